"""Fault injection: kills, write errors, concurrency and load, with real git and real processes."""
