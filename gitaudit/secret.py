"""The local secret: a random key that authenticates gitaudit's own caches.

Files under ``.git/`` (the verdict memo) or elsewhere on disk (the private checkouts' state) are
caches a process of the user could rewrite; a MAC under this key makes a rewrite detectable.
The key is 32 random bytes in ``$GITAUDIT_HOME/memo.key`` (mode 0600, owned by the user, opened
without following links, never inside a work tree): whoever can read it can read the signing
keys beside it as well.

Standard library only, and light: the hooks' fast path imports it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os

from gitaudit.places import home_dir, inside

KEY_FILENAME = "memo.key"


def _key_path() -> str:
    return os.path.join(home_dir(), KEY_FILENAME)


def local_key(workdir: str | None, *, create: bool) -> bytes | None:
    """The memo key; None when there is none (and *create* is off) or it is not private: a key
    inside the work tree, or readable or writable by others, authenticates nothing."""
    path = _key_path()
    if workdir is not None and inside(path, workdir):
        return None
    with contextlib.suppress(FileNotFoundError):
        key = _read_key(path)
        if key is None and create:
            _warn_once(path)
        return key
    if not create:
        return None
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_key(path)  # another process made it first
    except OSError:
        return None
    with os.fdopen(fd, "wb") as handle:
        handle.write(os.urandom(32))
    return _read_key(path)


_WARNED: list[str] = []


def _warn_once(path: str) -> None:
    """Say once a process that the key at *path* is refused: the caches it authenticates are
    off (nothing is trusted without it), so every command is slower, and nothing said why."""
    if path in _WARNED:
        return
    _WARNED.append(path)
    import sys

    print(
        f"warning: {path} is not a private key (a regular file of 32 bytes, yours, mode 0600, "
        "not a link): gitaudit's caches are off and every command is slower "
        f"(fix: `rm {path}`; the next command makes a new one)",
        file=sys.stderr,
    )


def _read_key(path: str) -> bytes | None:
    """FileNotFoundError when there is no key; None when the file is not a private key."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise
    except OSError:
        return None  # a symlink (O_NOFOLLOW), or unreadable
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not _private_file(info):
            return None
        key = handle.read(33)
    return key if len(key) == 32 else None


def _private_file(info: os.stat_result) -> bool:
    """A regular file of this user that nobody else may read or write."""
    import stat

    owned = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return stat.S_ISREG(info.st_mode) and not info.st_mode & 0o077 and owned


_PR_SET_DUMPABLE = 4  # <linux/prctl.h>
_KEPT: list[bool] = []  # [True] once this process is kept private


def keep_private() -> None:
    """Keep this process's memory to itself before it holds a secret worth stealing: a signing
    key, or the local key while a check runs.

    A check runs as the user, and a process of the user may raise another's core-size limit
    (``prlimit``) and send it ``SIGSEGV``: the core file, written in the work tree, held the
    runner's key. On Linux the process is made non-dumpable (``PR_SET_DUMPABLE`` 0: no core
    file, no ``/proc/<pid>/mem``, no ``ptrace`` attach by the user's other processes; children
    are dumpable again after ``exec``); elsewhere its core-size limit is set to zero, the hard
    limit too, so it cannot be raised again. Once per process; light (``ctypes``, about 2 ms),
    so it is called where a key is read or a check starts, never on the hooks' fast path."""
    if _KEPT:
        return
    import sys

    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    else:  # pragma: no cover - gitaudit's checks and tests run on Linux
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _KEPT.append(True)


def mac(key: bytes, payload: bytes) -> str:
    """HMAC-SHA256 of *payload* under *key*, hex."""
    return hmac.new(key, payload, hashlib.sha256).hexdigest()
