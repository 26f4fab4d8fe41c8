"""The sealed-repository fixture of tests/run, for the edge-case tests."""

from tests.run.conftest import sealed

__all__ = ["sealed"]
