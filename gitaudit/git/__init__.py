"""Git plumbing: the environment of git processes, the repository handle, the workspace
fingerprint."""
