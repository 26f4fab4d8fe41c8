"""OpenSSH allowed-signers files (ssh-keygen(1) "ALLOWED SIGNERS"), Ed25519 keys only.

Each line is ``principals [options] keytype base64 [comment]``; ``#`` comments and blank lines are
ignored. gitaudit writes ``principal namespaces="git" ssh-ed25519 AAAA...`` lines, which
``git verify-commit`` (``gpg.ssh.allowedSignersFile``) and ``ssh-keygen -Y verify`` read.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.wire import KEY_TYPE
from gitaudit.errors import KeyMaterialError

AllowedSigner = tuple[str, PublicKey, dict[str, str | None]]

FLAG_OPTIONS = frozenset({"cert-authority"})
VALUE_OPTIONS = frozenset({"namespaces", "valid-after", "valid-before"})
_KEY_TYPE_PREFIXES = ("ssh-", "ecdsa-", "sk-", "rsa-")
_FORBIDDEN_IN_PRINCIPAL = frozenset('"#,')
PRINCIPAL_HINT = (
    "a principal is one name without spaces, quotes, commas or '#', e.g. an email "
    "(a comma would make it a list of principals, each with the roles of its name)"
)


def principal_problem(name: str) -> str | None:
    """Why *name* cannot be one principal of an allowed-signers line (None: it can). A comma
    makes a principal list (every reader splits it, each name taking that name's roles), white
    space ends the field, a line break (any: ``str.splitlines`` breaks at more than ``\n``) or
    another control character ends or garbles the line."""
    if not name:
        return "it is empty"
    bad = sorted({ch for ch in name if ch in _FORBIDDEN_IN_PRINCIPAL or ch.isspace()})
    bad += sorted({ch for ch in name if not ch.isprintable() and ch not in bad})
    if bad:
        return f"it holds {', '.join(repr(ch) for ch in bad)}"
    return None


def format_allowed_signers(
    entries: Iterable[tuple[str, PublicKey]], namespaces: str = "git"
) -> str:
    """One ``principal namespaces="<namespaces>" ssh-ed25519 AAAA... [comment]`` line per entry."""
    lines = []
    for principal, key in entries:
        problem = principal_problem(principal)
        if problem:
            raise KeyMaterialError(
                f"invalid allowed-signers principal {principal!r}: {problem}", hint=PRINCIPAL_HINT
            )
        if '"' in namespaces or not namespaces.strip() or any(c.isspace() for c in namespaces):
            raise KeyMaterialError(f"invalid namespaces list {namespaces!r}")
        lines.append(f'{principal} namespaces="{namespaces}" {key.openssh()}\n')
    return "".join(lines)


def _next_token(line: str, pos: int, number: int) -> tuple[str, int]:
    """The whitespace-delimited token at *pos* (double quotes may hide spaces) and the new pos."""
    while pos < len(line) and line[pos] in " \t":
        pos += 1
    start, quoted = pos, False
    while pos < len(line) and (quoted or line[pos] not in " \t"):
        if line[pos] == '"':
            quoted = not quoted
        pos += 1
    if quoted:
        raise KeyMaterialError(f"allowed signers line {number}: unterminated quote")
    return line[start:pos], pos


def _split_options(text: str, number: int) -> list[str]:
    parts, current, quoted = [], "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    if any(not part for part in parts):
        raise KeyMaterialError(f"allowed signers line {number}: empty option in {text!r}")
    return parts


def _parse_options(text: str, number: int) -> dict[str, str | None]:
    options: dict[str, str | None] = {}
    for part in _split_options(text, number):
        name, eq, value = part.partition("=")
        name = name.lower()
        if name in options:
            raise KeyMaterialError(f"allowed signers line {number}: duplicate option '{name}'")
        if name in FLAG_OPTIONS and not eq:
            options[name] = None
        elif name in VALUE_OPTIONS and eq:
            if len(value) < 2 or value[0] != '"' or value[-1] != '"' or '"' in value[1:-1]:
                raise KeyMaterialError(
                    f"allowed signers line {number}: option '{name}' needs a quoted value"
                )
            options[name] = value[1:-1]
        else:
            raise KeyMaterialError(f"allowed signers line {number}: unsupported option {part!r}")
    return options


def parse_allowed_signers(text: str) -> list[AllowedSigner]:
    """Parse an allowed-signers file into ``(principals, key, options)`` tuples.

    *principals* is the raw comma-separated pattern list (quotes removed); *options* maps
    lower-case option names to their unquoted value (``None`` for ``cert-authority``).
    Comments and blank lines are skipped; anything else malformed raises
    :class:`KeyMaterialError` naming the line.
    """
    entries: list[AllowedSigner] = []
    # lines end at "\n" only, as OpenSSH reads them (str.splitlines would also break at \x0b,
    # \x1c, \x85, \u2028...: lines ssh-keygen and git verify-commit do not see)
    for number, raw_line in enumerate(text.split("\n"), start=1):
        line = raw_line.strip(" \t\r")
        if not line or line.startswith("#"):
            continue
        principals, pos = _next_token(line, 0, number)
        if principals.startswith('"'):
            if len(principals) < 2 or not principals.endswith('"') or '"' in principals[1:-1]:
                raise KeyMaterialError(f"allowed signers line {number}: bad quoted principals")
            principals = principals[1:-1]
        elif '"' in principals:
            raise KeyMaterialError(f"allowed signers line {number}: stray quote in principals")
        if not principals:
            raise KeyMaterialError(f"allowed signers line {number}: empty principals")
        token, pos = _next_token(line, pos, number)
        options: dict[str, str | None] = {}
        if token and not token.startswith(_KEY_TYPE_PREFIXES):
            options = _parse_options(token, number)
            token, pos = _next_token(line, pos, number)
        if not token:
            raise KeyMaterialError(f"allowed signers line {number}: no public key")
        if token != KEY_TYPE:
            raise KeyMaterialError(
                f"allowed signers line {number}: key type '{token[:40]}' is not supported",
                hint=f"gitaudit trusts Ed25519 keys only ({KEY_TYPE})",
            )
        try:
            key = PublicKey.from_openssh(line[pos - len(token) :])
        except KeyMaterialError as exc:
            raise KeyMaterialError(f"allowed signers line {number}: {exc.message}") from None
        entries.append((principals, key, options))
    return entries


def _matches(patterns: str, value: str) -> bool:
    """OpenSSH pattern-list matching: ``*``/``?`` wildcards, ``!`` negation wins."""
    matched = False
    for pattern in patterns.split(","):
        negated = pattern.startswith("!")
        if fnmatch.fnmatchcase(value, pattern.removeprefix("!")):
            if negated:
                return False
            matched = True
    return matched


def signs_for(options: dict[str, str | None], namespace: str = "git") -> bool:
    """Whether a line with *options* lets its key sign in *namespace* itself.

    Conservative: ``cert-authority`` lines (CA keys, not signers) and lines with
    ``valid-after``/``valid-before`` (gitaudit does not evaluate validity windows) never do.
    """
    if "cert-authority" in options or "valid-after" in options or "valid-before" in options:
        return False
    allowed = options.get("namespaces")
    return allowed is None or _matches(allowed, namespace)


def keys_for_namespace(entries: Iterable[AllowedSigner], namespace: str = "git") -> list[PublicKey]:
    """The keys allowed to sign in *namespace* (the lines :func:`signs_for` it)."""
    keys: list[PublicKey] = []
    for _principals, key, options in entries:
        if signs_for(options, namespace) and key not in keys:
            keys.append(key)
    return keys
