"""Agent hooks: the gate and a guard wired into AI coding hosts (Claude Code, or any host that
runs a command and honours exit code 2). See docs/agent-hooks.md."""
