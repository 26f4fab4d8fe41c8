"""gitaudit.git.conversions.possible: when no conversion can apply, the fingerprint may skip
comparing files with their blobs, so every place git reads attributes from must be looked at."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gitaudit.git import conversions, fingerprint
from tests.gitrepo import GitRepo

Setup = Callable[[GitRepo, Path, pytest.MonkeyPatch], None]


def _settled() -> int:
    """A time git began at when every change the test made so far had settled."""
    return time.time_ns() + conversions.SETTLED_NS + 1


def _possible(
    repo: GitRepo,
    report: bytes = b"add 'lib/app.py'\n",
    config: str | None = None,
    began: int | None = None,
    *,
    tree: str | None = None,
    seed: str | None = None,
) -> bool:
    """conversions.possible for *tree* (HEAD's); *seed*: the tree whose folders are listed
    early, as the fingerprint lists the seed's while git writes the new tree."""
    layout = fingerprint._locate(repo.path)
    env = {"GIT_DIR": str(layout.git_dir), "GIT_WORK_TREE": str(layout.work_tree)}
    tree = tree or repo.git("rev-parse", "HEAD^{tree}").strip()
    if config is not None:
        (layout.common_dir / "config").write_text(config)
    listing = conversions.list_folders(layout, seed) if seed is not None else None
    return conversions.possible(layout, env, tree, report, began or _settled(), seed=listing)


def _file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def project(repo: GitRepo) -> GitRepo:
    repo.write("lib/app.py", "ANSWER = 42\n")
    repo.write("lib/deep/more.py", "MORE = 1\n")
    repo.commit("lib")
    return repo


def test_nothing_converts_in_a_plain_repository(project: GitRepo) -> None:
    assert _possible(project) is False


@pytest.mark.parametrize(
    "text", ["*.png binary\n*.py diff=python\n", "* -text\n*.sh !eol\n", "*.c merge=union\n"]
)
@pytest.mark.parametrize("where", [".gitattributes", "lib/deep/.gitattributes"])
def test_attributes_that_convert_nothing(project: GitRepo, where: str, text: str) -> None:
    """Attributes files that set no converting attribute (unsetting one included) keep the
    fast path."""
    project.write(where, text)
    project.commit("attributes")
    assert _possible(project) is False


def _tracked_root(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    repo.write(".gitattributes", "* text=auto\n")
    repo.commit("attributes")


def _tracked_deep(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    repo.write("lib/deep/.gitattributes", "more.py ident\n")
    repo.commit("attributes")


def _ignored_folder(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    repo.write(".gitignore", ".gitattributes\n")
    repo.commit("ignore")
    repo.write("lib/.gitattributes", "app.py ident\n")


def _symlinked(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    _file(home / "elsewhere", "*.py diff=python\n")
    os.symlink(home / "elsewhere", repo.path / "lib" / ".gitattributes")


def _info_attributes(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    _file(repo.path / ".git" / "info" / "attributes", "*.sh eol=lf\n")


def _macro(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    _file(home / ".config" / "git" / "attributes", "[attr]normal text\n")


def _xdg(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    _file(home / "xdg" / "git" / "attributes", "*.py working-tree-encoding=UTF-16\n")
    mp.setenv("XDG_CONFIG_HOME", str(home / "xdg"))


def _home_default(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    _file(home / ".config" / "git" / "attributes", "*.py filter=lfs\n")
    mp.delenv("XDG_CONFIG_HOME")


def _attributes_file(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    _file(home / "attrs", "*.py crlf\n")
    repo.git("config", "--global", "core.attributesFile", "~/attrs")


def _relative_attributes_file(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    _file(repo.path / "lib" / "attrs", "*.py ident\n")
    repo.git("config", "--global", "core.attributesFile", "lib/attrs")


def _autocrlf_input(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    repo.git("config", "--global", "core.autocrlf", "input")


def _autocrlf_from_the_environment(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    mp.setenv("GIT_CONFIG_COUNT", "1")
    mp.setenv("GIT_CONFIG_KEY_0", "core.autocrlf")
    mp.setenv("GIT_CONFIG_VALUE_0", "yes")


def _attr_tree(repo: GitRepo, home: Path, mp: pytest.MonkeyPatch) -> None:
    repo.git("config", "attr.tree", "HEAD")


@pytest.mark.parametrize(
    "setup",
    [
        _tracked_root,
        _tracked_deep,
        _ignored_folder,
        _symlinked,
        _info_attributes,
        _macro,
        _xdg,
        _home_default,
        _attributes_file,
        _relative_attributes_file,
        _autocrlf_input,
        _autocrlf_from_the_environment,
        _attr_tree,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
def test_every_source_of_a_conversion_is_seen(
    project: GitRepo, monkeypatch: pytest.MonkeyPatch, setup: Setup
) -> None:
    setup(project, Path(os.environ["HOME"]), monkeypatch)
    assert _possible(project) is True
    head = project.git("rev-parse", "HEAD^{tree}").strip()
    assert _possible(project, seed=head) is True  # the same folders, listed early


def test_an_attributes_file_added_changed_or_removed_counts(project: GitRepo) -> None:
    """git's report naming a `.gitattributes` (one removed from the work tree, say) means the
    files may have been hashed under attributes that are gone."""
    assert _possible(project, b"remove 'lib/.gitattributes'\n") is True


def test_an_unreadable_configuration_counts(project: GitRepo) -> None:
    assert _possible(project, config="[core\n") is True


def _gone(repo: GitRepo) -> None:
    path = repo.path / "lib" / ".gitattributes"
    path.write_text("app.py ident\n")
    path.unlink()


def _rewritten_in_place(repo: GitRepo) -> None:
    path = repo.path / "lib" / "deep" / ".gitattributes"
    path.write_text("more.py ident\n")
    path.write_text("*.py diff=python\n")


def _new_folder_gone(repo: GitRepo) -> None:
    folder = repo.path / "lib" / "deep" / "tmp"
    folder.mkdir()
    folder.rmdir()


def _info_gone(repo: GitRepo) -> None:
    path = repo.path / ".git" / "info" / "attributes"
    path.write_text("*.py ident\n")
    path.unlink()


def _config_set_and_unset(repo: GitRepo) -> None:
    repo.git("config", "core.autocrlf", "input")
    repo.git("config", "--unset", "core.autocrlf")


@pytest.mark.parametrize(
    "change",
    [_gone, _rewritten_in_place, _new_folder_gone, _info_gone, _config_set_and_unset],
    ids=lambda f: f.__name__.strip("_"),
)
def test_a_change_while_git_hashed_counts(
    project: GitRepo, change: Callable[[GitRepo], None]
) -> None:
    """What changed after git began (and is back as before by the time of the look: attributes
    there only while git hashed) is seen by its change time, in the tree's folders, the
    attributes files and the repository's config: a conversion counts as possible."""
    project.write("lib/deep/.gitattributes", "*.py diff=python\n")
    project.commit("attributes that convert nothing")
    assert _possible(project) is False
    began = time.time_ns()
    change(project)
    assert _possible(project, began=began) is True
    assert _possible(project) is False  # once settled


def test_the_folders_only_the_new_tree_has_are_looked_in_beside_the_seeds(
    project: GitRepo,
) -> None:
    """The fingerprint lists the seed tree's folders while git writes the new tree: a folder
    only the new tree has is looked in all the same, found by what differs between the two
    trees. Here it holds an ignored attributes file that converts."""
    project.write(".gitignore", ".gitattributes\n")
    project.commit("attributes files are ignored")
    seed = project.git("rev-parse", "HEAD^{tree}").strip()
    project.write("fresh/deeper/x.txt", "x\n")
    project.write("fresh/.gitattributes", "*.txt ident\n")
    project.git("add", "fresh/deeper/x.txt")
    tree = project.git("write-tree").strip()
    added = b"add 'fresh/deeper/x.txt'\n"
    assert _possible(project, added, tree=tree) is True  # the new tree's folders, listed late
    assert _possible(project, added, tree=tree, seed=seed) is True
    assert _possible(project, b"", tree=tree, seed=seed) is True  # whatever the report says
    # the control: judging the seed's own tree, nothing differs and fresh/ is not looked in
    assert _possible(project, b"", tree=seed, seed=seed) is False
    # a seed tree gone from the object store: the new tree's folders
    assert _possible(project, b"", tree=tree, seed="1" * 40) is True
    (project.path / "fresh" / ".gitattributes").write_text("*.txt diff=python\n")
    assert _possible(project, added, tree=tree, seed=seed, began=_settled()) is False


def test_a_new_folder_named_like_report_lines_is_looked_in(project: GitRepo) -> None:
    """git's `add --verbose` report prints a path as it is, newlines included: a folder named
    `dir/a'<newline>add 'b` reads as two paths there. The folders come from git's `-z` output,
    so the folder that holds the converting attributes is looked in."""
    project.write(".gitignore", ".gitattributes\n")
    project.commit("attributes files are ignored")
    seed = project.git("rev-parse", "HEAD^{tree}").strip()
    odd = "dir/a'\nadd 'b"
    project.write(f"{odd}/c.txt", "x\n")
    project.write(f"{odd}/.gitattributes", "*.txt ident\n")
    project.git("add", "-A")
    tree = project.git("write-tree").strip()
    report = f"add '{odd}/c.txt'\n".encode()
    assert _possible(project, report, tree=tree, seed=seed) is True


def _checkout_id(repo: GitRepo, name: str, store: Path) -> str | None:
    """conversions._checked_out_id for the file *name* as it is, and HEAD's blob of it."""
    layout = fingerprint._locate(repo.path)
    env = {"GIT_DIR": str(layout.git_dir), "GIT_WORK_TREE": str(layout.work_tree)}
    blob = repo.git("rev-parse", f"HEAD:{name}").strip()
    found = conversions._blob_id((repo.path / name).read_bytes(), len(blob))
    store.mkdir()
    return conversions._checked_out_id(layout, env, name.encode(), blob, found, store)


def test_what_a_checkout_writes_is_made_from_the_files_bytes_not_the_store(
    repo: GitRepo, tmp_path: Path
) -> None:
    """The checkout's bytes of a converted file (ident, CRLF under eol=crlf) are made in a
    private store from the file's bytes: a checkout as written compares equal; a forged loose
    object under the blob's name holding the file's bytes changes nothing; an edit since the
    file was hashed is None."""
    import zlib

    repo.write(".gitattributes", "id.py ident\n*.bat text eol=crlf\n")
    repo.write("id.py", 'ID = "$Id$"\n')
    repo.write("run.bat", "exit /b 0\n")
    repo.commit("converted")
    for name in ("id.py", "run.bat"):
        (repo.path / name).unlink()
    repo.git("checkout", "--", ".")
    for name in ("id.py", "run.bat"):
        found = conversions._blob_id((repo.path / name).read_bytes(), 40)
        assert _checkout_id(repo, name, tmp_path / name) == found
    edited = b'ID = "$Id: "; ID = 41; _ = "$"\n'
    (repo.path / "id.py").write_bytes(edited)
    assert repo.git("diff", "--name-only") == ""
    genuine = _checkout_id(repo, "id.py", tmp_path / "before")
    assert genuine is not None and genuine != conversions._blob_id(edited, 40)
    blob = repo.git("rev-parse", "HEAD:id.py").strip()
    loose = repo.path / ".git" / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(b"blob %d\0" % len(edited) + edited))
    assert _checkout_id(repo, "id.py", tmp_path / "forged") == genuine
    layout = fingerprint._locate(repo.path)
    env = {"GIT_DIR": str(layout.git_dir), "GIT_WORK_TREE": str(layout.work_tree)}
    stale = conversions._blob_id(b"something else\n", 40)
    assert conversions._checked_out_id(layout, env, b"id.py", blob, stale, tmp_path) is None


def test_a_listing_of_folders_is_what_the_tree_objects_hold(project: GitRepo) -> None:
    """The folders of a tree are listed as git lists them, and counted only when every tree
    object it read hashes to its id and names exactly the folders listed: a forged object
    under a folder's id that leaves out a folder below it gives no listing (None)."""
    import zlib

    layout = fingerprint._locate(project.path)
    tree = project.git("rev-parse", "HEAD^{tree}").strip()
    listed = conversions._folders(conversions.list_folders(layout, tree))
    assert sorted(listed or []) == [b"lib", b"lib/deep"]
    lib = project.git("rev-parse", "HEAD:lib").strip()
    app = project.git("rev-parse", "HEAD:lib/app.py").strip()
    body = b"100644 app.py\0" + bytes.fromhex(app)
    loose = project.path / ".git" / "objects" / lib[:2] / lib[2:]
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(b"tree %d\0" % len(body) + body))
    assert b"lib/deep" not in project.git("ls-tree", "-r", "-d", "--name-only", tree).encode()
    assert conversions._folders(conversions.list_folders(layout, tree)) is None


def test_the_folders_of_a_changed_tree_are_read_from_verified_objects(
    project: GitRepo,
) -> None:
    """Beside the seed's listing, the new tree's folders are read from its tree objects, each
    hashed against its id, where its ids differ from the seed's: a folder only the new tree
    has is found, and a forged object under the id of a new folder's tree gives None."""
    import zlib

    layout = fingerprint._locate(project.path)
    seed = project.git("rev-parse", "HEAD^{tree}").strip()
    project.write("lib/deep/deeper/new.py", "NEW = 1\n")
    project.git("add", "-A")
    tree = project.git("write-tree").strip()
    read = conversions._folders_of(layout, tree, conversions.list_folders(layout, seed))
    assert sorted(read() or []) == [b"lib", b"lib/deep", b"lib/deep/deeper"]
    deep = project.git("rev-parse", f"{tree}:lib/deep").strip()
    more = project.git("rev-parse", f"{tree}:lib/deep/more.py").strip()
    body = b"100644 more.py\0" + bytes.fromhex(more)
    loose = project.path / ".git" / "objects" / deep[:2] / deep[2:]
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(b"tree %d\0" % len(body) + body))
    read = conversions._folders_of(layout, tree, conversions.list_folders(layout, seed))
    assert read() is None


def test_the_folders_of_a_tree_body_are_read_alike_in_c_and_entry_by_entry() -> None:
    """A body as git writes them is read by one regular expression (in C); it names the same
    folders, with the same ids, as reading it entry by entry does, whatever the names and the
    ids' bytes hold (a space, "40000 ", a NUL); a body git would not write is read entry by
    entry (a folder no listing has)."""
    import random

    def by_entry(body: bytes, width: int) -> list[tuple[bytes, str]]:
        out, at = [], 0
        while at < len(body):
            space, nul = body.find(b" ", at), body.find(b"\0", at)
            if body[at:space] == b"40000":
                out.append((body[space + 1 : nul], body[nul + 1 : nul + 1 + width].hex()))
            at = nul + 1 + width
        return out

    rng = random.Random(7)
    modes = [b"100644", b"100755", b"120000", b"160000", b"40000"]
    names = [b"a", b"x 40000 y", b"40000 ", b"dir", b"\xff\xfe", b"sp ace"]
    for width in (20, 32):
        for _ in range(300):
            chosen = rng.sample(names, rng.randint(0, len(names)))
            oids = [
                rng.choice([b"40000 " + bytes(width - 6), b"\0" * width, rng.randbytes(width)])
                for _ in chosen
            ]
            body = b"".join(
                rng.choice(modes) + b" " + n + b"\0" + o for n, o in zip(chosen, oids, strict=True)
            )
            assert conversions._subtrees(body, width) == by_entry(body, width)
    odd = b"040000 lib\0" + bytes(20)  # a mode git would not write
    assert conversions._subtrees(odd, 20) == []  # read entry by entry: not "40000"
    assert conversions._subtrees(b"40000 lib\0" + bytes(5), 20) == [(b"", "")]  # cut short
