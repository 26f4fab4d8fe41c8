"""The run: executing a sealed plan (runner) and recording its signed evidence (recorder)."""
