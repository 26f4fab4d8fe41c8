"""`git audit keys ...`: generate and list signing keys."""

from __future__ import annotations

import contextlib
from typing import Annotated

import typer

from gitaudit.cli.common import CONTEXT, JsonOpt, emit_json, say
from gitaudit.crypto.keystore import generate_key, keys_dir, list_local_keys
from gitaudit.errors import GitAuditError
from gitaudit.git.repo import open_repo
from gitaudit.ledger.plansref import read_state
from gitaudit.places import gitaudit_home

app = typer.Typer(
    help="Generate and list Ed25519 signing keys.", context_settings=CONTEXT, no_args_is_help=True
)


@app.command("generate")
def generate_cmd(
    name: Annotated[
        str, typer.Option("--name", "-n", help="Key name (file name under the key directory).")
    ] = "default",
) -> None:
    """Create an Ed25519 key under $GITAUDIT_HOME/keys (mode 0600; never inside a work tree).

    Prints the public key in OpenSSH format and its fingerprint as `ssh-keygen -lf` shows it.
    """
    workdir = None
    with contextlib.suppress(GitAuditError):  # generating a key outside a repository is fine
        workdir = open_repo().workdir
    generated = generate_key(name, forbid_inside=workdir)
    say(generated.public_key.openssh())
    say(f"256 {generated.public_key.fingerprint()} {generated.public_key.comment} (ED25519)")
    say(f"private key: {generated.private_path}")


@app.command("list")
def list_cmd(as_json: JsonOpt = False) -> None:
    """Keys on this machine, and keys this repository trusts with their roles."""
    local = list_local_keys()
    trusted: list[dict[str, object]] = []
    try:
        state = read_state(open_repo())
        trusted = [
            {
                "name": k.name,
                "roles": sorted(k.roles),
                "fingerprint": k.key.fingerprint(),
                "key": k.key.openssh(),
            }
            for k in state.trust.keys
        ]
    except GitAuditError:
        state = None
    local_fps = {k.fingerprint for k in local}
    if as_json:
        emit_json(
            {
                "key_directory": str(keys_dir()),
                "local": [
                    {
                        "name": k.name,
                        "path": str(k.private_path),
                        "fingerprint": k.fingerprint,
                        "key": k.public_key.openssh(),
                    }
                    for k in local
                ],
                "trusted": trusted,
            }
        )
        return
    say(f"keys on this machine ({keys_dir(gitaudit_home())}):")
    for k in local:
        say(f"  {k.name:<16} {k.fingerprint}  {k.private_path}")
    if not local:
        say("  none (create one with `git audit keys generate`)")
    if state is None:
        return
    say("keys this repository trusts (refs/audit/plans):")
    for t in trusted:
        mine = "  (this machine)" if t["fingerprint"] in local_fps else ""
        say(f"  {t['name']:<16} {','.join(t['roles']):<14} {t['fingerprint']}{mine}")  # type: ignore[arg-type]
    if not trusted:
        say("  none (run `git audit trust init`)")
