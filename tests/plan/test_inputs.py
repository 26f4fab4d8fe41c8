"""What a step's ``inputs`` cover in a tree: symlinks are followed inside the tree."""

from __future__ import annotations

import os

import pygit2
import pytest

from gitaudit.git.repo import open_repo
from gitaudit.plan import inputs
from gitaudit.plan.inputs import covered_files, matches_input
from gitaudit.plan.model import Plan
from tests.gitrepo import GitRepo

FILES = {
    "real/a.txt": "a\n",
    "real/b.txt": "b\n",
    "real/deep/c.txt": "c\n",
    "other/z.txt": "z\n",
}

# (links to create: path -> target, the inputs patterns, the paths they must cover)
CASES: dict[str, tuple[dict[str, str], list[str], set[str]]] = {
    "no links: the matching files, as always": ({}, ["real/**"], set(FILES) - {"other/z.txt"}),
    "a link to a file covers the file": (
        {"pkg/a.txt": "../real/a.txt"},
        ["pkg/**"],
        {"pkg/a.txt", "real/a.txt"},
    ),
    "a link to a folder covers every file below it": (
        {"pkg/lib": "../real"},
        ["pkg/**"],
        {"pkg/lib", "real/a.txt", "real/b.txt", "real/deep/c.txt"},
    ),
    "a chain of links covers each link and the end": (
        {"pkg/a.txt": "../mid/a.txt", "mid/a.txt": "../real/a.txt"},
        ["pkg/**"],
        {"pkg/a.txt", "mid/a.txt", "real/a.txt"},
    ),
    "a link deep in a subfolder, with ../ up to the root": (
        {"pkg/s/d/a.txt": "../../../real/a.txt"},
        ["pkg/**"],
        {"pkg/s/d/a.txt", "real/a.txt"},
    ),
    "a linked folder on the way to the target": (
        {"pkg/a.txt": "../via/deep/c.txt", "via": "real"},
        ["pkg/**"],
        {"pkg/a.txt", "via", "real/deep/c.txt"},
    ),
    "a glob through a linked folder covers the file it reaches": (
        {"pkg/lib": "../real"},
        ["pkg/lib/a.txt"],
        {"pkg/lib", "real/a.txt"},
    ),
    "a wildcard through a linked folder": (
        {"pkg/lib": "../real"},
        ["pkg/lib/deep/*.txt"],
        {"pkg/lib", "real/deep/c.txt"},
    ),
    "a linked folder inside a linked folder": (
        {"pkg/lib": "../real", "real/more": "../other"},
        ["pkg/lib/more/z.txt"],
        {"pkg/lib", "real/more", "other/z.txt"},
    ),
    "links below a linked folder are followed too": (
        {"pkg/lib": "../real", "real/more": "../other"},
        ["pkg/**"],
        {"pkg/lib", "real/a.txt", "real/b.txt", "real/deep/c.txt", "real/more", "other/z.txt"},
    ),
    "a link to its own folder's parent covers what is there": (
        {"pkg/up": ".."},
        ["pkg/**"],
        {*FILES, "README.md", "pkg/up"},
    ),
    "a loop through a glob is covered whole": (
        {"loop": "."},
        ["loop/loop/real/a.txt"],
        {*FILES, "README.md", "loop"},
    ),
    "dangling: the link's own text only": (
        {"pkg/gone": "../real/nothing.txt", "pkg/nodir": "../real/a.txt/x"},
        ["pkg/**"],
        {"pkg/gone", "pkg/nodir"},
    ),
    "a loop of links: the links' own text only": (
        {"pkg/x": "y", "pkg/y": "x"},
        ["pkg/**"],
        {"pkg/x", "pkg/y"},
    ),
    "an unmatched link covers nothing": (
        {"pkg/a.txt": "../real/a.txt"},
        ["other/**"],
        {"other/z.txt"},
    ),
}


def _tree(repo: GitRepo, links: dict[str, str]) -> str:
    for path, text in FILES.items():
        repo.write(path, text)
    for path, target in links.items():
        (repo.path / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, repo.path / path)
    repo.commit("tree")
    return repo.head_tree()


@pytest.mark.parametrize("case", sorted(CASES))
def test_inputs_cover_what_links_lead_to(repo: GitRepo, case: str) -> None:
    links, patterns, expected = CASES[case]
    tree = _tree(repo, links)
    covered = covered_files(open_repo(repo.path).git, tree, patterns)
    assert covered is not None
    assert {path for path, _, _ in covered} == expected, case


def test_without_links_the_digest_lines_are_the_matching_files(repo: GitRepo) -> None:
    tree = _tree(repo, {})
    git = open_repo(repo.path).git
    direct = sorted(f for f in inputs.tree_files(git, tree) if matches_input("real/**", f[0]))
    assert covered_files(git, tree, ["real/**"]) == direct


def test_following_links_is_bounded(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_VISITS entries the step depends on the whole tree (None), never on less."""
    tree = _tree(repo, {"pkg/lib": "../real"})
    monkeypatch.setattr(inputs, "MAX_VISITS", 2)
    assert covered_files(open_repo(repo.path).git, tree, ["pkg/**"]) is None


GLOBS = [
    "real",
    "real/",
    "./real/deep",
    "real/**",
    "**/c.txt",
    "**/*.txt",
    "r*/*.txt",
    "*/b.txt",
    "*.txt",
    "real/**/c.txt",
    "real/d*/**",
    "real/**/*",
    "real/**/**",
    "**/*",
    "[or]*/?.txt",
    "other/z.txt",
    "re[a",
    "**",
    "nothing/**",
    "real/a.txt/x",
    ".",
    "./",
    "real/..",
]


@pytest.mark.parametrize("glob", GLOBS)
def test_one_pass_matching_is_the_per_file_definition(repo: GitRepo, glob: str) -> None:
    """The tree is read lazily and the globs of all steps are matched together (by literal
    prefix and suffix); what each covers is exactly the files :func:`matches_input` accepts."""
    tree = _tree(repo, {})
    git = open_repo(repo.path).git
    direct = sorted(f for f in inputs.tree_files(git, tree) if matches_input(glob, f[0]))
    assert covered_files(git, tree, [glob]) == direct
    reading = inputs._Tree(git, tree)
    reading.match_all(GLOBS)  # every step's globs at once, as input_digests does
    assert reading.matching(glob) == [path for path, _, _ in direct]


@pytest.mark.parametrize("glob", GLOBS)
def test_folders_covered_whole_are_exactly_what_the_glob_matches(repo: GitRepo, glob: str) -> None:
    """Where a glob covers folders whole (the digest then takes each folder's tree id instead
    of a line per file), the files below them are exactly the files it matches; the other
    globs are listed file by file."""
    tree = _tree(repo, {})
    git = open_repo(repo.path).git
    folders = inputs._Tree(git, tree).whole_folders([glob])
    if folders is None:
        assert glob not in ("real/**", "real", "**", ".", "real/d*/**"), glob
        return
    below = {
        path
        for path, _mode, _oid in inputs.tree_files(git, tree)
        if any(not f or path.startswith(f + "/") for f, _ in folders)
    }
    assert below == {f[0] for f in inputs.tree_files(git, tree) if matches_input(glob, f[0])}
    for folder, oid in folders:
        assert oid == (tree if not folder else repo.git("rev-parse", f"{tree}:{folder}").strip())


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_digest_changes_exactly_with_the_files_its_inputs_cover(repo: GitRepo, case: str) -> None:
    """Whether the folders are covered whole (one line each) or file by file (links followed),
    the input digest changes when a covered file changes, and only then."""
    links, patterns, expected = CASES[case]
    tree = _tree(repo, links)
    git = open_repo(repo.path).git
    plan = _plan(patterns)
    before = inputs.input_digests(git, plan, tree)["a"]
    for path in sorted({*FILES, "README.md"}):
        repo.write(path, (repo.path / path).read_text() + "changed\n")
        repo.commit(f"change {path}")
        after = inputs.input_digests(git, plan, repo.head_tree())["a"]
        assert (after != before) == (path in expected), (case, path)
        before = after


def test_a_folder_covered_whole_is_one_line(repo: GitRepo) -> None:
    """``real/**``, ``r*/**`` and ``real`` cover the folder ``real`` whole: the digest is the
    step's contract, then ``40000 real <its tree id>``. A symlink in it, one at the glob's level
    that the glob could go through, or a submodule in it, and the files are listed one by
    one (links followed; a submodule makes the whole tree count)."""
    import hashlib

    from gitaudit.plan.digest import step_digest

    tree = _tree(repo, {})
    git = open_repo(repo.path).git
    real = repo.git("rev-parse", f"{tree}:real").strip()
    for glob in ("real/**", "r*/**", "real", "real/*"):
        plan = _plan([glob])
        line = f"\n40000 real {real}"
        want = hashlib.sha256((step_digest(plan, plan.steps[0]) + line).encode()).hexdigest()
        assert inputs.input_digests(git, plan, tree)["a"] == f"sha256:{want}", glob
    for links in ({"real/more": "../other"}, {"rlink": "other"}):
        linked = _tree(repo, links)
        assert inputs._Tree(git, linked).whole_folders(["r*/**"]) is None, links
        covered = covered_files(git, linked, ["r*/**"])
        assert covered is not None and "other/z.txt" in {p for p, _m, _o in covered}, links
    (repo.path / "rlink").unlink()
    (repo.path / "real/more").unlink()
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},real/sub")
    repo.git("commit", "-q", "-m", "a submodule")
    assert inputs._Tree(git, repo.head_tree()).whole_folders(["real/**"]) is None
    plan = _plan(["real/**"])
    line = f"\ntree {repo.head_tree()}"  # the whole tree counts, as for a step without inputs
    want = hashlib.sha256((step_digest(plan, plan.steps[0]) + line).encode()).hexdigest()
    assert inputs.input_digests(git, plan, repo.head_tree())["a"] == f"sha256:{want}"


@pytest.mark.parametrize("glob", ["real/**", "r*/**", "real/deep"])
def test_the_attributes_above_a_folder_covered_whole_count(repo: GitRepo, glob: str) -> None:
    """A ``.gitattributes`` above a folder covered whole changes how git writes its files: it
    changes the digest, as one inside the folder does (its tree id changes); one beside it, in
    a folder of no covered file, does not."""
    tree = _tree(repo, {})
    git = open_repo(repo.path).git
    plan = _plan([glob])
    before = inputs.input_digests(git, plan, tree)["a"]
    seen = {before}
    for path in ("other/.gitattributes", ".gitattributes", "real/.gitattributes"):
        if glob == "real/deep" and path == "real/.gitattributes":
            path = "real/deep/.gitattributes"
        repo.write(path, "*.txt text eol=crlf\n")
        repo.commit(f"attributes in {path}")
        digest = inputs.input_digests(git, plan, repo.head_tree())["a"]
        if path.startswith("other/"):
            assert digest == before, path
        else:
            assert digest not in seen, path
        seen.add(digest)


def test_digests_are_shared_within_a_process_only_for_the_same_tree_and_steps(
    repo: GitRepo,
) -> None:
    """A run and the gate judging the same tree right after read it once; another tree, or a
    step whose inputs differ, is computed afresh."""
    tree = _tree(repo, {})
    git = open_repo(repo.path).git
    plan = _plan(["real/**"])
    first = inputs.input_digests(git, plan, tree)
    assert inputs.input_digests(git, plan, tree) == first
    assert inputs.input_digests(git, _plan(["other/**"]), tree) != first
    repo.write("real/a.txt", "changed\n")
    repo.commit("changed")
    assert inputs.input_digests(git, plan, repo.head_tree()) != first


def _plan(globs: list[str], verify: list[dict[str, object]] | None = None) -> Plan:
    from gitaudit.plan.load import build_plan

    doc = {
        "task": "inputs",
        "requirements": [{"id": "REQ-001", "description": "it works"}],
        "steps": [
            {
                "id": "a",
                "depends_on": [],
                "covers": ["REQ-001"],
                "inputs": globs,
                "verify": verify or [{"type": "run", "argv": ["true"]}],
            }
        ],
    }
    plan, problems = build_plan(doc, name="default", source="test")
    assert not problems
    return plan


@pytest.mark.parametrize("glob", ["real/*.txt", "**/a.txt"])
def test_the_attributes_over_the_covered_files_count(repo: GitRepo, glob: str) -> None:
    """A ``.gitattributes`` in the root, or in the folder of a covered file or above it, changes
    how git writes that file: it changes the digest although the globs do not match it. One in
    a folder of no covered file does not; without any, the digest is what it always was: the
    contract, then the covered files' lines. (A glob naming a folder reads that folder; one
    without a literal prefix reads the whole tree, where no attributes file at all is known
    without a lookup per folder.)"""
    import hashlib

    from gitaudit.plan.digest import step_digest

    tree = _tree(repo, {})
    git = open_repo(repo.path).git
    plan = _plan([glob])
    step = plan.steps[0]
    covered = covered_files(git, tree, [glob])
    assert covered is not None
    lines = "".join(f"\n{mode:o} {path} {oid}" for path, mode, oid in covered)
    old = "sha256:" + hashlib.sha256((step_digest(plan, step) + lines).encode()).hexdigest()
    before = inputs.input_digests(git, plan, tree)[step.id]
    assert before == old
    seen = {before}
    for path in ("other/.gitattributes", "real/.gitattributes", ".gitattributes"):
        repo.write(path, "*.txt text eol=crlf\n")
        repo.commit(f"attributes in {path}")
        digest = inputs.input_digests(git, plan, repo.head_tree())[step.id]
        if path.startswith("other/"):
            assert digest == before, path  # no covered file is below it
        else:
            assert digest not in seen, path
        seen.add(digest)
    repo.write(".gitattributes", "*.txt -text\n")
    repo.commit("the root's attributes changed")
    assert inputs.input_digests(git, plan, repo.head_tree())[step.id] not in seen


def _raw_tree(repo: GitRepo, entries: list[tuple[bytes, bytes, str]]) -> str:
    """A tree object written byte for byte (``mode name\\0oid`` entries, as given): git's own
    tools would refuse some of them."""
    data = b"".join(mode + b" " + name + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries)
    return repo.git("hash-object", "-t", "tree", "-w", "--literally", "--stdin", input=data).strip()


def _reading(git: object, tree: str) -> list[tuple[str, int, str]]:
    reading = inputs._Tree(git, tree)  # type: ignore[arg-type]
    entries = reading.listed_entries()
    return [(path, *entries[path]) for path in reading.under("")]  # type: ignore[misc]


def test_reading_raw_trees_is_pygit2s_reading(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trees are read from their raw bytes (in C, several times faster than pygit2's entry
    objects): every path, mode and object id is what pygit2 reads entry by entry, names that
    are not UTF-8 decoded alike, "." names kept as they are; a tree git would not write (a
    zero-padded mode, a name with a slash, bytes left over) is read by pygit2 itself, never
    guessed at."""
    _tree(repo, {"pkg/lib": "../real"})
    repo.write("bin/run.sh", "#!/bin/sh\n", mode=0o755)
    repo.commit("an executable")
    blob = repo.git("hash-object", "-w", "--stdin", input=b"odd\n").strip()
    sub = repo.git("rev-parse", "HEAD").strip()
    head = repo.head_tree()
    inner = _raw_tree(repo, [(b"100644", b"caf\xc3\xa9.txt", blob), (b"100644", b"\xff.bin", blob)])
    normal = _raw_tree(
        repo,
        [
            (b"40000", b"base", head),
            (b"100644", b"named \xff", blob),
            (b"160000", b"sub", sub),
            (b"40000", b"z", inner),
        ],
    )
    git = open_repo(repo.path).git

    def no_fallback(*_args: object) -> None:
        raise AssertionError("a tree as git writes them fell back to pygit2's reading")

    with monkeypatch.context() as patched:
        patched.setattr(inputs._Tree, "_walk_entries", no_fallback)
        read = _reading(git, normal)
    assert read == sorted(inputs.tree_files(git, normal))
    assert ("z/\udcff.bin", 0o100644, blob) in read and ("sub", 0o160000, sub) in read

    dotted = _raw_tree(repo, [(b"100644", b".", blob), (b"40000", b"base", head)])
    assert _reading(git, dotted) == sorted(inputs.tree_files(git, dotted))
    assert (".", 0o100644, blob) in _reading(git, dotted)

    odd_trees = {
        "a zero-padded mode": [(b"040000", b"base", head), (b"100644", b"f", blob)],
        "a mode git would not write": [(b"100664", b"f", blob)],
        "a name with a slash": [(b"100644", b"a/b", blob)],
    }
    for case, entries in odd_trees.items():
        odd = _raw_tree(repo, entries)
        fell_back: list[str] = []

        def spy(
            self: inputs._Tree,
            at: str,
            *rest: object,
            seen: list[str] = fell_back,
            original: object = inputs._Tree._walk_entries,
        ) -> None:
            seen.append(at)
            original(self, at, *rest)  # type: ignore[operator]

        with monkeypatch.context() as patched:
            patched.setattr(inputs._Tree, "_walk_entries", spy)
            read = _reading(git, odd)
        assert fell_back, case
        assert read == sorted(inputs.tree_files(git, odd)), case

    # bytes left over: pygit2 cannot read the tree, and neither reading makes anything of it
    left_over = repo.git(
        "hash-object",
        "-t",
        "tree",
        "-w",
        "--literally",
        "--stdin",
        input=b"100644 f\0" + bytes.fromhex(blob) + b"100644 g\0\x01",
    ).strip()
    holder = _raw_tree(repo, [(b"40000", b"bad", left_over)])
    with pytest.raises(pygit2.GitError):
        inputs.tree_files(git, holder)
    with pytest.raises(pygit2.GitError):
        _reading(git, holder)


def test_a_file_name_reads_as_one_line_only(repo: GitRepo) -> None:
    """Each covered file is one line of the digest: a name holding a line break (written
    quoted) does not read as the lines of two files, nor a name starting with a quote as a
    quoted one; a name that is not UTF-8 has a digest too (it raised before). Ordinary names are
    written as they always were."""
    from gitaudit.plan.inputs import _written

    git = open_repo(repo.path).git
    plan = _plan(["src/**", "tox.ini"])
    repo.write("src/a.txt", "a\n")
    repo.write("tox.ini", "t\n")
    repo.commit("two files")
    two = inputs.input_digests(git, plan, repo.head_tree())["a"]
    blob = repo.git("rev-parse", "HEAD:src/a.txt").strip()
    repo.git("rm", "-q", "src/a.txt", "tox.ini")
    repo.write(f"src/a.txt {blob}\n100644 tox.ini", "t\n")
    repo.commit("one file")
    assert inputs.input_digests(git, plan, repo.head_tree())["a"] != two
    assert _written("src/a b.txt") == "src/a b.txt"
    assert _written('"a\\nb"') == '"\\"a\\\\nb\\""'  # not the quoted form of a<LF>b
    assert _written("src/a\nb") == '"src/a\\nb"'
    (repo.path / os.fsdecode(b"src/\xff")).write_bytes(b"x\n")
    repo.commit("a name that is not UTF-8")
    assert inputs.input_digests(git, plan, repo.head_tree())["a"].startswith("sha256:")


@pytest.mark.parametrize(
    "names",
    [
        ["src/a.txt", "src/b c.txt"],
        ["src/a.txt", "src/a\nb"],
        ['"src"/a', "src/b"],
        ["src/a", 'src/"b"'],  # a quote after the folder: written as is
        ["src/a", 'src/b "c"'],  # a quote after a space inside the name
        ["src/a", os.fsdecode(b"src/\xff")],
        ["src/\u00e9t\u00e9", "src/\u2028"],
        [],
    ],
)
def test_the_lines_are_each_path_written_whatever_the_names(names: list[str]) -> None:
    """The digest's lines are joined as they are when no path needs quoting (one pass to tell),
    and are exactly the lines of each path :func:`_written` either way."""
    from gitaudit.plan.inputs import _lines, _written

    entries = [(name, 0o100644, f"{n:040x}") for n, name in enumerate(names)]
    want = "".join(f"\n{mode:o} {_written(path)} {oid}" for path, mode, oid in entries)
    assert _lines(entries) == want.encode()


# the globs, and links to add to the tree: path -> target (the submodule is at sub/lib)
REACHING: dict[str, tuple[list[str], dict[str, str]]] = {
    "a glob matching the submodule": (["sub/**"], {}),
    "a glob naming a file inside it": (["sub/lib/x.py"], {}),
    "a wildcard that can match inside it": (["*.py"], {}),
    "a link to it": (["pkg/**"], {"pkg/lib": "../sub/lib"}),
    "a link through it": (["pkg/**"], {"pkg/a.txt": "../sub/lib/../../real/a.txt"}),
    "a glob through a linked folder holding it": (["pkg/s/lib/x.py"], {"pkg/s": "../sub"}),
    "a glob through a link to it": (["pkg/lib/x.py"], {"pkg/lib": "../sub/lib"}),
}


@pytest.mark.parametrize("case", sorted(REACHING))
def test_inputs_that_reach_a_submodule_depend_on_the_whole_tree(repo: GitRepo, case: str) -> None:
    """What a submodule holds, and where links inside it lead, is not in the tree (only its
    commit is): inputs that reach one cover the whole tree (None). Inputs that do not, keep
    their files."""
    patterns, links = REACHING[case]
    tree = _tree(repo, links)
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub/lib")
    repo.git("commit", "-q", "-m", "a submodule")
    git = open_repo(repo.path).git
    assert covered_files(git, repo.head_tree(), patterns) is None, case
    assert covered_files(git, repo.head_tree(), ["real/**"]) == covered_files(
        git, tree, ["real/**"]
    )


@pytest.mark.parametrize(
    "links",
    [
        {"pkg/up": "../../outside.txt"},
        {"pkg/abs": "/etc/passwd"},
        {"up": "../tree/real/a.txt"},
        {"pkg/lib": "../../tree/real"},
        {"pkg/a.txt": "../mid/a.txt", "mid/a.txt": "../../real/a.txt"},
        {"pkg/data": "../out/../real/a.txt"},
        {"pkg/data": "missing/deeper/../../../real"},
    ],
    ids=[
        "up out",
        "absolute",
        "out and back in from the root",
        "a folder",
        "at a chain's end",
        "through a folder the tree lacks",
        "through folders the tree lacks",
    ],
)
def test_a_link_out_of_the_tree_makes_the_whole_tree_count(
    repo: GitRepo, links: dict[str, str]
) -> None:
    """A link whose target is absolute or leaves the tree may lead back into it (the checks
    run in a checkout at <slot>/tree): the inputs cover the whole tree (None). So does one that
    goes through a folder the tree lacks and back up (`out/../real/a.txt`): while the checks
    run, a folder made there (a build's) leads on to a file the inputs do not cover."""
    tree = _tree(repo, links)
    patterns = ["pkg/**", "up"]
    assert covered_files(open_repo(repo.path).git, tree, patterns) is None


@pytest.mark.parametrize("root", [".", "./", "real/..", "./real/../"])
def test_a_pattern_naming_the_root_covers_every_file(repo: GitRepo, root: str) -> None:
    """`inputs: ["."]` names the root, and everything below it as any folder does: as
    written, it matched no path, so the step's digest never changed and its pass was carried
    through any change."""
    tree = _tree(repo, {})
    git = open_repo(repo.path).git
    assert matches_input(root, "real/a.txt") and matches_input(root, "other/z.txt")
    every = inputs.tree_files(git, tree)
    assert sorted(covered_files(git, tree, [root]) or []) == sorted(every)
    before = inputs.input_digests(git, _plan([root]), tree)
    repo.write("other/z.txt", "changed\n")
    repo.commit("changed")
    assert inputs.input_digests(git, _plan([root]), repo.head_tree()) != before


def test_a_check_path_outside_the_inputs_is_warned_about() -> None:
    """A step whose pass is carried for unchanged inputs, with a check reading a file none of
    them covers (a change there alone would never run it again): a warning naming the path."""
    from gitaudit.plan.validate import semantic_problems

    plan = _plan(
        ["src/**"],
        [
            {"type": "run", "argv": ["true"]},
            {"type": "regex", "path": "VERSION", "pattern": "1"},
            {"type": "file_exists", "path": "src/a.py"},
        ],
    )
    found = [p for p in semantic_problems(plan) if p.code == "inputs.path-not-covered"]
    assert [(p.path, p.severity) for p in found] == [("$.steps[0].verify[1].path", "warning")]
    assert "'VERSION'" in found[0].message


@pytest.mark.parametrize("glob", ["real/**", "real/a.txt", "**/a.txt"])
def test_a_forged_tree_object_is_a_one_line_error(repo: GitRepo, glob: str) -> None:
    """A file in .git/objects under a tree's name that holds another tree: libgit2 hashes what
    it reads and refuses it, and that is a RepositoryError naming the tree and the fix, not
    pygit2's GitError (a traceback at the command line)."""
    import zlib

    from gitaudit.errors import RepositoryError

    tree = _tree(repo, {})
    git = open_repo(repo.path).git
    real = str(git[pygit2.Oid(hex=tree)]["real"].id)  # type: ignore[index]
    stored = repo.path / ".git" / "objects" / real[:2] / real[2:]
    stored.chmod(0o644)
    stored.write_bytes(zlib.compress(b"tree 0\0"))  # the empty tree, under real/'s name
    with pytest.raises(RepositoryError, match=rf"cannot read tree {tree[:12]}") as raised:
        inputs.input_digests(git, _plan([glob]), tree)
    assert raised.value.hint is not None and "git fsck" in raised.value.hint
