"""The published plan documentation cannot drift from the code.

* ``docs/plan.schema.json`` is a byte-identical copy of the schema shipped in the package.
* Every full-plan example in ``docs/plan-format.md`` is validated for real: a ```json block
  preceded by ``<!-- example: valid-plan -->`` must have no errors, and one preceded by
  ``<!-- example: invalid-plan CODE -->`` must have exactly one error, with that code.
* Every problem code the validation layers can emit appears in the reference.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gitaudit.plan.validate import validate_bytes

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "plan-format.md"
PUBLISHED_SCHEMA = ROOT / "docs" / "plan.schema.json"
PACKAGE_SCHEMA = ROOT / "gitaudit" / "plan" / "schema.json"

_MARKER = re.compile(r"<!--\s*example:\s*(valid-plan|invalid-plan)\s*([a-z-]+\.[a-z-]+)?\s*-->")
_BLOCK = re.compile(r"\s*```json\n(.*?)\n```", re.DOTALL)


def _examples() -> list[tuple[str, str | None, str, int]]:
    """(kind, code, json text, line) for every marked example in the reference."""
    text = DOC.read_text(encoding="utf-8")
    found = []
    for marker in _MARKER.finditer(text):
        line = text.count("\n", 0, marker.start()) + 1
        block = _BLOCK.match(text, marker.end())
        assert block, f"plan-format.md:{line}: example marker not followed by a ```json block"
        found.append((marker.group(1), marker.group(2), block.group(1), line))
    return found


EXAMPLES = _examples()


def test_published_schema_is_the_shipped_schema() -> None:
    assert PUBLISHED_SCHEMA.read_bytes() == PACKAGE_SCHEMA.read_bytes(), (
        "docs/plan.schema.json differs from gitaudit/plan/schema.json: "
        "cp gitaudit/plan/schema.json docs/plan.schema.json"
    )


def test_the_reference_has_valid_and_invalid_examples() -> None:
    kinds = [kind for kind, _, _, _ in EXAMPLES]
    assert kinds.count("valid-plan") >= 1
    assert kinds.count("invalid-plan") >= 2
    assert all(code for kind, code, _, _ in EXAMPLES if kind == "invalid-plan")


@pytest.mark.parametrize(
    ("kind", "code", "text"),
    [(k, c, t) for k, c, t, _ in EXAMPLES],
    ids=[f"line{line}-{kind}{'-' + code if code else ''}" for kind, code, _, line in EXAMPLES],
)
def test_documented_example(kind: str, code: str | None, text: str) -> None:
    model, report = validate_bytes(text.encode("utf-8"), name="example", source="plan-format.md")
    errors = [(p.code, p.path, p.message) for p in report.errors]
    if kind == "valid-plan":
        assert model is not None
        assert report.valid, errors
    else:
        assert [c for c, _, _ in errors] == [code], errors


def _emitted_codes() -> set[str]:
    """Problem codes written as literals in the validation layers (file names excluded)."""
    prefixes = (
        "json|schema|step|requirement|requirements|dep|graph|outputs|output|covers|check|path"
        "|regex|duration|env"
    )
    literal = re.compile(rf'"((?:{prefixes})\.[a-z][a-z-]*)"')
    codes: set[str] = set()
    for name in ("load.py", "validate.py"):
        source = (ROOT / "gitaudit" / "plan" / name).read_text(encoding="utf-8")
        codes |= {c for c in literal.findall(source) if not c.endswith(".json")}
    return codes


def test_every_problem_code_is_documented() -> None:
    codes = _emitted_codes()
    assert len(codes) > 25  # the regex still finds them
    text = DOC.read_text(encoding="utf-8")
    missing = sorted(c for c in codes if f"`{c}`" not in text)
    assert not missing, f"document these codes in docs/plan-format.md: {missing}"
