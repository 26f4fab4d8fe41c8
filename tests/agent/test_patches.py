"""patch_paths: the files a Codex patch or a diff writes; Reader and mail_texts: the patch
files a command applies, read from disk."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from gitaudit.agent import patches
from gitaudit.agent.patches import Reader, mail_texts, patch_paths
from gitaudit.agent.shell import Unreadable


def test_codex_envelope() -> None:
    text = (
        "*** Begin Patch\n*** Add File: src/new.py\n+x\n*** Update File: a/b.py\n"
        "*** Move to: c/d.py\n@@\n-x\n+y\n*** Delete File: old.py\n*** End Patch\n"
    )
    assert patch_paths(text) == [
        "src/new.py",
        "new.py",
        "a/b.py",
        "b.py",
        "c/d.py",
        "d.py",
        "old.py",
    ]


def test_unified_and_git_diffs() -> None:
    text = (
        "diff --git a/x/y.py b/x/z.py\nsimilarity index 90%\nrename from x/y.py\n"
        "rename to x/z.py\n--- a/x/y.py\t2026-05-18 10:00:00\n+++ b/x/z.py\n@@ -1 +1 @@\n"
        '-a\n+b\n--- /dev/null\n+++ "b/with space.py"\n'
    )
    found = patch_paths(text)
    assert {"a/x/y.py", "x/y.py", "b/x/z.py", "x/z.py", "b/with space.py", "with space.py"} <= set(
        found
    )
    assert not {"/dev/null", "dev/null", "a", "b"} & set(found)


def test_context_diff_headers_not_hunks() -> None:
    text = "*** tests/check.py\t2026\n--- tests/check.py\t2026\n***************\n*** 1,3 ****\n"
    assert patch_paths(text) == [
        "tests/check.py",
        "check.py",
        "tests/check.py\t2026",
        "check.py\t2026",
    ]


def test_plain_text_names_nothing() -> None:
    assert patch_paths("python3 -m pytest -q tests\ngit commit -m 'fix: greeting'\n") == []


@pytest.mark.parametrize(
    "header",
    [
        "--- x/a/tests/check.py",  # patch -p2
        "+++ x/y/b/tests/check.py",  # git apply -p3
        "--- a//tests/check.py",  # a run of slashes counts as one
        "+++ ../tests/check.py",  # -p1 strips the '..'
        "--- /abs/tests/check.py",
    ],
)
def test_every_leading_component_is_stripped(header: str) -> None:
    """The applying command strips any number of components (``-pN``): checking the path as
    written and without its first component let ``patch -p2`` through."""
    assert "tests/check.py" in patch_paths(header + "\n")


@pytest.mark.parametrize(
    ("header", "path"),
    [
        ('+++ "b/\\164ests/check.py"', "tests/check.py"),  # octal for an ASCII letter
        ('--- "a/caf\\303\\251.py"', "caf\u00e9.py"),  # octal bytes forming UTF-8
        ('--- "a/\\342\\202\\254/x.py"', "\u20ac/x.py"),  # three bytes, one character
        ('+++ "b/\\377.py"', "\udcff.py"),  # not UTF-8: a surrogate escape, as os.fsdecode
        ('+++ "b/t\\ta\\nb\\"c\\\\d"', 't\ta\nb"c\\d'),
        ('+++ "b/\\a\\b\\f\\r\\v"', "\a\b\f\r\v"),
        ('+++ "b/tests/check.py\\000.bak"', "tests/check.py"),  # NUL ends a C string
        ('rename to "tests/\\143heck.py"', "tests/check.py"),
        ('diff --git "a/\\164ests/check.py" "b/\\164ests/check.py"', "tests/check.py"),
        ('diff --git "a/\\164ests/check.py" b/tests/check.py', "tests/check.py"),
        ('diff --git a/tests/check.py "b/\\164ests/check.py"', "tests/check.py"),
    ],
)
def test_quoted_names_are_decoded_as_git_decodes_them(header: str, path: str) -> None:
    """git's and GNU patch's C quoting: dropping the backslashes read ``\\164ests`` as
    ``164ests`` while git applied the patch to ``tests``."""
    assert path in patch_paths(header + "\n")


@pytest.mark.parametrize("header", ['+++ "b/\\x74ests/check.py"', '+++ "b/\\8.py"', '+++ "b/x'])
def test_invalid_quoting_is_read_as_written(header: str) -> None:
    """git reads a name it cannot unquote as written, quotes and all (GNU patch skips it)."""
    written = header[4:]
    assert written in patch_paths(header + "\n")
    assert not any(p.endswith("tests/check.py") for p in patch_paths(header + "\n"))


@pytest.mark.parametrize(
    "header",
    [
        "--- tests/check.py 2024-01-01 10:00:00.000000000 +0100",  # git strips it, patch too
        "+++ tests/check.py\t2024-01-01 10:00:00",
        "--- tests/check.py  2024-01-01 10:00:00 +01:00",
        "*** tests/check.py 1999-01-01",
        "+++ tests/check.py some words",  # GNU patch stops at the blank
        "+++ tests/check.py\r",  # a CRLF patch
        "Index: tests/check.py",  # GNU patch's name when the others do not exist
        "Index:tests/check.py",
        "rename old tests/check.py",  # git's older spelling
        "copy to tests/check.py",
        "diff --git a/tests/check.py b/tests/check.py",
    ],
)
def test_names_end_where_git_or_patch_end_them(header: str) -> None:
    assert "tests/check.py" in patch_paths(header + "\n")


def test_names_with_blanks_are_read_whole() -> None:
    assert "tests/my check.py" in patch_paths("+++ b/tests/my check.py\t2024-01-01\n")
    assert "tests/my check.py" in patch_paths("rename to tests/my check.py\n")
    assert "tests/my check.py" in patch_paths(
        "diff --git a/tests/my check.py b/tests/my check.py\n"
    )


def test_a_patch_too_long_to_check_is_unreadable() -> None:
    """Every leading component of every name is a path the guard checks: names of thousands of
    components would keep it checking past the host's timeout, so they are refused instead,
    while a patch of a thousand ordinary files is read."""
    with pytest.raises(Unreadable, match="smaller parts"):
        patch_paths("diff --git " + "a/ " * 2000 + "\n")
    with pytest.raises(Unreadable):
        patch_paths("--- " + "x/" * 100_000 + "tests/check.py\n")
    files = "".join(
        f"diff --git a/src/pkg{i}/mod/file.py b/src/pkg{i}/mod/file.py\n"
        f"--- a/src/pkg{i}/mod/file.py\t2024-01-01 10:00:00\n+++ b/src/pkg{i}/mod/file.py\n"
        for i in range(1000)
    )
    assert "src/pkg999/mod/file.py" in patch_paths(files)


# ------------------------------------------------------------------------ patch files on disk

DIFF = "--- a/tests/check.py\n+++ b/tests/check.py\n@@ -1 +1 @@\n-x\n+y\n"


def test_a_file_is_read_from_every_folder_it_may_be_in(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "p.diff").write_text("top")
    (tmp_path / "d" / "p.diff").write_text("in d")
    assert Reader().read("p.diff", [str(tmp_path)], ["", "d"]) == ["top", "in d"]
    assert Reader().read("p.diff", [str(tmp_path), str(tmp_path / "d")]) == ["top", "in d"]
    assert Reader().read(str(tmp_path / "p.diff"), ["\0unseen"]) == ["top"]  # absolute


def test_a_glob_reads_every_match_and_the_name_as_written(tmp_path: Path) -> None:
    for name in ("a.diff", "b.diff", "*.diff"):
        (tmp_path / name).write_text(name)
    assert sorted(Reader().read("*.diff", [str(tmp_path)])) == ["*.diff", "a.diff", "b.diff"]


def test_bytes_that_are_not_utf8_are_kept(tmp_path: Path) -> None:
    (tmp_path / "p.diff").write_bytes(b"+++ b/\xff.py\n")
    assert "\udcff.py" in patch_paths(Reader().read("p.diff", [str(tmp_path)])[0])


@pytest.mark.parametrize(
    ("word", "words"),
    [
        ("$P", "variable"),
        ("`x`", "variable"),
        ("missing.diff", "does not exist"),
        (".", "not a regular file"),
        ("fifo", "not a regular file"),  # opened without blocking: the guard does not wait
        ("*/p.diff", "glob over folders"),
    ],
)
def test_what_cannot_be_read_is_unreadable(tmp_path: Path, word: str, words: str) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(Unreadable, match=words):
        Reader().read(word, [str(tmp_path)])
    with pytest.raises(Unreadable, match="cannot see"):
        Reader().read("p.diff", ["\0unseen"])


def test_one_commands_files_are_read_within_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(patches, "FILE_BUDGET", 10)
    (tmp_path / "p.diff").write_text("123456")
    reader = Reader()
    reader.read("p.diff", [str(tmp_path)])
    with pytest.raises(Unreadable, match="longer than"):
        reader.read("p.diff", [str(tmp_path)])


def mail(headers: str, body: bytes) -> str:
    return f"From 0 Mon Sep 17 00:00:00 2001\nSubject: x\n{headers}\n" + body.decode("latin-1")


@pytest.mark.parametrize(
    "text",
    [
        mail("Content-Transfer-Encoding: base64\n", base64.encodebytes(DIFF.encode())),
        mail(
            "Content-Type: text/plain; charset=utf-16\nContent-Transfer-Encoding: base64\n",
            base64.encodebytes(DIFF.encode("utf-16")),
        ),
        mail("Content-Transfer-Encoding: quoted-printable\n", DIFF.replace("t", "=74").encode()),
        mail("", b"first\n")
        + mail("Content-Transfer-Encoding: base64\n", base64.b64encode(DIFF.encode())),
    ],
)
def test_a_mail_is_decoded_as_git_am_decodes_it(text: str) -> None:
    """git mailinfo decodes base64 and quoted-printable in the mail's charset before it reads
    the diff: read as written, the names were hidden."""
    assert "tests/check.py" not in patch_paths(text)
    assert any("tests/check.py" in patch_paths(body) for body in mail_texts(text))


def test_a_mail_in_a_charset_python_does_not_know_is_unreadable() -> None:
    with pytest.raises(Unreadable, match="charset"):
        list(mail_texts(mail("Content-Type: text/plain; charset=x-nope\n", b"body\n")))
