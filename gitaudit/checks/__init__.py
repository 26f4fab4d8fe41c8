"""Running checks: the bounded subprocess helper and workspace path confinement.

Every check process is started through :func:`gitaudit.checks.process.run_bounded` (time, output and
process-group bounds), and every path a plan names is confined to the workspace with
:func:`gitaudit.checks.paths.confine`. Import those modules directly; this package re-exports
nothing.
"""
