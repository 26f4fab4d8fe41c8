"""`git audit report` and `show --format junit` (gitaudit.gate.report, gitaudit.gate.junit): what
the agent wrote (check output, step titles, test names) is quoted on its line, inert as
markdown, writable as XML and never acted on as a workflow command in a GitHub job log; and a
step is shown in the gate's state, not the run's."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from markdown_it import MarkdownIt

from gitaudit.errors import SignatureError
from gitaudit.gate import junit, report
from gitaudit.ledger.records import StepEntry
from gitaudit.ledger.runs import read_run
from gitaudit.verdict import StepStatus
from tests.adversarial.conftest import World


def _rendered(markdown: str) -> list[tuple[str, str]]:
    """(type, content) of each CommonMark block and inline token of *markdown*."""
    out = []
    for token in MarkdownIt("commonmark").parse(markdown):
        out.append((token.type, token.content))
        out += [(child.type, child.content) for child in token.children or []]
    return out


@pytest.mark.parametrize(
    "text",
    [
        "a\n## PASS",
        "a\r## PASS",
        "a\u2028b\x00c",
        "**bold** _em_ `code` [link](http://x) ![img](http://x) <b>html</b> a|b ~~s~~ \\*",
    ],
)
def test_md_is_one_inert_line(text: str) -> None:
    quoted = report._md(text)
    assert "\n" not in quoted and "\r" not in quoted
    tokens = _rendered(f"- {quoted}")
    kinds = {kind for kind, _ in tokens}
    assert kinds <= {
        "bullet_list_open",
        "list_item_open",
        "paragraph_open",
        "inline",
        "text",
        "paragraph_close",
        "list_item_close",
        "bullet_list_close",
    }, tokens


@pytest.mark.parametrize("text", ["plain", "a`b", "``x``", "`edge`", "t`\n## PASS\n`"])
def test_code_span_holds_its_text(text: str) -> None:
    tokens = _rendered(f"- {report._code(text)}")
    assert [c for kind, c in tokens if kind == "code_inline"] == [report._line(text).strip()]


@pytest.mark.parametrize("text", ["plain", "```\nx", "````\n## PASS\n````", "``````````"])
def test_fence_is_closed_by_no_line_of_its_text(text: str) -> None:
    fence = report._fence(text)
    tokens = _rendered(f"{fence}\n{text}\n{fence}\n")
    assert [c for kind, c in tokens if kind == "fence"] == [text + "\n"]


def test_verbatim_shows_control_characters() -> None:
    assert report._verbatim("\x1b[2Kok\tx\x00\x7f") == "\\x1b[2Kok\tx\\x00\\x7f"


def test_github_log_stops_commands_with_a_fresh_token() -> None:
    first, second = report.github_log("::notice::x"), report.github_log("y")
    assert first[1] == "::notice::x"
    token = first[0].removeprefix("::stop-commands::")
    assert len(token) == 32 and first[2] == f"::{token}::"
    assert second[0] != first[0]


@pytest.mark.parametrize("char", ["\x00", "\x1b", "\x08", "\x0b", "\ufffe", "\ud800"])
def test_xml_text_writes_what_xml_cannot_hold_escaped(char: str) -> None:
    element = ET.Element("case", name=f"a{char}b")
    element.text = f"out{char}"
    junit._xml_safe(element)
    parsed = ET.fromstring(ET.tostring(element, encoding="utf-8"))
    shown = f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
    assert parsed.get("name") == f"a{shown}b" and parsed.text == f"out{shown}"


def test_xml_text_keeps_what_xml_holds() -> None:
    text = "tab\tline\nreturn\r é ✅ \U0001f600"
    assert junit.xml_text(text) == text


def _entry(status: StepStatus) -> StepEntry:
    return StepEntry(status, "", "", None, 0, 0.0, None, (), {}, (), None, None)


@pytest.mark.parametrize(
    ("status", "state", "shown"),
    [
        (StepStatus.PASSED, "verified", "passed"),
        (StepStatus.PASSED, "expired", "expired"),
        (StepStatus.PASSED, "pending", "pending"),
        (StepStatus.FAILED, "failed", "failed"),
        (None, "pending", "no evidence"),
    ],
)
def test_a_step_proven_by_the_run_is_shown_as_the_gate_sees_it(
    status: StepStatus | None, state: str, shown: str
) -> None:
    assert report._status(_entry(status) if status else None, state) == shown


@pytest.mark.parametrize(
    ("classname", "kept"),
    [
        ("default.run", "artifact:default.run"),
        ("default.unit", "artifact:default.unit"),
        ("default", "artifact:default"),
        ("defaults.x", "defaults.x"),
        ("tests.test_math", "tests.test_math"),
        ("", ""),
    ],
)
def test_an_artifact_case_is_kept_out_of_gitaudits_names(classname: str, kept: str) -> None:
    case = ET.Element("testcase", classname=classname, name="verdict")
    assert junit._theirs(case, "default").get("classname") == kept


def test_junit_is_written_only_for_a_run_a_trusted_runner_signed(proven: World) -> None:
    """ci's run is reported; the same run unsigned (a commit anyone can write) is refused."""
    repo = proven.handle()
    honest = proven.ref("refs/audit/runs/default")
    assert honest is not None
    junit.require_trusted(repo, read_run(repo.git, honest))
    forged = proven.forge_run(honest, signer=None, move=False)
    with pytest.raises(SignatureError, match=f"run {str(forged)[:12]} is not evidence"):
        junit.require_trusted(repo, read_run(repo.git, forged))
