"""gitaudit: sealed plans, signed evidence and a completion gate, stored in git."""

__version__ = "0.1.0"
