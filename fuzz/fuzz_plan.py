"""Fuzz harness: the plan parser (``validate_bytes`` and the contract digest after it).

Input: a plan file's bytes, checked the way ``plan validate``, ``plan seal`` and the gate do
(``catalog.check_file``: JSON, schema, model, semantic rules, then the RFC 8785 contract digest of a
valid plan). Inputs starting with a NUL byte are *structured*: the rest drives a replacement of one
value, at any depth, of a fixture plan (numbers near the limits, unicode, deep nesting ...), which
reaches the deeper layers far sooner than byte mutations of the JSON text.

Expected: nothing, or a GitAuditError. Anything else is a crash.

Run: ``fuzz/run.py plan SECONDS`` (or ``python fuzz/fuzz_plan.py CORPUS_DIR -max_total_time=60``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _driver import guarded, hermetic, main

try:
    import atheris
except ImportError:
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["gitaudit"]):
        from gitaudit.errors import GitAuditError
        from gitaudit.plan.catalog import check_file
        from gitaudit.plan.store import PlanFile
else:
    from gitaudit.errors import GitAuditError
    from gitaudit.plan.catalog import check_file
    from gitaudit.plan.store import PlanFile

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
BASES = [
    json.loads(p.read_text())
    for p in sorted([*FIXTURES.glob("plans/*.json"), *FIXTURES.glob("compat/*.json")])
]
INTS = [0, 1, -1, 2**31, 2**53 - 1, 2**53, 2**53 + 1, 2**63, 2**64, 10**30]
STRINGS = ["", "\x00", "\ud800", "²", "é", "../x", "/abs", "a\n", "(?P<", "7d", "9" * 4400 + "d"]
WORDS = ["id", "depends_on", "verify", "type", "run", "argv", "inputs", "valid_for", "any_of"]
RAW = ["1e400", "[" * 3000 + "]" * 3000, '{"a": 1, "a": 2}', "1" + "0" * 400]


class Bytes:
    """A tiny FuzzedDataProvider (atheris' own is not there in fallback mode)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def below(self, n: int) -> int:
        return (self.byte() << 8 | self.byte()) % n if n > 0 else 0

    def text(self) -> str:
        """Up to 23 bytes as UTF-16 (lone surrogates included) or Latin-1 text."""
        size = self.byte() % 24
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        if len(chunk) % 2 == 0:
            return chunk.decode("utf-16-le", "surrogatepass")
        return chunk.decode("latin-1")


def value(src: Bytes, depth: int = 0) -> Any:  # noqa: PLR0911 (one table: the value kinds)
    kind = src.below(12)
    if kind == 0:
        return INTS[src.below(len(INTS))]
    if kind == 1:
        return src.below(2**16) - 2**15
    if kind == 2:
        return [0.5, -0.0, 1e308, 5e-324, 1.0][src.below(5)]
    if kind == 3:
        return STRINGS[src.below(len(STRINGS))]
    if kind == 4:
        return src.text()
    if kind == 5:
        return WORDS[src.below(len(WORDS))]
    if kind == 6 and depth < 3:
        return [value(src, depth + 1) for _ in range(src.below(4))]
    if kind == 7 and depth < 3:
        return {WORDS[src.below(len(WORDS))]: value(src, depth + 1) for _ in range(src.below(4))}
    if kind == 8:
        return f"\x00raw{src.below(len(RAW))}\x00"
    if kind == 9:
        return None
    return bool(src.below(2))


def structured(data: bytes) -> bytes:
    """Replace one value of a fixture plan at a path chosen by *data*; serialise it."""
    src = Bytes(data)
    doc = json.loads(json.dumps(BASES[src.below(len(BASES))]))
    for _ in range(1 + src.below(3)):
        parent: Any = None
        key: Any = None
        node = doc
        while isinstance(node, (dict, list)) and node and src.below(4):
            key = (
                sorted(node)[src.below(len(node))]
                if isinstance(node, dict)
                else src.below(len(node))
            )
            parent, node = node, node[key]
        if parent is None:
            doc = value(src)
        elif isinstance(parent, dict) and src.below(5) == 0:
            del parent[key]
        else:
            parent[key] = value(src)
    text = json.dumps(doc, ensure_ascii=bool(src.below(2)))
    for i, fragment in enumerate(RAW):
        text = text.replace(json.dumps(f"\x00raw{i}\x00"), fragment)
    return text.encode("utf-8", "surrogatepass")


def check(data: bytes) -> str:
    if data[:1] == b"\x00":
        data = structured(data[1:])

    def run() -> str:
        checked = check_file(PlanFile("fuzz", "fuzz.json", data), environment=False)
        if checked.digest is not None:
            return "valid"
        return checked.report.errors[0].code if checked.report.errors else "no-plan"

    return guarded(run, GitAuditError)


if __name__ == "__main__":
    hermetic()
    main(check, instrumented=atheris is not None)
