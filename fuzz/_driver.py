"""Shared by the harnesses: expected errors, known bugs, and a pure-Python fallback driver.

Every harness defines ``check(data: bytes) -> str`` (what the target did with the input, e.g. the
first problem code) and calls :func:`main`. Under atheris
(``pip install atheris``) :func:`main` hands it to libFuzzer (coverage-guided, libFuzzer flags such
as ``-max_total_time=60``); without atheris, or with ``--fallback``, a small pure-Python driver
feeds it mutated corpus inputs for a bounded time and accepts the same few flags
(``-max_total_time``, ``-timeout``, ``-artifact_prefix``, ``-seed``, corpus directories). Both
print ``stat::number_of_executed_units`` and ``stat::average_exec_per_sec`` at the end.

A crash is any exception that is neither expected (a GitAuditError subclass the harness names)
nor a known bug registered in ``tests/fuzz/known_bugs.py`` (each has a strict-xfail reproducer);
``GITAUDIT_FUZZ_STRICT=1`` treats known bugs as crashes too. A hang is an input that runs longer
than ``-timeout`` seconds.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

Check = Callable[[bytes], str]  # one input -> a short description of what the target did
_reported: set[str] = set()


def hermetic() -> None:
    """No user git configuration, keys or identity leak into the harness."""
    home = Path(os.environ.get("GITAUDIT_FUZZ_HOME") or tempfile.mkdtemp(prefix="gitaudit-fuzz-"))
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").touch()
    os.environ.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        GITAUDIT_HOME=str(home / "gitaudit"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
        GIT_AUTHOR_NAME="Fuzz",
        GIT_AUTHOR_EMAIL="fuzz@example.test",
        GIT_COMMITTER_NAME="Fuzz",
        GIT_COMMITTER_EMAIL="fuzz@example.test",
    )


def shape(exc: BaseException) -> str:
    """An exception's type and the first words of its message with digits and quotes removed:
    how the fallback driver tells behaviours apart."""
    words = str(exc).replace("'", " ").split()[:4]
    return type(exc).__name__ + ":" + " ".join(w for w in words if not any(c.isdigit() for c in w))


def guarded(action: Callable[[], str], *expected: type[BaseException]) -> str:
    """Run *action*; *expected* exceptions and registered known bugs become a behaviour string,
    anything else propagates (a crash)."""
    from tests.fuzz.known_bugs import known_bug

    try:
        return action()
    except expected as exc:
        return shape(exc)
    except Exception as exc:
        bug = known_bug(exc)
        if bug is None:
            raise
        if bug.name not in _reported:
            _reported.add(bug.name)
            print(f"[fuzz] known bug tolerated: {bug.name} ({bug.summary})", file=sys.stderr)
        return f"known:{bug.name}"


def main(check: Check, *, instrumented: bool) -> None:
    """Fuzz *check* under atheris when it is available (and *instrumented* says the harness
    imported its targets inside ``atheris.instrument_imports``), else with the fallback."""
    argv = list(sys.argv)
    fallback = "--fallback" in argv
    argv = [a for a in argv if a != "--fallback"]
    if not fallback and instrumented:
        import atheris

        def test_one_input(data: bytes) -> None:
            check(data)

        atheris.Setup(argv, test_one_input)
        atheris.Fuzz()
        return
    if not fallback:
        print("[fuzz] atheris is not installed: using the pure-Python fallback driver")
    sys.exit(fallback_driver(check, argv[1:]))


# ----------------------------------------------------------------------------- fallback


class Hang(Exception):
    pass


_TOKENS = [
    b"[",
    b"]",
    b"{",
    b"}",
    b'"',
    b",",
    b":",
    b"\\",
    b"null",
    b"true",
    b"1e400",
    b"-1",
    b"0",
    b"9007199254740993",
    b"1" + b"0" * 30,
    b'"\\ud800"',
    b'"\\u0000"',
    b"\n",
    b"\r\n",
    b" ",
    b"\xff",
    b"\xc3\xa9",
    b"\xef\xbb\xbf",
    b"[" * 2000,
    b"gpgsig ",
    b"\n ",
    b"-----BEGIN SSH SIGNATURE-----\n",
    b"-----END SSH SIGNATURE-----\n",
    b"AAAA",
    b"=",
    b"ssh-ed25519 ",
    b'namespaces="git" ',
]


def mutate(data: bytes, rng: random.Random, corpus: list[bytes]) -> bytes:
    """1-4 byte-level mutations, libFuzzer style (flip, set, insert, erase, copy, splice)."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        at = rng.randint(0, len(out))
        if op == 0 and out:  # flip a bit
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
        elif op == 1 and out:  # interesting byte
            out[rng.randrange(len(out))] = rng.choice([0, 0x7F, 0x80, 0xFF, 0x22, 0x5B, 0x7B])
        elif op == 2:  # random bytes
            out[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 3:  # erase a range
            del out[at : at + rng.randint(1, 64)]
        elif op == 4 and out:  # copy a range elsewhere
            start = rng.randrange(len(out))
            chunk = out[start : start + rng.randint(1, 64)]
            out[at:at] = chunk
        elif op == 5 and corpus:  # splice with another input
            other = rng.choice(corpus)
            cut = rng.randint(0, len(other))
            out = out[:at] + other[cut : cut + rng.randint(1, 256)] + out[at:]
        elif op == 6:  # dictionary token
            out[at:at] = rng.choice(_TOKENS)
        elif op == 7:  # overwrite with digits
            out[at : at + 4] = str(rng.choice([0, 1, 2**31, 2**53 + 1, 10**20])).encode()
        else:  # truncate
            del out[at:]
    return bytes(out)


def _flags(args: list[str]) -> tuple[dict[str, str], list[Path]]:
    flags, dirs = {}, []
    for arg in args:
        if arg.startswith("-") and "=" in arg:
            key, value = arg.lstrip("-").split("=", 1)
            flags[key] = value
        elif not arg.startswith("-"):
            dirs.append(Path(arg))
    return flags, dirs


def _load(dirs: list[Path]) -> list[bytes]:
    corpus: list[bytes] = []
    for folder in dirs:
        if folder.is_dir():
            corpus.extend(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())
        elif folder.is_file():
            corpus.append(folder.read_bytes())
    return corpus or [b""]


def _save(prefix: str, kind: str, data: bytes) -> Path:
    path = Path(f"{prefix}{kind}-{hashlib.sha1(data, usedforsecurity=False).hexdigest()}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def fallback_driver(check: Check, args: list[str]) -> int:
    """Mutation fuzzing without coverage feedback; an input is kept when it makes the target
    behave in a way not seen before (a new exception type and message shape)."""
    flags, dirs = _flags(args)
    seconds = float(flags.get("max_total_time", "60"))
    timeout = float(flags.get("timeout", "10"))
    prefix = flags.get("artifact_prefix", "./")
    rng = random.Random(int(flags.get("seed", "0")) or None)  # noqa: S311 (not cryptography)
    corpus = _load(dirs)
    seen: set[str] = set()

    def alarm(_signum: int, _frame: object) -> None:
        raise Hang(f"input ran longer than {timeout}s")

    signal.signal(signal.SIGALRM, alarm)
    runs, start = 0, time.monotonic()
    initial = list(corpus)
    while time.monotonic() - start < seconds:
        data = initial[runs] if runs < len(initial) else mutate(rng.choice(corpus), rng, corpus)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        caught: BaseException | None = None
        behaviour = ""
        try:
            behaviour = check(data)
        except Hang:
            path = _save(prefix, "timeout", data)
            print(f"==fallback== TIMEOUT after {timeout}s; input saved to {path}", file=sys.stderr)
            return 70
        except Exception as exc:  # a crash: the harness only lets unexpected exceptions out
            path = _save(prefix, "crash", data)
            traceback.print_exc()
            print(
                f"==fallback== CRASH {type(exc).__name__}; input saved to {path}", file=sys.stderr
            )
            caught = exc
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        runs += 1
        if caught is not None:
            _stats(runs, start)
            return 1
        if behaviour not in seen:  # something new happened: keep the input to mutate further
            seen.add(behaviour)
            corpus.append(data)
    print(f"#{runs}\tDONE   corpus: {len(corpus)} inputs, {len(seen)} behaviours", file=sys.stderr)
    _stats(runs, start)
    return 0


def _stats(runs: int, start: float) -> None:
    elapsed = max(time.monotonic() - start, 1e-9)
    print(f"stat::number_of_executed_units: {runs}", file=sys.stderr)
    print(f"stat::average_exec_per_sec:     {int(runs / elapsed)}", file=sys.stderr)
