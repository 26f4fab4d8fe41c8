"""Build step: render the greeting into build/greeting.txt (build/ is git-ignored)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from greeter import greeting  # noqa: E402

out = Path("build")
out.mkdir(exist_ok=True)
(out / "greeting.txt").write_text(greeting("world") + "\n")
print("wrote build/greeting.txt")
