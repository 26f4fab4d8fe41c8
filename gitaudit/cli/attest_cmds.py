"""`git audit attest [REV]` and `git audit attest verify FILE`: in-toto / SLSA attestations."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Annotated

import typer

from gitaudit.cli.common import (
    ForRefOpt,
    KeyOpt,
    PlanOpt,
    exit_with,
    repo_here,
    say,
    signer_for,
    warn,
)
from gitaudit.cli.names import require_known
from gitaudit.errors import ExitCode, UsageError


def attest_cmd(
    args: Annotated[
        list[str] | None,
        typer.Argument(
            help="REV (default HEAD) to attest, or `verify FILE [REV]` to check an attestation "
            "(about REV's commit and tree, when given).",
            metavar="[REV | verify FILE [REV]]",
        ),
    ] = None,
    plan: PlanOpt = None,
    for_ref: ForRefOpt = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="vsa: a signed DSSE envelope (default); statement: the unsigned in-toto "
            "Statement.",
        ),
    ] = "vsa",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file, not stdout.")
    ] = None,
    key: KeyOpt = None,
) -> None:
    """The gate's verdict on a commit as an in-toto Statement v1 with a SLSA Verification
    Summary (v1) predicate, in a DSSE envelope signed by a trusted runner key. `attest verify
    FILE [REV]` checks one offline against this repository's trust set: exit 0 when it is
    authentic and PASSED for every plan of the commit (with --plan: that plan PASSed) under the
    seals in force, its evidence not expired, about REV's commit and tree when REV is given,
    and for the ref of --for (default: the ref it was judged for) under its evidence rule, 1
    otherwise."""
    from gitaudit.cli.reading import check_for_ref

    check_for_ref(for_ref)
    words = list(args or [])
    if words[:1] == ["verify"]:
        if len(words) not in (2, 3):
            raise UsageError("usage: git audit attest verify FILE [REV] [--plan NAME] [--for REF]")
        _verify(Path(words[1]), plan, for_ref, words[2] if len(words) == 3 else None)
        return
    if len(words) > 1:
        raise UsageError("give at most one revision", hint="git audit attest [REV] [--plan NAME]")
    if fmt not in ("vsa", "statement"):
        raise typer.BadParameter("use vsa or statement", param_hint="--format")
    from gitaudit.gate import attest

    repo = repo_here()
    require_known(repo, plan)
    attestation = attest.build(repo, words[0] if words else None, plan, for_ref=for_ref)
    if fmt == "statement":
        doc = attestation.statement
    else:
        doc = attest.sign(repo, attestation, signer_for(repo, key)).to_json()
    text = json.dumps(doc, indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        result = attestation.statement["predicate"]["verificationResult"]
        warn(f"attested {attestation.commit[:12]}: {result} ({fmt}) -> {output}")


MAX_ENVELOPE_BYTES = 16 << 20  # a statement names a commit, a tree and a digest per plan


def _envelope_bytes(path: Path) -> bytes:
    """The attestation file's bytes: a regular file of at most :data:`MAX_ENVELOPE_BYTES`,
    opened without blocking (a FIFO would wait for a writer, ``/dev/zero`` never end)."""
    hint = "give the file `git audit attest --output FILE` wrote"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})", hint=hint) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which refuses a directory
        os.close(fd)
        raise UsageError(f"{path}: not an attestation file (not a regular file)", hint=hint)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_ENVELOPE_BYTES + 1)
    if len(data) > MAX_ENVELOPE_BYTES:
        raise UsageError(
            f"{path}: not an attestation file (more than {MAX_ENVELOPE_BYTES >> 20} MiB)",
            hint=hint,
        )
    return data


def _verify(path: Path, plan: str | None, for_ref: str | None, rev: str | None) -> None:
    from gitaudit.gate import attest

    text = _envelope_bytes(path)
    checked = attest.verify(repo_here(), text, str(path), for_ref, rev)
    say(
        f"authentic: signed by {checked.signer.name} ({checked.signer.key.fingerprint()}, "
        f"a trusted runner)"
    )
    judged_for = f", judged for {checked.judged_for}" if checked.judged_for else ""
    say(f"{checked.result} for commit {checked.commit} (tree {checked.tree}){judged_for}")
    predicate = checked.statement["predicate"]
    say(f"verified at {predicate.get('timeVerified')} by {predicate['verifier'].get('id')}")
    for name, digest in sorted(checked.contracts.items()):
        say(f"  plan {name}: contract {digest}")
    for note in checked.notes:
        say(f"  note: {note}")
    refusal = checked.refusal(plan)
    if refusal is not None:
        warn(f"error: {refusal}")
        exit_with(ExitCode.FAIL)
    exit_with(ExitCode.OK if plan is not None or checked.passed else ExitCode.FAIL)
