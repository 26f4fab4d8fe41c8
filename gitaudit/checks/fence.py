"""A fence around the checks: what no check may open, held by the kernel (Linux Landlock).

A check runs code from the audited tree with the user's privileges. Without a fence, a test the
agent wrote could read the key that signs the run's evidence (``$GITAUDIT_HOME/keys``, or the
key file ``--key`` names) and leave it where the agent finds it, then sign evidence of its own;
or write the gitaudit home: re-pin a trust anchor, replace a key. A :class:`Fence` names paths
no check may open at all (read, write, execute, list, create, rename, link):
:func:`for_run` fences the gitaudit home and the signing key's files.

Landlock only grants, so the fence is drawn as grants: every entry of each folder above a
fenced path, except the ones on the way to it, is granted whole (links are not granted: what
they lead to has rules of its own), and so are the paths inside a fenced one that stay open
(the checkout, wherever the cache lies). The folders on the way get nothing themselves, so a
check cannot create entries right in them (``~/.config``, ``~`` for the default home; checks
have a private ``HOME`` unless the plan declares ``home: user``). The kernel refuses every
other access, also through symbolic links, ``/proc/<pid>/cwd`` or a hard link (linking or
renaming across rules is refused: ``REFER``), and a fenced process cannot ``ptrace`` or read
the memory of the run that holds the signing key.

Landlock restricts the calling thread and what it starts: a run's workers, which only run
checks, enter the fence when they start (:meth:`Fence.enter`); anyone else hands the start of a
check to a thread of the fence's own (:meth:`Fence.start`). The run's main thread stays
unfenced, and the ruleset is built once per run. Fenced threads also cannot gain privileges
(``no_new_privs``: a set-user-ID program runs as the user). Where the kernel has no Landlock
(Linux before 5.13, disabled, or another system) checks run unfenced: :func:`abi` says 0 and
``run`` says so.

Where the kernel scopes signals (Landlock ABI 6, Linux 6.12), each check's process also enters
a domain of its own, nested in the fence's, before its program starts (:meth:`Fence.child`):
it can signal only itself and what it starts, never the run (which holds the signing key: a
``SIGSEGV`` dumped its memory, a ``SIGKILL`` ended it unrecorded), a thread of it, nor another
check. The process enters it between ``fork`` and ``exec``, so that no thread of the run ever
shares the check's domain (a thread that started the check from inside it could be signalled
while it lived). The run, outside the domain, still stops and kills its checks, and a check
still signals its own children (``timeout``, a test runner's workers). Below ABI 6 a check can
signal the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import stat
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from gitaudit.frozen import frozen

T = TypeVar("T")

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # same on every arch
_CREATE_RULESET_VERSION = 1
_SCOPE_ABI = 6  # struct landlock_ruleset_attr gains ``scoped``
SCOPE_SIGNAL = 1 << 1  # LANDLOCK_SCOPE_SIGNAL (1 << 0 scopes abstract unix sockets)
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | _TRUNCATE | _IOCTL_DEV


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_ABI: int | None = None


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (or not Linux)."""
    global _ABI  # noqa: PLW0603 (asked once a process)
    if _ABI is None:
        libc = _libc()
        flags = _CREATE_RULESET_VERSION
        version = -1 if libc is None else libc.syscall(_SYS_CREATE_RULESET, None, 0, flags)
        _ABI = max(0, int(version))
    return _ABI


def _handled(version: int) -> int:
    rights = _ABI1
    if version >= 2:
        rights |= _REFER
    if version >= 3:
        rights |= _TRUNCATE
    if version >= 5:
        rights |= _IOCTL_DEV
    return rights


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def _beneath(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def grants(fenced: Iterable[str]) -> list[str]:
    """The hierarchies to grant so that everything but *fenced* (real paths) stays reachable:
    every entry of each folder above a fenced path, except those on the way to one."""
    tops = sorted(set(fenced))
    tops = [p for p in tops if not any(p != t and _beneath(p, t) for t in tops)]
    above: set[str] = set()
    for top in tops:
        at = top
        while at != "/":
            at = os.path.dirname(at)
            above.add(at)
    out: list[str] = []
    for folder in sorted(above):
        if any(_beneath(folder, t) for t in tops):
            continue
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if path in above or path in tops:
                continue
            out.append(path)
    return out


_LOCAL = threading.local()  # .fence: the fence the thread has entered


@frozen
class Fence:
    """Paths no check may open (``fenced``; one that does not exist cannot be created), and
    paths inside them that stay open: ``open`` for everything, ``readable`` to read only."""

    fenced: tuple[str, ...]
    open: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    _built: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)
    _spawner: list[_Spawner] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def around(
        cls,
        fenced: Iterable[str | os.PathLike[str]],
        open_: Iterable[str | os.PathLike[str]] = (),
        readable: Iterable[str | os.PathLike[str]] = (),
    ) -> Fence:
        def real(paths: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
            return tuple(dict.fromkeys(_real(p) for p in paths))

        return cls(real(fenced), real(open_), real(readable))

    def ruleset(self) -> int | None:
        """The Landlock ruleset's file descriptor (built once); None without Landlock."""
        version = abi()
        if not version or not self.fenced:
            return None
        with self._lock:
            if "fd" not in self._built:
                self._built["fd"] = _build(version, self)
        return self._built["fd"]

    def child(self) -> Callable[[], None] | None:
        """What a check's process runs between ``fork`` and ``exec`` (``preexec_fn``): it enters
        a domain of its own that scopes its signals (see the module docstring). None where the
        kernel cannot scope them (Landlock ABI below 6) or there is no fence. Only two system
        calls, through functions looked up here: the child of a threaded process must take no
        lock another thread may have held when it forked."""
        try:
            if abi() < _SCOPE_ABI or self.ruleset() is None:
                return None
        except OSError:
            return None  # no fence can be drawn: :meth:`start` fails the check, saying why
        with self._lock:
            if "scope" not in self._built:
                with contextlib.suppress(OSError):  # then no check starts (below)
                    self._built["scope"] = _build_scope()
            scope = self._built.get("scope", -1)
        libc = _libc()
        assert libc is not None
        prctl, syscall = libc.prctl, libc.syscall

        def enter_own_domain() -> None:
            if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or syscall(_SYS_RESTRICT_SELF, scope, 0):
                raise OSError("landlock_restrict_self (scoped signals)")

        return enter_own_domain

    def enter(self) -> None:
        """Fence the calling thread for good: for threads that only run checks (a run's
        workers), which then start them with no hand-off. A failure leaves the thread as it
        was, and :meth:`start` hands each check to the fence's own thread instead."""
        try:
            fd = self.ruleset()
            if fd is None:
                return
            _restrict(fd)
        except OSError:
            return  # each check then fails to start, saying why (start)
        _LOCAL.fence = self

    def start(self, begin: Callable[[], T]) -> T:
        """``begin()`` (which starts a process) in a thread fenced by this fence, so the process
        and everything it starts is fenced: the calling thread when it entered this fence
        (:meth:`enter`), else the fence's own thread (a hand-off of 0.2-0.3 ms); its result, or its
        exception raised here (an :class:`OSError` when the fence cannot be drawn). The process
        enters a domain of its own only through :meth:`child`, which *begin* passes as its
        ``preexec_fn``, as :func:`gitaudit.checks.process.run_bounded` does."""
        fd = self.ruleset()
        if fd is None or getattr(_LOCAL, "fence", None) is self:
            return begin()
        with self._lock:
            spawner = self._spawner
            if not spawner:
                spawner.append(_Spawner(fd))
        return spawner[0].call(begin)

    def close(self) -> None:
        """End this fence's thread and close its ruleset (a run's end); using it again builds
        them anew."""
        with self._lock:
            spawners, self._spawner[:] = list(self._spawner), []
            fds = [self._built.pop(k) for k in ("fd", "scope") if k in self._built]
        for spawner in spawners:
            spawner.stop()
        for fd in fds:
            os.close(fd)

    def __enter__(self) -> Fence:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class _Spawner:
    """A thread fenced once that runs what it is handed, one call at a time."""

    def __init__(self, ruleset: int) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._failed: BaseException | None = None
        ready = threading.Event()

        def serve() -> None:
            try:
                _restrict(ruleset)
            except OSError as exc:
                self._failed = exc
            ready.set()
            while True:
                call = self._calls.get()
                if call is None:
                    return
                try:
                    call.result.append(call.begin())
                except BaseException as exc:  # handed to the caller's thread
                    call.error.append(exc)
                call.done.set()

        self._thread = threading.Thread(target=serve, name="gitaudit-fence", daemon=True)
        self._thread.start()
        ready.wait()

    def stop(self) -> None:
        self._calls.put(None)
        self._thread.join()

    def call(self, begin: Callable[[], T]) -> T:
        if self._failed is not None:
            raise self._failed
        call: _Call = _Call(begin)
        self._calls.put(call)
        call.done.wait()
        if call.error:
            raise call.error[0]
        return call.result[0]  # type: ignore[return-value]


@dataclass
class _Call:
    begin: Callable[[], object]
    result: list[object] = field(default_factory=list)
    error: list[BaseException] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)


def _build(version: int, fence: Fence) -> int:
    libc = _libc()
    assert libc is not None
    handled = _handled(version)
    attr = struct.pack("=Q", handled)
    fd = libc.syscall(_SYS_CREATE_RULESET, ctypes.c_char_p(attr), len(attr), 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path in grants(fence.fenced):  # none of them is, or lies beneath, a fenced path
            _grant(libc, fd, path, handled)
        for path in fence.open:
            _grant(libc, fd, path, handled)
        for path in fence.readable:
            _grant(libc, fd, path, READ_FILE | READ_DIR | EXECUTE)
    except BaseException:
        os.close(fd)
        raise
    return int(fd)


def _build_scope() -> int:
    """A ruleset that handles no access and scopes signals (``handled_access_fs``,
    ``handled_access_net``, ``scoped``): a process in a domain of it signals only processes of
    that domain and of those nested in it."""
    libc = _libc()
    assert libc is not None
    attr = struct.pack("=QQQ", 0, 0, SCOPE_SIGNAL)
    fd = libc.syscall(_SYS_CREATE_RULESET, ctypes.c_char_p(attr), len(attr), 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset (scoped signals)")
    return int(fd)


def _grant(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return  # gone meanwhile: nothing to grant
    try:
        mode = os.fstat(target).st_mode
        if stat.S_ISLNK(mode):
            return  # what a link leads to has rules of its own
        allowed = rights if stat.S_ISDIR(mode) else rights & _FILE_RIGHTS
        attr = struct.pack("=Qi", allowed, target)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.c_char_p(attr), 0):
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
    finally:
        os.close(target)


def _restrict(ruleset: int) -> None:
    libc = _libc()
    assert libc is not None
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0):
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")


def for_run(
    slot: str | os.PathLike[str],
    *,
    keys: Iterable[str | os.PathLike[str]] = (),
    named: Iterable[str] = (),
) -> Fence:
    """The fence of a run whose checks run in the checkout folder *slot*
    (:class:`gitaudit.run.checkout.Slot`): no check opens the gitaudit home (keys, the memo
    key, trust anchors) or the signing key's files, and none writes the user's global git
    configuration, which is trusted like the key folder (the driver of a declared content
    filter comes from it), nor what that configuration *named* elsewhere (the run's
    :func:`gitaudit.git.config_paths.for_fence`: an included file, the attributes file, the
    hooks folder, a filter's program): they stay readable.

    Checks open only the slot's checkout (``tree``), its private git dirs (``git``,
    ``modules``: the checkout's ``.git`` files lead there; made anew before every update),
    ``home`` and ``tmp``, wherever the cache lies: the rest of gitaudit's cache (every other
    slot, the slot's own folder and the folders up to the cache) is fenced, and every folder
    above it is on the way to a fenced path, so it takes no new entry. Nothing a check leaves
    is found above the checkout by a tool that looks upwards (pytest's configuration and
    ``conftest.py``, ``package.json``, ``node_modules``, a ``.git``) in a later step or run."""
    from gitaudit.places import cache_dir, global_git_config, home_dir

    configs = [*global_git_config(), *named]
    root = os.fspath(slot)
    own = [os.path.join(root, name) for name in ("tree", "git", "modules", "home", "tmp")]
    return Fence.around([home_dir(), *keys, *configs, cache_dir(), root], own, configs)


def key_files(signer: object, configured: Iterable[str] = ()) -> list[str]:
    """The files of *signer*'s key and of the keys *configured* (paths: a private key file, or
    a public one and the private key beside it), for :func:`for_run` to fence."""
    path = getattr(signer, "source", None) or getattr(signer, "key_path", None)
    paths = [] if path is None else [os.fspath(path)]
    out: list[str] = []
    for text in [*paths, *configured]:
        out += [text, text.removesuffix(".pub")] if text.endswith(".pub") else [text]
    return list(dict.fromkeys(out))
