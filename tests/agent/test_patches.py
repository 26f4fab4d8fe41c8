"""patch_paths: the files a Codex patch or a diff writes."""

from __future__ import annotations

from gitaudit.agent.patches import patch_paths


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
    assert patch_paths(text) == [
        "a/x/y.py", "x/y.py", "b/x/z.py", "x/z.py", "y.py", "z.py", "b/with space.py",
        "with space.py",
    ]  # fmt: skip


def test_context_diff_headers_not_hunks() -> None:
    text = "*** tests/check.py\t2026\n--- tests/check.py\t2026\n***************\n*** 1,3 ****\n"
    assert patch_paths(text) == ["tests/check.py", "check.py"]


def test_plain_text_names_nothing() -> None:
    assert patch_paths("python3 -m pytest -q tests\ngit commit -m 'fix: greeting'\n") == []
