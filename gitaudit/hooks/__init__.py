"""Git hooks: the lean entry point (``python -m gitaudit.hooks NAME``) and their installation.
Kept light: nothing is imported here."""
