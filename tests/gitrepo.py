"""Real git repositories in temporary folders, for tests and benchmarks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def git(cwd: Path, *args: str, input: bytes | None = None, check: bool = True) -> str:
    """Run real git in *cwd*; return stdout (text). Raises with stderr on failure when *check*."""
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"git {' '.join(args)} failed ({proc.returncode}):\n"
            f"{proc.stderr.decode(errors='replace')}"
        )
    return proc.stdout.decode(errors="replace")


@dataclass
class GitRepo:
    """A real non-bare repository with a work tree at *path*."""

    path: Path

    @classmethod
    def create(cls, path: Path, *, bare: bool = False) -> GitRepo:
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "-b", "main", *(["--bare"] if bare else []))
        return cls(path)

    def git(self, *args: str, check: bool = True, input: bytes | None = None) -> str:
        return git(self.path, *args, check=check, input=input)

    def write(self, rel: str, content: str | bytes, *, mode: int | None = None) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
        if mode is not None:
            os.chmod(target, mode)
        return target

    def write_json(self, rel: str, data: Any) -> Path:
        return self.write(rel, json.dumps(data, indent=2) + "\n")

    def write_plan(self, data: Any, name: str = "default") -> Path:
        return self.write_json(f".gitaudit/plans/{name}.json", data)

    def commit(self, message: str = "commit", *, all_files: bool = True) -> str:
        if all_files:
            self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD").strip()

    def head_tree(self) -> str:
        return self.git("rev-parse", "HEAD^{tree}").strip()


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def audit(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    input: str | None = None,
    process: bool = False,
) -> CliResult:
    """Run the ``git-audit`` command line in *cwd*: in this process by default (the command's
    real entry point, :func:`gitaudit.cli.main`, with its output captured), or with *process* as
    ``python -m gitaudit`` in a child process (for end-to-end tests of the installed command)."""
    if process or os.environ.get("GITAUDIT_TEST_SUBPROCESS"):
        proc = subprocess.run(
            [sys.executable, "-m", "gitaudit", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            input=input,
            check=False,
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)
    return _audit_here(cwd, list(args), env or {}, input)


def _audit_here(cwd: Path, args: list[str], env: dict[str, str], input: str | None) -> CliResult:
    import contextlib
    import io

    from gitaudit.cli.entry import main

    out, err = io.StringIO(), io.StringIO()
    saved_env = {k: os.environ.get(k) for k in env}
    saved_cwd, saved_stdin = os.getcwd(), sys.stdin
    os.environ.update(env)
    sys.stdin = io.StringIO(input or "")
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(args)
                code = 0
            except SystemExit as exc:
                code = _exit_status(exc.code)
    finally:
        os.chdir(saved_cwd)
        sys.stdin = saved_stdin
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return CliResult(code, out.getvalue(), err.getvalue())


def _exit_status(code: object) -> int:
    """What a process exiting with SystemExit(code) would return."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


OLD_TIME = 1_600_000_000_123_456_789  # a file time long before any index: never racily clean


def edit_keeping_times(path: Path, content: bytes, index: Path | None = None) -> None:
    """Rewrite *path* (at the top of a work tree, or with git's *index* named) in place, the same
    inode, with *content*, in a later whole second than git recorded its change time (git
    compares change times in seconds), and put its access and modification times back: only
    the change time tells the edit apart."""
    index = index or path.parent / ".git/index"
    recorded = max(path.stat().st_ctime_ns, index.stat().st_mtime_ns)
    later = (recorded // 10**9 + 1) * 10**9 + 100_000_000  # file times use a coarser clock
    while time.time_ns() < later:
        time.sleep(0.05)
    times = path.stat()
    with open(path, "r+b") as handle:
        handle.write(content)
        handle.truncate()
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))


# ------------------------------------------------------------------ a hand-written index


def point_entry_at(repo: GitRepo, path: str, blob: str) -> None:
    """Point *path*'s entry of the user's index at *blob*, its stat data kept, the index's
    checksum recomputed: what a hand-written index can say."""
    index = repo.path / ".git" / "index"
    data = index.read_bytes()
    staged = bytes.fromhex(repo.git("ls-files", "-s", path).split()[1])
    assert data.count(staged) == 1
    body = data[:-20].replace(staged, bytes.fromhex(blob))
    index.write_bytes(body + hashlib.sha1(body).digest())


def _index_extensions(data: bytes) -> int:
    """Where the extensions of a version-2 index (as git writes one by default) begin."""
    assert data[:4] == b"DIRC" and int.from_bytes(data[4:8], "big") == 2
    pos = 12
    for _ in range(int.from_bytes(data[8:12], "big")):
        name_length = int.from_bytes(data[pos + 60 : pos + 62], "big") & 0xFFF
        pos += (62 + name_length + 8) // 8 * 8
    return pos


def cached_trees(data: bytes) -> bytes:
    """The index's ``TREE`` extension, whole (its signature and size included)."""
    pos = _index_extensions(data)
    while pos < len(data) - 20:
        size = int.from_bytes(data[pos + 4 : pos + 8], "big")
        if data[pos : pos + 4] == b"TREE":
            return data[pos : pos + 8 + size]
        pos += 8 + size
    raise AssertionError("the index caches no tree ids")


def with_cached_trees(data: bytes, trees: bytes) -> bytes:
    """*data* with *trees* as its ``TREE`` extension, the checksum recomputed."""
    old = cached_trees(data)
    body = data[:-20].replace(old, trees)
    return body + hashlib.sha1(body).digest()


def root_left_to_compute(trees: bytes) -> bytes:
    """*trees* with the root's cached id dropped (``-1``): git computes the root again, from
    the folders' cached ids."""
    body = trees[8:]
    head, rest = body.split(b"\n", 1)
    assert head[:1] == b"\0" and not head.startswith(b"\0-1")
    subtrees = head.split()[1]
    new = b"\0-1 " + subtrees + b"\n" + rest[20:]
    return b"TREE" + len(new).to_bytes(4, "big") + new


def forget_marks(gitdir: Path) -> None:
    """Forget the high-water marks of the repository at *gitdir*, as a fresh clone has none:
    the marks file and their floors in the gitaudit home (gitaudit/ledger/watermark.py)."""
    from gitaudit.places import marks_path, state_dir

    for path in (Path(state_dir(gitdir)) / "watermarks.json", Path(marks_path(gitdir))):
        path.unlink(missing_ok=True)
