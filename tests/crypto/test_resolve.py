"""resolve_signer: explicit > $GITAUDIT_SIGNING_KEY > audit.signingKey > user.signingKey (ssh)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from gitaudit.crypto.keystore import GeneratedKey, generate_key
from gitaudit.crypto.resolve import chosen_in_repository, configured_key_files, resolve_signer
from gitaudit.crypto.signers import Ed25519Signer, SshKeygenSigner
from gitaudit.errors import KeyMaterialError
from tests.crypto import keygen, libgit2_home
from tests.gitrepo import GitRepo


@pytest.fixture(autouse=True)
def _libgit2_sees_hermetic_home(hermetic: Path) -> Iterator[None]:
    with libgit2_home(hermetic):
        yield


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, GeneratedKey]:
    return {
        name: generate_key(name, tmp_path / "keys-home") for name in ("cli", "env", "audit", "user")
    }


def _config(repo: GitRepo, **values: str) -> pygit2.Config:
    for name, value in values.items():
        repo.git("config", name.replace("_", "."), value)
    return pygit2.Repository(str(repo.path)).config


def test_precedence_with_real_git_config(
    repo: GitRepo, keys: dict[str, GeneratedKey], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(
        repo,
        audit_signingKey=str(keys["audit"].private_path),
        user_signingKey=str(keys["user"].private_path),
        gpg_format="ssh",
    )
    monkeypatch.setenv("GITAUDIT_SIGNING_KEY", str(keys["env"].private_path))

    def chosen(explicit: Path | None = None) -> str:
        signer = resolve_signer(explicit=explicit, repo_config=config, workdir=repo.path)
        return next(n for n, k in keys.items() if k.public_key == signer.public_key)

    assert chosen(keys["cli"].private_path) == "cli"
    assert chosen() == "env"
    monkeypatch.delenv("GITAUDIT_SIGNING_KEY")
    assert chosen() == "audit"
    repo.git("config", "--unset", "audit.signingKey")
    config = pygit2.Repository(str(repo.path)).config
    assert chosen() == "user"
    repo.git("config", "gpg.format", "openpgp")  # user.signingKey is then a GPG key id
    config = pygit2.Repository(str(repo.path)).config
    with pytest.raises(KeyMaterialError, match="no signing key found") as e:
        chosen()
    assert e.value.hint == "run `git audit keys generate` or set audit.signingKey"


def test_config_as_dict_or_callable(keys: dict[str, GeneratedKey]) -> None:
    values = {"user.signingKey": str(keys["user"].private_path), "gpg.format": "ssh"}
    from_dict = resolve_signer(repo_config=values, workdir=None)
    from_callable = resolve_signer(repo_config=values.get, workdir=None)
    assert from_dict.public_key == from_callable.public_key == keys["user"].public_key
    assert isinstance(from_dict, Ed25519Signer)


def test_user_signing_key_forms(tmp_path: Path, keys: dict[str, GeneratedKey]) -> None:
    user = keys["user"]
    literal = user.public_key.openssh()
    for value, key_path in (
        (str(user.public_path), user.public_path),
        (f"key::{literal}", None),
        (literal, None),
    ):
        signer = resolve_signer(repo_config={"user.signingKey": value, "gpg.format": "ssh"})
        assert isinstance(signer, SshKeygenSigner)
        assert signer.key_path == key_path
        assert signer.public_key == user.public_key


def test_user_signing_key_must_be_ed25519(tmp_path: Path) -> None:
    rsa = keygen(tmp_path / "ecdsa", key_type="ecdsa")
    config = {"user.signingKey": str(rsa), "gpg.format": "ssh"}
    with pytest.raises(KeyMaterialError, match=r"^user.signingKey: .*not an OpenSSH Ed25519"):
        resolve_signer(repo_config=config)
    literal = {"user.signingKey": "key::ssh-rsa AAAAB3NzaC1yc2E=", "gpg.format": "ssh"}
    with pytest.raises(KeyMaterialError, match=r"user\.signingKey: unsupported key type 'ssh-rsa'"):
        resolve_signer(repo_config=literal)


def test_work_tree_keys_are_refused_and_relative_paths_use_workdir(
    repo: GitRepo, tmp_path: Path
) -> None:
    inside = keygen(repo.path / "secrets" / "id")
    with pytest.raises(KeyMaterialError, match=r"audit\.signingKey: .*must never live inside"):
        resolve_signer(repo_config={"audit.signingKey": "secrets/id"}, workdir=repo.path)
    # an explicit path is no exception to the rule
    with pytest.raises(KeyMaterialError, match="inside the work tree"):
        resolve_signer(explicit=inside, workdir=repo.path)
    # nor a public key beside it (ssh-keygen signs with the private half when no agent has it)
    with pytest.raises(KeyMaterialError, match=r"secrets/id: private keys must never live inside"):
        resolve_signer(repo_config={"audit.signingKey": "secrets/id.pub"}, workdir=repo.path)
    # a public key alone (agent-held private half) may be read from anywhere; in the work tree
    # ssh-keygen takes it from the agent only (-U), whatever appears beside it later
    inside.unlink()
    signer = resolve_signer(repo_config={"audit.signingKey": "secrets/id.pub"}, workdir=repo.path)
    assert isinstance(signer, SshKeygenSigner) and signer.key_path == repo.path / "secrets/id.pub"
    assert signer.agent_only
    keygen(tmp_path / "elsewhere")
    outside = resolve_signer(repo_config={"audit.signingKey": str(tmp_path / "elsewhere.pub")})
    assert isinstance(outside, SshKeygenSigner) and not outside.agent_only


def test_a_private_key_appearing_beside_a_work_tree_public_key_never_signs(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent writes its private key beside the .pub that .git/config names, after the
    signer was chosen: ssh-keygen -U signs from the agent only, so no key in the work tree
    signs (before, ssh-keygen loaded it)."""
    keygen(repo.path / ".git" / "k")
    private = (repo.path / ".git" / "k").read_bytes()
    (repo.path / ".git" / "k").unlink()
    signer = resolve_signer(repo_config={"audit.signingKey": ".git/k.pub"}, workdir=repo.path)
    (repo.path / ".git" / "k").write_bytes(private)
    (repo.path / ".git" / "k").chmod(0o600)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with pytest.raises(KeyMaterialError, match="ssh-keygen could not sign"):
        signer.sign(b"data", "git")


def test_env_path_expands_home(hermetic: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = generate_key("mine", hermetic / "elsewhere")
    monkeypatch.setenv("GITAUDIT_SIGNING_KEY", "~/elsewhere/keys/mine")
    assert resolve_signer().public_key == made.public_key
    monkeypatch.setenv("GITAUDIT_SIGNING_KEY", "~/missing")
    with pytest.raises(KeyMaterialError, match=r"GITAUDIT_SIGNING_KEY: .*no such key file"):
        resolve_signer()


def test_falls_back_to_gitaudit_home_keys(hermetic: Path) -> None:
    first = generate_key("laptop")
    assert resolve_signer().public_key == first.public_key  # the only key
    generate_key("desktop")
    with pytest.raises(KeyMaterialError, match=r"several keys \(desktop, laptop\)") as e:
        resolve_signer()
    assert e.value.hint and "audit.signingKey" in e.value.hint
    default = generate_key("default")
    assert resolve_signer().public_key == default.public_key


def test_explicit_path_is_always_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = generate_key("ssh-looking-name", tmp_path / "h")
    monkeypatch.chdir(made.private_path.parent)
    signer = resolve_signer(explicit=Path("ssh-looking-name"))
    assert isinstance(signer, Ed25519Signer) and signer.public_key == made.public_key
    with pytest.raises(KeyMaterialError, match=r"^--key: .*no such key file"):
        resolve_signer(explicit=tmp_path / "absent")


@pytest.mark.parametrize("where", ["audit.signingKey", "GITAUDIT_SIGNING_KEY", "--key"])
@pytest.mark.parametrize("setting", ["~no-such-user-gitaudit/key", "/dev/zero", "fifo"])
def test_unusable_key_paths_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, setting: str
) -> None:
    """A home that does not exist (pathlib raised RuntimeError), a device that never ends and
    a FIFO that blocks (the read never returned): a key setting the agent may write in
    .git/config, or an environment variable, is refused in one line."""
    if setting == "fifo":
        setting = str(tmp_path / "fifo")
        os.mkfifo(setting)
    config = {"audit.signingKey": setting} if where == "audit.signingKey" else {}
    if where == "GITAUDIT_SIGNING_KEY":
        monkeypatch.setenv(where, setting)
    explicit = Path(setting) if where == "--key" else None
    with pytest.raises(KeyMaterialError, match=rf"^{where}: .*(cannot expand|not a key file)"):
        resolve_signer(explicit=explicit, repo_config=config, workdir=tmp_path / "repo")


def test_a_key_chosen_by_the_repositorys_own_configuration_is_named(
    repo: GitRepo, keys: dict[str, GeneratedKey], monkeypatch: pytest.MonkeyPatch
) -> None:
    """chosen_in_repository names the setting of the repository's configuration (its own file,
    what it includes, the worktree's) that picks the key; the user's global configuration, the
    environment and the key directory are the user's choice."""

    def named() -> str | None:
        return chosen_in_repository(pygit2.Repository(str(repo.path)).config)

    assert named() is None  # nothing set: the gitaudit key directory chooses
    repo.git("config", "--global", "audit.signingKey", str(keys["user"].private_path))
    assert named() is None
    repo.git("config", "audit.signingKey", str(keys["audit"].private_path))
    assert named() == "audit.signingKey"
    monkeypatch.setenv("GITAUDIT_SIGNING_KEY", str(keys["env"].private_path))
    assert named() is None
    monkeypatch.delenv("GITAUDIT_SIGNING_KEY")
    repo.git("config", "audit.signingKey", "")  # blank here: the next setting is read
    repo.git("config", "--global", "--unset", "audit.signingKey")
    repo.git("config", "--global", "user.signingKey", str(keys["user"].private_path))
    assert named() is None  # gpg.format is not ssh: no setting chooses
    repo.git("config", "gpg.format", "ssh")
    assert named() is None  # the user's own user.signingKey
    repo.git("config", "user.signingKey", str(keys["audit"].private_path))
    assert named() == "user.signingKey"
    repo.git("config", "--unset", "user.signingKey")
    repo.git("config", "--unset", "audit.signingKey")
    included = repo.path.parent / "included.gitconfig"
    included.write_text(f"[audit]\n\tsigningKey = {keys['audit'].private_path}\n")
    repo.git("config", "include.path", str(included))
    assert named() == "audit.signingKey"
    repo.git("config", "--unset", "include.path")
    repo.git("config", "extensions.worktreeConfig", "true")
    repo.git("config", "--worktree", "audit.signingKey", str(keys["audit"].private_path))
    assert named() == "audit.signingKey"


def test_configured_key_files_are_every_key_path_the_settings_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a run fences besides its own key: each path the settings name (``~`` expanded,
    relative to the work tree), whichever would sign; never a literal public key."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GITAUDIT_SIGNING_KEY", "~/env_key")
    config = {
        "audit.signingKey": "rel/key",
        "gpg.format": "ssh",
        "user.signingKey": "key::ssh-ed25519 AAAA",
    }
    found = configured_key_files(config, tmp_path / "work")
    assert found == [str(tmp_path / "env_key"), str(tmp_path / "work" / "rel" / "key")]
    monkeypatch.delenv("GITAUDIT_SIGNING_KEY")
    assert configured_key_files({"user.signingKey": "/k.pub"}, None) == []  # a GnuPG key id
    ssh = {"gpg.format": "ssh", "user.signingKey": "/k.pub"}
    assert configured_key_files(ssh, None) == ["/k.pub"]
