"""``python -m gitaudit.hooks NAME ARGS``: the hook entry point by module name (the pre-commit
framework's entries, hand-written server hooks, shims installed before v2). The installed shims
call :func:`gitaudit.hooks.entry.run` through ``python -P -c`` instead: runpy costs about 2 ms."""

from gitaudit.hooks.entry import run

run()
