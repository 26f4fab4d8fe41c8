"""Run one fuzz harness for a bounded time, or rebuild the seed corpus.

    fuzz/run.py NAME SECONDS [--fallback] [--strict] [-- LIBFUZZER_FLAGS...]
    fuzz/run.py seeds

NAME is ``plan``, ``signature``, ``gate``, ``ledger`` or ``hooks`` (``fuzz/fuzz_NAME.py``). The
harness runs in a subprocess under atheris/libFuzzer when atheris is importable (``--fallback``
forces the pure-Python driver), on a working corpus ``fuzz/corpus/NAME/`` (not versioned) that
starts from ``fuzz/seeds/NAME/``. Crash
and timeout inputs land in ``fuzz/artifacts/NAME/``. ``--strict`` sets ``GITAUDIT_FUZZ_STRICT=1``:
known bugs (``tests/fuzz/known_bugs.py``) count as crashes too.

Prints executions, executions per second and the verdict; exits 0 when nothing crashed or hung.
``seeds`` rewrites ``fuzz/seeds/``: the fixture plans, a structured-mode seed, and a real SSH-signed
commit (fixed key) with its armoured signature, wire blob and an allowed-signers file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HARNESSES = ("plan", "signature", "gate", "ledger", "hooks")
PER_INPUT_TIMEOUT = 10  # seconds: longer is a hang


def atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def prepare_corpus(name: str) -> Path:
    corpus = HERE / "corpus" / name
    corpus.mkdir(parents=True, exist_ok=True)
    for seed in sorted((HERE / "seeds" / name).iterdir()):
        target = corpus / f"seed-{seed.name}"
        if not target.exists():
            shutil.copyfile(seed, target)
    return corpus


def run(name: str, seconds: int, *, fallback: bool, strict: bool, extra: list[str]) -> int:
    harness = HERE / f"fuzz_{name}.py"
    if name not in HARNESSES or not harness.exists():
        print(f"unknown harness {name!r}; choose one of: {', '.join(HARNESSES)}", file=sys.stderr)
        return 2
    corpus = prepare_corpus(name)
    artifacts = HERE / "artifacts" / name
    artifacts.mkdir(parents=True, exist_ok=True)
    use_atheris = atheris_available() and not fallback
    flags = [
        f"-max_total_time={seconds}",
        f"-timeout={PER_INPUT_TIMEOUT}",
        f"-artifact_prefix={artifacts}/",
    ]
    if use_atheris:
        flags += ["-rss_limit_mb=2048", "-print_final_stats=1", "-max_len=65536"]
    argv = [sys.executable, str(harness), str(corpus), *flags, *extra]
    if not use_atheris:
        argv.append("--fallback")
    home = Path(tempfile.mkdtemp(prefix="gitaudit-fuzz-home-"))
    env = {**os.environ, "GITAUDIT_FUZZ_HOME": str(home), "PYTHONHASHSEED": "0"}
    if strict:
        env["GITAUDIT_FUZZ_STRICT"] = "1"
    engine = "atheris/libFuzzer" if use_atheris else "pure-Python fallback driver"
    print(f"== fuzz {name}: {seconds}s with {engine} (corpus {corpus.relative_to(ROOT)})")
    started = time.monotonic()
    # a hard stop well past the budget: libFuzzer's own limit is checked between inputs
    try:
        proc = subprocess.run(
            argv,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=seconds + 5 * PER_INPUT_TIMEOUT + 60,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        print(f"   HANG: the harness did not stop ({exc.timeout:.0f}s)", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(home, ignore_errors=True)
    elapsed = time.monotonic() - started
    output = proc.stdout + proc.stderr
    runs = _stat(output, "number_of_executed_units")
    per_sec = _stat(output, "average_exec_per_sec")
    known = sorted(set(re.findall(r"known bug tolerated: ([\w-]+)", output)))
    print(f"   executions: {runs if runs is not None else '?'} in {elapsed:.0f}s")
    print(f"   executions per second: {per_sec if per_sec is not None else '?'}")
    if known:
        print(
            f"   known bugs met (tolerated, see tests/fuzz/test_known_bugs.py): {', '.join(known)}"
        )
    if proc.returncode != 0:
        print(output[-6000:], file=sys.stderr)
        found = sorted(p.name for p in artifacts.iterdir())
        print(f"   CRASH or HANG (exit {proc.returncode}); inputs in {artifacts}: {found[-5:]}")
        return 1
    print("   no crash, no hang")
    return 0


def _stat(output: str, name: str) -> int | None:
    found = re.findall(rf"stat::{name}:\s+(\d+)", output)
    return int(found[-1]) if found else None


# ----------------------------------------------------------------------------- seeds


def write_seeds() -> None:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    import fuzz_signature

    from gitaudit.crypto.allowed_signers import format_allowed_signers
    from gitaudit.crypto.signers import Ed25519Signer

    plan_dir, sig_dir = HERE / "seeds" / "plan", HERE / "seeds" / "signature"
    for folder in (plan_dir, sig_dir):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    fixtures = ROOT / "tests" / "fixtures"
    for path in sorted([*fixtures.glob("plans/*.json"), *fixtures.glob("compat/*.json")]):
        shutil.copyfile(path, plan_dir / f"{path.parent.name}-{path.name}")
    (plan_dir / "structured-0").write_bytes(b"\x00" + bytes(range(64)))
    (plan_dir / "structured-1").write_bytes(b"\x00\x01\x00\x03\x00\x02\x00\x01\x00\x08\x00\x01")
    key = Ed25519Signer(fuzz_signature.SEED, comment="fuzz").public_key
    other = Ed25519Signer(bytes(reversed(fuzz_signature.SEED))).public_key
    signers = format_allowed_signers([("alice", key), ("bob@example.test", other)])
    (sig_dir / "0-commit").write_bytes(b"\x00" + fuzz_signature.COMMIT)
    (sig_dir / "1-armoured").write_bytes(b"\x01" + fuzz_signature.ARMOURED.encode())
    (sig_dir / "2-blob").write_bytes(b"\x02" + fuzz_signature.BLOB)
    (sig_dir / "3-allowed-signers").write_bytes(b"\x03" + signers.encode())
    print(
        f"wrote {len(list(plan_dir.iterdir()))} plan and {len(list(sig_dir.iterdir()))} "
        "signature seeds"
    )


def main(argv: list[str]) -> int:
    if argv[:1] == ["seeds"]:
        write_seeds()
        return 0
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = argv[: argv.index("--")] if "--" in argv else argv
    options = {a for a in args if a.startswith("--")}
    positional = [a for a in args if not a.startswith("--")]
    if len(positional) != 2 or not positional[1].isdigit() or options - {"--fallback", "--strict"}:
        print(__doc__, file=sys.stderr)
        return 2
    name, seconds = positional[0], int(positional[1])
    return run(
        name, seconds, fallback="--fallback" in options, strict="--strict" in options, extra=extra
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
