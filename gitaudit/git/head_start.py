"""The fingerprint's head start: git hashes the work tree while gitaudit is still importing.

``status``, ``run`` and the agent's stop hook judge the work tree as it is when they start, and
the ``git add -A`` that fingerprints it (:mod:`gitaudit.git.fingerprint`) is their longest
step, about one ``git status``. In the usual case it needs nothing but the repository's place,
gitaudit's kept index for it and the settings, found here with the standard library's ``os``
(a few milliseconds of imports, against about 30 for the fingerprint's module and what it
brings), so git starts hashing about as soon as the interpreter is up.

Nothing is trusted here. The kept index is copied as it is, its tag unchecked, and the
descriptor it was copied from stays open: the fingerprint checks the tag against that
descriptor, and that nothing wrote the file meanwhile, before it takes git's result; otherwise
it throws the result away and computes the fingerprint from the start. Only the usual case gets
a head start: HEAD is a commit, the repository's config names no content filter and includes
no other file, and a kept
index exists whose tag names the current version of the user's index. Anything else (the first
call, a new version of the user's index, new settings) is left to the fingerprint.
"""

from __future__ import annotations

import contextlib
import os
import time

from gitaudit.executables import git_program
from gitaudit.git import index_files
from gitaudit.git.environment import CONFIG, as_it_is, git_env
from gitaudit.git.spawn import DEVNULL, PIPE, Process
from gitaudit.held import Held
from gitaudit.places import entered_worktree, fingerprint_dir, inside, sha256_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitaudit.git.index_files import Tagged

LOCATE = ("rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir", "--show-toplevel")
"""Where the repository is: git dir, common dir, work tree (then HEAD's commit and tree)."""

# Settings forced on the git processes that touch a private index.  The split index would make
# git create `sharedindex.*` files in the user's git dir (and hide the true entry count); sparse
# checkout would make `add -A` refuse or skip paths outside the cone; the embedded-repo advice is
# noise on stderr.
INDEX_CONFIG: tuple[str, ...] = (
    "-c",
    "core.splitIndex=false",
    "-c",
    "core.sparseCheckout=false",
    "-c",
    "index.sparse=false",
    "-c",
    "advice.addEmbeddedRepo=false",
    "-c",
    "index.version=4",
)
ADD_ALL = ("add", "-A", "--verbose", "--no-ignore-errors")
"""What the fingerprint asks of git: hash every change into the private index, and say which
(and stop at a file it cannot add, whatever ``add.ignoreErrors`` the repository sets: with it,
git leaves the file out, goes on and exits 1, which a part of a hash in parts could pass for
the exit of an ignored path excluded)."""
ADD_ENV = {"LC_ALL": "C", "LANGUAGE": "C"}
"""git's report untranslated: the fingerprint reads it."""


def unread(messages: bytes) -> str | None:
    """The first line of a ``git add -A`` run's *messages* (stderr) saying git could not read
    something of the work tree, or None. git goes on and exits 0 when it cannot ``lstat`` a
    file it tracks (it prints the path and the reason, and keeps the entry as it was: the
    blob of the index it was given), or open a folder (its untracked files go unseen), or read
    an ignore or attributes file: each such message ends in the system's reason for the error
    (``strerror``, untranslated under :data:`ADD_ENV`). Those, and any ``error:`` or
    ``fatal:`` line, are refusals: the tree git writes would not be the work tree's. A line
    of another program (a clean filter's) that ends like one refuses too."""
    if not messages:
        return None
    import errno

    reasons = {os.strerror(code) for code in errno.errorcode}
    for raw in messages.split(b"\n"):
        line = raw.decode("utf-8", "surrogateescape").rstrip("\r")
        if line.startswith(("error: ", "fatal: ")) or line.rpartition(": ")[2] in reasons:
            return line
    return None


# Sections of git's configuration that never change what `git add` makes of a file: a write to
# them (`git push -u`, `git remote add`, `git config user.email`, gitaudit's own `audit.*`) keeps
# the kept index. Any other section counts, and so does anything not read as one of these.
INERT_SECTIONS = frozenset(
    [
        *("advice", "alias", "audit", "author", "blame", "branch", "color", "column", "commit"),
        *("committer", "credential", "diff", "difftool", "fetch", "format", "gc", "gpg", "grep"),
        *("gui", "help", "http", "init", "log", "maintenance", "merge", "mergetool", "notes"),
        *("pager", "pretty", "protocol", "pull", "push", "rebase", "receive", "remote", "rerere"),
        *("sendemail", "stash", "status", "tag", "transfer", "url", "user"),
    ]
)


def config_part(path: str) -> str:
    """What of the repository's config file at *path* the kept index depends on: its lines
    outside the :data:`INERT_SECTIONS` (digested). Only what is plainly inert is left out: a
    section header with anything after it on its line (git reads a second header there), and
    every line after it until the next header, count; lines are split where git splits them
    (a lone carriage return is no line break to git); a file with a value continued on the
    next line (a backslash before the line break) counts whole. A file that includes others
    counts by its stat data, whole, like the other settings files."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return "-"
    if b"include" in data.lower():
        return _stat_part(path)
    if b"\\\n" in data.replace(b"\r\n", b"\n") or data.endswith(b"\\"):
        # a value continued on the next line: git reads that line as part of the value, even
        # one that looks like a header, and the lines after it as the section it continues
        return sha256_hex(data)
    kept = []
    inert = False
    for line in data.split(b"\n"):
        text = line.strip()
        if text.startswith(b"["):
            header, closed, rest = text[1:].partition(b"]")
            name = header.split(b'"', 1)[0].strip().split(b".", 1)[0].lower()
            plain = closed and (not rest.strip() or rest.lstrip()[:1] in (b"#", b";"))
            inert = bool(plain) and name.decode("ascii", "replace") in INERT_SECTIONS
        if text and not inert:  # a blank line means nothing to git
            kept.append(line)
    return sha256_hex(b"\n".join(kept))


def _stat_part(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


_FORMAT = "faithful-1"
"""What a kept index vouches for: since ``faithful-1``, that each file it holds was compared with
what a checkout writes for its blob when git hashed it (kept indexes made before are not used)."""


def settings_signature(git_dir: str, common_dir: str) -> str:
    """What outside the work tree changes how git hashes files: the repository's config (what
    of it counts, :func:`config_part`), the stat data of the other settings files, and the
    settings given in the environment.

    Attributes and filters (``core.autocrlf``, ``filter.*.clean``, ``info/attributes``) decide the
    blob a file hashes to.  A kept result holds blobs hashed under the settings of its time, so it
    is only reused while none of these changed.
    """
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    others = [
        os.path.join(common_dir, "info", "attributes"),
        os.environ.get("GIT_CONFIG_GLOBAL") or os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        os.path.join(xdg, "git", "attributes"),
        os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig",
    ]
    parts = [
        _FORMAT,
        config_part(os.path.join(common_dir, "config")),
        config_part(os.path.join(git_dir, "config.worktree")),
        *(_stat_part(path) for path in others),
        os.environ.get("GIT_CONFIG_PARAMETERS", ""),
        os.environ.get("GIT_CONFIG_COUNT", ""),
        os.environ.get("GIT_CONFIG_NOSYSTEM", ""),
    ]
    for n in range(min(_count(os.environ.get("GIT_CONFIG_COUNT")), 1000)):
        parts.append(os.environ.get(f"GIT_CONFIG_KEY_{n}", "") + "=")
        parts.append(os.environ.get(f"GIT_CONFIG_VALUE_{n}", ""))
    return "|".join(parts)


def _count(text: str | None) -> int:
    try:
        return max(0, int(text or "0"))
    except ValueError:
        return 0


def warm_path(private_dir: str, git_dir: str, common_dir: str) -> str:
    """The kept index for the current settings: named after their signature."""
    slot = sha256_hex(settings_signature(git_dir, common_dir).encode())
    return os.path.join(private_dir, f"{index_files.WARM_PREFIX}{slot[:32]}.index")


def temp_path(private_dir: str) -> str:
    """A new per-process private index name (:data:`index_files.TEMP_PREFIX`)."""
    name = f"{index_files.TEMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}.index"
    return os.path.join(private_dir, name)


def base_path(temp: str) -> str:
    """The second name of a private index's seed (the fingerprint's ``_copy_base``)."""
    return temp.removesuffix(".index") + "-base.index"


def user_index_identity(git_dir: str) -> str | None:
    """:func:`index_files.identity` of the user's index now; None when there is none."""
    try:
        fd = os.open(os.path.join(git_dir, "index"), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        return index_files.identity(fd, os.fstat(fd))
    finally:
        os.close(fd)


def may_name_filters(config: str) -> bool:
    """Whether the config file *config* may define a content filter: the word appears in it, or
    it includes other files (in any letter case; git decides, for the fingerprint)."""
    try:
        with open(config, "rb") as handle:
            text = handle.read().lower()
    except OSError:
        return False
    return b"filter" in text or b"include" in text


class Started:
    """A ``git add -A`` started on a copy of the kept index, not yet trusted."""

    __slots__ = (
        "before",
        "common_dir",
        "git_dir",
        "head",
        "head_tree",
        "identity",
        "kept",
        "launched_ns",
        "process",
        "settings",
        "start",
        "streams",
        "temp",
        "warm",
        "work_tree",
    )

    def __init__(self, start: str, where: list[str], private_dir: str, warm: str) -> None:
        self.start = start
        self.git_dir, self.common_dir, self.work_tree, self.head, self.head_tree = where
        self.settings = as_it_is(self.work_tree)
        self.warm = warm
        self.temp = temp_path(private_dir)
        self.identity: str | None = None
        self.kept: Tagged | None = None
        self.before: tuple[int, int] | None = None
        self.streams: list[int] = []  # git's output and messages: unlinked files, read here
        self.process: Process | None = None
        self.launched_ns = 0  # the clock when the copy began: git reads the work tree after it

    @property
    def base(self) -> str:
        return base_path(self.temp)

    def covers(self, folder: str) -> bool:
        """Whether *folder* (a real path) is in this work tree (the one git enters from it)."""
        return folder == self.start or entered_worktree(folder) == os.path.realpath(self.work_tree)

    def launch(self) -> bool:
        """Copy the kept index and start git on the copy; False (nothing left behind) when the
        kept index does not name the user's current index."""
        self.launched_ns = time.time_ns()
        try:
            git = git_program(self.work_tree, os.environ)  # git_env keeps PATH as it is
        except FileNotFoundError:  # no git gitaudit may run: the fingerprint says so in full
            return False
        self.identity = user_index_identity(self.git_dir)
        self.kept = index_files.open_kept(self.warm)
        if self.kept is None or self.identity is None or self.kept.basis != self.identity:
            return False
        index_files.copy_open_file(self.kept.fd, self.kept.st, self.temp)
        os.link(self.temp, self.base)
        st = os.stat(self.temp)
        self.before = (st.st_ino, st.st_mtime_ns)
        # files, not pipes: nobody reads git's report until the rest is imported, and a pipe
        # would stop git once full (a report of many untracked files); unlinked at once
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        for suffix in ("-out", "-err"):
            self.streams.append(os.open(self.temp + suffix, flags, 0o600))
            os.unlink(self.temp + suffix)
        env = {
            "GIT_DIR": self.git_dir,
            "GIT_WORK_TREE": self.work_tree,
            "GIT_INDEX_FILE": self.temp,
            **ADD_ENV,
        }
        argv = [git, "-C", self.work_tree, *CONFIG, *INDEX_CONFIG, *self.settings, *ADD_ALL]
        out, err = self.streams
        self.process = Process(argv, env=git_env(env), stdout=out, stderr=err)
        return True

    def finish(self) -> tuple[int, bytes, bytes]:
        """Wait for git: its exit code, report and messages."""
        assert self.process is not None
        code = self.process.wait()
        out, err = (os.pread(fd, os.fstat(fd).st_size, 0) for fd in self.streams)
        return code, out, err

    def discard(self, *, keep_index: bool = False) -> None:
        """Stop git if it still runs and remove what the head start wrote (all of it, or all
        but the private index and its seed's second name, which the fingerprint takes on)."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            self.process.wait()
        if self.kept is not None:
            self.kept.close()
        while self.streams:
            os.close(self.streams.pop())
        if keep_index:
            return
        for name in (self.temp, self.temp + ".lock", self.base):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)


_STARTED: list[Started] = []  # at most one: taken by the fingerprint of its work tree


def launch(repo_path: str | os.PathLike[str]) -> bool:
    """Start fingerprinting the work tree containing *repo_path* now if this is the usual case
    (see the module docstring); whether git is hashing. Once per work tree: another one started
    before is stopped. Never raises: the fingerprint itself explains what is wrong."""
    try:
        start = _folder(repo_path)
        if any(s.covers(start) for s in _STARTED):
            return True
        started = _launch(start)
    except (OSError, ValueError):
        return False
    if started is None:
        return False
    if not _STARTED:
        import atexit

        atexit.unregister(_discard_at_exit)  # registered once
        atexit.register(_discard_at_exit)
    _discard_at_exit()  # at most one: the last one started
    _STARTED.append(started)
    return True


def _folder(repo_path: str | os.PathLike[str]) -> str:
    """The real path of the folder *repo_path* is, or is in."""
    path = os.path.realpath(os.fspath(repo_path))
    return path if os.path.isdir(path) else os.path.dirname(path)


def _launch(start: str) -> Started | None:
    # spawn's Process, not gitaudit.git.call's run_git: its error classes bring enum, about 2 ms
    # before git could start
    environment = git_env()
    try:
        git = git_program(start, environment)
    except FileNotFoundError:  # no git gitaudit may run: the fingerprint says so in full
        return None
    argv = [git, "-C", start, *CONFIG, *LOCATE, "HEAD^{commit}", "HEAD^{tree}", "--"]
    # killed on Ctrl-C, also one that lands as Process returns (held until the block can kill it)
    with Held() as held, Process(argv, env=environment, stdout=PIPE, stderr=DEVNULL) as proc:
        held.release()
        out, _ = proc.communicate()
    where = out.decode("utf-8", "surrogateescape").splitlines()
    if proc.returncode != 0 or len(where) < 5:
        return None
    git_dir, common_dir, work_tree = where[:3]
    private_dir = fingerprint_dir(git_dir)
    if (
        os.path.realpath(work_tree) != entered_worktree(start)
        or inside(private_dir, work_tree, git_dir, common_dir)
        or may_name_filters(os.path.join(common_dir, "config"))
        or may_name_filters(os.path.join(git_dir, "config.worktree"))
    ):
        return None
    started = Started(start, where[:5], private_dir, warm_path(private_dir, git_dir, common_dir))
    try:
        if started.launch():
            return started
    except BaseException:
        started.discard()
        raise
    started.discard()
    return None


def take(repo_path: str | os.PathLike[str]) -> Started | None:
    """The started fingerprint of the work tree containing *repo_path*, once; any other is
    stopped and removed."""
    wanted = _folder(repo_path)
    found = None
    while _STARTED:
        started = _STARTED.pop()
        if started.covers(wanted):
            found = started
        else:
            started.discard()
    return found


def located(repo_path: str | os.PathLike[str]) -> tuple[str, str, str] | None:
    """Where the started fingerprint of the work tree containing *repo_path* found the
    repository: git dir, work tree and common dir, absolute, as git printed them; None when
    none was started for it."""
    wanted = _folder(repo_path)
    for started in _STARTED:
        if started.covers(wanted):
            return started.git_dir, started.work_tree, started.common_dir
    return None


def _discard_at_exit() -> None:
    """A head start nobody took (the command failed first) is stopped and removed: a command
    leaves nothing behind."""
    while _STARTED:
        _STARTED.pop().discard()
