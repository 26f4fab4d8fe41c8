"""The SSH wire format (RFC 4253) and the Ed25519 key-type constants.

Wire strings (``uint32`` length + bytes) and ``uint32`` values, a bounds-checked reader, and the
PEM-style armour OpenSSH wraps private keys and signatures in. Ed25519 itself is PyNaCl.
"""

from __future__ import annotations

import base64
import binascii
import struct

KEY_TYPE = "ssh-ed25519"
PUBLIC_KEY_LEN = 32
SEED_LEN = 32
SIGNATURE_LEN = 64
ARMOUR_WIDTH = 70


class WireFormatError(ValueError):
    """Malformed or truncated SSH wire data; callers turn it into a domain error with context."""


def ssh_string(data: bytes) -> bytes:
    """Encode *data* as an RFC 4253 ``string``: a big-endian uint32 length, then the bytes."""
    return struct.pack(">I", len(data)) + data


def ssh_uint32(value: int) -> bytes:
    """Encode *value* as an RFC 4253 ``uint32``."""
    return struct.pack(">I", value)


class WireReader:
    """Sequential, bounds-checked reader for RFC 4253 wire data."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, size: int, what: str) -> bytes:
        """Read exactly *size* raw bytes; *what* names the field in the error."""
        if size > len(self._data) - self._pos:
            raise WireFormatError(f"truncated {what}")
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def uint32(self, what: str) -> int:
        """Read a big-endian uint32."""
        value: int = struct.unpack(">I", self.take(4, what))[0]
        return value

    def string(self, what: str) -> bytes:
        """Read a length-prefixed ``string``."""
        return self.take(self.uint32(what), what)

    def text(self, what: str) -> str:
        """Read a ``string`` that must be ASCII (algorithm and type names)."""
        raw = self.string(what)
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            raise WireFormatError(f"{what} is not ASCII") from None

    def remaining(self) -> int:
        """Number of bytes not read yet."""
        return len(self._data) - self._pos

    def rest(self) -> bytes:
        """Consume and return every remaining byte."""
        return self.take(self.remaining(), "remainder")

    def finish(self, what: str) -> None:
        """Require that every byte was consumed."""
        if self.remaining():
            raise WireFormatError(f"{self.remaining()} trailing bytes after {what}")


def armour(label: str, blob: bytes) -> str:
    """PEM-style armour as OpenSSH writes it: base64 wrapped at 70 columns, final newline."""
    b64 = base64.b64encode(blob).decode("ascii")
    lines = [b64[i : i + ARMOUR_WIDTH] for i in range(0, len(b64), ARMOUR_WIDTH)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"


def dearmour(text: str, label: str) -> bytes:
    """Strictly undo :func:`armour`: BEGIN line, base64 lines, END line, optional final newline.

    ``\\r\\n`` line ends and trailing blank lines are tolerated; anything else raises
    :class:`WireFormatError` with the reason.
    """
    begin, end = f"-----BEGIN {label}-----", f"-----END {label}-----"
    lines = text.replace("\r\n", "\n").rstrip("\n").split("\n")
    if lines[0] != begin:
        if begin in text:
            raise WireFormatError(f"unexpected text before '{begin}'")
        raise WireFormatError(f"missing '{begin}' line")
    if lines[-1] != end:
        if end in text:
            raise WireFormatError(f"unexpected text after '{end}'")
        raise WireFormatError(f"truncated {label.lower()} armour (no '{end}' line)")
    body = lines[1:-1]
    if not body:
        raise WireFormatError(f"empty {label.lower()} armour")
    for number, line in enumerate(body, start=2):
        if not line or len(line) > 76:
            raise WireFormatError(f"armour line {number} has bad length {len(line)}")
    try:
        return base64.b64decode("".join(body), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WireFormatError(f"invalid base64 in armour ({exc})") from None
