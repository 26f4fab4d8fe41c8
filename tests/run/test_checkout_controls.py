"""The private checkout's defences (docs/threat-model.md, "Checks run on the tree") at the unit
level: :func:`gitaudit.run.checkout.materialise` and its purity helpers called directly on real
repositories, nothing run through the command line.

End to end (the same situations judged through a run and the gate): tests/adversarial/
test_hermetic.py."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gitaudit.errors import RunError
from gitaudit.git.repo import open_repo
from gitaudit.places import checkouts_dir
from gitaudit.run import checkout
from gitaudit.run.recorder import _purity
from tests.gitrepo import GitRepo


@contextmanager
def placed(
    repo: GitRepo,
    tree: str | None = None,
    *,
    filters: tuple[str, ...] = (),
    ignored: tuple[str, ...] = (),
) -> Iterator[checkout.Materialised]:
    """The private checkout of *tree* (HEAD's by default), held while the block runs."""
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    with checkout.acquire(handle.gitdir, handle.workdir) as slot:
        yield checkout.materialise(
            slot,
            handle.gitdir,
            handle.workdir,
            tree or repo.head_tree(),
            None,
            declared_filters=filters,
            ignored_paths=ignored,
        )


def add_submodule(repo: GitRepo, tmp_path: Path) -> tuple[GitRepo, str]:
    """A submodule ``lib`` whose committed ``verdict`` says "broken"; (lib, its commit)."""
    lib = GitRepo.create(tmp_path / "lib")
    lib.write("verdict", "broken\n")
    recorded = lib.commit("v1")
    repo.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib.path), "lib")
    repo.commit("add lib")
    return lib, recorded


def entries(root: Path) -> set[str]:
    """Every path under *root* (files, links and folders), relative, without .git."""
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *files]:
            if name != ".git":
                found.add(os.path.relpath(os.path.join(folder, name), root))
    return found


# ------------------------------------------------------------ files git does not record (20)


def test_files_git_does_not_record_are_not_in_the_checkout(repo: GitRepo, tmp_path: Path) -> None:
    """Ignored files, files excluded by .git/info/exclude or the global excludes, empty
    directories and untracked files of a submodule: the checkout holds the tree, nothing else."""
    add_submodule(repo, tmp_path)
    repo.write(".gitignore", "verdict.local\n")
    repo.commit("ignore")
    repo.write("verdict.local", "ok\n")
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    (repo.path / ".git" / "info" / "exclude").write_text("by-info-exclude\n")
    repo.write("by-info-exclude", "")
    excludes = tmp_path / "excludes"
    excludes.write_text("by-global-excludes\n")
    repo.git("config", "--global", "core.excludesFile", str(excludes))
    repo.write("by-global-excludes", "")
    (repo.path / "build" / "empty").mkdir(parents=True)
    (repo.path / "lib" / "extra").write_text("untracked in the submodule\n")
    # git records none of them (the submodule's untracked file only marks it as modified)
    assert repo.git("status", "--porcelain", "--ignore-submodules=untracked") == ""
    with placed(repo) as p:
        assert entries(p.slot.tree) == {
            ".gitignore",
            ".gitmodules",
            "README.md",
            "lib",
            "lib/verdict",
        }


# ------------------------------------------------------------- live edits during a run (21)


def test_live_edits_after_materialising_change_nothing(
    repo: GitRepo,
) -> None:
    """Once the checkout is written, the live work tree is edited in place, a file is added and
    one deleted: the checkout still holds the tree's bytes, and its purity check finds it
    unchanged (the edits are not the checkout's)."""
    repo.write("verdict", "broken\n")
    repo.write("other", "kept\n")
    repo.commit("verdict")
    with placed(repo) as p:
        with open(repo.path / "verdict", "r+") as live:  # in place: same inode
            live.write("ok\n    ")
        (repo.path / "other").unlink()
        repo.write("new", "x\n")
        assert (p.slot.tree / "verdict").read_text() == "broken\n"
        assert (p.slot.tree / "other").read_text() == "kept\n"
        assert not (p.slot.tree / "new").exists()
        assert checkout.changed(p).changed == ()


# ------------------------------------------------------------------ local git settings (22)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("core.autocrlf", "true"),
        ("core.eol", "crlf"),
        ("core.fileMode", "false"),
        ("core.symlinks", "false"),
        ("core.attributesFile", "ATTRS"),
    ],
)
def test_local_git_settings_do_not_change_the_checkouts_bytes(
    repo: GitRepo, tmp_path: Path, key: str, value: str
) -> None:
    """A repository setting that a fresh clone would not have: the checkout's bytes, modes and
    symlinks are the tree's, and the purity check still sees a mode a check changed."""
    attrs = tmp_path / "attrs"
    attrs.write_text("* text eol=crlf ident\n")
    repo.write("script.sh", "#!/bin/sh\nexit 0\n", mode=0o755)
    os.symlink("script.sh", repo.path / "link")
    repo.write("data.txt", "line\n$Id$\n")
    repo.write(".gitattributes", "*.txt text\n")
    repo.commit("files")
    repo.git("config", key, str(attrs) if value == "ATTRS" else value)
    with placed(repo) as p:
        tree = p.slot.tree
        assert (tree / "data.txt").read_bytes() == b"line\n$Id$\n"
        assert os.access(tree / "script.sh", os.X_OK)
        assert (tree / "link").is_symlink() and os.readlink(tree / "link") == "script.sh"
        assert p.filters == {}
        assert checkout.changed(p).changed == ()
        (tree / "script.sh").chmod(0o644)  # a check drops the executable bit: seen
        assert checkout.changed(p).changed == ("script.sh",)


def test_a_filter_wired_outside_the_tree_is_not_applied(repo: GitRepo, tmp_path: Path) -> None:
    """.git/info/attributes and a global core.attributesFile ask for a smudge filter whose driver
    is in the user's global configuration: a fresh clone would not apply it, nor does the
    checkout."""
    repo.write("verdict", "broken\n")
    repo.commit("verdict")
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    (repo.path / ".git" / "info" / "attributes").write_text("verdict filter=flip\n")
    attrs = tmp_path / "global-attrs"
    attrs.write_text("verdict filter=flip\n")
    repo.git("config", "--global", "core.attributesFile", str(attrs))
    repo.git("config", "--global", "filter.flip.smudge", "sed s/broken/ok/")
    with placed(repo) as p:
        assert (p.slot.tree / "verdict").read_text() == "broken\n"
        assert p.filters == {}


def test_a_filter_the_tree_asks_for_is_refused_unless_declared(repo: GitRepo) -> None:
    """The tree's own .gitattributes names a filter: refused (naming it and the file) unless the
    plan declares it; declared, it is applied with the driver of the user's global
    configuration, and the driver is what the checkout records."""
    repo.write("sub/.gitattributes", "verdict filter=flip\n")
    repo.git("config", "--global", "filter.flip.smudge", "sed s/bad/ok/")
    repo.git("config", "--global", "filter.flip.clean", "sed s/ok/bad/")
    repo.write("sub/verdict", "ok\n")  # stored as "bad" by the clean filter
    repo.commit("filtered")
    assert repo.git("cat-file", "-p", "HEAD:sub/verdict") == "bad\n"
    with (
        pytest.raises(RunError, match=r"content filter 'flip' \(sub/\.gitattributes\)"),
        placed(repo),
    ):
        pass
    with placed(repo, filters=("flip",)) as p:
        assert (p.slot.tree / "sub" / "verdict").read_text() == "ok\n"
        assert p.filters == {"flip.clean": "sed s/ok/bad/", "flip.smudge": "sed s/bad/ok/"}
        assert p.to_json()["filters"] == dict(p.filters)


# ------------------------------------------------------------------------ submodules (23)


def test_submodules_are_checked_out_at_the_recorded_commit(repo: GitRepo, tmp_path: Path) -> None:
    """The live submodule has an uncommitted edit, an untracked file and a newer commit the
    superproject does not record: the checkout holds the recorded commit's tree."""
    lib, recorded = add_submodule(repo, tmp_path)
    live = GitRepo(repo.path / "lib")
    live.write("verdict", "ok\n")
    live.commit("v2, not recorded by the superproject")
    live.write("verdict", "dirty\n")
    with placed(repo) as p:
        assert p.submodules == {"lib": recorded}
        assert (p.slot.tree / "lib" / "verdict").read_text() == "broken\n"
        assert p.to_json()["submodules"] == {"lib": recorded}
        assert checkout.changed(p).changed == ()
    assert lib.path != live.path


def test_a_missing_submodule_commit_is_an_error_naming_it(repo: GitRepo, tmp_path: Path) -> None:
    add_submodule(repo, tmp_path)
    missing = "1" * 40
    repo.git("update-index", "--cacheinfo", f"160000,{missing},lib")
    repo.git("commit", "-q", "-m", "point lib at a commit nobody has")
    with (
        pytest.raises(RunError, match=r"submodule lib is recorded at commit 111111111111") as err,
        placed(repo),
    ):
        pass
    assert err.value.hint is not None and "git submodule update --init" in err.value.hint


# ---------------------------------------------------------- nothing above the checkout (24)


def test_nothing_above_the_checkout_is_the_project(repo: GitRepo) -> None:
    """Tools that look upwards from the checkout (pytest's conftest search, node_modules, git)
    never reach the live project: no folder above the checkout is the work tree or its git
    dir, and git run inside the checkout finds the checkout's own repository."""
    repo.write(".gitignore", "conftest.py\nnode_modules/\n")
    repo.commit("ignore")
    repo.write("conftest.py", "planted = 1\n")
    repo.write("node_modules/planted/index.js", "")
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    project = {os.path.realpath(handle.workdir), os.path.realpath(handle.gitdir)}
    with placed(repo) as p:
        tree = Path(os.path.realpath(p.slot.tree))
        assert not {str(folder) for folder in (tree, *tree.parents)} & project
        for folder in (tree, *tree.parents):
            assert not (folder / "conftest.py").exists()
            assert not (folder / "node_modules").exists()
        inside = GitRepo(p.slot.tree)
        assert os.path.realpath(inside.git("rev-parse", "--show-toplevel").strip()) == str(tree)
        assert inside.git("status", "--porcelain") == ""


# --------------------------------------------------- what a plan opens beyond the tree (26)


def test_a_declared_ignored_path_is_linked_and_guarded(repo: GitRepo) -> None:
    """A declared ignored path is linked into the checkout; its listing is recorded; a write
    through the link during the run is what the run's purity check reports."""
    repo.write(".gitignore", "tools/\n")
    repo.commit("ignore")
    repo.write("tools/verdict", "ok\n")
    workdir = repo.path
    with placed(repo, ignored=("tools",)) as p:
        link = p.slot.tree / "tools"
        assert link.is_symlink() and os.path.realpath(link) == os.path.realpath(workdir / "tools")
        assert (link / "verdict").read_text() == "ok\n"
        (ignored,) = p.ignored
        files, digest = checkout.listing_digest(workdir / "tools")
        assert (ignored.path, ignored.files, ignored.digest) == ("tools", 1, digest)
        assert files == 1
        assert p.to_json()["ignored_paths"] == {"tools": {"files": 1, "digest": digest}}
        purity, _ = _purity(workdir, p.tree, p, None)
        assert purity.changed == ()
        (link / "extra").write_text("written by a check\n")
        purity, _ = _purity(workdir, p.tree, p, None)
        assert purity.changed == ("tools (declared ignored path)",)


def test_a_declared_ignored_path_written_and_put_back_is_reported(repo: GitRepo) -> None:
    """A check writes a file of the declared path (its times put back after), or adds one and
    removes it again: the listing is what the run began with, the stamps (inode, change time)
    of its files and folders are not, and the run's purity check reports the path."""
    repo.write(".gitignore", "tools/\n")
    repo.commit("ignore")
    repo.write("tools/verdict", "ok\n")
    workdir = repo.path
    for undo in ("times", "added"):
        with placed(repo, ignored=("tools",)) as p:
            link = p.slot.tree / "tools"
            (ignored,) = p.ignored
            assert checkout.ignored_unchanged(workdir, ignored)
            if undo == "times":
                kept = os.stat(link / "verdict")
                (link / "verdict").write_text("no\n")
                (link / "verdict").write_text("ok\n")
                os.utime(link / "verdict", ns=(kept.st_atime_ns, kept.st_mtime_ns))
            else:
                (link / "extra").write_text("written by a check\n")
                (link / "extra").unlink()
            assert checkout.listing_digest(workdir / "tools")[1] == ignored.digest
            assert not checkout.ignored_unchanged(workdir, ignored)
            purity, _ = _purity(workdir, p.tree, p, None)
            assert purity.changed == ("tools (declared ignored path)",)


def test_an_ignored_path_must_exist_and_not_be_in_the_tree(repo: GitRepo) -> None:
    repo.write(".gitignore", ".venv/\n")
    repo.commit("ignore")
    with (
        pytest.raises(RunError, match=r"'\.venv', which does not exist in the work tree"),
        placed(repo, ignored=(".venv",)),
    ):
        pass
    with (
        pytest.raises(RunError, match=r"'README\.md' as an ignored path, but the tree has it"),
        placed(repo, ignored=("README.md",)),
    ):
        pass


@pytest.mark.parametrize(("link", "declared"), [(".cache", ".cache/src"), ("a/b", "a/b/src")])
def test_a_declared_path_below_a_link_into_the_work_tree_is_refused(
    repo: GitRepo, link: str, declared: str
) -> None:
    """Not a link itself, but below one to the work tree: it is the tracked ``src``."""
    repo.write(".gitignore", "/.cache\n/a/\n")
    repo.write("src/mod.py", "x = 1\n")
    repo.commit("ignore")
    (repo.path / link).parent.mkdir(parents=True, exist_ok=True)
    (repo.path / link).symlink_to(repo.path)
    with (
        pytest.raises(RunError, match=r"pointing into the work tree") as err,
        placed(repo, ignored=(declared,)),
    ):
        pass
    assert f"({declared} -> {repo.path}/src)" in err.value.message


def test_an_editable_install_in_a_declared_path_is_refused(repo: GitRepo) -> None:
    """A .pth file of a declared virtualenv pointing back into the work tree would make checks
    import the live sources: refused, naming the file and where it points."""
    repo.write(".gitignore", ".venv/\n")
    repo.commit("ignore")
    repo.write(".venv/lib/site-packages/__editable__.pth", f"{repo.path}/src\n")
    with (
        pytest.raises(RunError, match=r"editable install pointing into the work tree") as err,
        placed(repo, ignored=(".venv",)),
    ):
        pass
    assert f"lib/site-packages/__editable__.pth -> {repo.path}/src" in err.value.message


@pytest.mark.parametrize(
    ("tracked", "planted"),
    [
        ("app.py", "lib/python3.12/site-packages/app.py"),
        ("app.py", "lib/python3.12/site-packages/app.cpython-312-x86_64-linux-gnu.so"),
        ("app.py", "lib/python3.12/site-packages/app.pyc"),
        ("app.py", "lib/python3.12/site-packages/app/__init__.py"),
        ("app/__init__.py", "lib/python3.12/site-packages/app/core.py"),  # a namespace folder
        ("src/app/core.py", "lib/python3.12/site-packages/app.py"),
        ("src/tool.py", "lib/python3.12/tool.py"),  # an interpreter's own library folder
        ("app.py", "lib/python3.12/dist-packages/app.py"),
        ("app.py", "extra/app.py"),  # a folder holding a .pth
    ],
)
def test_a_module_of_the_tree_in_a_declared_path_is_refused(
    repo: GitRepo, tracked: str, planted: str
) -> None:
    """A module or package of a declared virtualenv named like one of the tree's top-level ones
    (its root's, or src/'s) would be imported in place of the judged sources: refused, naming
    the file."""
    repo.write(".gitignore", ".venv/\n")
    repo.write(tracked, "ANSWER = 41\n")
    repo.commit("app")
    repo.write(f".venv/{planted}", "ANSWER = 42\n")
    repo.write(".venv/extra/x.pth", "\n")
    with (
        pytest.raises(RunError, match=r"named like a module of the tree") as err,
        placed(repo, ignored=(".venv",)),
    ):
        pass
    named = planted.removesuffix("/__init__.py").removesuffix("/core.py")
    assert f"holds .venv/{named}, named like a module of the tree" in err.value.message


def test_other_names_in_a_declared_path_are_no_shadow(repo: GitRepo) -> None:
    """Control: a tracked folder that is no package (tests/, docs/), names that only begin like
    a module of the tree, metadata of a distribution, and a module of the tree's name outside
    the folders Python looks in are all accepted."""
    repo.write(".gitignore", ".venv/\n")
    repo.write("app.py", "ANSWER = 42\n")
    repo.write("tests/test_app.py", "\n")
    repo.write("docs/index.md", "\n")
    repo.commit("app")
    for rel in (
        "lib/python3.12/site-packages/tests/__init__.py",
        "lib/python3.12/site-packages/docs/__init__.py",
        "lib/python3.12/site-packages/application.py",
        "lib/python3.12/site-packages/app_extras.py",
        "lib/python3.12/site-packages/app-1.0.dist-info/METADATA",
        "lib/python3.12/site-packages/app.egg-info/PKG-INFO",
        "lib/python3.12/site-packages/other/app.py",
        "share/app.py",
    ):
        repo.write(f".venv/{rel}", "\n")
    with placed(repo, ignored=(".venv",)) as materialised:
        assert [i.path for i in materialised.ignored] == [".venv"]


@pytest.mark.parametrize("name", ["myproj", "@acme/myproj"])
@pytest.mark.parametrize("where", ["", "web/"])
def test_the_trees_own_package_in_a_declared_node_modules_is_refused(
    repo: GitRepo, name: str, where: str
) -> None:
    """node_modules/<the name of the package.json beside it, or of the root's> would be
    required in place of the tree's package: refused, naming it."""
    repo.write(".gitignore", "node_modules/\n")
    repo.write("package.json", json.dumps({"name": name}))
    repo.write("web/package.json", json.dumps({"name": "web"}))
    repo.commit("package")
    repo.write(f"{where}node_modules/{name}/index.js", "exports.ANSWER = 42\n")
    with (
        pytest.raises(RunError, match=r"named like the tree's own package") as err,
        placed(repo, ignored=(f"{where}node_modules",)),
    ):
        pass
    assert f"holds {where}node_modules/{name}, named" in err.value.message


def test_other_packages_in_a_declared_node_modules_are_no_shadow(repo: GitRepo) -> None:
    """Control: a dependency's own copy of the project (nested node_modules), packages named
    otherwise, and a package.json that names no package are accepted."""
    repo.write(".gitignore", "node_modules/\n")
    repo.write("package.json", json.dumps({"name": "myproj"}))
    repo.write("web/package.json", json.dumps({"private": True}))
    repo.commit("package")
    repo.write("node_modules/plugin/node_modules/myproj/index.js", "\n")
    repo.write("node_modules/myproj-extras/index.js", "\n")
    repo.write("web/node_modules/web/index.js", "\n")
    with placed(repo, ignored=("node_modules", "web/node_modules")) as materialised:
        assert [i.path for i in materialised.ignored] == ["node_modules", "web/node_modules"]


@pytest.mark.parametrize("how", ["pth", "cached"])
def test_a_declared_path_that_moves_the_bytecode_cache_is_refused(repo: GitRepo, how: str) -> None:
    """A start-up file that sets ``sys.pycache_prefix``, or bytecode kept for the private
    checkout's files (what such a prefix in the declared path holds), would have checks run
    bytecode the tree does not pin: refused, naming the file."""
    repo.write(".gitignore", ".venv/\n")
    repo.write("app.py", "ANSWER = 41\n")
    repo.commit("app")
    site = ".venv/lib/python3.12/site-packages"
    if how == "pth":
        repo.write(f"{site}/speed.pth", "import sys; sys.pycache_prefix = '/x'\n")
        named = f"{site}/speed.pth"
    else:
        handle = open_repo(repo.path)
        mirror = os.path.realpath(checkouts_dir(handle.gitdir)).lstrip(os.sep)
        named = f".venv/pc/{mirror}/0/tree/app.cpython-312.pyc"
        repo.write(named, b"")
    with (
        pytest.raises(RunError, match=r"bytecode cache \(sys.pycache_prefix\)") as err,
        placed(repo, ignored=(".venv",)),
    ):
        pass
    assert f"holds {named}, which moves" in err.value.message


def test_bytecode_a_virtualenv_caches_for_itself_is_accepted(repo: GitRepo) -> None:
    """Control: the __pycache__ folders of installed packages, even of a module named like
    nothing of the tree, are the virtualenv's own."""
    repo.write(".gitignore", ".venv/\n")
    repo.write("app.py", "ANSWER = 42\n")
    repo.commit("app")
    site = ".venv/lib/python3.12/site-packages"
    repo.write(f"{site}/helper/__init__.py", "\n")
    repo.write(f"{site}/helper/__pycache__/__init__.cpython-312.pyc", b"")
    repo.write(f"{site}/__pycache__/six.cpython-312.pyc", b"")
    with placed(repo, ignored=(".venv",)) as materialised:
        assert [i.path for i in materialised.ignored] == [".venv"]
