"""The commit-msg hook's mode, at the unit level: the sealed policy is a floor that
``audit.commitMsg`` (in ``.git/config``, which an agent can write) may only raise.

End to end (a real commit through the installed hook): ``tests/adversarial/test_commit_msg.py``.
"""

from __future__ import annotations

import pytest

from gitaudit.hooks.entry import _configured_mode, commit_mode


def test_the_configured_mode_is_read_from_git_config_output() -> None:
    """``git config --get-regexp`` output, as the memo keeps it: names lower-cased, the last
    value wins (as with ``git config --get``), other keys ignored."""
    config = "core.bare false\naudit.commitmsg Strict\nuser.name audit.commitmsg off\n"
    assert _configured_mode(config) == "strict"
    assert _configured_mode(config + "audit.commitmsg  Off \n") == "off"
    assert _configured_mode("audit.commitmsgs strict\nxaudit.commitmsg strict\n") is None
    assert _configured_mode("") is None


@pytest.mark.parametrize(
    ("policy", "configured", "mode"),
    [
        ("off", None, "off"),
        ("off", "claims", "claims"),
        ("off", "strict", "strict"),
        ("claims", "off", "claims"),
        ("strict", "claims", "strict"),
        ("claims", "bogus", "claims"),
    ],
)
def test_the_configuration_only_raises_the_policy(
    policy: str, configured: str | None, mode: str
) -> None:
    assert commit_mode(policy, configured) == mode
    assert commit_mode(policy, _configured_mode(f"audit.commitmsg {configured}")) == mode
