"""``python -m gitaudit.hooks NAME ARGS``: the entry point the installed shims call."""

import sys

from gitaudit.hooks.entry import main

sys.exit(main())
