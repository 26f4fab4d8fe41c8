"""The one environment policy of every git process gitaudit starts (standard library, ``os``
alone: the fingerprint's head start uses it before anything else is imported).

* Variables through which a caller points git at another repository, index, object store or path
  prefix (set by git for a hook or an alias, by ``git -C``, or by anyone invoking gitaudit) are
  dropped; the repository is always given explicitly (``--git-dir``/``-C``). A server hook sees
  the quarantined objects of a push through pygit2 (:func:`gitaudit.git.repo.open_repo` with
  ``from_env``); no git process of gitaudit needs them.
* ``GIT_NO_REPLACE_OBJECTS=1`` and an empty graft file: ``refs/replace/*`` and grafts never change
  what gitaudit reads. ``-c core.commitGraph=false`` (:data:`CONFIG`): git takes a commit's
  parents and root tree from ``objects/info/commit-graph`` when there is one, and a hand-made
  graph (its checksum is no secret) would lie to ``rev-list`` and ``log`` while ``cat-file``
  shows the real commit.
* ``GIT_OPTIONAL_LOCKS=0``: a read-only command never rewrites (refreshes) an index.
* The places git reads its configuration from are the ones gitaudit looks at: a relative
  ``HOME``, ``XDG_CONFIG_HOME``, ``GIT_CONFIG_GLOBAL`` or ``GIT_CONFIG_SYSTEM`` is made absolute
  from gitaudit's own folder (:data:`PATH_VARS`), and ``GIT_CONFIG`` is dropped, as are git's
  test switches (``GIT_TEST_*``).
* No transport (``GIT_ALLOW_PROTOCOL`` naming none, :data:`NO_TRANSPORT`) but for the fetches
  and pushes gitaudit makes on purpose (``transport=True``): git fetches a partial clone's
  missing objects on demand, and a remote runs what the repository's config names.
* ``GIT_EXEC_PATH`` is dropped: git finds its own programs where it was built to (a ``git``
  planted in a folder the caller names would answer for a submodule). Which ``git`` starts at
  all is :mod:`gitaudit.executables`'.
* :func:`as_it_is`: what git is told whenever gitaudit asks it about a work tree.
* :data:`SEARCH` and :data:`SEARCH_ENV`: what git is told whenever gitaudit has it search a
  ledger's messages (``rev-list --grep``).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

LOCATION_VARS = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_INDEX_VERSION",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_QUARANTINE_PATH",
        "GIT_COMMON_DIR",
        "GIT_PREFIX",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_INTERNAL_SUPER_PREFIX",
        "GIT_SHALLOW_FILE",
        "GIT_GRAFT_FILE",
        "GIT_NAMESPACE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_REPLACE_REF_BASE",
        "GIT_LITERAL_PATHSPECS",
        "GIT_GLOB_PATHSPECS",
        "GIT_NOGLOB_PATHSPECS",
        "GIT_ICASE_PATHSPECS",
        "GIT_ATTR_SOURCE",  # git 2.40: attributes read from a tree of the caller's choosing
    }
)

# What git is told on every command of gitaudit's that writes an index or a ref of the user's
# repository: run no hook. The repository's hooks folder (`.git/hooks`, or the folder
# `core.hooksPath` names from any file of its configuration) is anyone's who writes `.git`, and
# git runs `post-index-change` after every index write, the fingerprint's private index
# included (named in the hook's `GIT_INDEX_FILE`), and `reference-transaction` on every ref
# update: a hook that read HEAD's tree into the private index made an edited work tree
# fingerprint as HEAD's, and any such hook ran the agent's program in the user's `git audit`,
# outside the fence of the checks. `/dev/null` holds no hooks (git finds none there, silently).
NO_HOOKS: tuple[str, ...] = ("-c", "core.hooksPath=/dev/null")

# What git is told whenever gitaudit asks it about a work tree (the fingerprint, the stop hook's
# `git status`): look at the files as they are, and run no hook (:data:`NO_HOOKS`). A
# file-system monitor or an untracked cache answers "nothing changed" on their behalf (a hook the
# repository installs could lie), and the repository's config can blind the stat comparison
# git decides "unchanged" by (`core.checkStat=minimal` ignores change times, inodes and
# sub-second times; `core.trustctime=false` change times): an edit made in place with its
# times put back would then pass unread. `core.symlinks=false` would let a plain file holding a
# link's text stand for the committed link.
AS_IT_IS: tuple[str, ...] = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.checkStat=default",
    "-c",
    "core.trustctime=true",
    "-c",
    "core.ignoreStat=false",
    "-c",
    "core.symlinks=true",
    *NO_HOOKS,
)


# What git is told whenever gitaudit has it search a ledger's commit messages (`rev-list
# --grep`, past the few hundred commits read in Python): the messages as stored, the chain as
# stored. git re-encodes each message into `i18n.logOutputEncoding` (else `i18n.commitEncoding`)
# before matching, so `UTF-16` in the repository's config made no message match; and it stops
# walking at any commit named in the `shallow` file (an empty `GIT_SHALLOW_FILE` is git's own
# "no shallow file", as fetch-pack passes it). Either hid a newer failure from the search for
# the runs of a tree. Not every command gets these: a real shallow clone needs its shallow file
# to fetch. The patterns are fixed strings by the search's own flags (`--fixed-strings`), which
# `grep.patternType` does not override.
SEARCH: tuple[str, ...] = ("-c", "i18n.logOutputEncoding=UTF-8")
SEARCH_ENV: Mapping[str, str] = {"GIT_SHALLOW_FILE": ""}


def as_it_is(work_tree: str | os.PathLike[str]) -> tuple[str, ...]:
    """:data:`AS_IT_IS` for the work tree at *work_tree* (the folder holding ``.git``), with
    ``core.ignorecase`` set to what its file system does: ``true`` in the repository's config
    on a file system that tells ``readme.md`` from ``README.md`` would hide from git a file
    named as a case variant of a tracked one."""
    folds = "true" if folds_case(work_tree) else "false"
    return (*AS_IT_IS, "-c", f"core.ignorecase={folds}")


def folds_case(folder: str | os.PathLike[str]) -> bool:
    """Whether the file system folds the case of names in *folder*, which holds ``.git``: the
    upper-case name ``.GIT`` must reach the very entry ``.git`` is (a folder, or a file with no
    other name: a hard link could join two names on any file system). Nothing is written, and
    when in doubt the answer is no, the stricter reading: git then sees a case variant as
    another file, so a tree differs rather than hides one."""
    import stat

    base = os.fspath(folder)
    try:
        entry = os.lstat(os.path.join(base, ".git"))
        upper = os.lstat(os.path.join(base, ".GIT"))
    except OSError:
        return False
    only_name = stat.S_ISDIR(entry.st_mode) or entry.st_nlink == 1
    return os.path.samestat(entry, upper) and only_name


# git resolves a relative path in these against its own working folder (the work tree's root,
# for the fingerprint), while gitaudit, which looks at the same files to tell whether anything
# converts what git hashes (and to key what it keeps), resolves it against its own: from a
# subfolder, `XDG_CONFIG_HOME=cfg` named an attributes file git read and gitaudit never saw.
# Made absolute from gitaudit's folder, both read the same files.
PATH_VARS = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM")

# `GIT_CONFIG` (git's oldest spelling) makes `git config` read that one file only, while `git
# add` goes on reading the repository's: gitaudit would ask git for the conversions configured
# and hear of none.
CONFIG_VARS_DROPPED = frozenset({"GIT_CONFIG"})

# `GIT_EXEC_PATH` names where git finds its own programs, the `git` it starts for a submodule
# among them (`git add -A` and `git status` in a work tree with one): a `git` planted there
# answered for the submodule. git then uses the folder it was built with.
PROGRAM_VARS_DROPPED = frozenset({"GIT_EXEC_PATH"})

# git's own test switches (`GIT_TEST_SPLIT_INDEX`, `GIT_TEST_FSMONITOR`, ...) override the
# settings gitaudit forces on a private index: `GIT_TEST_SPLIT_INDEX=1` had git write
# `sharedindex.*` files into the user's git dir despite `-c core.splitIndex=false`.
TEST_VARS = "GIT_TEST_"


# git fetches the objects a partial clone lacks from its promisor remote whenever a command needs
# one (`extensions.partialClone`; `rev-parse HEAD^{tree}` with the tree's object deleted), and a
# remote runs what the repository's config names: `core.sshCommand` (also for an https address a
# `url.*.insteadOf` makes ssh), `remote.<name>.uploadpack`, a remote helper. gitaudit refused such
# a repository only after its git had fetched, and the stop hook ran the agent's program outside
# any sandbox of the agent's. A `GIT_ALLOW_PROTOCOL` naming no protocol overrides every
# `protocol.*.allow`: git then refuses every transport. Only `sync` and `push` fetch or push, on
# purpose, and they are given the caller's setting as it is.
NO_TRANSPORT = "GIT_ALLOW_PROTOCOL"


def git_env(extra: Mapping[str, str] | None = None, *, transport: bool = False) -> dict[str, str]:
    """The environment of every git process gitaudit starts (see the module docstring); with
    *transport*, one that may fetch or push (the caller's ``GIT_ALLOW_PROTOCOL`` as it is)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in LOCATION_VARS
        and k not in CONFIG_VARS_DROPPED
        and k not in PROGRAM_VARS_DROPPED
        and not k.startswith(TEST_VARS)
    }
    for name in PATH_VARS:
        value = env.get(name)
        if value and not os.path.isabs(value):
            env[name] = os.path.abspath(value)
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    env["GIT_GRAFT_FILE"] = os.devnull
    env["GIT_OPTIONAL_LOCKS"] = "0"
    # grafts are switched off above; git's hint that they are deprecated is noise to our users
    try:
        n = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        n = -1  # someone else's malformed count: leave git's own handling alone
    if n >= 0:
        env[f"GIT_CONFIG_KEY_{n}"] = "advice.graftFileDeprecated"
        env[f"GIT_CONFIG_VALUE_{n}"] = "false"
        env["GIT_CONFIG_COUNT"] = str(n + 1)
    if extra:
        env.update(extra)
    if not transport:
        env[NO_TRANSPORT] = ""  # a list of the protocols allowed, naming none
    return env


# before every command: the objects as stored, never a commit-graph's summary of them
CONFIG = ("-c", "core.commitGraph=false")


# What git is told when it reads configuration the gate reads with libgit2 (the verdict memo's
# state, :mod:`gitaudit.gate.memo`): read it where libgit2 does, or a value libgit2 never sees
# stands in the state for one it does. libgit2 takes no configuration from variables (the
# `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n` anyone may set, the `GIT_CONFIG_PARAMETERS` of `git -c`)
# and reads the user's and the system's files where they are by default, whatever
# `GIT_CONFIG_GLOBAL`, `GIT_CONFIG_SYSTEM` or `GIT_CONFIG_NOSYSTEM` say.
AS_LIBGIT2: Mapping[str, str] = {"GIT_CONFIG_PARAMETERS": "", "GIT_CONFIG_COUNT": "0"}
UNREAD_BY_LIBGIT2 = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM")


def config_as_libgit2() -> dict[str, str]:
    """:func:`git_env` for a git that reads the configuration as libgit2 does (see above)."""
    env = git_env(AS_LIBGIT2)
    for name in UNREAD_BY_LIBGIT2:
        env.pop(name, None)
    return env
