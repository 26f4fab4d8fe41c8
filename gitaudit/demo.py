"""`make demo`: the whole job end to end on a built-in sample repository, in a temporary folder.

``python -m gitaudit.demo --sample DIR`` only copies the sample repository to DIR, to try by hand.

Seal, run, status, a bare remote with the server hook, a passing push; then an edit that breaks a
check: status FAIL, the push blocked on the client, and the same push forced with --no-verify
rejected by the server. Nothing outside the temporary folder is touched (HOME and the key folder
point inside it).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

BOLD = "\033[1m" if sys.stdout.isatty() else ""
DIM = "\033[2m" if sys.stdout.isatty() else ""
RESET = "\033[0m" if sys.stdout.isatty() else ""


class Demo:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        bindir = Path(sys.executable).parent
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITAUDIT_"))},
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),  # the checkouts, the fingerprint's
            "GITAUDIT_HOME": str(self.home / ".config" / "gitaudit"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Demo Developer",
            "GIT_AUTHOR_EMAIL": "dev@example.test",
            "GIT_COMMITTER_NAME": "Demo Developer",
            "GIT_COMMITTER_EMAIL": "dev@example.test",
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
        }
        (self.home / ".gitconfig").write_text(
            "[init]\n\tdefaultBranch = main\n[user]\n\tname = Demo Developer\n"
            "\temail = dev@example.test\n[advice]\n\tdetachedHead = false\n"
        )

    def section(self, title: str) -> None:
        print(f"\n{BOLD}== {title}{RESET}", flush=True)

    def sh(
        self, cmd: str, cwd: Path, *, expect: int | set[int] = 0
    ) -> subprocess.CompletedProcess[str]:
        """Run one shell-free command line, print it and its output, check its exit code."""
        print(f"{BOLD}$ {cmd}{RESET}", flush=True)
        argv = shlex.split(cmd)
        if argv[:2] == ["git", "audit"]:
            argv = [sys.executable, "-m", "gitaudit", *argv[2:]]
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        for line in proc.stdout.rstrip().splitlines():
            print(f"  {line}")
        wanted = {expect} if isinstance(expect, int) else expect
        print(f"{DIM}  (exit {proc.returncode}){RESET}", flush=True)
        if proc.returncode not in wanted:
            raise SystemExit(f"demo: `{cmd}` exited {proc.returncode}, expected {sorted(wanted)}")
        return proc


def _copy_sample(target: Path) -> None:
    sample = resources.files("gitaudit").joinpath("sample")
    for item in sample.iterdir():
        _copy(item, target / item.name)


def _copy(item: object, dest: Path) -> None:
    from importlib.abc import Traversable

    assert isinstance(item, Traversable)
    if item.name == "__pycache__":
        return
    # dot-files are shipped as dot-<name> so packaging and linters leave them alone
    dest = (
        dest.with_name("." + dest.name.removeprefix("dot-"))
        if dest.name.startswith("dot-")
        else dest
    )
    if item.is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        for child in item.iterdir():
            _copy(child, dest / child.name)
    else:
        dest.write_bytes(item.read_bytes())


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 (a script: the demo's steps in order)
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--sample"] and len(args) == 2:
        target = Path(args[1])
        if target.exists():
            print(f"error: {target} already exists", file=sys.stderr)
            return 1
        target.mkdir(parents=True)
        _copy_sample(target)
        print(f"copied the sample repository to {target}")
        return 0
    if args:
        print("usage: python -m gitaudit.demo [--sample DIR]", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="gitaudit-demo-"))
    try:
        demo = Demo(root)
        repo = root / "greeter"
        server = root / "server.git"
        repo.mkdir()
        _copy_sample(repo)
        demo.section("A sample repository with two plans: app (a DAG, an output contract) and docs")
        demo.sh("git init -q", repo)
        demo.sh("git add -A", repo)
        demo.sh("git commit -q -m 'greeter: code, tests and plans'", repo)
        demo.sh("git audit plan validate", repo)
        demo.sh("git audit plan graph --plan app --format text", repo)

        demo.section("Onboard (a key, trust on refs/audit/plans, hooks), then seal the plans")
        demo.sh("git audit init", repo)
        demo.sh("git audit plan seal --reason 'first version'", repo)

        demo.section("Run the checks and record signed evidence; the gate says PASS")
        demo.sh("git audit run", repo)
        demo.sh("git audit status", repo)
        demo.sh("git show --stat --format=%s refs/audit/runs/app", repo)

        demo.section("A bare server with the pre-receive hook, and a passing push")
        demo.sh(f"git init -q --bare {server}", root)
        demo.sh("git audit hooks install --server", server)
        pinned = subprocess.run(
            ["git", "config", "audit.rootKey"],
            cwd=repo,
            env=demo.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        demo.sh(f"git config audit.rootKey {pinned}", server)
        demo.sh(f"git remote add origin {server}", repo)
        demo.sh("git push -q origin refs/audit/plans", repo)
        demo.sh("git audit push origin", repo)
        demo.sh("git audit status main", server)

        demo.section("Break a check: status FAIL, the push blocked, --no-verify rejected")
        greet = repo / "greeter.py"
        greet.write_text(greet.read_text().replace("Hello", "Goodbye"))
        demo.sh("git commit -q -a -m 'change the greeting'", repo)
        demo.sh("git audit run", repo, expect=1)
        demo.sh("git audit status", repo, expect=1)
        demo.sh("git audit push origin", repo, expect=1)
        forced = (
            "git push --no-verify --atomic origin main refs/audit/runs/app refs/audit/runs/docs"
        )
        demo.sh(forced, repo, expect=1)
        demo.sh("git audit status main", server)
        print(f"\n{BOLD}demo complete:{RESET} every step behaved as expected")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
