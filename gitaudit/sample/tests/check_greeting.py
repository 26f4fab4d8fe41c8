"""Test step: the built greeting is exactly what the user asked for."""

import sys
from pathlib import Path

text = Path("build/greeting.txt").read_text().strip()
if text != "Hello, world!":
    sys.exit(f"unexpected greeting: {text!r}")
print("greeting ok:", text)
