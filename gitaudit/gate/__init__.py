"""The gate: is this exact tree proven by signed, fresh evidence? Kept light: the hooks' fast
path imports :mod:`gitaudit.gate.memo` alone, so nothing heavy is imported here."""
