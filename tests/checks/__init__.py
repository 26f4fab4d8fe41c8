"""Tests for gitaudit.checks: bounded processes and workspace paths."""
