"""`git audit trust ...`: the trust set and gate policy on refs/audit/plans."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from gitaudit.cli.common import CONTEXT, KeyOpt, repo_here, say, signer_for
from gitaudit.cli.context import root_signer_for
from gitaudit.crypto.allowed_signers import PRINCIPAL_HINT, principal_problem
from gitaudit.crypto.keystore import read_key_file
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import KeyMaterialError, TrustError, UsageError
from gitaudit.ledger import anchor
from gitaudit.ledger.plansref import read_state, root_of_trust
from gitaudit.ledger.seals import set_policy, trust_add, trust_init, trust_remove
from gitaudit.ledger.trust import (
    AGENTS_MODES,
    APPROVAL_KINDS,
    COMMIT_MSG_MODES,
    LIVE_EVIDENCE,
    POLICY_PATH,
    ROLES,
    EvidenceRule,
    Policy,
)

app = typer.Typer(
    help="Manage who may seal plans and record evidence.",
    context_settings=CONTEXT,
    no_args_is_help=True,
)

NameOpt = Annotated[str | None, typer.Option("--name", "-n", help="Principal name for the key.")]


@app.command("init")
def init_cmd(
    key: KeyOpt = None,
    name: NameOpt = None,
    no_runner: Annotated[
        bool,
        typer.Option(
            "--no-runner", help="The key seals only; evidence needs a separate runner key."
        ),
    ] = False,
) -> None:
    """Create refs/audit/plans, signed by the first sealer key, and pin that key locally."""
    repo = repo_here()
    signer = root_signer_for(repo, key)
    principal = _principal(name) if name else signer.public_key.comment or "sealer"
    commit = trust_init(repo, signer, principal.replace(" ", "-"), runner=not no_runner)
    roles = "sealer" if no_runner else "sealer and runner"
    say(f"initialised refs/audit/plans at {str(commit)[:12]}: {principal} is {roles}")
    say(f"pinned audit.rootKey = {signer.public_key.fingerprint()}")
    say(f"trust anchor: {anchor.files(repo)[0]}")


@app.command("anchor")
def anchor_cmd(
    expect: Annotated[
        str | None,
        typer.Option(
            "--expect", help="The root key you were told to expect (SHA256:...); refuse another."
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Pin without asking (after checking the key).")
    ] = False,
) -> None:
    """Pin the verified root of trust of refs/audit/plans in this repository's trust anchor,
    outside the repository ($GITAUDIT_HOME/anchors), and in audit.rootKey."""
    repo = repo_here()
    root, key, principal = root_of_trust(repo)
    fingerprint = key.fingerprint()
    say(f"refs/audit/plans: root {str(root)[:12]} is signed by {principal} ({fingerprint})")
    if expect is not None and not anchor.same_key(expect, fingerprint):
        raise TrustError(
            f"the root of trust is signed by {fingerprint}, not by {expect.strip()}",
            hint="fetch the genuine refs/audit/plans; nothing was pinned",
        )
    try:
        current = anchor.find(repo)
    except anchor.AnchorError as exc:
        current = None
        say(f"the current anchor cannot be used: {exc.message}")
    pinned = anchor.same_key(repo.config("audit.rootKey") or "", fingerprint)
    if current is not None and current.root_key == fingerprint and pinned:
        say(f"already anchored to {fingerprint} ({current.file})")
        return
    if current is not None and current.root_key != fingerprint:
        say(f"this replaces the anchor {current.root_key}")
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(
                "pinning a root of trust needs a confirmation",
                hint="run it in a terminal, or pass --yes once you have checked the key",
            )
        if not typer.confirm(f"Pin {fingerprint} as the root of trust of this repository?"):
            raise typer.Exit(1)
    written = anchor.write(repo, fingerprint)
    repo.git.config["audit.rootKey"] = fingerprint
    say(f"anchored {written.repository} to {fingerprint} in {written.file}")
    say(f"pinned audit.rootKey = {fingerprint}")


@app.command("add")
def add_cmd(
    pubkey: Annotated[
        str, typer.Argument(help="An OpenSSH public key line, or a path to a .pub file.")
    ],
    role: Annotated[
        str,
        typer.Option(
            "--role",
            "-r",
            help="sealer, runner, reconciler (may settle an unknown outcome by its word; "
            "sealers may too) or planner (may seal plan changes that answer the sealed "
            "request and weaken nothing: an agent's own key).",
        ),
    ],
    name: Annotated[str, typer.Option("--name", "-n", help="Principal name for the key.")],
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label",
            "-l",
            help="A label the principal carries (repeatable), e.g. linux or ci: steps with "
            "`runs_on` and the policy's per-ref evidence rules name runners by label.",
        ),
    ] = None,
    key: KeyOpt = None,
) -> None:
    """Trust a public key in a role (a plans-ref commit signed by a current sealer)."""
    if role not in ROLES:
        raise UsageError(
            f"unknown role {role!r}",
            hint="use --role sealer, --role runner, --role reconciler or --role planner",
        )
    _principal(name)
    public = _public_key_arg(pubkey)
    repo = repo_here()
    labels = frozenset(_label(v) for v in label or ())
    commit = trust_add(repo, signer_for(repo, key), public, role, name, labels)
    if commit is None:
        say(f"{name} is already trusted as {role}; nothing to do")
    else:
        labelled = f" labelled {', '.join(sorted(labels))}" if labels else ""
        say(f"trusted {name} as {role}{labelled} ({public.fingerprint()}) in {str(commit)[:12]}")


def _public_key_arg(value: str) -> PublicKey:
    """The key `trust add` names: an OpenSSH public key line, or the ``.pub`` file holding one."""
    path = Path(value)
    if not path.is_file():
        if os.path.lexists(path):  # a folder, a FIFO, a link to nothing
            what = (
                "a folder"
                if path.is_dir()
                else "a link to nothing"
                if not path.exists()
                else ("not a regular file")
            )
            raise KeyMaterialError(
                f"{value}: not an OpenSSH Ed25519 public key ({what})",
                hint="pass the key's .pub file or its `ssh-ed25519 AAAA...` line",
            )
        try:
            return PublicKey.from_openssh(value)
        except KeyMaterialError as exc:
            raise KeyMaterialError(
                exc.message,
                hint=exc.hint or "pass the key's .pub file or its `ssh-ed25519 AAAA...` line",
            ) from None
    data = read_key_file(Path(value))
    try:
        return PublicKey.from_openssh(data.decode("utf-8"))
    except (KeyMaterialError, UnicodeDecodeError) as exc:
        why = exc.message if isinstance(exc, KeyMaterialError) else "not UTF-8 text"
        raise KeyMaterialError(
            f"{value}: not an OpenSSH Ed25519 public key ({why})",
            hint="pass the key's .pub file or its `ssh-ed25519 AAAA...` line",
        ) from None


def _principal(name: str) -> str:
    problem = principal_problem(name)
    if problem:
        raise UsageError(f"invalid principal name {name!r}: {problem}", hint=PRINCIPAL_HINT)
    return name


def _label(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", value):
        raise UsageError(
            f"--label {value!r} is not a label",
            hint="use letters, digits, '.', '_' and '-' (e.g. linux, macos-14, ci)",
        )
    return value


@app.command("remove")
def remove_cmd(
    name: Annotated[str, typer.Argument(help="The principal to remove.")], key: KeyOpt = None
) -> None:
    """Stop trusting a key (refused for the last sealer)."""
    repo = repo_here()
    commit = trust_remove(repo, signer_for(repo, key), name)
    say(f"removed {name} in {str(commit)[:12]}")


@app.command("export")
def export_cmd(
    file: Annotated[Path | None, typer.Argument(help="Write here instead of stdout.")] = None,
) -> None:
    """Write an allowed-signers file for plain git (gpg.ssh.allowedSignersFile)."""
    state = read_state(repo_here())
    if not state.exists:
        raise UsageError("refs/audit/plans does not exist", hint="run `git audit trust init` first")
    text = state.trust.allowed_signers()
    if file is None:
        typer.echo(text, nl=False)
    else:
        file.write_text(text)
        say(f"wrote {len(state.trust.keys)} key(s) to {file}")
        say(
            "verify with: git -c gpg.format=ssh "
            f"-c gpg.ssh.allowedSignersFile={file} verify-commit <id>"
        )


@app.command("policy")
def policy_cmd(
    protect: Annotated[
        list[str] | None,
        typer.Option("--protect", help="Protected ref pattern (repeatable; replaces the list)."),
    ] = None,
    weaken: Annotated[str | None, typer.Option("--weakening", help="allowed or forbidden.")] = None,
    commit_msg: Annotated[
        str | None,
        typer.Option(
            "--commit-msg",
            help="commit-msg mode: off, claims or strict (git config may only raise it).",
        ),
    ] = None,
    live_evidence: Annotated[
        str | None,
        typer.Option(
            "--live-evidence",
            help="allow or refuse evidence of checks that ran in the live work tree.",
        ),
    ] = None,
    max_artifact_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-artifact-bytes", help="The largest artifact a run stores, in bytes.", min=0
        ),
    ] = None,
    agents: Annotated[
        str | None,
        typer.Option(
            "--agents",
            help="How agents' claims coexist: parallel-warn, parallel-strict or serial "
            "(see docs/agents.md).",
        ),
    ] = None,
    evidence: Annotated[
        list[str] | None,
        typer.Option(
            "--evidence",
            help="Whose evidence proves a tree for a ref: REF_PATTERN=RUNNER[,RUNNER...][:MIN] "
            "(runner names or labels; MIN distinct runners, default 1). Repeatable; replaces "
            "the rules; 'none' removes them.",
        ),
    ] = None,
    approvals: Annotated[
        list[str] | None,
        typer.Option(
            "--approvals",
            help="How many distinct sealers must approve a kind of change: KIND=K, KIND one of "
            f"{', '.join(APPROVAL_KINDS)} (1: the signer alone). Repeatable; kinds not given keep "
            "their number. Lowering one is a weakening that needs that many approvals.",
        ),
    ] = None,
    allow_weaken: Annotated[
        bool, typer.Option("--allow-weaken", help="Accept a laxer policy (recorded).")
    ] = False,
    reason: Annotated[str | None, typer.Option("--reason", help="Why the policy changes.")] = None,
    key: KeyOpt = None,
) -> None:
    """Show the gate policy, or change it (a signed change; a laxer policy counts as weakening)."""
    repo = repo_here()
    state = read_state(repo)
    current = state.policy
    given = (protect, weaken, commit_msg, live_evidence, max_artifact_bytes, agents, evidence)
    if given == (None,) * 7 and approvals is None:
        for k, v in current.to_json().items():
            say(f"{k}: {v}")
        return
    if weaken not in (None, "allowed", "forbidden"):
        raise UsageError("--weakening takes allowed or forbidden")
    if commit_msg is not None and commit_msg not in COMMIT_MSG_MODES:
        raise UsageError(f"--commit-msg takes one of {', '.join(COMMIT_MSG_MODES)}")
    if live_evidence not in (None, *LIVE_EVIDENCE):
        raise UsageError(f"--live-evidence takes one of {', '.join(LIVE_EVIDENCE)}")
    if agents not in (None, *AGENTS_MODES):
        raise UsageError(f"--agents takes one of {', '.join(AGENTS_MODES)}")
    policy = Policy(
        protected_refs=tuple(protect) if protect else current.protected_refs,
        allow_weaken=current.allow_weaken if weaken is None else weaken == "allowed",
        commit_msg=commit_msg or current.commit_msg,
        live_evidence=live_evidence or current.live_evidence,
        max_artifact_bytes=current.max_artifact_bytes
        if max_artifact_bytes is None
        else max_artifact_bytes,
        agents=agents or current.agents,
        evidence=current.evidence if evidence is None else _evidence_rules(evidence),
        approvals=_approvals(current.approvals, approvals or []),
    )
    try:  # what every reader will check of it, before anything is signed
        Policy.from_json(policy.to_json(), "the new policy")
    except TrustError as exc:
        raise UsageError(exc.message.replace(f": {POLICY_PATH} is invalid:", ":")) from None
    commit, laxer = set_policy(
        repo, signer_for(repo, key), policy, allow_weaken=allow_weaken, reason=reason
    )
    if commit is None:
        say("policy unchanged; nothing to do")
    else:
        say(
            f"policy updated in {str(commit)[:12]}"
            + (f" (weakened: {'; '.join(laxer)})" if laxer else "")
        )


def _evidence_rules(specs: list[str]) -> tuple[EvidenceRule, ...]:
    """``REF_PATTERN=RUNNER[,RUNNER...][:MIN]`` specs (or ``none``) as evidence rules."""
    if specs == ["none"]:
        return ()
    rules: dict[str, EvidenceRule] = {}
    for spec in specs:
        pattern, eq, rest = spec.partition("=")
        who, _, least = rest.partition(":")
        runners = tuple(sorted({r.strip() for r in who.split(",") if r.strip()}))
        if not eq or not pattern.startswith("refs/") or not runners:
            raise UsageError(
                f"--evidence {spec!r}: expected REF_PATTERN=RUNNER[,RUNNER...][:MIN]",
                hint="e.g. --evidence refs/heads/main=ci, "
                "or --evidence 'refs/heads/release/*=ci,mac:2'",
            )
        if least and not (least.isascii() and least.isdigit() and int(least) >= 1):
            raise UsageError(f"--evidence {spec!r}: MIN must be a whole number, 1 or more")
        if pattern in rules:
            raise UsageError(f"--evidence: {pattern} is given twice")
        rules[pattern] = EvidenceRule(pattern, runners, int(least) if least else 1)
    return tuple(rules[p] for p in sorted(rules))


def _approvals(
    current: tuple[tuple[str, int], ...], specs: list[str]
) -> tuple[tuple[str, int], ...]:
    """``KIND=K`` specs applied to the current approvals (K = 1 drops the kind: the default)."""
    wanted = dict(current)
    for spec in specs:
        kind, eq, least = spec.partition("=")
        whole = least.isascii() and least.isdigit() and int(least) >= 1
        if not eq or kind not in APPROVAL_KINDS or not whole:
            raise UsageError(
                f"--approvals {spec!r}: expected KIND=K, KIND one of {', '.join(APPROVAL_KINDS)}",
                hint="e.g. --approvals weaken=2 --approvals trust=2",
            )
        wanted[kind] = int(least)
    return tuple(sorted((k, n) for k, n in wanted.items() if n > 1))
