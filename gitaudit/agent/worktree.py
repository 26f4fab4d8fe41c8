"""The tree id of the work tree for the stop hook, with the verdict memo's snapshot.

The work tree's id is its fingerprint (:func:`gitaudit.git.fingerprint.workspace_fingerprint`),
never what ``git status`` says of it: status trusts the stat data, marks and cached tree ids of
the user's index, which anyone who writes ``.git`` can set, while the fingerprint hashes every
file whose stat data differs from what git recorded when it last hashed it *for gitaudit*. The
fingerprint starts first (its head start, :mod:`gitaudit.git.head_start`, or a thread): git
hashes while this process imports the rest and reads the memo's snapshot with git processes of
its own (where the repository is, the head start has already asked git), so the hook costs
about one fingerprint. Standard library only.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the agent hooks do without typing (gitaudit.named)
if TYPE_CHECKING:
    from gitaudit.gate import memo


def state(root: str) -> tuple[str, memo.Snapshot | None]:
    """The work tree's tree id and the memo's snapshot of the repository at *root*."""
    from gitaudit.git import head_start

    launched = head_start.launch(root)
    from gitaudit.gate import memo
    from gitaudit.git import fingerprint

    if not launched:
        fingerprint.prefetch(root, head_start_tried=True)
    found = memo.snapshot(root, located=head_start.located(root) if launched else None)
    tree = fingerprint.workspace_fingerprint(root).tree
    return tree, found[0] if found is not None else None
