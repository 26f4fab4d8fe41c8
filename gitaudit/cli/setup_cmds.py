"""Onboarding and plumbing: `init`, `hooks`, `push`, `doctor`."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
from importlib import metadata
from typing import Annotated, Any

import typer

from gitaudit import __version__
from gitaudit.cli.common import (
    CONTEXT,
    JsonOpt,
    KeyOpt,
    PlanOpt,
    emit_json,
    exit_with,
    repo_here,
    say,
    signer_for,
    warn,
)
from gitaudit.cli.context import refuse_root_key_from_repository
from gitaudit.crypto.keystore import generate_key, list_local_keys
from gitaudit.errors import ExitCode, GitAuditError, HookError, UsageError
from gitaudit.executables import outside
from gitaudit.gate.judge import judge
from gitaudit.git.repo import Repo
from gitaudit.hooks.install import (
    CLIENT_HOOKS,
    SERVER_HOOKS,
    configure_fetch,
    fetch_states,
    hook_states,
    hooks_dir,
    install_hooks,
    uninstall_hooks,
)
from gitaudit.ledger import anchor
from gitaudit.ledger.plansref import PlansState, read_state
from gitaudit.ledger.refs import PLANS_REF, read_ref
from gitaudit.ledger.seals import trust_init
from gitaudit.plan.catalog import check_worktree, write_template
from gitaudit.plan.store import DEFAULT_PLAN, discover_worktree, plan_path

hooks_app = typer.Typer(
    help="Install or remove gitaudit's git hooks.", context_settings=CONTEXT, no_args_is_help=True
)


@hooks_app.command("install")
def hooks_install_cmd(
    server: Annotated[
        bool,
        typer.Option("--server", help="Install the pre-receive hook (bare server repository)."),
    ] = False,
) -> None:
    """Install the hook shims (pre-push and commit-msg; pre-receive with --server), keeping any
    existing hook as <name>.legacy and still running it."""
    repo = repo_here()
    if repo.workdir is None and not server:
        raise UsageError(
            f"{repo.gitdir} is a bare repository (a server): the client hooks (pre-push, "
            "commit-msg) never run there",
            hint="install the server's hook: `git audit hooks install --server`",
        )
    for action in install_hooks(repo, server=server):
        say(f"{action.what}: {action.done} ({action.path})")


@hooks_app.command("uninstall")
def hooks_uninstall_cmd(
    server: Annotated[
        bool,
        typer.Option(
            "--server", help="Remove the pre-receive hook too (switches a server's gate off)."
        ),
    ] = False,
) -> None:
    """Remove gitaudit's client hooks (and, with --server, pre-receive) and restore what was
    there before."""
    repo = repo_here()
    names = (*CLIENT_HOOKS, *SERVER_HOOKS) if server else CLIENT_HOOKS
    if not server and hook_states(repo)["pre-receive"] not in ("absent", "foreign"):
        if repo.workdir is None:
            raise UsageError(
                f"{repo.gitdir} is a bare repository whose pre-receive hook is gitaudit's: "
                "removing it switches the gate off for every push",
                hint="if that is what you mean: `git audit hooks uninstall --server`",
            )
        warn("pre-receive: kept (remove it with `git audit hooks uninstall --server`)")
    actions = uninstall_hooks(repo, names)
    for action in actions:
        say(f"{action.what}: {action.done}")
    if not actions:
        say("no gitaudit hooks installed")


def init_cmd(plan: PlanOpt = None, key: KeyOpt = None) -> None:
    """One-command onboarding: a plan template, a signing key, trust, fetch refspecs for
    refs/audit/*, and the client hooks. Each step is skipped when already done."""
    repo = repo_here()
    workdir = repo.require_workdir()
    refuse_root_key_from_repository(repo, key)  # before anything is written
    name = plan or DEFAULT_PLAN
    existing = [f.name for f in discover_worktree(workdir)]
    if plan_path(workdir, name).exists() or (plan is None and existing):
        say(f"plan: found {', '.join(existing)} (template skipped)")
    else:
        target = write_template(workdir, name)
        say(f"plan: created {target.relative_to(workdir)} from the template")
    try:
        signer = signer_for(repo, key)
        say(f"key: using {signer.public_key.fingerprint()} (skipped generating one)")
    except GitAuditError:
        generated = generate_key("default", forbid_inside=workdir)
        signer = signer_for(repo, generated.private_path)
        say(f"key: generated {generated.private_path} ({generated.public_key.fingerprint()})")
    if read_ref(repo.git, PLANS_REF) is None:
        principal = (signer.public_key.comment or "sealer").replace(" ", "-")
        trust_init(repo, signer, principal)
        say(f"trust: initialised refs/audit/plans; {principal} is sealer and runner")
    else:
        say("trust: refs/audit/plans exists (skipped)")
    try:
        found = anchor.find(repo)
    except anchor.AnchorError as exc:
        found, problem = None, exc.message
    else:
        problem = _anchor_state(repo)[1]
    if found is not None:
        folder = os.path.dirname(found.file)
        say(f"anchor: {found.root_key} pinned outside the repository ({folder})")
    else:
        say(f"anchor: {problem}")
    for action in configure_fetch(repo):
        say(f"refspec: {action.what}: {action.done}")
    try:
        installed = install_hooks(repo)
    except HookError as exc:  # the rest of the set-up stands; the hooks wait for a safe gitaudit
        say(f"hooks: not installed: {exc.message} ({exc.hint})")
        installed = []
    for action in installed:
        say(f"hooks: {action.what}: {action.done}")
    say("next: edit the plan, then `git audit plan seal`, `git audit run`, `git audit status`")


def push_cmd(
    remote: Annotated[
        str | None, typer.Argument(help="Remote (default: the branch's upstream, else origin).")
    ] = None,
    refspecs: Annotated[
        list[str] | None, typer.Argument(help="What to push (default: the current branch).")
    ] = None,
    evidence_only: Annotated[
        bool,
        typer.Option(
            "--evidence-only",
            help="Push refs/audit/* alone, no branch: a CI runner that recorded its part of a "
            "plan (`git audit run --label L`) before the branch can pass.",
        ),
    ] = False,
) -> None:
    """Push the branch together with refs/audit/* in one atomic push, so the server's
    pre-receive hook sees the evidence with the commits it proves (a reseal goes first)."""
    repo = repo_here()
    if evidence_only and refspecs:
        raise UsageError("--evidence-only pushes no branch; leave out the refspecs")
    if repo.git.head_is_detached and not refspecs and not evidence_only:
        raise UsageError(
            "HEAD is detached; name what to push", hint="git audit push origin HEAD:refs/heads/main"
        )
    unborn = repo.git.head_is_unborn  # a fresh clone of a server without branches
    branch = None if repo.git.head_is_detached or unborn else repo.git.head.shorthand
    if branch is None and not refspecs and not evidence_only:
        raise UsageError("HEAD names no branch yet; name what to push, or --evidence-only")
    if remote is None:
        remote = (repo.config(f"branch.{branch}.remote") if branch else None) or "origin"
    specs = [] if evidence_only else list(refspecs or [f"refs/heads/{branch}:refs/heads/{branch}"])
    from gitaudit.ledger.sync import PushResult, push

    signer = None
    with contextlib.suppress(GitAuditError):
        signer = signer_for(repo, None)

    def retrying(attempt: int, result: PushResult) -> None:
        sys.stderr.write(result.messages)
        warn(
            f"gitaudit: another push moved {', '.join(result.refused)} first; fetching, "
            f"replaying and pushing again (attempt {attempt + 1})"
        )

    say(f"+ git push --atomic {remote} {' '.join(specs)} refs/audit/*")
    result = push(repo, remote, specs, signer, on_retry=retrying)
    for action in result.actions:
        if action.action not in ("up-to-date", "local-only"):
            say(f"{action.ref}: {action.action}")
    for ref in result.refs:
        say(f"  {ref.target}: {ref.summary}")
    sys.stderr.write(result.messages)
    if result.lost_race:
        warn(f"gitaudit: still losing the race after {result.attempts} attempts; try again")
    exit_with(result.code and ExitCode.FAIL)


def _version(name: str) -> str:
    """``NAME --version`` of the program gitaudit would run (never one the repository holds)."""
    with contextlib.suppress(OSError):
        exe = outside(name, None, os.environ)
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
        return proc.stdout.strip() or proc.stderr.strip()
    return "not found"


def _found(name: str) -> str | None:
    """Where gitaudit finds program *name* (:func:`gitaudit.executables.outside`)."""
    try:
        return outside(name, None, os.environ)
    except FileNotFoundError:
        return None


def _anchor_state(repo: Repo) -> tuple[bool, str, str]:
    """Whether the repository's root of trust is anchored outside it, how, and the fix."""
    try:
        found = anchor.find(repo)
        anchor.pinned_root(repo)
    except anchor.AnchorError as exc:
        return False, exc.message, exc.hint or "git audit trust anchor"
    if found is not None:
        return True, f"{found.root_key} ({found.file})", ""
    if repo.workdir is None:
        if (repo.config("audit.rootKey") or "").strip():
            return True, "none: a server is pinned by its own audit.rootKey", ""
        return (
            False,
            "none, and no audit.rootKey: pre-receive refuses the first refs/audit/plans until "
            "the server pins its root of trust",
            "git config audit.rootKey SHA256:... (the key that created refs/audit/plans)",
        )
    return (
        False,
        "none: the root of trust is pinned only by audit.rootKey in .git/config, which anything "
        "that writes .git/ can re-pin; check the root key, then `git audit trust anchor`",
        "git audit trust anchor",
    )


def _signing_key(repo: Repo, state: PlansState | None) -> tuple[bool, str, str]:
    try:
        signer = signer_for(repo, None)
    except GitAuditError as exc:
        if repo.workdir is None:  # a server judges; it signs nothing
            return True, "none (a server repository signs nothing)", ""
        return False, exc.message, exc.hint or "git audit keys generate"
    entry = state.trust.find(signer.public_key) if state else None
    roles = sorted(entry.roles) if entry else []
    return (
        bool(roles),
        f"{signer.public_key.fingerprint()} roles: {', '.join(roles) or 'none (untrusted)'}",
        "git audit trust add <pubkey> --role runner --name NAME",
    )


def doctor_cmd(as_json: JsonOpt = False) -> None:
    """Set-up and environment: versions, keys and roles, hooks, refspecs, tools, plans, and the
    status verdict. Exits non-zero unless everything is in order and the verdict is PASS."""
    import pygit2

    repo = repo_here()
    checks: list[dict[str, Any]] = []

    def item(name: str, ok: bool, detail: str, fix: str = "") -> None:
        checks.append({"check": name, "ok": ok, "detail": detail, "fix": fix})

    item(
        "versions",
        True,
        f"gitaudit {__version__}, {_version('git')}, "
        f"pygit2 {metadata.version('pygit2')} (libgit2 {pygit2.LIBGIT2_VERSION}), "
        f"Python {platform.python_version()}",
    )
    keygen = _found("ssh-keygen")
    item(
        "ssh-keygen",
        keygen is not None,
        keygen or "not found",
        "optional: needed only for passphrase or agent keys",
    )
    try:
        state = read_state(repo)
        item(
            "plans ref",
            state.exists,
            f"{len(state.trust.keys)} trusted key(s), {len(state.active())} sealed plan(s)"
            if state.exists
            else "refs/audit/plans does not exist",
            "git audit init",
        )
    except GitAuditError as exc:
        state = None
        item("plans ref", False, exc.message, exc.hint or "")
    item("trust anchor", *_anchor_state(repo))
    item("signing key", *_signing_key(repo, state))
    item("local keys", True, ", ".join(k.name for k in list_local_keys()) or "none")
    states = hook_states(repo)
    # a bare repository is a server: its gate is pre-receive, and client hooks never run there
    wanted = SERVER_HOOKS if repo.workdir is None else CLIENT_HOOKS
    item(
        "hooks",
        all(states[h] == "current" for h in wanted),
        f"{hooks_dir(repo)}: "
        + ", ".join(f"{k} {v}" for k, v in states.items() if k in wanted or v != "absent"),
        "git audit hooks install" + (" --server" if repo.workdir is None else ""),
    )
    fetching = fetch_states(repo)
    missing = [f"{r} ({state})" for r, state in fetching.items() if state != "current"]
    item(
        "refspecs",
        not missing,
        "remotes without the audit fetch refspec: " + ", ".join(missing)
        if missing
        else (f"{len(fetching)} remote(s) fetch refs/audit/*" if fetching else "no remotes"),
        "git audit sync (sets the refspec of every remote, also one added after init)",
    )
    if repo.workdir is not None:
        try:
            for c in check_worktree(repo.workdir):
                tools = [p.message for p in c.report.environment]
                item(
                    f"plan {c.name}",
                    c.report.valid and not tools,
                    "valid" + (f"; {'; '.join(tools)}" if tools else "")
                    if c.report.valid
                    else f"{len(c.report.errors)} problem(s)",
                    f"git audit plan validate --plan {c.name}",
                )
                seal = state.seal(c.name) if state else None
                item(
                    f"seal {c.name}",
                    bool(seal and seal.contract_digest == c.digest),
                    f"v{seal.version}" if seal else "not sealed",
                    f"git audit plan seal --plan {c.name}",
                )
        except GitAuditError as exc:
            item("plans", False, exc.message, exc.hint or "")
    result = judge(repo) if repo.workdir is not None else None
    if result is not None:
        item("status", result.verdict == "PASS", result.verdict, "git audit status")
    ok = all(row["ok"] for row in checks)
    if as_json:
        emit_json({"ok": ok, "checks": checks, "status": result.to_json() if result else None})
    else:
        for row in checks:
            say(f"{'ok ' if row['ok'] else 'BAD'} {row['check']}: {row['detail']}")
            if not row["ok"] and row["fix"]:
                say(f"      fix: {row['fix']}")
    exit_with(
        ExitCode.OK
        if ok
        else (result.exit_code if result and result.verdict != "PASS" else ExitCode.FAIL)
    )
