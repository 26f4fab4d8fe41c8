"""confine / is_within / check_relative_spec against real directories and symlinks."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitaudit.checks.paths import confine, first_link, is_within, link_climbed
from gitaudit.errors import CheckError
from gitaudit.plan.paths import HINT, check_relative_spec


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with a subdirectory, a file, and symlinks leading in and out."""
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s\n")
    (root / "etc").symlink_to("/etc")
    (root / "out").symlink_to(outside)  # a symlinked directory leading out
    (root / "in").symlink_to("src/pkg")  # a symlink that stays inside
    (root / "up").symlink_to("..")  # relative symlink climbing out
    return root


# --- lexical ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "fragment"),
    [
        ("", "is empty"),
        ("/etc/passwd", "absolute path"),
        ("..", "'..' component"),
        ("../x", "'..' component"),
        ("a/../../b", "'..' component"),
        ("a/..", "'..' component"),
        ("a\0b", "NUL byte"),
        ("\ud800", "unencodable"),
    ],
)
def test_check_relative_spec_rejects(rel: str, fragment: str) -> None:
    message = check_relative_spec(rel)
    assert message is not None and fragment in message
    assert message.startswith(repr(rel))


@pytest.mark.parametrize("rel", [".", "a", "a/b/c", "a..b", "...", ".hidden", "a//b/", "./a"])
def test_check_relative_spec_accepts(rel: str) -> None:
    assert check_relative_spec(rel) is None


def test_check_relative_spec_needs_no_filesystem() -> None:
    assert check_relative_spec("no/such/dir/anywhere") is None


# --- confine ---------------------------------------------------------------------------------


def test_message_names_what_and_value(ws: Path) -> None:
    with pytest.raises(CheckError) as info:
        confine(ws, "../x", what="cwd")
    assert info.value.message.startswith("cwd '../x' escapes the workspace")
    assert info.value.hint == HINT


@pytest.mark.parametrize("rel", ["/etc", "..", "a/../../b", "src/../..", "x\0y", ""])
def test_lexically_bad_paths_are_rejected(ws: Path, rel: str) -> None:
    with pytest.raises(CheckError, match="path "):
        confine(ws, rel)


@pytest.mark.parametrize(
    "rel", ["etc", "etc/passwd", "out", "out/secret", "out/new", "up", "up/outside"]
)
def test_symlink_escape_is_rejected(ws: Path, rel: str) -> None:
    with pytest.raises(CheckError, match="escapes the workspace through a symlink") as info:
        confine(ws, rel, what="exec")
    assert info.value.message.startswith(f"exec {rel!r}")


def test_symlinked_parent_of_workspace_path_is_followed(ws: Path) -> None:
    """A directory inside that is a symlink to outside cannot be used as a stepping stone."""
    (ws / "src" / "escape").symlink_to(ws.parent / "outside")
    with pytest.raises(CheckError, match="symlink"):
        confine(ws, "src/escape/secret", must_exist=True)


def test_symlink_pointing_inside_is_allowed(ws: Path) -> None:
    got = confine(ws, "in/mod.py", must_exist=True)
    assert got == (ws / "src" / "pkg" / "mod.py").resolve()


def test_returns_resolved_path(ws: Path) -> None:
    assert confine(ws, "src") == ws.resolve() / "src"
    assert confine(ws, ".") == ws.resolve()
    assert confine(ws, "./src//pkg/") == ws.resolve() / "src" / "pkg"


def test_nonexistent_path_allowed_unless_must_exist(ws: Path) -> None:
    assert confine(ws, "build/out.txt") == ws.resolve() / "build" / "out.txt"
    with pytest.raises(CheckError, match=r"'build/out\.txt' does not exist") as info:
        confine(ws, "build/out.txt", what="path", must_exist=True)
    assert info.value.hint


def test_dangling_symlink_inside_is_checked_by_target(ws: Path) -> None:
    (ws / "dangling_in").symlink_to("not/yet")
    (ws / "dangling_out").symlink_to(ws.parent / "outside" / "not-yet")
    assert confine(ws, "dangling_in") == ws.resolve() / "not" / "yet"
    with pytest.raises(CheckError, match="symlink"):
        confine(ws, "dangling_out")


def test_symlink_loop_does_not_crash(ws: Path) -> None:
    (ws / "loop1").symlink_to("loop2")
    (ws / "loop2").symlink_to("loop1")
    with pytest.raises(CheckError, match="does not exist"):
        confine(ws, "loop1/x", must_exist=True)


def test_symlink_out_and_back_in_is_allowed(ws: Path) -> None:
    """Only where a path finally lands matters: 'up/ws' leaves and re-enters the workspace."""
    assert confine(ws, "up/ws/src") == ws.resolve() / "src"


def test_workspace_reached_through_a_symlink(ws: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(ws)
    assert confine(alias, "src") == ws.resolve() / "src"
    with pytest.raises(CheckError):
        confine(alias, "out/secret")


# --- is_within -------------------------------------------------------------------------------


def test_is_within(ws: Path) -> None:
    assert is_within(ws, ws)
    assert is_within(ws, ws / "src" / "pkg")
    assert is_within(ws, ws / "in")
    assert not is_within(ws, ws / "src" / ".." / "..")
    assert not is_within(ws, ws / "out")
    assert not is_within(ws, ws.parent / (ws.name + "-sibling"))  # prefix, not a parent
    assert not is_within(ws, Path("/"))
    assert is_within(Path("/"), ws)
    assert not is_within(ws, Path("a\0b"))


# --- property: whatever the string, the result stays inside ----------------------------------

_WORKSPACE_DIR = tempfile.TemporaryDirectory(prefix="gitaudit-confine-")
_HYPO = Path(_WORKSPACE_DIR.name)


def _hypothesis_workspace() -> Path:
    """Built once per session (hypothesis reruns the body; function fixtures would be shared)."""
    root = _HYPO / "ws"
    if not root.exists():
        (root / "a" / "b").mkdir(parents=True)
        (_HYPO / "outside").mkdir()
        (root / "out").symlink_to(_HYPO / "outside")
        (root / "etc").symlink_to("/etc")
        (root / "up").symlink_to("..")
        (root / "a" / "upup").symlink_to("../..")
        (root / "a" / "in").symlink_to("b")
        (root / "abs_in").symlink_to(root / "a")
    return root


_segments = st.sampled_from(
    ["a", "b", "..", ".", "", "out", "etc", "up", "upup", "in", "abs_in", "x", "\0", "/", "ws"]
)
_paths = st.one_of(
    st.text(max_size=40),
    st.lists(_segments, max_size=8).map("/".join),
    st.lists(_segments, min_size=1, max_size=8).map(lambda parts: "/" + "/".join(parts)),
)


@settings(max_examples=400, deadline=None)
@given(rel=_paths, must_exist=st.booleans())
def test_confine_never_returns_a_path_outside(rel: str, must_exist: bool) -> None:
    root = _hypothesis_workspace()
    real_root = os.path.realpath(root)
    try:
        got = confine(root, rel, must_exist=must_exist)
    except CheckError as exc:
        assert exc.message.startswith("path ")
        return
    assert got.is_absolute()
    assert str(got) == real_root or str(got).startswith(real_root + os.sep)
    assert os.path.realpath(got) == str(got)  # nothing left to resolve
    if must_exist:
        assert got.exists()


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("in/mod.py", ("in", "src/pkg", True)),  # through a link to elsewhere inside
        ("in", ("in", "src/pkg", True)),  # the link itself
        ("src/pkg/mod.py", None),  # no link on the way
        ("./src/pkg/mod.py", None),
        ("out/secret", ("out", "<outside>", False)),  # leads out: named, with where, absolute
        ("etc/passwd", ("etc", os.path.realpath("/etc"), False)),
        ("up/x", ("up", "<tmp>", False)),  # climbs out
        ("missing/file", None),
    ],
)
def test_first_link_names_the_link_and_whether_it_stays_inside(
    ws: Path, rel: str, expected: tuple[str, str, bool] | None
) -> None:
    if expected is not None:
        where = {
            "<outside>": os.path.realpath(ws.parent / "outside"),
            "<tmp>": os.path.realpath(ws.parent),
        }
        expected = (expected[0], where.get(expected[1], expected[1]), expected[2])
    assert first_link(ws, rel) == expected


@pytest.mark.parametrize(
    ("spelled", "expected"),
    [
        ("in/../src/pkg/mod.py", ("in", "src/pkg", True)),  # `..` out of where a link led
        ("in/x/../../src", ("in", "src/pkg", True)),
        ("out/../secret", ("out", "<outside>", False)),
        ("src/pkg/../pkg/mod.py", None),  # `..` out of real folders: the lexical path
        ("src/./pkg/../../src/pkg/mod.py", None),
        ("in/mod.py", None),  # no `..`: first_link's business
        ("missing/../src", None),  # nothing there to lead elsewhere
        ("../ws/src", None),  # above the workspace: no file of the tree
    ],
)
def test_link_climbed_names_the_link_a_parent_step_leaves(
    ws: Path, spelled: str, expected: tuple[str, str, bool] | None
) -> None:
    """A `..` climbs out of where a link led, not back up the path as written: the file reached
    is then not the one the path read lexically names."""
    if expected is not None and expected[1] == "<outside>":
        expected = (expected[0], os.path.realpath(ws.parent / "outside"), expected[2])
    assert link_climbed(ws, spelled) == expected
