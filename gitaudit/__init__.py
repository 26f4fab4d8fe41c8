"""gitaudit: sealed plans, signed evidence and a completion gate, stored in git."""

__all__ = ["__version__"]

try:  # written from the git tags when the package is built or installed (hatch-vcs)
    from gitaudit._version import __version__
except ImportError:  # a source tree that was never built or installed
    __version__ = "0.0.0+unknown"
