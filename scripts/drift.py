"""How far today's unpinned resolution has drifted from requirements.lock (CI prints it; never fails on drift).

    python scripts/drift.py      # runs `pip install --dry-run --ignore-installed --report` on .[all,ui,dev]

Prints one line per package whose newest allowed release differs from the locked one, then a count. Exit 0
whatever it finds; exit 1 only when pip itself could not resolve (the ranges in pyproject.toml are broken).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def locked(path: Path) -> dict[str, str]:
    """name -> version pinned in a hashed requirements file."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;\\]+)", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(3)
    return out


def main() -> int:
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
                          "--report", "-", f"{ROOT}[all,ui,dev]"], capture_output=True, text=True)
    if res.returncode != 0:
        print(f"drift: pip could not resolve the unpinned set: {res.stderr.strip()[-500:]}")
        return 1
    report = json.loads(res.stdout)
    fresh = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"] for i in report["install"]}
    lock = locked(ROOT / "requirements.lock")
    changed = [(n, lock.get(n, "-"), fresh.get(n, "-")) for n in sorted(set(lock) | set(fresh))
               if n != "worldrecall" and lock.get(n) != fresh.get(n)]
    for name, old, new in changed:
        print(f"drift: {name} {old} (locked) -> {new} (unpinned today)")
    print(f"drift: {len(changed)} of {len(lock)} locked packages differ from an unpinned install today")
    return 0


if __name__ == "__main__":
    sys.exit(main())
