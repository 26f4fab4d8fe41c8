"""``python -m gitaudit.hooks NAME ARGS``: the entry point the installed shims call."""

from gitaudit.hooks.entry import main
from gitaudit.shutdown import leave

leave(main())
