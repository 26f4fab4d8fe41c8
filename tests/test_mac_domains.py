"""Domain separation between the MACs under the local key (:mod:`gitaudit.secret`).

One key authenticates every cache gitaudit keeps where the agent can write (the verified marks,
the tallies, the verdict memo, the remembered stop, the confirmations, the schema marks, the
kept indexes' tags, the checkouts' state). A MAC made in one context must never hold in
another: each context's payload is recognisable from its bytes alone, either by a tag that
ends at the first NUL (and the fields after it cannot hold a NUL) or as one JSON object whose
serialisation and keys are its own. The checkout's state is verified for whatever keys its file
holds, so it alone uses ``json.dumps``'s default separators; every other JSON payload is compact.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from gitaudit import secret
from gitaudit.agent import stop
from gitaudit.gate import memo
from gitaudit.git import index_files
from gitaudit.ledger import lookup, tallies, watermark
from gitaudit.plan import known_valid
from gitaudit.run import checkout

KEY = bytes(range(32))
TIP = "a" * 40

# every module that makes a MAC under the local key: a new one must add its context below
MAKERS = {
    "gitaudit/agent/stop.py",
    "gitaudit/gate/memo.py",
    "gitaudit/git/index_files.py",
    "gitaudit/ledger/lookup.py",
    "gitaudit/ledger/tallies.py",
    "gitaudit/ledger/watermark.py",
    "gitaudit/plan/known_valid.py",
    "gitaudit/run/checkout.py",
}


def _payloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    made: list[bytes] = []
    mac = secret.mac

    def capture(key: bytes, payload: bytes) -> str:
        made.append(payload)
        return mac(key, payload)

    monkeypatch.setattr(secret, "mac", capture)
    out: dict[str, bytes] = {}

    def one(name: str) -> None:
        assert len(made) == 1, (name, made)
        out[name] = made.pop()

    out["watermark"] = watermark._payload(tmp_path, "refs/audit/plans", TIP)
    tallies.mac(KEY, "default", TIP, tallies.Tallies().dump())
    one("tallies")
    known_valid._mark(KEY, b'{"version": 1}')
    one("valid-plan")
    warm = tmp_path / "warm-0.index"
    warm.write_bytes(b"DIRC" + bytes(40))
    fd = os.open(warm, os.O_RDONLY)
    try:
        out["kept-index"] = index_files._statement(warm.name, fd, os.fstat(fd), "1:2:3", TIP)
    finally:
        os.close(fd)
    out["confirmed"] = lookup._statement("default", TIP, "c" * 64, TIP, TIP)
    entry = memo.Entry(
        state="d" * 64,
        tree=TIP,
        made=1.0,
        until=None,
        tools=(),
        protect=(),
        commit_msg="off",
        runs=(),
    )
    memo._mac(KEY, entry)
    one("memo")
    block = {"format": stop.FORMAT, "state": "d" * 64, "tree": TIP, "made": 1.0, "reason": "x"}
    out["stop"] = stop._payload(block)
    monkeypatch.setattr(secret, "local_key", lambda workdir, create: KEY)
    checkout._write_meta(checkout.Slot(tmp_path / "slot"), tmp_path, {"tree": TIP})
    one("checkout-meta")
    return out


def _domain(payload: bytes) -> tuple[object, ...]:
    if not payload.startswith(b"{"):
        tag = payload.split(b"\0", 1)[0]
        assert tag.startswith(b"gitaudit") and b"\0" in payload, payload
        return ("tagged", tag)
    doc = json.loads(payload)
    assert isinstance(doc, dict) and doc, payload
    if json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() == payload:
        return ("compact", frozenset(doc))
    assert json.dumps(doc, sort_keys=True).encode() == payload, payload
    return ("default",)  # any keys: the checkout's state is verified for whatever its file holds


def test_every_mac_context_has_a_payload_no_other_context_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payloads = _payloads(tmp_path, monkeypatch)
    domains = {name: _domain(p) for name, p in payloads.items()}
    assert len(set(domains.values())) == len(domains), domains
    assert domains["checkout-meta"] == ("default",)


def test_every_mac_under_the_local_key_is_made_by_a_context_listed_here() -> None:
    root = Path(__file__).resolve().parents[1]
    found: set[str] = set()
    for path in (root / "gitaudit").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        relative = path.relative_to(root).as_posix()
        if relative != "gitaudit/secret.py":
            assert "hmac.new(" not in text, f"{relative}: MAC with secret.mac, in a context here"
        if re.search(r"\bsecret\.mac\(", text):
            found.add(relative)
    assert found == MAKERS
