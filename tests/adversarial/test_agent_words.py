"""Attacks on how the agent guard reads a shell word's expansions: quoted text bash keeps
literal (``'$HOME'``), an unquoted here-document bash expands, a patch applied under another
folder, and commands built to keep the guard judging past the host's hook timeout. Each
through the real installed hook command with Claude Code's payload (tests/agent/host.py), and
each harmful one run for real by bash in a copy of the project, so a spelling bash does not
read that way fails the test instead of passing it.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agent.host import CHECK, bash, run_hook, sealed_project
from tests.gitrepo import GitRepo


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    repo = sealed_project(tmp_path / "project")
    (repo.path / "sub").mkdir()  # an untracked folder to run from
    return repo


def refused(repo: GitRepo, command: str, words: str, where: str = "") -> None:
    """Assert the guard refuses *command* (run in the folder *where*) with *words* in its
    one-line reason."""
    run = run_hook(repo.path, "guard", bash(repo.path, command, repo.path / where))
    assert run.blocked, f"not refused: {command[:200]!r}"
    assert words in run.reason, f"{command[:200]!r}: {run.reason}"
    assert "\n" not in run.reason.strip(), run.reason


def for_real(repo: GitRepo, tmp_path: Path, command: str, where: str = "") -> Path:
    """*command* run by bash in a copy of the project (the attack, had the guard let it by)."""
    copy = tmp_path / "copy"
    shutil.copytree(repo.path, copy, symlinks=True)
    subprocess.run(
        ["bash", "-c", command], cwd=copy / where, capture_output=True, check=False, timeout=60
    )
    return copy


def check_changed(copy: Path) -> bool:
    check = copy / "tests" / "check_greeting.py"
    return not check.exists() or check.read_text() != CHECK or check.stat().st_mode & 0o111 != 0


# ------------------------------------------------------------------------------ quoted words

PROTECTED = "protected by the plan"


@pytest.mark.parametrize(
    "command",
    [
        "echo pass > '$HOME/../tests/check_greeting.py'",
        "echo pass > $'\\x24HOME/../tests/check_greeting.py'",
        "cp /dev/null '${HOME}/../tests/check_greeting.py'",
        "sed -i s/assert/#/ \\$HOME/../tests/check_greeting.py",
        "rm '~/../tests/check_greeting.py'",
        "X=..; chmod +x '$X'/$X/tests/check_greeting.py",
        "X=..; echo pass > a/'$X'/$X/$X/tests/check_greeting.py",
        "echo pass > tests/check_greeting.py$UNSET_HERE",
        "echo pass > ${UNSET_HERE:-tests}/check_greeting.py",
        "echo pass > ~+/tests/check_greeting.py",
    ],
)
def test_attack_agent_writes_the_check_through_a_word_the_guard_expanded(
    project: GitRepo, tmp_path: Path, command: str
) -> None:
    """A ``$NAME`` or ``~`` bash keeps literal (single quotes, ``$'\\x24'``, a backslash) names a
    folder of that name in the project (made earlier, by a script: the guard reads commands,
    not programs), and ``..`` climbs out of it onto the check; the guard expanded it
    (``$HOME/../tests`` is beside the home folder; ``'$X'/$X`` with X=.. is outside the
    project) and let the write through. So did a variable bash expands to nothing (unset: the
    guard kept it as written), a ``${NAME:-default}``, and ``~+`` (bash's ``$PWD``)."""
    for folder in ("$HOME", "${HOME}", "~", "$X", "a/$X"):
        (project.path / folder).mkdir(parents=True)
    refused(project, command, PROTECTED)
    assert check_changed(for_real(project, tmp_path, command)), f"no harm done: {command!r}"


# --------------------------------------------------------------------- here-documents

HUNK = (
    "@@ -1,4 +1 @@\n-import sys\n-sys.path.insert(0, '.')\n-from greeter import greeting\n"
    "-assert greeting() == 'Hello, world!', greeting()\n+print('ok')\n"
)


CHECK_NOPE = "tests$NOPE/check_greeting.py"
CHECK_CUT = "${X:0:5}/check_greeting.py"
CONTINUED = "te\\\nsts/check_greeting.py"  # a backslash, a newline: bash joins the lines


def diff(old: str, new: str) -> str:
    return f"--- a/{old}\n+++ b/{new}\n{HUNK}"


@pytest.mark.parametrize(
    ("command", "words"),
    [
        pytest.param(
            f"X=tests; git apply <<EOF\n{diff('$X/check_greeting.py', '$X/check_greeting.py')}EOF",
            PROTECTED,
            id="a variable the command sets",
        ),
        pytest.param(
            f"X=tests; patch -s -p1 <<EOF\n"
            f"{diff('${X}/check_greeting.py', '${X}/check_greeting.py')}EOF",
            PROTECTED,
            id="braced, patch",
        ),
        pytest.param(
            f"git apply <<EOF\n{diff('tests$NOPE/check_greeting.py', CHECK_NOPE)}EOF",
            "delimiter is not quoted",
            id="an unset variable",
        ),
        pytest.param(
            f"X=tests.; git apply <<EOF\n{diff(CHECK_CUT, CHECK_CUT)}EOF",
            "delimiter is not quoted",
            id="a substring",
        ),
        pytest.param(
            "patch -s -p1 <<EOF\n"
            f"{diff('${NOPE:-tests}/check_greeting.py', '${NOPE:-tests}/check_greeting.py')}EOF",
            "delimiter is not quoted",
            id="a default value",
        ),
        pytest.param(
            "git apply <<-EOF\n" + diff(CONTINUED, CONTINUED) + "\tEOF",
            PROTECTED,
            id="a continued line",
        ),
    ],
)
def test_attack_agent_expands_a_patch_name_in_an_unquoted_here_document(
    project: GitRepo, tmp_path: Path, command: str, words: str
) -> None:
    """A here-document whose delimiter is not quoted is expanded by bash before ``git apply``
    or ``patch`` reads it: ``$X``, ``${X}``, an unset ``$NOPE`` (nothing), ``${X:0:5}``,
    ``${X:-...}`` and a backslash at the end of a line make the check's name. The guard read
    the body as written and let each through. (A ``$(...)`` or backticks there were refused
    already: the guard cannot see what they print.)"""
    refused(project, command, words)
    assert check_changed(for_real(project, tmp_path, command)), f"no harm done: {command!r}"


# ------------------------------------------------------------------- patches elsewhere


CHECK_PY = "check_greeting.py"


def git_diff(name: str) -> str:
    return f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n{HUNK}"


@pytest.mark.parametrize(
    ("command", "where"),
    [
        (f"git apply --directory=tests <<'EOF'\n{diff(CHECK_PY, CHECK_PY)}EOF", ""),
        (f"git apply --directory tests <<'EOF'\n{diff(CHECK_PY, CHECK_PY)}EOF", ""),
        (f"git apply --dir=tests <<'EOF'\n{git_diff(CHECK_PY)}EOF", ""),
        (f"git apply --directory=tests/ -p1 <<'EOF'\n{git_diff(CHECK_PY)}EOF", ""),
        (f"git -C tests apply --directory=tests <<'EOF'\n{git_diff(CHECK_PY)}EOF", ""),
        (f"patch -s -p1 -d tests <<'EOF'\n{diff(CHECK_PY, 'x')}EOF", ""),
        (f"patch -s -p1 --directory=tests <<'EOF'\n{diff(CHECK_PY, 'x')}EOF", ""),
        (f"patch -s -p1 --dir tests <<'EOF'\n{diff(CHECK_PY, 'x')}EOF", ""),
        (f"patch -sp1 -dtests <<'EOF'\n{diff(CHECK_PY, 'x')}EOF", ""),
        (f"patch -s -p1 -d ../tests <<'EOF'\n{diff(CHECK_PY, 'x')}EOF", "sub"),
    ],
)
def test_attack_agent_applies_a_patch_under_another_folder(
    project: GitRepo, tmp_path: Path, command: str, where: str
) -> None:
    """``git apply --directory=DIR`` (``--dir``: git takes any unique abbreviation) puts DIR
    before every name, ``patch -d DIR`` (``-dDIR``, ``--directory``, ``--dir``) moves to DIR
    first: the guard judged the names from the command's folder alone, and let each through.
    (``git -C tests apply --directory=tests``: git reads a git diff's names from the work
    tree's root.)"""
    refused(project, command, PROTECTED, where)
    copy = for_real(project, tmp_path, command, where)
    assert check_changed(copy), f"no harm done: {command!r} in {where or 'the project'}"


GREETER_HUNK = (
    "--- a/greeter.py\n+++ b/greeter.py\n@@ -1,2 +1,2 @@\n def greeting():\n"
    "-    return 'Hello, world!'\n+    return 'x'\n"
)


@pytest.mark.parametrize(
    "command",
    [
        f"patch -s tests/check_greeting.py <<'EOF'\n{diff('greeter.py', 'greeter.py')}EOF",
        f"patch -s -o tests/check_greeting.py greeter.py <<'EOF'\n{GREETER_HUNK}EOF",
        f"patch -s --output=tests/check_greeting.py <<'EOF'\n{GREETER_HUNK}EOF",
        f"patch -s -f -r tests/check_greeting.py greeter.py <<'EOF'\n{diff('g', 'g')}EOF",
    ],
)
def test_attack_agent_patches_the_check_under_a_name_the_diff_does_not_give(
    project: GitRepo, tmp_path: Path, command: str
) -> None:
    """GNU patch writes the file it is given, whatever the diff names (``patch FILE``), its
    ``-o`` output and its ``-r`` rejects: the guard judged only the diff's names (here
    ``greeter.py``), and let each through."""
    refused(project, command, PROTECTED)
    assert check_changed(for_real(project, tmp_path, command)), f"no harm done: {command!r}"


# ------------------------------------------------------------------------------- cost

OVER = "more paths to be checked than the guard checks in time"


def _many_folders(repo: GitRepo) -> str:
    for i in range(8):
        for j in range(8):
            (repo.path / f"d{i}" / f"e{j}").mkdir(parents=True)
    group = "{" + ",".join(f"d{i}" for i in range(8)) + "}/{" + ",".join(f"e{j}" for j in range(8))
    return "rm -rf " + " ".join(group + "}" for _ in range(40))


def _many_bases(repo: GitRepo) -> str:
    return (
        "".join(f"cd d{i}; " for i in range(200)) + "rm -rf " + " ".join(f"x{i}" for i in range(20))
    )


def _names_from_many_bases(repo: GitRepo) -> str:
    names = "".join(f"--- a/x{i}/y/z.py\n+++ b/x{i}/y/z.py\n" for i in range(1500))
    return "cd a; cd b; cd c; cd d; cd e; git apply <<'EOF'\n" + names + "EOF"


def _deep_glob(repo: GitRepo) -> str:
    return "touch /*/*/*/*/*/*/never-there"


def _braces_of_commas(repo: GitRepo) -> str:
    return "echo pass > '{" + "," * 60_000 + "'"


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (_many_folders, OVER),
        (_many_bases, OVER),
        (_names_from_many_bases, OVER),
        (_deep_glob, OVER),
        (_braces_of_commas, None),  # a file of an odd name: allowed, but quickly
    ],
)
def test_attack_agent_keeps_the_guard_judging_past_the_hooks_time(
    project: GitRepo, build: Callable[[GitRepo], str], words: str | None
) -> None:
    """Commands that multiply what the guard judges: existing folders through braces (one git
    process each), hundreds of ``cd`` folders, a patch's names from every one of them, a glob
    over the whole disk, a brace group the old pattern matched in quadratic time. A guard still
    judging when the host's hook timeout ends lets the call through; each took from several
    seconds to minutes before the fix. Now what it judges is bounded, past the bound the
    command is refused as unreadable, and every answer comes in a few seconds at most."""
    command = build(project)
    started = time.monotonic()
    run = run_hook(project.path, "guard", bash(project.path, command))
    took = time.monotonic() - started
    assert took < 10, f"the guard took {took:.1f}s"
    if words is None:
        assert run.allowed, run
    else:
        assert run.blocked and words in run.reason, run.reason
        assert "\n" not in run.reason.strip(), run.reason


# ------------------------------------------------------------ names built from options

HOOK = ".git/hooks/pre-push"
GI = "--- .gi\n+++ .gi\n@@ -1 +1 @@\n-x\n+y\n"  # a patch of a file named `.gi`
T_HOOK = "--- t/hooks/pre-push\n+++ t/hooks/pre-push\n@@ -1 +1 @@\n-x\n+y\n"
TS_CHECK = "--- ts/check_greeting.py\n+++ ts/check_greeting.py\n@@ -1 +1 @@\n-x\n+y\n"
BARE = "--- pre-push\n+++ pre-push\n@@ -1 +1 @@\n-x\n+y\n"
INSIDE = "inside a git directory"


@pytest.fixture
def staged(project: GitRepo, tmp_path: Path) -> GitRepo:
    """The project with the files an agent makes first: `.gi`, `pre-push`, `t/hooks/pre-push`,
    `ts/check_greeting.py` and `tests/check_greeting` (each `x`), `hooks/pre-push` and
    `t/hooks/pre-push` committed,
    and an archive of `hooks/pre-push` (tar and zip) in *tmp_path*."""
    for name in (".gi", "pre-push", "t/hooks/pre-push", "ts/check_greeting.py"):
        project.write(name, "x\n")
    project.write("tests/check_greeting", "x\n")
    project.write("hooks/pre-push", "#!/bin/sh\nexit 0\n")
    project.git("add", "hooks", "t")
    project.git("commit", "-q", "--no-verify", "-m", "files named like a hook")
    (tmp_path / "arc" / "hooks").mkdir(parents=True)
    (tmp_path / "arc" / "hooks" / "pre-push").write_text("#!/bin/sh\nexit 0\n")
    with tarfile.open(tmp_path / "h.tar", "w") as tar:
        tar.add(tmp_path / "arc" / "hooks", arcname="hooks")
    with zipfile.ZipFile(tmp_path / "h.zip", "w") as archive:
        archive.write(tmp_path / "arc" / "hooks" / "pre-push", "hooks/pre-push")
    return project


def harmed(repo: GitRepo, copy: Path) -> bool:
    """Whether the check or the pre-push hook of *copy* is not the project's any more."""
    hook = copy / HOOK
    return check_changed(copy) or hook.read_bytes() != (repo.path / HOOK).read_bytes()


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (f"patch -s -b -B .gi t/hooks/pre-push <<'EOF'\n{T_HOOK}EOF", INSIDE),
        (f"patch -s -b --prefix=.gi -p0 <<'EOF'\n{T_HOOK}EOF", INSIDE),
        (f"patch -s -b -Btes -p0 <<'EOF'\n{TS_CHECK}EOF", PROTECTED),
        (f"patch -s -b -z t/hooks/pre-push .gi <<'EOF'\n{GI}EOF", INSIDE),
        (f"patch -s -bzt/hooks/pre-push -p0 <<'EOF'\n{GI}EOF", INSIDE),
        (f"patch -s -b --suff=t/hooks/pre-push -p0 <<'EOF'\n{GI}EOF", INSIDE),
        (f"patch -s -b --basename-prefix=.git/hooks/ -p0 <<'EOF'\n{BARE}EOF", INSIDE),
        (f"SIMPLE_BACKUP_SUFFIX=t/hooks/pre-push patch -s -b -p0 <<'EOF'\n{GI}EOF", "SIMPLE_"),
        ("cp -b -S .py greeter.py tests/check_greeting", PROTECTED),
        ("mv -b --suffix=.py greeter.py tests/check_greeting", PROTECTED),
        ("install -b -S.py greeter.py tests/check_greeting", PROTECTED),
        ("ln -f -bS .py greeter.py tests/check_greeting", PROTECTED),
        ("rsync -b --suffix=.py greeter.py tests/check_greeting", PROTECTED),
        ("rsync -b --backup-dir=.git/hooks greeter.py pre-push", INSIDE),
        ("sed -i'.git/hooks/*' s/x/y/ pre-push", INSIDE),
        ("sed -it/hooks/pre-push s/x/y/ .gi", INSIDE),
        ("sed --in-place=t/hooks/pre-push s/x/y/ .gi", INSIDE),
        ("perl -i'.git/hooks/*' -pe 's/x/y/' pre-push", INSIDE),
        ("perl -pit/hooks/pre-push -e 's/x/y/' .gi", INSIDE),
    ],
)
def test_attack_agent_writes_a_backup_named_by_an_option(
    staged: GitRepo, tmp_path: Path, command: str, words: str
) -> None:
    """A backup's name is the file's name with an option's text put before or after it, as
    written: ``patch -B .gi`` backs ``t/hooks/pre-push`` up to ``.git/hooks/pre-push`` (``-z``
    after ``.gi``, ``-Y`` before the last component, and ``SIMPLE_BACKUP_SUFFIX``), ``cp``/
    ``mv``/``install``/``ln``/``rsync -b -S .py`` move an old ``tests/check_greeting`` to the
    check's name, ``rsync --backup-dir`` puts the backup in the hooks folder, and ``sed``/
    ``perl -i'.git/hooks/*'`` (``-iSUFFIX``) likewise. The guard judged the files written and
    the option's text alone, and let each through (each did its harm for real)."""
    refused(staged, command, words)
    copy = for_real(staged, tmp_path, command)
    assert harmed(staged, copy), f"no harm done: {command!r}"


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("cp -at .git/hooks pre-push", INSIDE),
        ("cp -t.git/hooks pre-push", INSIDE),
        ("cp --target=.git/hooks pre-push", INSIDE),
        ("install -Dt .git/hooks pre-push", INSIDE),
        ("rsync -t greeter.py tests/check_greeting.py", PROTECTED),
        ("sed -Ei s/assert/#/ tests/check_greeting.py", PROTECTED),
        ("perl -lpi -e 's/assert/#/' tests/check_greeting.py", PROTECTED),
        ("tar -xf {tmp}/h.tar -C .git", INSIDE),
        ("tar -C.git -xf {tmp}/h.tar", INSIDE),
        ("tar -x -f {tmp}/h.tar --dir .git", INSIDE),
        ("tar xfC {tmp}/h.tar .git", INSIDE),
        ("tar -cf tests/check_greeting.py greeter.py", PROTECTED),
        ("unzip -oq {tmp}/h.zip -d .git", INSIDE),
        ("unzip -oq -d.git {tmp}/h.zip", INSIDE),
        ("git --work-tree=.git checkout HEAD -- hooks/pre-push", INSIDE),
        ("git --work-tree .git reset -q --hard", INSIDE),
        ("git -C sub --work-tree=../.git restore --source=HEAD hooks/pre-push", INSIDE),
        ("GIT_WORK_TREE=.git git checkout HEAD -- hooks/pre-push", "GIT_WORK_TREE"),
        ("git checkout-index -f --prefix=.gi t/hooks/pre-push", INSIDE),
    ],
)
def test_attack_agent_writes_into_a_folder_named_by_an_option(
    staged: GitRepo, tmp_path: Path, command: str, words: str
) -> None:
    """Where a command writes, named by an option the guard did not read so: ``cp -t`` bundled
    (``-at DIR``, ``install -Dt DIR``), attached (``-tDIR``) or abbreviated (``--target=DIR``)
    was read as a source (rsync's ``-t`` keeps times: its destination was read as the
    folder); ``sed -Ei`` and ``perl -lpi`` edit in place from inside a bundle; ``tar -C
    .git`` (``-C.git``, ``--dir``, the old ``xfC``) and ``unzip -d .git`` extract a hook into
    the git directory; ``tar -cf`` writes its archive; ``git --work-tree=.git``
    (``GIT_WORK_TREE``) checks files out into it, and ``git checkout-index --prefix=.gi``
    writes ``t/hooks/pre-push`` to ``.git/hooks/pre-push``. Each got through (and did its
    harm for real)."""
    command = command.format(tmp=tmp_path)
    refused(staged, command, words)
    copy = for_real(staged, tmp_path, command)
    assert harmed(staged, copy), f"no harm done: {command!r}"


# ------------------------------------------------------- git writing where its words say


@pytest.fixture
def template(tmp_path: Path) -> Path:
    """A template folder holding an executable `pre-commit` hook (what `git init` copies)."""
    hook = tmp_path / "tpl" / "hooks" / "pre-commit"
    hook.parent.mkdir(parents=True)
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    return hook.parent.parent


def planted(repo: GitRepo, copy: Path) -> bool:
    """Whether *copy*'s check or hooks folder is not the project's any more (a hook changed,
    or a file or folder added to `.git/hooks`)."""
    hooks = {p.name for p in (copy / ".git" / "hooks").iterdir()}
    return harmed(repo, copy) or hooks != {p.name for p in (repo.path / ".git" / "hooks").iterdir()}


@pytest.mark.parametrize(
    ("command", "words", "where"),
    [
        ("git log -1 --format='#!/bin/sh%nexit 0' --output=.git/hooks/pre-push", INSIDE, ""),
        ("git diff HEAD~1 --output .git/hooks/pre-push", INSIDE, ""),
        ("git show --output=tests/check_greeting.py HEAD", PROTECTED, ""),
        ("git format-patch -q -o .git/hooks -1", INSIDE, ""),
        ("git format-patch -k -1 -o.git/hooks", INSIDE, ""),
        ("git archive -o .git/hooks/pre-push HEAD", INSIDE, ""),
        ("git archive --output=tests/check_greeting.py HEAD", PROTECTED, ""),
        ("git bundle create -q .git/hooks/pre-push HEAD", INSIDE, ""),
        ("git worktree add -q .git/hooks/wt", INSIDE, ""),
        ("git clone -q . .git/hooks/c", INSIDE, ""),
        ("git clone -q --separate-git-dir=.git/hooks/c . {tmp}/elsewhere", INSIDE, ""),
        ("git -c protocol.file.allow=always submodule add -q {tmp}/copy .git/hooks/s", INSIDE, ""),
        ("git init -q --template={tmp}/tpl", "it holds", ""),
        ("git init -q --template={tmp}/tpl ..", "it holds", "sub"),
        ("git init -q --bare --templ={tmp}/tpl .git", INSIDE, ""),
        ("git --git-dir=../.git init -q --template={tmp}/tpl", INSIDE, "sub"),
        ("GIT_DIR=.git git init -q --template={tmp}/tpl", "GIT_DIR", ""),
        ("GIT_TEMPLATE_DIR={tmp}/tpl git init -q", "GIT_TEMPLATE_DIR", ""),
        ("git -c init.templateDir={tmp}/tpl init -q", "init.templateDir", ""),
        ("git config core.worktree hooks && git reset -q --hard", "core.worktree", ""),
    ],
)
def test_attack_agent_git_writes_a_file_or_folder_its_words_name(
    staged: GitRepo, template: Path, tmp_path: Path, command: str, words: str, where: str
) -> None:
    """Git subcommands that write a file or folder an option or an argument names, none read
    by the guard: the diff options' ``--output`` (``git log --format=... --output=`` writes a
    hook of the agent's text), ``format-patch -o``, ``archive -o``, ``bundle create FILE``,
    ``worktree add PATH``, ``clone URL DIR`` (and ``--separate-git-dir``), ``submodule add URL
    PATH``; ``git init`` run on the project's repository re-initializes it, copying the
    template's hooks into ``.git/hooks`` (``--template``, ``--bare .git``, ``--git-dir``,
    ``GIT_DIR``, ``GIT_TEMPLATE_DIR``, ``init.templateDir``); ``core.worktree`` set in the
    repository's configuration (relative to the git directory: ``hooks``) makes a reset check
    the tree out into ``.git/hooks`` (``git -c core.worktree`` is refused too; git reads it
    from the file only). Each got through and did its harm for real."""
    command = command.format(tmp=tmp_path)
    refused(staged, command, words, where)
    copy = for_real(staged, tmp_path, command, where)
    assert planted(staged, copy), f"no harm done: {command!r}"


CHECK_PATH = "tests/check_greeting.py"
OUT = "git checkout-index -af"  # writes the index out


@pytest.mark.parametrize(
    ("command", "words", "where"),
    [
        ("git rm -q ':/tests/check_greeting.py'", PROTECTED, "sub"),
        ("git rm -q ':(top)tests/check_greeting.py'", PROTECTED, "sub"),
        ("git -C sub rm -q ':/tests/check_greeting.py'", PROTECTED, ""),
        ("git rm -q ':(icase)TESTS/CHECK_GREETING.PY'", "it holds", ""),
        ("git rm -q '*check_greeting.py'", "it holds", ""),
        ("git rm -q 'tests/check_greeting.p?'", "it holds", ""),
        ("git rm -q ':(glob)tests/**'", "it holds", ""),
        ("git --icase-pathspecs rm -q TESTS/CHECK_GREETING.PY", "--icase-pathspecs", ""),
        ("GIT_ICASE_PATHSPECS=1 git rm -q TESTS/CHECK_GREETING.PY", "GIT_ICASE_PATHSPECS", ""),
        ("printf tests/check_greeting.py | git rm -q --pathspec-from-file=-", "pathspec", ""),
        ("git restore ':!greeter.py'", "it holds", ""),
        ("git checkout -- ':^greeter.py'", "it holds", ""),
        ("git checkout-index -a -f", "it holds", ""),
        ("git checkout-index -f --all", "it holds", "tests"),
        (f"git update-index --chmod=+x {CHECK_PATH} && git checkout-index -af", PROTECTED, ""),
        (f"git update-index --cacheinfo 100644,{{blob}},{CHECK_PATH} && {OUT}", PROTECTED, ""),
        (f"git update-index --cach 100644 {{blob}} {CHECK_PATH} && {OUT}", PROTECTED, ""),
    ],
)
def test_attack_agent_git_reaches_the_check_through_a_pathspec_or_the_index(
    staged: GitRepo, tmp_path: Path, command: str, words: str, where: str
) -> None:
    """The check written through git's own reading of paths: pathspec magic (``:/x`` and
    ``:(top)x`` from the work tree's top, ``:(icase)``, an exclusion that leaves the rest
    matched, git's ``*`` and ``?`` matching across folders, ``--icase-pathspecs``,
    ``GIT_ICASE_PATHSPECS``, ``--pathspec-from-file``), and through the index: ``git
    update-index --chmod``/``--cacheinfo`` put another check in it, ``git checkout-index -a``
    writes it out (``--al`` too: git takes any abbreviation). The guard judged each word
    as a plain path (or none at all), and let each through. (Before a command that writes
    the index out, the index holds another check, as ``update-index`` leaves it.)"""
    blob = staged.git("hash-object", "-w", "greeter.py").strip()
    if "update-index" not in command and ("checkout" in command or "restore" in command):
        staged.git("update-index", "--cacheinfo", f"100644,{blob},tests/check_greeting.py")
    command = command.format(blob=blob)
    refused(staged, command, words, where)
    copy = for_real(staged, tmp_path, command, where)
    assert check_changed(copy), f"no harm done: {command!r}"


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("git config --fil .git/config core.hooksPath /dev/null", "core.hooksPath"),
        ("git config --fil .git/config --add core.hooksPath /dev/null", "core.hooksPath"),
        ("git config --glob filter.x.clean cat", "--global"),
        ("git config --sys filter.x.clean cat", "--system"),
        ("git config -f$HOME/.gitconfig filter.x.clean cat", "git configuration"),
        ("git config -zf $HOME/.gitconfig filter.x.clean cat", "git configuration"),
    ],
)
def test_attack_agent_git_config_writes_through_an_option_the_guard_misread(
    staged: GitRepo, tmp_path: Path, command: str, words: str
) -> None:
    """``git config`` takes any unambiguous abbreviation of its options and bundled short
    ones: ``--fil FILE`` was read as a key (so ``core.hooksPath``, the next word, was its
    value, unjudged), ``--glob`` was not ``--global``, and ``-fFILE`` (``-zf FILE``) named no
    file. Each wrote the repository's or the user's configuration (the hooks switched off, a
    content filter) and got through. (``--sys`` is refused; writing /etc/gitconfig is not
    tried.)"""
    refused(staged, command, words)
    if "--sys" in command:
        return
    copy = for_real(staged, tmp_path, command)
    local = (copy / ".git" / "config").read_text()
    user = Path.home() / ".gitconfig"
    assert "hookspath" in local.lower() or (user.exists() and "filter" in user.read_text())


# ---------------------------------------------------------------- patch files given by name

MAIL = (
    "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
    "From: A Dev <dev@example.com>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n"
    "Subject: [PATCH] tidy the check\n{headers}\n{body}"
)


@pytest.fixture
def patch_files(project: GitRepo, tmp_path: Path) -> GitRepo:
    """The project with the patch files an agent writes first with an edit tool (untracked):
    `p.diff` (a git diff of the check), `p0.diff` (names without `a/`), `hook.diff` (a new
    `hooks/post-merge`) in *tmp_path*, and mails of the check's diff, `p.mbox` as written and
    `b64.mbox` in base64 (what `git am` decodes)."""
    import base64

    project.write("p.diff", git_diff(CHECK_PATH))
    project.write("list", "p.diff\n")
    project.write("p0.diff", f"--- {CHECK_PATH}\n+++ {CHECK_PATH}\n{HUNK}")
    (tmp_path / "hook.diff").write_text(
        "diff --git a/hooks/post-merge b/hooks/post-merge\nnew file mode 100755\n"
        "--- /dev/null\n+++ b/hooks/post-merge\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n+exit 0\n"
    )
    diff_text = git_diff(CHECK_PATH) + "-- \n2.39.5\n"
    project.write("p.mbox", MAIL.format(headers="", body=f"---\n{diff_text}"))
    encoded = base64.encodebytes(f"---\n{diff_text}".encode()).decode()
    headers = "MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n"
    headers += "Content-Transfer-Encoding: base64\n"
    project.write("b64.mbox", MAIL.format(headers=headers, body=encoded))
    return project


READS = "cannot check this command"
HERE_STRING = "git apply <<< $'{}'".format(
    git_diff(CHECK_PATH).replace("'", "\\'").replace("\n", "\\n").replace("{", "{{")
)


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("git apply p.diff", PROTECTED),
        ("git apply -p0 p0.diff", PROTECTED),
        ("git apply --unsafe-paths --directory=.git {tmp}/hook.diff", INSIDE),
        ("git apply --unsafe-paths --dir .git -- {tmp}/hook.diff", INSIDE),
        ("git apply < p.diff", PROTECTED),
        ("git apply - < p.diff", PROTECTED),
        ("cat p.diff | git apply", PROTECTED),
        ("cat -- p.diff | (git apply -v)", PROTECTED),
        ("{{ git apply; }} < p.diff", PROTECTED),
        ("cat p.diff | {{ true; git apply; }}", PROTECTED),
        ("P=p.diff; git apply $P", PROTECTED),
        ("git apply p.d*ff", PROTECTED),
        ("git -C tests apply ../p.diff", PROTECTED),
        ("patch -s -p1 < p.diff", PROTECTED),
        ("patch -s -p1 -i p.diff", PROTECTED),
        ("patch -s -p0 --input=p0.diff", PROTECTED),
        ("patch -s --in=p.diff -p1", PROTECTED),
        ("patch -s -p2 --directory=tests --input=../p.diff", PROTECTED),
        ("git am -q p.mbox", PROTECTED),
        ("git am -q < p.mbox", PROTECTED),
        ("git am -q b64.mbox", PROTECTED),
        (HERE_STRING, PROTECTED),
        ("xargs -a list git apply", "xargs"),
        ("xargs -a list patch -s -p1 -i", "xargs"),
        ("sed -n p p.diff | git apply", READS),
        ('git apply <<< "$(cat p.diff)"', READS),
        ('git apply "$PATCH_FILE"', READS),
    ],
)
def test_attack_agent_applies_a_patch_file_given_by_name(
    patch_files: GitRepo, tmp_path: Path, command: str, words: str
) -> None:
    """A patch in a file the agent wrote first (an edit tool may write any file but the
    guarded ones), applied by name: ``git apply FILE`` (``-p0``, ``--unsafe-paths
    --directory=.git`` writing a new hook from a file in /tmp), ``< FILE``, ``cat FILE |``, a
    group's input, a glob, a variable the command sets, ``xargs``, ``patch -i FILE`` (``--input``,
    ``--in``, from its ``--directory``, ``< FILE``), ``git am FILE`` (its body in base64 too), and a
    here-string (``<<< $'...'``: bash decodes the newlines). The guard read only patches
    written in the command's own lines and let each through. What the guard
    cannot read (another program's output, a here-string of a command's output, a variable
    set elsewhere, here ``$PATCH_FILE`` set to ``p.diff`` when run) is refused."""
    command = command.format(tmp=tmp_path)
    refused(patch_files, command, words)
    real = f"PATCH_FILE=p.diff; {command}"
    copy = for_real(patch_files, tmp_path, real)
    assert planted(patch_files, copy), f"no harm done: {command!r}"


@pytest.mark.parametrize(
    "command",
    [
        "git apply fix.diff",
        "git apply --check -p1 fix.diff && git apply fix.diff",
        "patch -s -p1 < fix.diff",
        "patch -s -p1 -i fix.diff",
        "cat fix.diff | git apply --index",
        "git apply --directory=src fix0.diff",
    ],
)
def test_ordinary_patch_files_pass(project: GitRepo, command: str) -> None:
    """A patch file of the agent's own code is read and let through."""
    project.write("fix.diff", GREETER_HUNK)
    project.write("fix0.diff", GREETER_HUNK.replace("a/greeter.py", "a/x.py"))
    run = run_hook(project.path, "guard", bash(project.path, command))
    assert run.allowed, run


@pytest.mark.parametrize(
    "command",
    [
        "cat < $(echo pass > tests/check_greeting.py)",
        "wc -l < `rm tests/check_greeting.py`",
        "git status < <(chmod +x tests/check_greeting.py)",
        'cat 0< "$(rm -f tests/check_greeting.py)"',
    ],
)
def test_attack_agent_runs_a_command_in_an_input_redirection(
    project: GitRepo, tmp_path: Path, command: str
) -> None:
    """The guard dropped the word after ``<`` unread, and with it the command substitution
    or process substitution bash runs there to name the file: each write got through."""
    refused(project, command, PROTECTED)
    assert check_changed(for_real(project, tmp_path, command)), f"no harm done: {command!r}"


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("cp /dev/null .g?t/hooks/pre-push", INSIDE),
        ("cp /dev/null .gi[t]/hooks/pre-pus?", INSIDE),
        ("cp greeter.py .g*t/hooks/pre-push", INSIDE),
        ("mv greeter.py .g?t/hooks/pre-push", INSIDE),
        ("install -m 755 /dev/null .g?t/hooks/pre-push", INSIDE),
        ("cp /dev/null tests/check_greeting.p?", PROTECTED),
        ("cp /dev/null tes?s/check_greeting.py", PROTECTED),
        ("cp greeter.py tests/check_greeting.p*", PROTECTED),
        ("mv greeter.py tests/check_greeting.[p]y", PROTECTED),
        ("cd sub && cp /dev/null ../.g?t/hooks/pre-push", INSIDE),
    ],
)
def test_attack_agent_copies_onto_a_file_named_by_a_glob(
    project: GitRepo, tmp_path: Path, command: str, words: str
) -> None:
    """A copy's, move's or install's destination spelled with a glob that bash expands to an
    existing file: ``cp /dev/null .g?t/hooks/pre-push`` empties the pre-push hook (so the
    user's next ``git push`` runs no gate), ``cp /dev/null tests/check_greeting.p?`` the check.
    The guard judges a destination as a folder the copy writes into (``DEST/``, and
    ``DEST/SOURCE``), and its glob matched folders only there: the existing file the pattern
    names was never judged, and every variant got through (while the plain spelling and ``dd
    of=.g?t/...`` were refused). A pattern ending with ``/`` now matches files too, judged
    as written."""
    refused(project, command, words)
    copy = for_real(project, tmp_path, command)
    assert harmed(project, copy), f"no harm done: {command!r}"


UNREAD = "guard cannot check this command"
UNVALUED = "in a way gitaudit's guard does not take a value from"


def hook_or_check_harmed(repo: GitRepo, copy: Path) -> bool:
    """:func:`harmed`, a removed pre-push hook included."""
    return not (copy / HOOK).exists() or harmed(repo, copy)


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("a=.git; b=a; rm ${!b}/hooks/pre-push", UNREAD),
        ("a=.git; b=a; cp /dev/null ${!b}/hooks/pre-push", UNREAD),
        ("x=.tig; rm ${x/tig/git}/hooks/pre-push", UNREAD),
        ("x=X.git; rm ${x#X}/hooks/pre-push", UNREAD),
        ("x=.gitX; rm ${x%X}/hooks/pre-push", UNREAD),
        ("x=..git; rm ${x:1}/hooks/pre-push", UNREAD),
        ("x=.GIT; rm ${x,,}/hooks/pre-push", UNREAD),
        ("x=sestt; echo pass > ${x/sestt/tests}/check_greeting.py", UNREAD),
        ("m=(x .git); rm ${m[1]}/hooks/pre-push", UNVALUED),
        ("m=(.git); rm $m/hooks/pre-push", UNVALUED),
        ("export d=.git; rm $d/hooks/pre-push", UNVALUED),
        ("declare d=.git; rm $d/hooks/pre-push", UNVALUED),
        ("readonly d=.git; cp /dev/null $d/hooks/pre-push", UNVALUED),
        ("d=.gi; d+=t; rm $d/hooks/pre-push", UNVALUED),
        ("printf -v d .git; rm $d/hooks/pre-push", UNVALUED),
        ("read d <<< .git; rm $d/hooks/pre-push", UNVALUED),
        (": ${d:=.git}; rm $d/hooks/pre-push", UNVALUED),
        ("set -- .git; rm $1/hooks/pre-push", UNVALUED),
        ("d=.git bash -c 'rm $d/hooks/pre-push'", UNVALUED),
        ("export d=.git; bash -c 'rm $d/hooks/pre-push'", UNVALUED),
        ("export d=tests; echo pass > $d/check_greeting.py", UNVALUED),
    ],
)
def test_attack_agent_writes_through_a_variable_the_guard_did_not_value(
    project: GitRepo, tmp_path: Path, command: str, words: str
) -> None:
    """A variable the command itself sets, expanded where the guard does not compute what
    bash makes of it: indirection (``${!b}``), a cut or replaced pattern (``${x#X}``,
    ``${x/tig/git}``), a substring, a case change, an array's element; or set in a way the
    guard takes no value from (``export``/``declare``/``readonly NAME=...``, an array, ``+=``
    appended, ``printf -v``, ``read``, ``${d:=...}``, ``set --``, a prefix for a nested
    shell). The guard judged such a word as written and as unset (``/hooks/pre-push``), so
    each removed or emptied the pre-push hook (or the check) when run for real (all 21 got
    through before the fix). Now an expansion of a variable the guard knows in a form it does
    not compute, and an expansion of a variable set in a way it does not value, are
    refused."""
    refused(project, command, words)
    copy = for_real(project, tmp_path, command)
    assert hook_or_check_harmed(project, copy), f"no harm done: {command!r}"


@pytest.mark.parametrize(
    "command",
    [
        "x='greeter.py .git/hooks/pre-push'; rm $x",
        "x='/dev/null .git/hooks/pre-push'; cp $x",
        "x='greeter.py tests/check_greeting.py'; rm -f ${x}",
        "IFS=:; x='greeter.py:.git/hooks/pre-push'; rm $x",
        "export IFS=:; x='greeter.py:.git/hooks/pre-push'; rm $x",
    ],
)
def test_attack_agent_writes_through_a_word_bash_splits(
    project: GitRepo, tmp_path: Path, command: str
) -> None:
    """An unquoted expansion is split into fields at ``IFS``'s characters (space, tab and
    newline unless the command sets it): ``x='greeter.py .git/hooks/pre-push'; rm $x`` gives
    ``rm`` two paths. The guard put the value in and judged ``greeter.py
    .git/hooks/pre-push`` as one path, a file in a folder named ``greeter.py .git``, and let
    each through (all 5 removed the hook or the check for real). Each field is now judged
    too (split at the ``IFS`` the command sets; set in a way the guard does not value, an
    expanded word is refused)."""
    refused(project, command, "")
    copy = for_real(project, tmp_path, command)
    assert hook_or_check_harmed(project, copy), f"no harm done: {command!r}"


@pytest.mark.parametrize(
    "command",
    [
        "find .git -name pre-push -delete",
        "find .g?t -name pre-push -delete",
        "find -L .git -name pre-push -delete",
        "find .git/ -name pre-push -exec rm {} +",
        "find .git -name pre-push -execdir rm {} \\;",
        "cd .git && find hooks -name pre-push -delete",
        "find .git -name pre-push -exec cp /dev/null {} \\;",
    ],
)
def test_attack_agent_deletes_a_hook_by_finding_it(
    project: GitRepo, tmp_path: Path, command: str
) -> None:
    """``find`` started in the git directory, its expression picking the hook: the guard
    refused ``find`` only when a word named ``.git/hooks`` (or another internal path), so
    ``find .git -name pre-push -delete`` (a glob, ``-L``, ``-exec rm``, ``-execdir``, from
    ``cd .git``, ``-exec cp /dev/null``) removed or emptied the pre-push hook (all 7 before the
    fix). Each starting point of a ``find`` that deletes or runs a program not known to only
    read is now judged as a folder written into."""
    refused(project, command, INSIDE)
    copy = for_real(project, tmp_path, command)
    assert hook_or_check_harmed(project, copy), f"no harm done: {command!r}"
