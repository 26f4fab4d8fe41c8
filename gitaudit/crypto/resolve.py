"""Which key signs: ``--key``, ``$GITAUDIT_SIGNING_KEY``, git config, then gitaudit's own keys."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pygit2

from gitaudit.crypto.keystore import (
    GENERATE_HINT,
    expand_user,
    keys_dir,
    list_local_keys,
    load_signer,
)
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Signer, SshKeygenSigner
from gitaudit.errors import KeyMaterialError

ENV_SIGNING_KEY = "GITAUDIT_SIGNING_KEY"


class ConfigLike(Protocol):
    """What :func:`resolve_signer` needs from a config: ``config[name]`` raising KeyError."""

    def __getitem__(self, name: str, /) -> str | None: ...


ConfigLookup = Callable[[str], str | None]


def config_lookup(config: ConfigLike | ConfigLookup | pygit2.Config | None) -> ConfigLookup:
    """Normalise a pygit2.Config, a mapping or a ``get(name) -> str | None`` callable."""
    if config is None:
        return lambda _name: None
    if callable(config):
        return config

    def get(name: str) -> str | None:
        try:
            value = config[name]
        except KeyError:
            return None
        return value if isinstance(value, str) else None

    return get


def _load_from(source: str, path: Path, workdir: Path | None) -> Signer:
    """:func:`load_signer`, with *source* (where the path came from) prefixed to errors."""
    try:
        return load_signer(path, forbid_inside=workdir)
    except KeyMaterialError as exc:
        raise KeyMaterialError(f"{source}: {exc.message}", hint=exc.hint) from None


def _signer_from_setting(value: str, source: str, workdir: Path | None) -> Signer:
    """A signer from a key setting, read as git reads ``user.signingKey``: ``key::...`` or
    ``ssh-...`` is a literal public key (private half in ssh-agent), anything else a path
    (``~`` expanded, relative to the work tree)."""
    setting = value.strip()
    if setting.startswith(("key::", "ssh-")):
        try:
            return SshKeygenSigner.for_agent_key(PublicKey.from_openssh(setting))
        except KeyMaterialError as exc:
            raise KeyMaterialError(f"{source}: {exc.message}", hint=exc.hint) from None
    try:
        path = expand_user(setting)
    except KeyMaterialError as exc:
        raise KeyMaterialError(f"{source}: {exc.message}", hint=exc.hint) from None
    if not path.is_absolute() and workdir is not None:
        path = workdir / path
    return _load_from(source, path, workdir)


_REPOSITORY_LEVEL = int(pygit2.enums.ConfigLevel.LOCAL)  # LOCAL, WORKTREE, APP: the repository's


def chosen_in_repository(config: pygit2.Config) -> str | None:
    """The setting of the repository's own configuration (``.git/config``, a worktree's
    ``config.worktree``, what they include) by which :func:`resolve_signer` would choose the key
    when neither ``--key`` nor ``$GITAUDIT_SIGNING_KEY`` is given; None when the user's own
    configuration or gitaudit's key directory chooses it. Anything that writes ``.git/`` can
    set such a setting, naming a key it holds."""
    if os.environ.get(ENV_SIGNING_KEY, "").strip():
        return None
    get = config_lookup(config)
    name = "audit.signingKey"
    if not (get(name) or "").strip():
        name = "user.signingKey"
        if (get("gpg.format") or "").strip() != "ssh" or not (get(name) or "").strip():
            return None
    levels = [int(entry.level) for entry in config if entry.name.lower() == name.lower()]
    return name if levels and max(levels) >= _REPOSITORY_LEVEL else None


def configured_key_files(
    repo_config: ConfigLike | ConfigLookup | pygit2.Config | None, workdir: Path | None
) -> list[str]:
    """The key files the user's gitaudit commands may sign with, as :func:`resolve_signer`
    reads the settings (``$GITAUDIT_SIGNING_KEY``, ``audit.signingKey``, ``user.signingKey``
    when ``gpg.format`` is ``ssh``; not a literal public key, whose private half is in an
    agent): a run fences them like its own key (:func:`gitaudit.checks.fence.for_run`), since
    the sealer's key the configuration names may lie outside the gitaudit home (``~/.ssh``)."""
    get = config_lookup(repo_config)
    ssh = (get("gpg.format") or "").strip() == "ssh"  # else a GnuPG key id, no file
    values = (
        os.environ.get(ENV_SIGNING_KEY),
        get("audit.signingKey"),
        get("user.signingKey") if ssh else None,
    )
    found: list[str] = []
    for value in values:
        setting = (value or "").strip()
        if not setting or setting.startswith(("key::", "ssh-")):
            continue
        try:
            path = expand_user(setting)
        except KeyMaterialError:
            continue
        if not path.is_absolute() and workdir is not None:
            path = workdir / path
        found.append(os.fspath(path))
    return found


def resolve_signer(
    *,
    explicit: Path | None = None,
    repo_config: ConfigLike | ConfigLookup | pygit2.Config | None = None,
    workdir: Path | None = None,
    home: Path | None = None,
) -> Signer:
    """Find the signing key, first match wins.

    1. *explicit* (``--key``);
    2. ``$GITAUDIT_SIGNING_KEY``;
    3. git config ``audit.signingKey``;
    4. git config ``user.signingKey`` when ``gpg.format`` is ``ssh`` (a private key path, a
       ``.pub`` path or a literal ``key::ssh-ed25519 ...`` meaning agent-held; Ed25519 only);
    5. the gitaudit key directory: the key named ``default``, else its only key.

    *repo_config* is a ``pygit2.Config``, a mapping or a ``get(name)`` callable; with the last two
    the names are looked up exactly as spelt above. Private keys inside *workdir* are refused.
    """
    get = config_lookup(repo_config)
    if explicit is not None:
        return _load_from("--key", Path(explicit), workdir)  # load_signer expands ~
    env_value = os.environ.get(ENV_SIGNING_KEY, "").strip()
    if env_value:
        return _signer_from_setting(env_value, ENV_SIGNING_KEY, workdir)
    audit_value = (get("audit.signingKey") or "").strip()
    if audit_value:
        return _signer_from_setting(audit_value, "audit.signingKey", workdir)
    if (get("gpg.format") or "").strip() == "ssh":
        user_value = (get("user.signingKey") or "").strip()
        if user_value:
            return _signer_from_setting(user_value, "user.signingKey", workdir)
    local = list_local_keys(home)
    chosen = [k for k in local if k.name == "default"] or (local if len(local) == 1 else [])
    if chosen:
        return _load_from(f"gitaudit key {chosen[0].name!r}", chosen[0].private_path, workdir)
    if local:
        names = ", ".join(k.name for k in local)
        raise KeyMaterialError(
            f"no signing key chosen: {keys_dir(home)} holds several keys ({names})",
            hint="set audit.signingKey to one of them, or pass --key",
        )
    raise KeyMaterialError("no signing key found", hint=GENERATE_HINT)
