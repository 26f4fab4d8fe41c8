"""The audit ledger: refs under ``refs/audit/``, their trees, seals, runs and lookups."""
