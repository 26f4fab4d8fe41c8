"""Reading shell commands: the simple commands the guard's rules see."""

from __future__ import annotations

import pytest

from gitaudit.agent.shell import Simple, Unreadable, commands, split_heredocs, substitutions


def words(script: str) -> list[tuple[str, ...]]:
    return [s.words for s in commands(script)]


def test_lists_pipelines_and_groups_are_split_into_simple_commands() -> None:
    script = "cd src && make; (echo a | tee b) || true\ngit status &"
    assert words(script) == [
        ("cd", "src"),
        ("make",),
        ("echo", "a"),
        ("tee", "b"),
        ("true",),
        ("git", "status"),
    ]


def test_assignments_and_write_redirections_are_kept_apart() -> None:
    (simple,) = commands("A=1 B='two words' cmd x > out.txt 2>&1 >> log < in.txt")
    assert simple == Simple(
        (("A", "1"), ("B", "two words")), ("cmd", "x"), ("out.txt", "log"), reads=(("<", "in.txt"),)
    )
    (simple,) = commands("echo hi &> all.txt")
    assert simple.writes == ("all.txt",)
    (simple,) = commands("echo hi >&2")
    assert simple.writes == ()


def test_input_redirections_and_pipes_are_kept() -> None:
    """Where a command's input comes from (a patch it applies may be there)."""
    cat, _, apply = commands("cat a.diff | sudo git apply <<< text < b.diff")
    assert cat.piped is None and apply.piped == cat
    assert apply.words == ("git", "apply") and apply.reads == (("<<<", "text"), ("<", "b.diff"))
    *_, inner = commands("cat a.diff | (git apply)")
    assert inner.piped is not None and inner.piped.words == ("cat", "a.diff")
    *_, last = commands("(cat a.diff) | git apply")
    assert last.piped is not None and last.piped.words == ()  # which command: unseen
    *_, last = commands("printf x | cat | git apply")
    assert last.piped is not None and last.piped.piped == Simple((), (), ())  # one pipe back
    _, group = commands("{ git apply; } < p.diff")
    assert group.words == () and group.reads == (("<", "p.diff"),)
    assert list(commands("git apply; cat x"))[1].piped is None


def test_a_substitution_in_an_input_redirection_is_read() -> None:
    assert ("rm", "-rf", ".git") in words("git status < $(rm -rf .git)")


def test_wrappers_are_unwrapped() -> None:
    found = words("sudo -u root env -i GIT_X=1 nice -n 5 timeout 10 git commit")
    assert found[-1] == ("git", "commit")
    (*_, last) = commands("env -i GIT_CONFIG_COUNT=1 git commit")
    assert last.assignments == (("GIT_CONFIG_COUNT", "1"),) and last.words == ("git", "commit")
    assert words("xargs -n 1 git update-ref -d")[-1] == ("git", "update-ref", "-d")
    assert words("env -S 'git push -f'")[-1] == ("git", "push", "-f")


@pytest.mark.parametrize(
    ("script", "inner"),
    [
        ("env -S'git push -f'", ("git", "push", "-f")),
        ('env -iS"git push -f"', ("git", "push", "-f")),
        ("env --split-string='git push -f'", ("git", "push", "-f")),
        ("env --split 'git push -f'", ("git", "push", "-f")),
        ("env -S'-i X=1 git push -f'", ("git", "push", "-f")),
        ("exec -cla name git push -f", ("git", "push", "-f")),
        ("sudo -iu root git push -f", ("git", "push", "-f")),
        ("timeout -k5 10 git push -f", ("git", "push", "-f")),
        ("flock .lock -c 'git push -f'", ("git", "push", "-f")),
        ("flock .lock --command 'git push -f'", ("git", "push", "-f")),
        ("busybox cp a b", ("cp", "a", "b")),
        ("busybox sh -c 'git push -f'", ("git", "push", "-f")),
    ],
)
def test_wrapper_options_are_read_as_getopt_reads_them(script: str, inner: tuple[str, ...]) -> None:
    """Bundled options, values attached or given to an abbreviated long option: the command
    the wrapper runs is what it runs."""
    assert inner in words(script)


@pytest.mark.parametrize(
    "script",
    [
        "bash -o errexit -c 'git push -f'",
        "bash -eo pipefail -c 'git push -f'",
        "bash -O extglob -c 'git push -f'",
        "bash +o posix -c 'git push -f'",
        "bash --rcfile /dev/null -c 'git push -f'",
        "bash -c -- 'git push -f'",
        "bash <<< 'git push -f'",
        "sh -s <<< 'git push -f'",
        "bash -s -- a b <<< 'git push -f'",
        "bash /dev/stdin <<< 'git push -f'",
    ],
)
def test_a_shells_script_is_found_past_its_options(script: str) -> None:
    assert ("git", "push", "-f") in words(script)


def test_a_script_file_and_its_operands_are_not_the_script() -> None:
    assert words("bash script.sh <<< 'git push -f'") == [("bash", "script.sh")]
    assert words("bash -c 'echo hi' -- a b") == [
        ("bash", "-c", "echo hi", "--", "a", "b"),
        ("echo", "hi"),
    ]


@pytest.mark.parametrize(
    "script",
    [
        "git rebase -x 'git push -f' HEAD~3",
        "git rebase --exec='git push -f' HEAD~3",
        "git -C . rebase -x'git push -f' HEAD~3",
        "git bisect run git push -f",
        "git submodule --quiet foreach --recursive 'git push -f'",
        "git -c core.editor='git push -f' commit",
        "git -c Sequence.Editor='git push -f' rebase -i HEAD~3",
        "git -c core.pager='git push -f' log",
        "git -c pager.log='git push -f' log",
        "git -c diff.external='git push -f' diff",
        "GIT_EDITOR='git push -f' git commit",
        "GIT_SEQUENCE_EDITOR='git push -f' git rebase -i HEAD~3",
        "GIT_EXTERNAL_DIFF='git push -f' git diff",
        "GIT_SSH_COMMAND='git push -f' git fetch",
    ],
)
def test_what_git_runs_is_read(script: str) -> None:
    assert ("git", "push", "-f") in words(script)


def test_nested_scripts_are_read() -> None:
    assert ("git", "commit", "--no-verify") in words('bash -lc "git commit --no-verify"')
    assert ("git", "commit", "-n") in words("eval 'git commit -n'")
    assert ("git", "commit", "-n") in words("alias c='git commit -n'")
    assert ("git", "push", "-f") in words('echo "$(git push -f)"')
    assert ("git", "push", "-f") in words("echo `git push -f`")
    assert ("git", "push", "-f") in words("diff <(git push -f) x")


def test_substitutions_are_found_balanced() -> None:
    assert substitutions("a$(b $(c) d)e`f`") == ["b $(c) d", "f"]


def test_heredoc_bodies_are_data_but_still_read() -> None:
    script = "git commit -F - <<'EOF'\nfix: don't use --no-verify\nEOF\ngit status"
    text, bodies = split_heredocs(script)
    assert bodies == ["fix: don't use --no-verify"]
    assert "don't" not in text
    assert words(script) == [("git", "commit", "-F", "-"), ("git", "status")]
    found = list(commands("bash <<EOF\ngit commit --no-verify\nEOF"))
    assert found[0].heredoc and found[0].words == ("git", "commit", "--no-verify")


def test_claude_codes_commit_message_pattern_reads() -> None:
    script = "git commit -m \"$(cat <<'EOF'\nFix the greeting\n\nIt's done.\nEOF\n)\""
    assert ("git", "commit", "-m", "$(cat <<'EOF'\n)") in words(script)


def test_comments_end_at_the_line_and_only_start_words() -> None:
    assert words("git commit # --no-verify") == [("git", "commit")]
    assert words("echo a#b") == [("echo", "a#b")]
    assert words("# what's next\ngit commit --no-verify") == [("git", "commit", "--no-verify")]


def test_quoted_and_escaped_operators_are_words() -> None:
    assert words("git commit -m ';' --no-verify") == [("git", "commit", "-m", ";", "--no-verify")]
    assert words("git commit -m \\; -n") == [("git", "commit", "-m", ";", "-n")]
    assert words('git commit -m "a && b" -n') == [("git", "commit", "-m", "a && b", "-n")]
    assert words("find . -exec git commit -n \\;")[-1] == ("git", "commit", "-n")


@pytest.mark.parametrize(
    ("script", "word"),
    [
        ("x $'core.hooksPath'", "core.hooksPath"),
        ("x $'\\x2egit/\\150ooks/\\u0070re-push'", ".git/hooks/pre-push"),
        ("x a$'\\U00000074'b", "atb"),
        ("x $'\\a\\b\\e\\E\\f\\n\\r\\t\\v\\\\\\'\\\"\\?'", "\a\b\x1b\x1b\f\n\r\t\v\\'\"?"),
        ("x $'\\0101\\18\\777'", "\b1\x018\udcff"),
        ("x $'\\x414\\xg\\x{4174}\\u12345\\u\\z'", "A4\\xgt\u12345\\u\\z"),
        ("x $'\\ca\\cZ\\c?\\c\\\\x\\c'", "\x01\x1a\x7f\x1cx\\c"),
        ("x $'caf\\303\\251'", "caf\u00e9"),
        ("x $'tests/check.py\\0.bak'z", "tests/check.pyz"),
        ("x $'it\\'s'", "it's"),
        ('x $"a \\"b\\" $c"', 'a "b" $c'),
        ("x $$'y'", "$$y"),
        ("x \"$'y'\"", "$'y'"),
    ],
)
def test_ansi_c_and_locale_quoting_read_as_bash_reads_them(script: str, word: str) -> None:
    """``$'...'`` is decoded (bash 5.2's escapes; a NUL ends it) and ``$"..."`` read as
    ``"..."``: read as ``$`` and the text, a quoted path or option name got past the rules."""
    assert words(script) == [("x", word)]


def test_ansi_c_quoting_inside_a_substitution_keeps_its_end() -> None:
    assert ("rm", ".git/hooks/pre-push") in words("echo $(printf $'a\\')'; rm .git/hooks/pre-push)")


@pytest.mark.parametrize("script", ["echo $'open", "echo $'\\U00110000'"])
def test_unreadable_ansi_c_quoting_raises(script: str) -> None:
    with pytest.raises(Unreadable):
        list(commands(script))


def test_line_continuations_join_words() -> None:
    assert words("git commit \\\n  --no-verify") == [("git", "commit", "--no-verify")]


@pytest.mark.parametrize("script", ["echo 'unbalanced", 'echo "open', "eval " * 3 + "'x"])
def test_unreadable_commands_raise(script: str) -> None:
    with pytest.raises(Unreadable):
        list(commands(script))


def test_nesting_is_bounded() -> None:
    script = "x"
    for _ in range(12):
        script = f"sh -c {__import__('shlex').quote(script)}"
    with pytest.raises(Unreadable, match="too deeply"):
        list(commands(script))
