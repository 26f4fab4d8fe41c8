"""The guard's rules for shell commands, one kind at a time (in-process; the host-level and
attack tests run the real command)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from gitaudit.agent import patches
from gitaudit.agent.bypass import _TOP, _destination, _ledger, _pathspec, refusal


def guarded(word: str, base: str, variables: Mapping[str, str] | None = None) -> str | None:
    """A stand-in for the guard's path check: `.git/...` and `tests/check.py` are guarded."""
    path = os.path.normpath(os.path.join(base, word))
    return "guarded" if path.startswith(("/p/.git", "/p/tests/check.py")) else None


def refused(command: str) -> str | None:
    return refusal(command, guarded, "/p")


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git commit -m 'fix: greeting' -- greeter.py",
        "git commit -am 'no verify needed'",
        "git commit -m 'do not use --no-verify'",
        "git commit -v",
        "git push origin main",
        "git push -n origin main",  # -n is --dry-run for push
        "git push origin refs/audit/runs/default",  # a fast-forward: the server checks it
        "git fetch origin refs/audit/plans:refs/remotes/origin/audit/plans",
        "git config user.name 'A Dev'",
        "git config --get core.hooksPath",
        "git config core.hooksPath",
        "git config get audit.rootKey",
        "git -c color.ui=never log --oneline",
        "git update-ref refs/heads/topic HEAD",
        "git audit run && git audit status",
        "git merge --no-ff topic",
        "python3 -m pytest -q tests",
        "cat .git/config && ls .git/hooks",
        "grep -r hooksPath .git/config",
        "find .git/hooks -name '*.sample'",
        "echo hello > notes.txt",
        "cp tests/check.py /tmp/backup.py",
        "sed -n 1,10p tests/check.py",
        "export PATH=$PATH:/opt/bin",
        "GIT_AUTHOR_NAME=x git commit -m msg",
        "PYTHONPATH=src python3 -m pytest -q",  # the project's own tests may set it
        "export PYTHONPATH=src && python3 -m pytest -q",  # no gitaudit in the call
        "export FOO=1 && git audit status",
        "HOME=/tmp/h ls && git status",  # the prefix reaches ls alone
        "python3 -m gitaudit status",
        "git push -f origin topic",
        "git push origin HEAD:refs/heads/topic :refs/heads/old-topic",
        "git push origin audit/plans",  # a fast-forward of refs/audit/plans: the server checks it
        "git fetch --prune origin '+refs/heads/*:refs/remotes/origin/*'",
        "git config remote.origin.url git@example.com:me/repo.git",
        "git pull -t --rebase origin main",
        'git merge -m "merge $BRANCH" topic',
        "cp /tmp/helper.py tests/",
        "cp /tmp/helper.py .",
        "mv /tmp/helper.py tests",
        "cp -r /tmp/fixtures tests",  # tests/fixtures: the folder is written into
        "cd /tmp && echo x > out.txt",
        'cd "$(mktemp -d)" && echo x > /tmp/out.txt',
        "ln -s /opt/tool bin/tool",
        "set -a; . ./.env; set +a; python3 app.py",
        "export GIT_PAGER=cat; git log -1",
        "read answer < reply.txt",
        "cp -b a b",
        "cp -b -S .bak a b",
        "mv --backup=numbered a b",
        "cp -at build a b",
        "rsync -t a b",
        "rsync -b --backup-dir=old a b",
        "sed -i.bak s/a/b/ f",
        "sed -n -e s/a/b/p tests/check.py",  # -n, -e: no edit in place
        "sed -e i\\x tests/check.py",  # `i` is the script's command here
        "perl -pi.bak -e s/a/b/ f",
        "perl -pi'orig/*' -e s/a/b/ f",
        "tar -xzf a.tgz -C build",
        "tar xf a.tar",
        "tar -czf out.tgz tests",
        "unzip -q a.zip -d build",
        "git --work-tree=. status",
        "git --work-tree=/tmp/export checkout HEAD -- .",
        "git checkout-index -a --prefix=export/",
        "git diff --output=out.patch",
        "git log -p --output /tmp/log.txt",
        "git diff --output-indicator-new=+ HEAD",
        "git format-patch -o patches/ HEAD~3",
        "git worktree add ../wt",
        "git worktree add -b topic ../wt-topic main",
        "git archive -o dist.tar HEAD",
        "git archive --format=tar.gz --output=dist.tgz --prefix=proj/ HEAD",
        "git bundle create ../repo.bundle --all",
        "git init /tmp/newrepo",
        "git init -b main newproj",
        "git clone https://example.com/me/tool.git",
        "git clone -b main https://example.com/me/tool.git vendor/tool",
        "git submodule add https://example.com/me/lib.git vendor/lib",
        "git rm -r --cached 'src/*.pyc'",
        "git checkout HEAD -- 'src/*.py'",
        "git rm ':(literal)src/a*b.py'",
        "git update-index --refresh",
        "git update-index --chmod=+x scripts/run.sh",
        "git config --file ci/settings.ini build.jobs 4",
        "git config --list --show-origin",
        "git config -l",
        "git stash && git stash pop",
        "git notes add -m reviewed HEAD",
    ],
)
def test_ordinary_commands_pass(command: str) -> None:
    assert refused(command) is None, command


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("git commit --no-verify -m x", "skips gitaudit's commit-msg hook"),
        ("git commit -nm x", "skips gitaudit's commit-msg hook"),
        ("git commit -m x -n", "skips gitaudit's commit-msg hook"),
        ("git commit --no-veri -m x", "skips"),
        ("git push --no-verify origin main", "skips gitaudit's pre-push hook"),
        ("git merge --no-verify topic", "skips"),
        ("git update-ref -d refs/audit/plans", "rewrites gitaudit's ledger"),
        ("git update-ref --stdin < moves.txt", "--stdin"),
        ("git config core.hooksPath /dev/null", "another hooks folder"),
        ("git config --unset audit.rootKey", "gitaudit's own configuration"),
        ("git config set --local audit.commitMsg off", "gitaudit's own configuration"),
        ("git config --remove-section audit", "gitaudit's own configuration"),
        ("git config include.path /tmp/evil", "includes another configuration"),
        ("git config alias.ci 'commit --no-verify'", "defines an alias"),
        ("git config --edit", "can change anything"),
        ("git -c core.hooksPath=/dev/null commit -m x", "another hooks folder"),
        ("git --config-env=core.hooksPath=HP commit", "another hooks folder"),
        ("GIT_CONFIG_COUNT=1 git commit", "GIT_CONFIG_COUNT"),
        ("export GIT_CONFIG_PARAMETERS=x", "GIT_CONFIG_PARAMETERS"),
        ("HOME=/tmp/h git commit -m x", "another global configuration"),
        ("GITAUDIT_HOME=/tmp/g git audit status", "GITAUDIT_HOME"),
        ("PYTHONPATH=/tmp/fake git push origin main", "import another gitaudit"),
        ("PYTHONHOME=/tmp/py git commit -m x", "import another gitaudit"),
        ("PYTHONPATH=/tmp/fake git-audit status", "import another gitaudit"),
        ("LD_PRELOAD=/tmp/x.so git audit run", "dynamic loader"),
        ("LD_LIBRARY_PATH=/tmp/lib git-audit run", "dynamic loader"),
        ("env LD_AUDIT=/tmp/a.so git commit -m x", "dynamic loader"),
        ("PYTHONPYCACHEPREFIX=/tmp/pyc git audit run", "its bytecode"),
        ("PYTHONUSERBASE=/tmp/u git push origin main", "import another gitaudit"),
        ("GITAUDIT_CACHE=/tmp/c git audit run", "another cache"),
        ("XDG_CACHE_HOME=/tmp/c git-audit run", "another cache"),
        ("export PYTHONPATH=/tmp/fake && git audit run", "import another gitaudit"),
        ("declare -x LD_PRELOAD=/tmp/x.so; git commit -m x", "dynamic loader"),
        ("PYTHONUSERBASE=/tmp/u; git push origin main", "import another gitaudit"),
        ("export XDG_CACHE_HOME=/tmp/c; git audit run", "another cache"),
        ("HOME=/tmp/h; git commit -m x", "another global configuration"),
        ("export XDG_CONFIG_HOME=/tmp/x && git push", "another global configuration"),
        ("HOME=/tmp/h git-audit run", "another home"),
        ("XDG_CONFIG_HOME=/tmp/x gitaudit run", "another home"),
        ("HOME=/tmp/h python3 -m gitaudit run", "another home"),
        ("PYTHONPATH=/tmp/fake python3 -m gitaudit run", "import another gitaudit"),
        ("LD_PRELOAD=/tmp/x.so python3.11 -Im gitaudit.hooks pre-push", "dynamic loader"),
        ("PYTHONPATH=/tmp/fake python3 ~/.local/bin/git-audit run", "import another gitaudit"),
        ("PYTHONINSPECT=1 git audit run", "typed on its terminal"),
        ("git push -f origin refs/audit/runs/default", "rewrite the shared ledger"),
        ("git push origin :refs/audit/plans", "rewrite the shared ledger"),
        ("git push --mirror origin", "--mirror"),
        ("git fetch origin '+refs/audit/*:refs/audit/*'", "overwrites the local ledger"),
        ("git audit hooks uninstall", "the user's decision"),
        ("gitaudit agent uninstall", "the user's decision"),
        ("rm -f .git/hooks/pre-push", "`rm` would write `.git/hooks/pre-push`"),
        ("echo x > tests/check.py", "the redirection would write `tests/check.py`"),
        ("cp /tmp/x tests/check.py", "`cp` would write"),
        ("sed -i s/a/b/ tests/check.py", "`sed` would write"),
        ("git checkout HEAD~3 -- tests/check.py", "`git checkout` would write"),
        ("python3 -c \"open('.git/hooks/pre-push','w')\"", "names .git/hooks"),
        ("cd tests && echo pass > check.py", "would write `check.py`"),
        ("cd .git; rm hooks/pre-push", "`rm` would write `hooks/pre-push`"),
        ("(cd tests) && echo pass > check.py", "would write `check.py`"),
        ("git -C tests checkout HEAD~1 -- check.py", "`git checkout` would write"),
        ("F=tests/check.py; echo pass > $F", "would write `tests/check.py`"),
        ("N=--no-verify; git commit $N -m x", "skips gitaudit's commit-msg hook"),
        ("git commit $GIT_FLAGS -m x", "cannot see what $GIT_FLAGS holds"),
        ("echo 'unbalanced", "cannot read this command"),
        ("git push origin :audit/plans", "rewrite the shared ledger"),
        ("git fetch -p origin 'refs/*:refs/*'", "overwrites the local ledger"),
        ("git send-pack ../r.git main", "without gitaudit's pre-push hook"),
        ("git commit-tree HEAD^{tree} -m x", "without gitaudit's commit-msg hook"),
        ("git config remote.origin.push 'refs/*'", "which refs a plain fetch or push moves"),
        ("git config --global filter.x.clean cat", "the user's git configuration"),
        ('cd "$(git rev-parse --git-dir)" && rm hooks/pre-push', "cannot see"),
        ('git -C "$D" checkout -- check.py', "cannot see"),
        ("ln -s .git g", "would make a link to `.git`"),
        ("rm -rf .git/", "`rm` would write `.git`"),  # the folder as a whole
        ("mv .git/ /tmp", "`mv` would write `.git`"),
        ("set -a; git commit -m x", "exports every variable"),
        ("read GIT_DIR < f", "sets GIT_DIR from input"),
        ("git pull -t --no-verify", "skips"),
        ("git merge $FLAGS topic", "cannot see what $FLAGS holds"),
        ("patch tests/check.py fix.diff", "`patch` would write `tests/check.py`"),
        ("patch -p1 -o tests/check.py a.py < fix.diff", "`patch` would write"),
        ("patch -sotests/check.py a.py < fix.diff", "`patch` would write"),
        ("patch --reject-file=tests/check.py a.py < fix.diff", "`patch` would write"),
        ("git apply --build-fake-ancestor=tests/check.py x.diff", "`git apply` would write"),
        ("patch -b -B .gi t/hooks/pre-push < x.diff", "would write `.git/hooks/pre-push`"),
        ("patch --prefix=tes ts/check.py < x.diff", "would write `tests/check.py`"),
        ("patch -Y../.git/ sub/config < x.diff", "would write `sub/../.git/config`"),
        ("patch -zt/config .gi < x.diff", "would write `.git/config`"),
        ("SIMPLE_BACKUP_SUFFIX=.py patch -b tests/check < x.diff", "SIMPLE_BACKUP_SUFFIX"),
        ("cp -b -S .py a tests/check", "`cp` would write `tests/check.py`"),
        ("mv -b --suffix=.py a tests/check", "`mv` would write `tests/check.py`"),
        ("install -bS.py a tests/check", "`install` would write `tests/check.py`"),
        ("cp -at .git/hooks a", "`cp` would write `.git/hooks/`"),
        ("cp --target=.git/hooks a", "`cp` would write `.git/hooks/`"),
        ("rsync -t a tests/check.py", "`rsync` would write `tests/check.py`"),
        ("rsync --backup-dir .git/hooks a b", "`rsync` would write `.git/hooks/`"),
        ("sed -i'.git/hooks/*' s/a/b/ f", "`sed` would write `.git/hooks/"),
        ("sed -it/config s/a/b/ .gi", "`sed` would write `.git/config`"),
        ("sed --in-pl=t/config s/a/b/ .gi", "`sed` would write `.git/config`"),
        ("sed -Ei s/a/b/ tests/check.py", "`sed` would write `tests/check.py`"),
        ("perl -pit/config -e1 .gi", "`perl` would write `.git/config`"),
        ("perl -lpi -e1 tests/check.py", "`perl` would write `tests/check.py`"),
        ("tar -xf a.tar -C .git", "`tar` would write `.git/`"),
        ("tar xvfC a.tar .git", "`tar` would write `.git/`"),
        ("tar --create --file=tests/check.py a", "`tar` would write `tests/check.py`"),
        ("unzip -o a.zip -d.git", "`unzip` would write `.git/`"),
        ("cpio -idD .git < a.cpio", "`cpio` would write `.git/`"),
        ("find . | cpio -pdm .git", "`cpio` would write `.git/`"),
        ("git --work-tree=.git checkout -f HEAD", "makes git write the work tree's files"),
        ("git --work-tree=w restore -s HEAD ../.git/config", "would write `../.git/config`"),
        ("GIT_WORK_TREE=.git git reset --hard", "GIT_WORK_TREE"),
        ("git checkout-index --prefix=.gi t/config", "would write `.git/config`"),
        ("git diff --output=.git/hooks/pre-push", "`git diff` would write `.git/hooks/pre-push`"),
        ("git log --output .git/config", "`git log` would write `.git/config`"),
        ("git show --output=tests/check.py", "would write `tests/check.py`"),
        ("git format-patch -ko.git/hooks -1", "would write `.git/hooks/`"),
        ("git format-patch --output-directory .git -1", "would write `.git/`"),
        ("git archive -o.git/hooks/pre-push HEAD", "`git archive` would write"),
        ("git bundle create --version 2 .git/x HEAD", "`git bundle` would write `.git/x`"),
        ("git worktree add -b x .git/wt", "`git worktree` would write `.git/wt`"),
        ("git worktree move ../wt .git/wt", "`git worktree` would write `.git/wt`"),
        ("git init --bare .git", "`git init` would write `.git`"),
        ("cd .git && git init --template=/tmp/t", "`git init` would write `.`"),
        ("git --git-dir=.git init --template=/tmp/t", "`git --git-dir init` would write"),
        ("GIT_DIR=.git git init", "setting GIT_DIR for `git init`"),
        ("GIT_TEMPLATE_DIR=/tmp/t git init x", "GIT_TEMPLATE_DIR"),
        ("git -c init.templateDir=/tmp/t init x", "copy that folder's hooks"),
        ("git clone x .git/c", "`git clone` would write `.git/c`"),
        ("git clone --separate-git-dir=.git/x url new", "would write `.git/x`"),
        ("cd .git && git clone -b main /srv/hooks.git", "`git clone` would write `hooks`"),
        ("git submodule add -b main url .git/s", "`git submodule` would write `.git/s`"),
        ("git config --fil .git/config core.hooksPath x", "another hooks folder"),
        ("git config --glob filter.x.clean cat", "`git config --global`"),
        ("git config -zf.git/config user.name x", "`git config --file .git/config`"),
        ("git config core.worktree hooks", "points the files git writes"),
        ("git update-index --cacheinfo 100644,abc,tests/check.py", "would write `tests/check.py`"),
        ("git update-index --cach 100644 abc tests/check.py", "would write `tests/check.py`"),
        ("git update-index --chmod=+x tests/check.py", "would write `tests/check.py`"),
        ("git update-index --index-info < list", "input gitaudit's guard cannot see"),
        ("git rm ':(glob).git/hook?/x'", "`git rm` would write `.git`"),
        ("cd tests && git rm :/tests/check.py", "`git rm` would write `:/tests/check.py`"),
        ("git -C tests rm ':(top,literal)tests/check.py'", "would write `:/tests/check.py`"),
        ("git restore --pathspec-from=list.txt", "--pathspec-from-file"),
        ("git --icase-pathspecs rm TESTS/check.py", "--icase-pathspecs"),
        ("GIT_ICASE_PATHSPECS=1 git rm TESTS/check.py", "GIT_ICASE_PATHSPECS"),
    ],
)
def test_bypasses_are_refused_with_their_reason(command: str, words: str) -> None:
    why = refused(command)
    assert why is not None and words in why, (command, why)


@pytest.mark.parametrize(
    ("name", "ledger"),
    [
        ("refs/audit/plans", True),
        ("audit/plans", True),  # git looks it up as refs/audit/plans too
        ("refs/*", True),
        ("*", True),
        ("refs/a*", True),
        ("refs//audit/runs/x", True),
        ("refs/audit/runs/*", True),
        ("REFS/Audit/plans", True),  # a case-insensitive file system holds loose refs
        ("main", False),
        ("refs/heads/*", False),
        ("refs/heads/audit/plans", False),
        ("refs/remotes/origin/audit/plans", False),
        ("heads/a*", False),
    ],
)
def test_a_ref_name_that_could_resolve_under_the_ledger(name: str, ledger: bool) -> None:
    assert _ledger(name) is ledger


@pytest.mark.parametrize(
    ("command", "sources", "writes"),
    [
        ("cp a b", ["a"], ["b/", "b/a"]),
        ("cp a b/", ["a"], ["b/", "b/a"]),
        ("cp -r easy/. tests", ["easy/."], ["tests/", "tests"]),
        ("cp -t dir a b", ["a", "b"], ["dir/", "dir/a", "dir/b"]),
        ("cp -rT easy tests", ["easy"], ["tests"]),
        ("rsync -a easy/ tests/", ["easy"], ["tests", "tests"]),
        ("rsync -a easy tests", ["easy"], ["tests", "tests/easy"]),
        ("ln -s .git", [".git"], [".git"]),
        ("cp -at dir a", ["a"], ["dir/", "dir/a"]),
        ("cp -tdir a", ["a"], ["dir/", "dir/a"]),
        ("cp --tar dir a", ["a"], ["dir/", "dir/a"]),
        ("cp -S .x a b", ["a"], ["b/", "b/a"]),  # the suffix is no source
        ("install -m 644 a b", ["a"], ["b/", "b/a"]),
        ("rsync -t a b", ["a"], ["b", "b/a"]),  # rsync's -t keeps times
    ],
)
def test_what_a_copy_writes(command: str, sources: list[str], writes: list[str]) -> None:
    """A copy into a folder writes the folder (judged as a whole only when it is not one yet:
    the trailing `/`) and the entry each source makes in it."""
    name, *args = command.split()
    assert _destination(name, args) == (sources, writes)


PATCH = "--- a/{0}\n+++ b/{0}\n@@ -1 +1 @@\n-x\n+y\n"


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (f"X=tests; git apply <<EOF\n{PATCH.format('$X/check.py')}EOF", "`tests/check.py`"),
        (f"X=tests; patch -p1 <<E\n{PATCH.format('${X}/check.py')}E", "`tests/check.py`"),
        (f"git apply <<EOF\n{PATCH.format('te$NOPE/check.py')}EOF", "is not quoted"),
        ("git apply <<EOF\n" + PATCH.format("a\\$X/check.py") + "EOF", "is not quoted"),
        (f"X=a; X=tests; git apply <<EOF\n{PATCH.format('$X/check.py')}EOF", "is not quoted"),
        ("git apply <<-EOF\n" + PATCH.format("te\\\nsts/check.py") + "\tEOF", "tests/check"),
        (f"git apply --directory=tests <<'E'\n{PATCH.format('check.py')}E", "`tests/check.py`"),
        (f"git apply --di tests <<'E'\n{PATCH.format('check.py')}E", "`tests/check.py`"),
        (f"git -C x apply --directory=tests <<'E'\n{PATCH.format('check.py')}E", "tests/check"),
        (f"git am --directory=tests <<'E'\n{PATCH.format('check.py')}E", "`tests/check.py`"),
        (f"patch -d tests <<'E'\n{PATCH.format('check.py')}E", "`tests/check.py`"),
        (f"patch -Ed tests <<'E'\n{PATCH.format('check.py')}E", "`tests/check.py`"),
        (f"patch -p1 -dtests <<'E'\n{PATCH.format('check.py')}E", "`tests/check.py`"),
        (f"patch --dir=tests <<'E'\n{PATCH.format('check.py')}E", "`tests/check.py`"),
    ],
)
def test_a_patch_is_judged_as_bash_hands_it_over_and_where_it_is_applied(
    command: str, words: str
) -> None:
    why = refused(command)
    assert why is not None and words in why, (command, why)


@pytest.mark.parametrize(
    "command",
    [
        f"X=src; git apply <<EOF\n{PATCH.format('$X/check.py')}EOF",
        f"git apply <<'EOF'\n{PATCH.format('$X/check.py')}EOF",  # quoted: kept as written
        f'git apply <<"EOF"\n{PATCH.format("$X/check.py")}EOF',
        f"git apply --directory=src <<'E'\n{PATCH.format('check.py')}E",
        f"patch -p0 -o out.py greeter.py <<'E'\n{PATCH.format('greeter.py')}E",
    ],
)
def test_ordinary_patches_pass(command: str) -> None:
    assert refused(command) is None, command


def test_variables_that_grow_past_what_the_guard_reads_are_refused() -> None:
    """A=$B$B$B, B=$C$C$C...: each level multiplies the word; past the bound, unreadable."""
    command = "A=xxxxxxxxxx"
    for name, last in zip("BCDEF", "ABCDE", strict=True):
        command += f"; {name}=" + f"${last}" * 60
    why = refused(command + "; echo $F > out")
    assert why is not None and "longer than the guard reads" in why, why


def test_a_quoted_variable_is_judged_as_written_too() -> None:
    """Quotes are gone from the words: `'$X'/$X` is judged with each $X kept or put in."""
    seen: list[tuple[str, dict[str, str]]] = []

    def recording(word: str, base: str, variables: Mapping[str, str] | None = None) -> None:
        seen.append((word, dict(variables or {})))

    refusal("X=..; echo pass > '$X'/$X/tests/check.py", recording, "/p")
    assert ("../../tests/check.py", {"X": ".."}) in seen  # the values put in
    assert ("$X/$X/tests/check.py", {"X": ".."}) in seen  # as written, for the guard to spell


@pytest.mark.parametrize(
    ("word", "paths"),
    [
        ("tests/check.py", ["tests/check.py"]),
        (":/tests/check.py", [_TOP + "tests/check.py"]),
        (":(top)tests/check.py", [_TOP + "tests/check.py"]),
        ("::x", ["x"]),
        (":(literal)a*b", ["a*b"]),
        ("src/*.py", ["src"]),
        ("*check.py", ["."]),
        (":(glob)tests/**/x", ["tests"]),
        (":(icase)TESTS/x", ["."]),
        (":/!x", [_TOP + "."]),
        (":(exclude)x", [_TOP + "."]),
    ],
)
def test_what_a_pathspec_may_write(word: str, paths: list[str]) -> None:
    """Git's magic and wildcards read as the paths (or the folders, as a whole) they reach:
    from the work tree's top (:data:`_TOP`), in any case, everything but an exclusion."""
    assert _pathspec(word) == paths


def test_a_path_from_the_top_is_judged_from_every_folder_above() -> None:
    seen: list[str] = []

    def recording(word: str, base: str, variables: Mapping[str, str] | None = None) -> None:
        seen.append(os.path.join(base, word))

    refusal("cd a/b && git rm :/x.py", recording, "/p")
    assert {"/p/a/b/x.py", "/p/a/x.py", "/p/x.py", "/x.py"} <= set(seen)


# ------------------------------------------------------------------------------ patch files


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A folder holding `fix.diff` (of `src/greeter.py`), `evil.diff` (of `tests/check.py`),
    `src/fix.diff`, `sub/`, and `evil.mbox` (a mail of evil.diff)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "fix.diff").write_text(PATCH.format("src/greeter.py"))
    (tmp_path / "src" / "fix.diff").write_text(PATCH.format("greeter.py"))
    (tmp_path / "evil.diff").write_text(PATCH.format("tests/check.py"))
    (tmp_path / "evil.mbox").write_text(
        "From 0 Mon Sep 17 00:00:00 2001\nSubject: x\n\n---\n" + PATCH.format("tests/check.py")
    )
    return tmp_path


def refused_in(folder: Path, command: str) -> str | None:
    def guarded_there(word: str, base: str, variables: Mapping[str, str]) -> str | None:
        path = os.path.normpath(os.path.join(base, word))
        return (
            "guarded" if path.startswith((f"{folder}/.git", f"{folder}/tests/check.py")) else None
        )

    return refusal(command, guarded_there, str(folder))


@pytest.mark.parametrize(
    "command",
    [
        "git apply evil.diff",
        "git apply -p 1 evil.diff",  # -p takes the next word: evil.diff is the patch
        "git apply --exclude=x -- evil.diff",
        "git -C sub apply ../evil.diff",
        "cd sub && git apply ../evil.diff",
        "git apply ev?l.diff",
        "X=evil.diff; git apply $X",
        "git apply < evil.diff",
        "git apply <<< $'--- a/tests/check.py\\n+++ b/tests/check.py'",
        "cat evil.diff | git apply",
        "cat fix.diff evil.diff | git apply",
        "cat evil.diff | (git apply)",
        "cat evil.diff | while true; do git apply; done",
        "while true; do git apply; done < evil.diff",
        "patch -p1 < evil.diff",
        "patch -i evil.diff",
        "patch --inp evil.diff",
        "patch -p1 -ievil.diff",
        "patch -d sub -i ../evil.diff",
        "patch greeter.py evil.diff",  # patch [ORIGINAL [PATCHFILE]]
        "git am evil.mbox",
        "git am < evil.mbox",
        "git am --directory=tests -p2 < evil.diff",
    ],
)
def test_a_patch_file_is_read_and_its_names_judged(work: Path, command: str) -> None:
    why = refused_in(work, command)
    assert why is not None and "tests/check.py" in why, (command, why)


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("git apply missing.diff", "does not exist"),
        ("git apply sub", "not a regular file"),
        ("git apply /dev/stdin", "not a regular file"),
        ("git apply $UNSET_HERE", "a variable or a command"),
        ("cd $(mktemp -d) && git apply fix.diff", "a folder the guard cannot see"),
        ("git apply */fix.diff", "a glob over folders"),
        ("git show HEAD:evil.diff | git apply", "comes from `git`'s output"),
        ("(cat evil.diff) | git apply", "a group of commands"),
        ("sed p evil.diff | cat | git apply", "more than one pipe"),
        ('git apply <<< "$(cat evil.diff)"', "here-string"),
        ("git apply <&3", "file descriptor"),
    ],
)
def test_a_patch_file_the_guard_cannot_read_is_refused(
    work: Path, command: str, words: str
) -> None:
    why = refused_in(work, command)
    assert why is not None and words in why and "cannot check" in why, (command, why)


def test_a_patch_file_longer_than_the_guard_reads_is_refused(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(patches, "FILE_BUDGET", 100)
    assert refused_in(work, "git apply fix.diff") is None
    why = refused_in(work, "git apply fix.diff fix.diff")  # 2 x 60 bytes: over
    assert why is not None and "longer than" in why, why


@pytest.mark.parametrize(
    "command",
    [
        "git apply fix.diff",
        "git apply -p1 --index fix.diff",
        "git apply --directory=src -p1 src/fix.diff",
        "git -C src apply fix.diff",
        "cat fix.diff | git apply",
        "git apply < fix.diff",
        "patch -p1 < fix.diff",
        "patch -b -z .orig -p1 < fix.diff",
        "patch -b -B old/ -p1 < fix.diff",
        "patch -i fix.diff -d src",  # -i takes the value, read from src
        "git am --continue",
        "git status | cat",
        "ls | grep x; git apply fix.diff",
    ],
)
def test_ordinary_patch_files_pass(work: Path, command: str) -> None:
    assert refused_in(work, command) is None, command


@pytest.mark.parametrize(
    ("command", "runs"),
    [
        ("git audit run", True),
        ("/usr/bin/git-audit status", True),
        ("python3 -m gitaudit run", True),
        ("python3.11 -Im gitaudit.hooks pre-push", True),
        ("python -mgitaudit status", True),
        ("python3 -W ignore -X dev -m gitaudit run", True),
        ("python3 /home/u/.local/bin/git-audit run", True),
        ("python3 -- gitaudit", True),
        ("python3 -m pytest", False),
        ("python3 -c 'import sys'", False),
        ("python3 tools/check.py", False),
        ("python3 -m", False),
        ("ls", False),
    ],
)
def test_which_commands_run_gitaudit(command: str, runs: bool) -> None:
    import shlex

    from gitaudit.agent.bypass import runs_gitaudit
    from gitaudit.agent.shell import Simple

    assert runs_gitaudit(Simple((), tuple(shlex.split(command)), ())) is runs


@pytest.mark.parametrize(
    "command",
    [
        "m=(.git); rm $m/hooks/pre-push",
        "export d=.git; rm $d/hooks/pre-push",
        "local d=.git; rm $d/hooks/pre-push",
        "d=.gi; d+=t; rm $d/hooks/pre-push",
        "read d <<< .git; rm $d/hooks/pre-push",
        "mapfile -t d < list; rm $d/hooks/pre-push",
        "printf -v d .git; rm $d/hooks/pre-push",
        "getopts a d; rm $d/hooks/pre-push",
        ": ${d:=.git}; rm $d/hooks/pre-push",
        "set -- .git; rm $1/hooks/pre-push",
        "d=.git sh -c 'rm $d/hooks/pre-push'",
        "export IFS=,; x='a,.git/hooks/pre-push'; rm $x",
    ],
)
def test_a_variable_the_guard_does_not_value_is_refused_in_a_write(command: str) -> None:
    """A write target expanding a variable the command sets in a way the guard takes no value
    from (an expanded word at all, when that variable is IFS). The forms of expansion the
    guard does not compute, and fields, are the path check's: tests/agent/test_guard.py."""
    assert refused(command), command


@pytest.mark.parametrize(
    "command",
    [
        "export d=.git; cat $d/config",  # read, not written
        "X=build; rm -rf $X/out",
        'for f in *.txt; do mv "$f" "${f%.txt}.md"; done',  # a loop's: a known limit
        "export PATH=$PATH:/opt/bin && rm -rf build",
        "x='a b'; echo $x > notes.txt",
    ],
)
def test_variables_the_guard_values_or_that_write_nothing_pass(command: str) -> None:
    assert refused(command) is None, command


@pytest.mark.parametrize(
    ("command", "refused_too"),
    [
        ("find .git -name pre-push -delete", True),
        ("find -L /p/.git -exec rm {} +", True),
        ("find .git -name '*.sample' -exec cat {} \\;", False),  # a reader
        ("find . -name '*.pyc' -delete", False),  # the folder itself only
        ("find .git/hooks -name '*.sample'", False),  # no write
        ("find build -delete", False),
    ],
)
def test_what_find_writes(command: str, refused_too: bool) -> None:
    assert bool(refused(command)) is refused_too, command
