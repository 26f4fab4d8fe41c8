"""Attacks through the text a search sees: a `regex` check's file, an `output_regex`'s output."""

from __future__ import annotations

from typing import Any

import pytest

from gitaudit.checks.execute import REGEX_READ_LIMIT
from tests.adversarial.conftest import World, assert_plan, check, plan, step

# pattern, the line the searched part ends with (or holds), what follows it in the whole
CUT = {
    # "settings.py never turns DEBUG on": the line after the cut is not searched
    "negative lookahead": (r"\A(?![\s\S]*DEBUG = True)", b"ok = 1\n", b"DEBUG = True\n"),
    # "the file ends with the final release line": it ends the searched part, not the file
    "end of text": (r'release = "final"\n\Z', b'release = "final"\n', b'release = "draft"\n'),
    # "a line that is exactly VERSION = 2": the cut ends the line early, the file says 23
    "whole line": (r"^VERSION = 2$", b"\nVERSION = 2", b"3\n"),
}


@pytest.mark.parametrize("case", sorted(CUT))
def test_attack_searches_regex_file_past_the_read_limit(world: World, case: str) -> None:
    """A sealed `regex` check whose pattern the whole file does not match: the agent pads the
    file so the part the check searched (the first 16 MiB) ends where it likes, and what breaks
    the pattern lies past it (a negative lookahead, `\\Z`, a line the cut ends early). The part
    matched: the check passed, ci signed PASS and the gate said PASS (all three before the fix).
    A file larger than the searched part now fails the check unsearched."""
    pattern, head, tail = CUT[case]
    regex = {"type": "regex", "path": "settings.py", "pattern": pattern}
    world.repo.write("settings.py", b"ok = 1\n")
    world.seal(plan(step("unit", regex, check("true"))))
    pad = b"#" * (REGEX_READ_LIMIT - len(head) - 1) + b"\n"
    world.repo.write("settings.py", pad + head + tail)
    world.repo.commit("pad the settings")
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert "larger than" in judged.reasons[0].message, judged.reasons


OUTPUT: dict[str, tuple[str, str, dict[str, Any]]] = {
    # "the build log holds no ERROR": the ERROR comes after the kept first bytes
    "negative lookahead": (r"\A(?![\s\S]*ERROR)", "ok\n", {}),
    # "the last line is exactly done": the kept bytes end in the middle of the line
    "whole line": (r"^done$", "done", {}),
    # the same on stderr
    "stderr": (r"\A(?![\s\S]*ERROR)", "ok\n", {"stream": ">&2"}),
}


@pytest.mark.parametrize("case", sorted(OUTPUT))
def test_attack_searches_output_regex_past_max_output_bytes(world: World, case: str) -> None:
    """A sealed check whose output must match `output_regex`: the agent makes the output longer
    than `max_output_bytes`, so the kept first bytes end where it likes and what breaks the
    pattern is discarded (plan-auditor failed such a check; gitaudit searched the kept part and
    passed it: PASS, before the fix). An `output_regex` now fails the check when the output it
    would search was cut."""
    pattern, ending, extra = OUTPUT[case]
    stream = extra.get("stream", "")
    log = check("sh", "-c", f"cat build.log {stream}", output_regex=pattern, max_output_bytes=1000)
    world.repo.write("build.log", "ok\n")
    world.seal(plan(step("unit", log)))
    pad = "#" * (1000 - len(ending) - 1) + "\n"
    world.repo.write(
        "build.log", pad + ending + (", with 3 failures\n" if case == "whole line" else "ERROR\n")
    )
    world.repo.commit("a long log")
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert "max_output_bytes" in judged.reasons[0].message, judged.reasons


def test_searches_under_the_limits_still_pass(world: World) -> None:
    """Control: a file and an output within the limits are searched whole, as before."""
    world.repo.write("settings.py", b"#" * 100_000 + b"\nok = 1\n")
    world.repo.write("build.log", "ok\n")
    regex = {"type": "regex", "path": "settings.py", "pattern": r"\A(?![\s\S]*DEBUG = True)"}
    log = check("cat", "build.log", output_regex=r"\A(?![\s\S]*ERROR)", max_output_bytes=1000)
    world.seal(plan(step("unit", regex, log)))
    assert world.run().verdict == "PASS"
    assert world.gate().verdict == "PASS"
