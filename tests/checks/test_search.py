"""The bounded regex search (gitaudit/checks/search.py): an answer, or None past the bound."""

from __future__ import annotations

import pytest

from gitaudit.checks.search import search
from gitaudit.errors import CheckError


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        ("^ok$", "first\nok\nlast", True),  # re.MULTILINE, as the checks always searched
        ("^ok$", "not ok", False),
        # a plan-auditor pattern for the whole file, rewritten as docs/plan-format.md says
        (r"^2\.0\.0$", "1.9.0\n2.0.0\n", True),
        (r"\A2\.0\.0\n?\Z", "1.9.0\n2.0.0\n", False),
        (r"\A2\.0\.0\n?\Z", "2.0.0\n", True),
        ("caf\u00e9", "un caf\u00e9 noir", True),
        (r"\\x9f", "bytes shown as \\x9f", True),  # undecodable output, backslash-escaped
        ("", "", True),
    ],
)
def test_a_search_answers_as_re_search(pattern: str, text: str, found: bool) -> None:
    assert search(pattern, text, 10) is found


def test_a_catastrophic_search_is_cut_at_its_bound() -> None:
    """``^(a+)+$`` over 40 a's and a '!' backtracks 2**40 times (days): no answer, None."""
    assert search("^(a+)+$", "a" * 40 + "!", 0.5) is None


@pytest.mark.parametrize(
    ("pattern", "plain"),
    [
        ("^Hello", True),
        (r"\d+ passed", True),
        ("(?:ab)+c", True),
        ("^fib\\(10\\) = 55$", True),
        ("^(a+)+$", False),  # a repetition inside another
        ("(ab|a)*c", False),  # an alternation inside a repetition
        (r"(\d+) passed, (\d+) failed", False),  # two: polynomial over a long line
        (r"(a)\1", False),  # a backreference
    ],
)
def test_a_plain_search_runs_here_and_any_other_in_the_child(
    monkeypatch: pytest.MonkeyPatch, pattern: str, plain: bool
) -> None:
    """A short text and a pattern that cannot backtrack more than quadratically are searched in
    this process (a child costs about 10 ms); anything else in the bounded child, and a long
    text always, with the same answers as re.search."""
    import re
    import subprocess

    from gitaudit.checks import search as module

    children: list[object] = []
    real = subprocess.run

    def counted(*args: object, **kwargs: object) -> object:
        children.append(args)
        return real(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "run", counted)
    for text in ("Hello\n3 passed, 0 failed\nfib(10) = 55\nabababc aa", "x" * 5000 + "\nHello"):
        expected = re.search(pattern, text, re.MULTILINE) is not None
        children.clear()
        assert search(pattern, text, 10) is expected
        assert len(children) == (0 if plain and len(text) <= module.HERE_TEXT else 1)


def test_a_pattern_that_does_not_compile_is_a_check_error() -> None:
    with pytest.raises(CheckError, match=r"the pattern /\(/ does not compile"):
        search("(", "text", 10)
