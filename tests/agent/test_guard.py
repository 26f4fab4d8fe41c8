"""The guard, run as Claude Code runs it (PreToolUse payloads through the installed command):
ordinary work passes silently, each kind of refusal comes with its reason, bad input is
refused. The attack variants are in tests/adversarial/test_agent.py."""

from __future__ import annotations

import json
import os
import site
import sys
import time
from pathlib import Path

import pytest

from gitaudit.agent import guard, programs
from gitaudit.agent.guard import Places, _braces, _fields, spellings
from gitaudit.agent.shell import Unreadable
from tests.agent.host import PLAN, bash, payload, run_hook, tool
from tests.gitrepo import GitRepo


@pytest.fixture
def work(repo: GitRepo) -> GitRepo:
    """A repository with a plan (not sealed: the guard reads the work tree's plans too)."""
    repo.write("greeter.py", "def greeting():\n    return 'Hello'\n")
    repo.write("tests/check_greeting.py", "print('check')\n")
    repo.write_plan(PLAN)
    repo.commit("plan")
    return repo


ORDINARY = [
    ("Write", {"file_path": "{p}/greeter.py", "content": "x"}),
    ("Write", {"file_path": "{p}/src/new_module.py", "content": "x"}),
    ("Edit", {"file_path": "{p}/greeter.py", "old_string": "a", "new_string": "b"}),
    (
        "MultiEdit",
        {"file_path": "{p}/README.md", "edits": [{"old_string": "a", "new_string": "b"}]},
    ),
    ("NotebookEdit", {"notebook_path": "{p}/analysis.ipynb", "new_source": "1", "cell_id": "c"}),
    ("Write", {"file_path": "/tmp/scratch-outside-the-project.txt", "content": "x"}),
    ("Read", {"file_path": "{p}/.git/config"}),
    ("Grep", {"pattern": "hooksPath", "path": "{p}/.git"}),
    ("Glob", {"pattern": ".gitaudit/**"}),
    ("WebFetch", {"url": "https://example.com", "prompt": "summarise"}),
]


@pytest.mark.parametrize(
    ("name", "tool_input"), ORDINARY, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ORDINARY)]
)
def test_ordinary_tool_calls_pass_silently(
    work: GitRepo, name: str, tool_input: dict[str, object]
) -> None:
    filled = {
        k: v.replace("{p}", str(work.path)) if isinstance(v, str) else v
        for k, v in tool_input.items()
    }
    doc = payload("pretooluse-read", work.path, tool_name=name, tool_input=filled)
    run = run_hook(work.path, "guard", doc)
    assert run.allowed, run


@pytest.mark.parametrize(
    "command",
    [
        "python3 -m pytest -q tests",
        "git add -A && git commit -m 'fix: the greeting'",
        "git commit -m \"$(cat <<'EOF'\nFix the greeting\n\nIt's what the check wants.\nEOF\n)\"",
        "git push origin main",
        "git audit run && git audit status",
        "cat .git/config; git log --oneline -3",
        "python3 tests/check_greeting.py",
        "git audit plan seal -m 'a stronger check'",
        "git audit reconcile greeting --readback && git audit trust policy",
        "git apply <<'EOF'\n--- a/greeter.py\n+++ b/greeter.py\n@@ -1 +1 @@\n-x\n+y\nEOF",
        "cp /tmp/helper.py tests/ && mkdir -p tests/unit && cp -r /tmp/fixtures tests",
        "cp /tmp/notes.md . && mv /tmp/other.py tests",
        "git push -f origin topic && git fetch --prune origin",
        "git config user.name 'A Dev' && git config --global --get user.name",
        "cd /tmp && echo x > out.txt",
        'echo done > "$HOME/notes.txt" && rm -rf build/* "$TMPDIR"/scratch',
        "X=src; git apply <<EOF\n--- a/$X/new.py\n+++ b/$X/new.py\n@@ -0,0 +1 @@\n+x\nEOF",
        "git apply --directory=src <<'EOF'\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-x\n+y\nEOF",
        "cat ~/.bashrc ~/.profile; which git git-audit; ls -l ~/.local/bin",
        "mkdir -p bin && cp /tmp/helper bin/run-tests && echo x > ~/.bashrc.notes",
    ],
)
def test_ordinary_commands_pass_silently(work: GitRepo, command: str) -> None:
    run = run_hook(work.path, "guard", bash(work.path, command))
    assert run.allowed, run


def test_a_refused_edit_says_why_in_claude_codes_deny_decision(work: GitRepo) -> None:
    run = run_hook(
        work.path,
        "guard",
        tool(
            work.path,
            "Edit",
            file_path=str(work.path / "tests" / "check_greeting.py"),
            old_string="a",
            new_string="b",
        ),
    )
    assert run.code == 0 and run.blocked
    doc = json.loads(run.stdout)
    assert doc == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": run.reason,
        }
    }
    assert "is protected by the plan" in run.reason and "reseal" in run.reason


@pytest.mark.parametrize(
    ("target", "words"),
    [
        (".git/hooks/pre-push", "inside a git directory"),
        (".gitaudit/plans/default.json", "gitaudit plan file"),
        (".claude/settings.json", "holds this agent's hooks"),
        ("tests/check_greeting.py", "protected by the plan"),
    ],
)
def test_each_guarded_place_is_refused(work: GitRepo, target: str, words: str) -> None:
    run = run_hook(
        work.path, "guard", tool(work.path, "Write", file_path=str(work.path / target), content="x")
    )
    assert run.blocked and words in run.reason, run


@pytest.mark.parametrize(
    ("hook", "config"),
    [
        ("ARGS=(hook-impl --config=.pre-commit-config.yaml --hook-type=pre-push)", None),
        ("ARGS=(hook-impl --config=ci/hooks.yaml --hook-type=pre-push)", "ci/hooks.yaml"),
        ("# File generated by pre-commit: https://pre-commit.com\nCONFIG='old.yaml'", "old.yaml"),
        ("# File generated by pre-commit: https://pre-commit.com\n", None),
    ],
    ids=["default", "custom", "before-2.0", "unnamed"],
)
def test_the_configuration_a_pre_commit_hook_runs_from_is_guarded(
    work: GitRepo, hook: str, config: str | None
) -> None:
    """A pre-commit framework hook runs what its configuration lists: that file is guarded
    while such a hook is installed (tests/adversarial/test_agent.py), and only then."""
    config = config or ".pre-commit-config.yaml"
    (work.path / ".git" / "hooks" / "pre-push.sample").write_text("hook-impl --config=x.yaml\n")
    assert Places(str(work.path))._hook_configs == []
    (work.path / ".git" / "hooks" / "pre-push").write_text(f"#!/usr/bin/env bash\n{hook}\n")
    places = Places(str(work.path))
    assert places._hook_configs == [os.path.realpath(work.path / config)]
    why = places.write_refusal(config, str(work.path))
    assert why is not None and "configuration of the client hooks" in why
    assert places.write_refusal("README.md", str(work.path)) is None
    assert Places(str(work.path)).write_refusal("x.yaml", str(work.path)) is None


def test_the_native_hooks_guard_no_pre_commit_configuration(work: GitRepo) -> None:
    """gitaudit's own hooks run no configuration of the work tree: `.pre-commit-config.yaml`
    stays the project's to edit (a control)."""
    from tests.gitrepo import audit

    assert audit(work.path, "hooks", "install").code == 0
    places = Places(str(work.path))
    assert places._hook_configs == []
    assert places.write_refusal(".pre-commit-config.yaml", str(work.path)) is None


def test_the_generic_host_gets_exit_2_and_the_reason_on_stderr(work: GitRepo) -> None:
    run = run_hook(
        work.path, "guard", bash(work.path, "git commit --no-verify -m x"), host="generic"
    )
    assert run.code == 2 and run.stdout == "" and "--no-verify" in run.stderr
    run = run_hook(work.path, "guard", bash(work.path, "git status"), host="generic")
    assert run.code == 0 and run.stdout == "" and run.stderr == ""


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{oops",
        b"[]",
        json.dumps({"hook_event_name": "PreToolUse"}),  # no tool_name
        json.dumps({"tool_name": "Write", "tool_input": "greeter.py"}),
        json.dumps({"tool_name": "Edit", "tool_input": {"old_string": "a"}}),  # no file_path
        json.dumps({"tool_name": "Bash", "tool_input": {"command": ["git", "push"]}}),
    ],
    ids=["empty", "broken", "array", "no-tool", "input-not-object", "no-path", "command-not-text"],
)
def test_a_malformed_payload_is_refused(work: GitRepo, data: bytes | str) -> None:
    run = run_hook(work.path, "guard", data)
    assert run.blocked and "could not check this tool call" in run.reason, run


def test_outside_a_repository_the_git_dirs_and_home_are_still_guarded(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    ok = run_hook(
        folder, "guard", tool(folder, "Write", file_path=str(folder / "a.txt"), content="x")
    )
    assert ok.allowed
    other = tmp_path / "some-clone" / ".git" / "config"
    run = run_hook(folder, "guard", tool(folder, "Write", file_path=str(other), content="x"))
    assert run.blocked and "inside a git directory" in run.reason


@pytest.mark.parametrize("variable", ["GIT_CONFIG_GLOBAL", "XDG_CONFIG_HOME", "GIT_CONFIG_SYSTEM"])
def test_the_git_configuration_is_refused_where_git_reads_it(
    work: GitRepo, tmp_path: Path, variable: str
) -> None:
    """The guard follows the variables git reads its global and system configuration by."""
    elsewhere = tmp_path / "elsewhere"
    target = elsewhere / "git" / "attributes" if variable == "XDG_CONFIG_HOME" else elsewhere
    env = {variable: str(elsewhere)}
    attempt = tool(work.path, "Write", file_path=str(target), content="* filter=keep\n")
    run = run_hook(work.path, "guard", attempt, env=env)
    assert run.blocked and "the user's git configuration" in run.reason, run
    assert run_hook(work.path, "guard", attempt).allowed  # elsewhere, it is an ordinary file


def test_what_the_git_configuration_names_is_refused(work: GitRepo, tmp_path: Path) -> None:
    """A file the global configuration includes, its attributes file and its hooks folder are
    refused like the configuration, as named and through a link; the folder holding them as a
    whole; a file beside them is ordinary."""
    home = Path(os.environ["HOME"])
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (home / "dots").symlink_to(dotfiles)
    with (home / ".gitconfig").open("a") as config:
        config.write(
            "[include]\n\tpath = ~/dots/extra\n"
            f"[core]\n\tattributesFile = {dotfiles}/attrs\n\thooksPath = {dotfiles}/hooks\n"
        )
    for target in ("dots/extra", f"{dotfiles}/extra", f"{dotfiles}/attrs", "dots/hooks/x"):
        attempt = tool(work.path, "Write", file_path=str(home / target), content="[core]\n")
        run = run_hook(work.path, "guard", attempt)
        assert run.blocked and "is named by the git configuration" in run.reason, (target, run)
    run = run_hook(work.path, "guard", bash(work.path, f"rm -rf {dotfiles}"))
    assert run.blocked and "is named by the git configuration" in run.reason, run
    beside = tool(work.path, "Write", file_path=str(dotfiles / "notes"), content="x")
    assert run_hook(work.path, "guard", beside).allowed


def test_a_folder_is_judged_by_what_it_holds(work: GitRepo) -> None:
    """Removing or replacing a folder writes every file in it; writing into it does not."""
    run = run_hook(work.path, "guard", bash(work.path, "rm -rf tests"))
    assert run.blocked and "it holds `tests/check_greeting.py`" in run.reason, run
    run = run_hook(work.path, "guard", bash(work.path, "cp -r /tmp/x/. tests/"))
    assert run.blocked and "it holds `tests/check_greeting.py`" in run.reason, run
    assert run_hook(work.path, "guard", bash(work.path, "cp /tmp/x.py tests/")).allowed
    assert run_hook(work.path, "guard", bash(work.path, "rm -rf build")).allowed


def test_a_glob_ending_with_a_slash_matches_the_file_a_copy_writes_over(work: GitRepo) -> None:
    """A copy's destination is judged as `DEST/` (a folder written into); its glob matches the
    file bash would write over too, judged as a file, and a folder still as one written into."""
    places = Places(str(work.path))
    here = str(work.path)
    why = places.write_refusal("tests/check_greeting.p?/", here, {})
    assert why is not None and "protected by the plan" in why
    assert places.write_refusal("tes?s/", here, {}) is None  # into the folder: a new entry
    assert places._glob_written(os.path.join(here, "tes?s/")) == [
        os.path.join(here, "tests") + os.sep
    ]
    assert run_hook(work.path, "guard", bash(work.path, "cp /tmp/x.py tes?s/")).allowed
    run = run_hook(work.path, "guard", bash(work.path, "cp /dev/null tests/check_greeting.p?"))
    assert run.blocked and "protected by the plan" in run.reason, run


def test_a_shell_word_is_judged_in_every_spelling_bash_may_give_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Quotes are gone by the time a word is judged: `$NAME`, `~` and braces are each taken as
    written (quoted) and as bash expands them (an unset variable: nothing)."""
    monkeypatch.setenv("HOME", "/h")
    monkeypatch.delenv("NOPE", raising=False)
    spent: list[int] = []
    found = set(spellings("$HOME/{a,b}$NOPE", "/cwd", spent.append, {"X": "x"}))
    assert {"$HOME/{a,b}$NOPE", "/h/a", "/h/b", "$HOME/a", "/h/a$NOPE", "/b"} <= found
    assert len(spent) >= len(found)
    assert set(spellings("a/${NOPE:-t}/$X", "/cwd", spent.append, {"X": "x"})) >= {
        "a/t/x",
        "a/${NOPE:-t}/$X",
        "a//",
    }
    assert set(spellings("~+/t", "/cwd", spent.append)) == {"~+/t", "/cwd/t"}
    assert set(spellings("~/t", "/cwd", spent.append)) == {"~/t", "/h/t"}


def test_an_expansion_the_guard_does_not_compute_is_unreadable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Indirection, a cut or replaced pattern, a substring, a subscript, a case change: of a
    variable the command set (or one here), bash makes another path than any the guard
    judges; of a variable it does not know, the word is judged as before."""
    monkeypatch.setenv("HERE", "/h")
    monkeypatch.delenv("NOPE", raising=False)
    for word in ("${!b}/x", "${a#X}/x", "${a%X}", "${a/t/g}", "${a:1}", "${a,,}", "${HERE#/}"):
        with pytest.raises(Unreadable):
            list(spellings(word, "/cwd", lambda cost: None, {"a": ".gitX", "b": "a"}))
    assert "${NOPE#X}/x" in set(spellings("${NOPE#X}/x", "/cwd", lambda cost: None, {}))


def test_a_word_is_judged_in_each_field_bash_may_split_it_into(work: GitRepo) -> None:
    """Quotes are gone: a value with a space (or a character of the IFS the command sets) may
    be split into several paths."""
    places = Places(str(work.path))
    here = str(work.path)
    assert places.write_refusal("a .git/hooks/pre-push", here, {})
    assert places.write_refusal("a\n.git/hooks/pre-push", here, {})
    assert places.write_refusal("a:.git/hooks/pre-push", here, {"IFS": ":"})
    assert places.write_refusal("a:.git/hooks/pre-push", here, {}) is None  # one file
    assert places.write_refusal("my notes.txt", here, {}) is None
    assert _fields("a b", {}) == ["a b", "a", "b"]
    assert _fields("ab", {}) == ["ab"]


def test_braces_are_read_in_linear_time() -> None:
    """The old pattern took quadratic time on a group of commas that never closes."""
    started = time.monotonic()
    assert _braces("{" + "," * 200_000, lambda cost: None) == ["{" + "," * 200_000]
    assert time.monotonic() - started < 1
    assert set(_braces("x{a,b{c,d}}y", lambda cost: None)) == {"xay", "xbcy", "xbdy"}


def test_judging_past_the_budget_is_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each path judged and each folder entry a glob looks at is spent; past the budget the
    word is unreadable (the command is refused), not judged on past the hook's timeout."""
    for i in range(30):
        (tmp_path / f"d{i}").mkdir()
    places = Places(str(tmp_path))
    assert places.write_refusal("d*/x", str(tmp_path), {}) is None
    assert places.spent > 30  # every entry the glob looked at
    monkeypatch.setattr(guard, "BUDGET", 20)
    with pytest.raises(Unreadable, match="more paths to be checked"):
        Places(str(tmp_path)).write_refusal("d*/x", str(tmp_path), {})


def test_the_installation_the_guard_runs_from_is_guarded(
    work: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What this interpreter loads code from (its environment, its import path, the package),
    the user's site-packages it would read, and the `git-audit` on PATH with the interpreter it
    names are refused; a folder of the import path inside the work tree is not (the hooks'
    installation refuses that set-up: gitaudit.places.code_inside), nor reading any of it."""
    user_site = tmp_path / "user-site"
    monkeypatch.setattr(site, "ENABLE_USER_SITE", True)
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(user_site))
    other = tmp_path / "other-venv"
    (other / "bin").mkdir(parents=True)
    (other / "pyvenv.cfg").write_text("home = /usr/bin\n")
    command = tmp_path / "on-path" / "git-audit"
    command.parent.mkdir()
    command.write_text(f"#!{other / 'bin' / 'python'}\n")
    command.chmod(0o755)
    # without the interpreter's bin (the suite puts it first): a folder on PATH is refused by
    # its own rule, and this test is about the installation's
    bindir = os.path.dirname(sys.executable)
    rest = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != bindir)
    monkeypatch.setenv("PATH", f"{command.parent}:{rest}")
    vendored = work.path / "vendor"
    monkeypatch.setattr(sys, "path", [*sys.path, str(vendored)])
    places = Places(str(work.path))
    for path in (
        Path(sys.prefix) / "lib" / "zz-first.pth",
        Path(sys.executable),
        Path(guard.__file__),
        user_site / "zz-first.pth",  # not there yet: Python would read it once it is
        other / "lib" / "site.py",
        other / "pyvenv.cfg",
    ):
        why = places.write_refusal(str(path), str(work.path))
        assert why and "gitaudit installation" in why, (path, why)
    assert places.write_refusal(str(vendored / "helper.py"), str(work.path)) is None
    assert places.write_refusal(str(tmp_path / "elsewhere.py"), str(work.path)) is None


def test_programs_are_refused_in_the_folders_on_path(
    work: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git`, `git-audit`, `gitaudit` (any case) in a folder on PATH (as written and where a
    link leads), `~/.local/bin` or `~/bin`, the work tree's too; any other program in such a
    folder outside the work tree (where the checks find theirs). Other names in a folder of the
    work tree on PATH (the run drops those), and every name elsewhere, pass."""
    folder = tmp_path / "tools"
    folder.mkdir()
    linked = tmp_path / "linked-bin"
    linked.symlink_to(folder)
    project_bin = work.path / "bin"
    monkeypatch.setenv("PATH", f"{linked}:{project_bin}:{os.environ['PATH']}")
    home = Path(os.path.expanduser("~"))
    places = Places(str(work.path))
    for path in (
        folder / "git",
        linked / "Git-Audit",
        home / ".local/bin/gitaudit",
        home / "bin/git",
        project_bin / "git",
    ):
        why = places.write_refusal(str(path), str(work.path))
        assert why and "a folder on PATH" in why and "later" in why, (path, why)
    for path in (folder / "python3", linked / "pytest", home / ".local/bin/git-lfs"):
        why = places.write_refusal(str(path), str(work.path))
        assert why and "where the checks of `git audit run` find" in why, (path, why)
    for path in (project_bin / "run-tests", tmp_path / "git", work.path / "git"):
        assert places.write_refusal(str(path), str(work.path)) is None, path


def test_what_the_shell_sources_is_refused(
    work: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's startup files, Claude Code's snapshots and session environment files, and
    the files $ZDOTDIR, $BASH_ENV, $ENV and $CLAUDE_ENV_FILE name; not a file beside them."""
    for name in ("ZDOTDIR", "BASH_ENV", "ENV", "CLAUDE_ENV_FILE"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    home = Path(os.path.expanduser("~"))
    places = Places(str(work.path))
    sourced = [home / name for name in programs.HOME_STARTUP]
    sourced += [tmp_path / "zdotdir" / ".zshrc", tmp_path / "bash_env", tmp_path / "env"]
    sourced += [tmp_path / "claude_env_file", Path("/etc/profile.d/zz.sh")]
    for path in sourced:
        why = places.write_refusal(str(path), str(work.path))
        assert why and "sourced by the shell" in why, (path, why)
    for path in (home / "notes.txt", home / ".bashrc.bak", tmp_path / "zdotdir" / "notes"):
        assert places.write_refusal(str(path), str(work.path)) is None, path


def test_the_hosts_moved_configuration_folders_are_guarded(
    work: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`$CLAUDE_CONFIG_DIR` moves Claude Code's `~/.claude` (its settings, shell snapshots and
    session environment files), `$CODEX_HOME` Codex's `~/.codex`: both places are kept, the
    home's too; another file there is not."""
    claude, codex = tmp_path / "claude-work", tmp_path / "codex-home"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("CODEX_HOME", str(codex))
    home = Path(os.path.expanduser("~"))
    places = Places(str(work.path))
    for path in (
        claude / "settings.json",
        claude / "settings.local.json",
        codex / "hooks.json",
        codex / "config.toml",
        home / ".claude" / "settings.json",
        home / ".codex" / "config.toml",
        claude,
    ):
        why = places.write_refusal(str(path), str(work.path))
        assert why and "hook settings" in why, (path, why)
    for path in (claude / "shell-snapshots" / "snapshot-bash-1.sh", claude / "session-env"):
        why = places.write_refusal(str(path), str(work.path))
        assert why and "sourced by the shell" in why, (path, why)
    for path in (claude / "projects" / "x.jsonl", codex / "notes.txt", claude / "hooks.json"):
        assert places.write_refusal(str(path), str(work.path)) is None, path
