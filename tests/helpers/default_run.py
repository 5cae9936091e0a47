"""One fresh default run per test session, through the CLI as a user types it: ``worldrecall run
output_root=<tmp>`` with the default config (suite built from scratch, every benchmark, MLflow and report on).

The README's figures (validity table, gate table, printed leaderboard) and the gate-neutrality counts are all
read from this one run (``tests/conftest.py``'s ``default_run`` fixture), so the suite pays for one default
run (~2.5 min plus the suite build), not one per test file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class DefaultRun:
    """What the run left: its results folder (``tables/``, ``meta/``), what it printed, its exit code."""

    output_root: Path
    results_dir: Path
    stdout: str
    returncode: int

    @property
    def tables(self) -> Path:
        return self.results_dir / "tables"

    def n_failed(self) -> int:
        """The failed cases the run printed (``cases: N  failed: F …``)."""
        m = re.search(r"^cases: \d+\s+failed: (\d+)", self.stdout, re.MULTILINE)
        assert m, self.stdout[-2000:]
        return int(m.group(1))

    def suite_digest(self) -> str:
        """The built suite's name and content digest, as ``docs/figures/suite_digest.txt`` records them."""
        cfg = json.loads((self.results_dir / "meta" / "resolved_config.json").read_text())
        root = Path(cfg["suite"]["root"])
        manifest = json.loads((root / "manifest.json").read_text())
        return f"suite {root.name} content sha256 {manifest['content_digest']}\n"


def default_run(output_root: Path, extra: tuple[str, ...] = ()) -> DefaultRun:
    """``worldrecall run output_root=<output_root>`` in a fresh interpreter (this checkout's code), as a user runs it
    (``extra``: overrides after it, to try this helper on a smaller suite; the fixture passes none)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    env.pop("WORLDRECALL_OUTPUT", None)
    code = "import sys; from worldrecall.engine.cli import main; sys.exit(main())"
    res = subprocess.run([sys.executable, "-c", code, "run", f"output_root={output_root}", "progress=false", *extra],
                         cwd=output_root, env=env, capture_output=True, text=True, timeout=3600)
    found = sorted((output_root / "results").glob("*/tables/validity.csv"))
    assert res.returncode == 0 and len(found) == 1, (res.returncode, found, res.stderr[-3000:])
    return DefaultRun(output_root, found[0].parent.parent, res.stdout, res.returncode)
