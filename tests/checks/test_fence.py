"""The fence around the checks (gitaudit/checks/fence.py): Linux Landlock, on real processes."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from gitaudit.checks import fence
from gitaudit.checks.fence import Fence
from gitaudit.checks.process import run_bounded


def test_the_kernel_has_landlock() -> None:
    """The machines gitaudit is tested on have Landlock (Linux 5.13+): every test here and in
    tests/adversarial/test_hermetic.py that reads the fence relies on it."""
    assert fence.abi() >= 1


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    (tmp_path / "home" / "keys").mkdir(parents=True)
    (tmp_path / "home" / "keys" / "k").write_text("SECRET\n")
    (tmp_path / "home" / "cache").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "f").write_text("open\n")
    return tmp_path


def sh(wall: Fence, script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """*script* started as a check is (:func:`gitaudit.checks.process.run_bounded`)."""
    child = wall.child()
    proc = wall.start(
        lambda: subprocess.Popen(
            ["sh", "-c", script],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=child,  # noqa: PLW1509 (what run_bounded does)
        )
    )
    out, _ = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode())


def test_grants_everything_but_the_fenced_path_and_the_way_to_it(layout: Path) -> None:
    granted = set(fence.grants([str(layout / "home" / "keys")]))
    assert str(layout / "home" / "cache") in granted
    assert str(layout / "other") in granted
    assert str(layout / "home") not in granted  # on the way: nothing granted on it itself
    assert str(layout / "home" / "keys") not in granted
    assert not any(p.startswith(str(layout / "home" / "keys") + "/") for p in granted)


def test_grants_nothing_beneath_any_fenced_path_nested_ones_included(layout: Path) -> None:
    """The ruleset grants exactly :func:`fence.grants`: none of them may be or lie beneath a
    fenced path, even when one fenced path lies inside another."""
    fenced = [str(layout / "home"), str(layout / "home" / "keys"), str(layout / "other" / "f")]
    granted = fence.grants(fenced)
    assert str(layout / "other") not in granted  # on the way to other/f
    assert str(layout / "other" / "f") not in granted
    for path in granted:
        assert not any(path == top or path.startswith(top + "/") for top in fenced), path


def test_a_fenced_process_cannot_open_the_fenced_path(layout: Path) -> None:
    wall = Fence.around([layout / "home" / "keys"], open_=[layout / "home" / "cache"])
    secret = layout / "home" / "keys" / "k"
    refused = sh(wall, f"cat {secret}", layout / "other")
    assert refused.returncode != 0 and "Permission denied" in refused.stdout
    allowed = sh(
        wall, "cat f && echo x > ../home/cache/new && cat ../home/cache/new", layout / "other"
    )
    assert (allowed.returncode, allowed.stdout) == (0, "open\nx\n")
    assert sh(wall, f"echo forged > {secret}", layout).returncode != 0
    assert secret.read_text() == "SECRET\n"
    assert sh(wall, f"ln -s {secret} link && cat link", layout / "other").returncode != 0


def test_the_callers_thread_stays_unfenced(layout: Path) -> None:
    wall = Fence.around([layout / "home" / "keys"])
    assert sh(wall, "true", layout).returncode == 0
    assert (layout / "home" / "keys" / "k").read_text() == "SECRET\n"  # this thread still reads
    assert subprocess.run(["cat", str(layout / "home" / "keys" / "k")], check=False).returncode == 0


def test_run_bounded_starts_the_check_inside_the_fence(layout: Path) -> None:
    wall = Fence.around([layout / "home"])
    result = run_bounded(
        ["cat", str(layout / "home" / "keys" / "k")], cwd=layout / "other", fence=wall
    )
    assert result.exit_code != 0 and b"Permission denied" in result.stderr
    assert run_bounded(["cat", "f"], cwd=layout / "other", fence=wall).stdout == b"open\n"


def test_a_run_fences_the_gitaudit_home_and_the_key_files(
    layout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITAUDIT_HOME", str(layout / "home"))
    key = layout / "other" / "id_ed25519"
    key.write_text("PRIVATE\n")
    (layout / "other" / "id_ed25519.pub").write_text("ssh-ed25519 AAAA\n")

    class AgentKey:
        key_path = layout / "other" / "id_ed25519.pub"

    (layout / "home" / "cache" / "tree").mkdir()
    wall = fence.for_run(layout / "home" / "cache", keys=fence.key_files(AgentKey()))
    assert {
        os.path.realpath(p) for p in (layout / "home", key, layout / "other" / "id_ed25519.pub")
    } <= set(wall.fenced)
    assert sh(wall, "cat ../home/keys/k", layout / "other").returncode != 0
    assert sh(wall, "cat id_ed25519", layout / "other").returncode != 0
    assert sh(wall, "echo x > ../home/cache/tree/x", layout / "other").returncode == 0


def test_a_run_fences_the_key_files_the_configuration_names_too(
    layout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Besides the run's own key, the keys the configuration names (a sealer's key in
    ``~/.ssh``): a ``.pub`` fences the private key beside it."""
    monkeypatch.setenv("GITAUDIT_HOME", str(layout / "home"))
    sealer = layout / "other" / "id_sealer"
    sealer.write_text("PRIVATE\n")
    (layout / "home" / "cache" / "tree").mkdir()
    keys = fence.key_files(None, [f"{sealer}.pub"])
    assert keys == [f"{sealer}.pub", str(sealer)]
    wall = fence.for_run(layout / "home" / "cache", keys=keys)
    assert sh(wall, "cat id_sealer", layout / "other").returncode != 0
    assert sh(wall, "echo x > ../home/cache/tree/x", layout / "other").returncode == 0


def test_closing_a_fence_ends_its_thread_and_it_can_be_used_again(layout: Path) -> None:
    """A run closes its fence: a process that runs many (the tests, a watch loop) keeps no
    idle thread or ruleset per run."""

    def fence_threads() -> int:
        return sum(t.name == "gitaudit-fence" for t in threading.enumerate())

    before = fence_threads()
    with Fence.around([layout / "home"]) as wall:
        assert sh(wall, "true", layout).returncode == 0
        assert fence_threads() == before + 1
    assert fence_threads() == before
    assert sh(wall, "cat home/keys/k", layout).returncode != 0  # built again on use
    wall.close()
    assert fence_threads() == before


def test_a_thread_that_entered_the_fence_starts_fenced_checks_itself(layout: Path) -> None:
    """A run's workers enter the fence once and start their checks with no hand-off."""
    wall = Fence.around([layout / "home"])
    seen: list[object] = []

    def worker() -> None:
        wall.enter()
        seen.append(sh(wall, "cat home/keys/k", layout).returncode)
        seen.append(threading.current_thread().name)
        try:
            (layout / "home" / "keys" / "k").read_text()
        except PermissionError:
            seen.append("refused")

    before = sum(t.name == "gitaudit-fence" for t in threading.enumerate())
    thread = threading.Thread(target=worker, name="worker")
    thread.start()
    thread.join()
    assert seen[0] != 0 and seen[1:] == ["worker", "refused"]
    assert sum(t.name == "gitaudit-fence" for t in threading.enumerate()) == before
    wall.close()


def test_a_run_leaves_the_global_git_config_readable_not_writable(
    layout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's global git configuration is trusted like the key folder (a declared filter's
    driver comes from it): a check reads it, writes none of it, creates none of it."""
    home = layout / "user"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "config").write_text("[user]\n\tname = u\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.setenv("GITAUDIT_HOME", str(layout / "home"))
    (home / "work").mkdir()  # what is there when the run starts; created later, on the way: not
    wall = fence.for_run(layout / "home" / "cache")
    xdg = home / ".config" / "git" / "config"
    assert sh(wall, f"grep -q name {xdg}", layout).returncode == 0
    assert sh(wall, f"echo [filter] >> {xdg}", layout).returncode != 0
    assert sh(wall, f"echo x > {home}/.gitconfig", layout).returncode != 0
    assert sh(wall, f"echo x > {home}/.config/git/attributes", layout).returncode != 0
    assert xdg.read_text() == "[user]\n\tname = u\n"
    assert not (home / ".gitconfig").exists()
    assert sh(wall, f"echo x > {home}/.cache-new", layout).returncode != 0  # on the way
    assert sh(wall, f"echo x > {home}/work/f", layout).returncode == 0  # beside: open


def test_a_run_leaves_what_the_git_configuration_names_readable_not_writable(
    layout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the configuration names elsewhere (an included file, an attributes file not made
    yet) is trusted like it: a check reads it, writes none of it, creates none of it."""
    monkeypatch.setenv("GITAUDIT_HOME", str(layout / "home"))
    dotfiles = layout / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "extra").write_text("[user]\n\tname = u\n")
    (layout / "beside").mkdir()
    named = [str(dotfiles / "extra"), str(dotfiles / "attrs")]
    wall = fence.for_run(layout / "home" / "cache", named=named)
    assert sh(wall, f"grep -q name {dotfiles}/extra", layout).returncode == 0
    assert sh(wall, f"echo [filter] >> {dotfiles}/extra", layout).returncode != 0
    assert sh(wall, f"echo '* text eol=crlf' > {dotfiles}/attrs", layout).returncode != 0
    assert (dotfiles / "extra").read_text() == "[user]\n\tname = u\n"
    assert not (dotfiles / "attrs").exists()
    assert sh(wall, f"echo x > {layout}/beside/f", layout).returncode == 0


def test_a_run_lets_checks_write_only_their_checkout_home_and_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing above the checkout is a check's: the slot's folder, gitaudit's own folders in
    it (its git's neutral HOME), the other slots, the folders up to the cache and the one
    above it take nothing; the checkout, its private git dir, HOME and TMPDIR do."""
    monkeypatch.setenv("GITAUDIT_HOME", str(tmp_path / "gitaudit"))
    monkeypatch.setenv("GITAUDIT_CACHE", str(tmp_path / "user-cache" / "gitaudit"))
    base = tmp_path / "user-cache" / "gitaudit" / "checkouts" / "0123456789abcdef0123"
    slot = base / "0"
    for name in ("tree", "git", "home", "tmp", "neutral"):
        (slot / name).mkdir(parents=True)
    (base / "1" / "tree").mkdir(parents=True)
    (tmp_path / "user-cache" / "pip").mkdir()
    wall = fence.for_run(slot)
    for ok in ("tree/f", "git/config", "home/.npmrc", "tmp/f", "../../../../pip/f"):
        assert sh(wall, f"echo x > ../{ok} && cat ../{ok}", slot / "tree").returncode == 0, ok
    for refused in (
        "pytest.ini",  # the slot's folder
        "neutral/ignore",
        "../1/tree/conftest.py",
        "../conftest.py",
        "../../package.json",
        "../../../setup.cfg",  # the cache folder
        "../../../../tox.ini",  # above it
    ):
        assert sh(wall, f"echo x > ../{refused}", slot / "tree").returncode != 0, refused
        assert not (slot / refused).exists()
    assert sh(wall, "mkdir ../node_modules", slot / "tree").returncode != 0


@pytest.mark.parametrize("sig", ["0", "TERM", "SEGV"])
def test_a_fenced_check_signals_only_what_it_started(layout: Path, sig: str) -> None:
    """Where the kernel scopes signals (Landlock ABI 6), a check is alone in a domain of its
    own: it signals its children, never the process that started it nor a thread of it (a
    worker that entered the fence included); that process still ends it. Below ABI 6 a check
    signals its parent (the limit the scope removes: signal 0 asks without sending)."""
    wall = Fence.around([layout / "home"])
    # dash says "Terminated" only when `wait` itself reaps the child: when the child ended and
    # its SIGCHLD came before the shell's next command (the scheduler's choice, under load), the
    # shell reaped it between commands and says nothing. Its status alone tells how it ended.
    own = sh(wall, "sleep 30 & kill $!; wait $! 2>/dev/null; echo $?", layout)
    assert own.stdout == "143\n", own.stdout  # its child ended by SIGTERM
    parent = "kill -s {sig} $PPID" if sig != "0" else "kill -0 $PPID"
    threads = f"for t in /proc/$PPID/task/*; do kill -s {sig} ${{t##*/}} || exit 1; done"
    seen: list[int] = []

    def worker() -> None:  # a run's worker: it entered the fence and starts its checks itself
        wall.enter()
        seen.append(sh(wall, threads, layout).returncode)

    if fence.abi() >= 6:
        assert sh(wall, parent.format(sig=sig), layout).returncode != 0
        assert sh(wall, threads, layout).returncode != 0
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert seen == [1]
    else:
        assert wall.child() is None
        assert sh(wall, "kill -0 $PPID", layout).returncode == 0
    child = wall.child()
    sleeper = wall.start(lambda: subprocess.Popen(["sleep", "30"], preexec_fn=child))  # noqa: PLW1509
    sleeper.terminate()
    assert sleeper.wait() == -15
    wall.close()


def test_a_fence_that_cannot_be_drawn_fails_each_check_closed(
    layout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ruleset the kernel refuses: the worker stays as it was (no broken pool, no traceback)
    and every check fails to start, saying why; none runs unfenced."""

    def refuse(_version: int, _fence: Fence) -> int:
        raise OSError(22, "landlock_add_rule")

    monkeypatch.setattr(fence, "_build", refuse)
    wall = Fence.around([layout / "home"])
    wall.enter()  # no exception: the run's pool stays usable
    result = run_bounded(["true"], cwd=layout / "other", fence=wall)
    assert result.exit_code is None and "landlock_add_rule" in (result.start_error or "")
