"""``python -m gitaudit.agent stop|guard [--host HOST]``: the hook commands, without typer."""

import sys

from gitaudit.agent.entry import main

sys.exit(main())
