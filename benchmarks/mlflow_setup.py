"""MLflow's own cost per `worldrecall run` invocation: importing mlflow, and setting up the store.

Each invocation is a fresh Python process (as a real `worldrecall run` is) that first imports what a run
has already imported (pandas, numpy, the engine), then opens the tracker exactly as a run does. Prints,
per case, the median and range over ``--repeat`` invocations of

  import_s  Python importing mlflow and its SQL store (paid by every process that logs),
  setup_s   the store's own setup: creating/migrating a new SQLite store or opening an existing one,
            the experiment, the stale-run check.

Cases: the very first fresh store (no template yet: MLflow migrates it), later fresh stores (new output
roots: a copy of the migrated template), and an existing store (a rerun into the same output root).

    python benchmarks/mlflow_setup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """
import json, sys
import numpy, pandas, worldrecall.engine.job  # a run has these loaded before it tracks
from worldrecall.engine.sinks.tracking.tracker import Tracker
t = Tracker({"experiment": "worldrecall"}, sys.argv[1])
print(json.dumps({"import_s": t.import_s, "setup_s": t.setup_s}))
"""


def probe(output_root: Path, template_dir: Path) -> dict[str, float]:
    env = {**os.environ, "WORLDRECALL_MLFLOW_TEMPLATE_DIR": str(template_dir)}
    env.pop("MLFLOW_TRACKING_URI", None)
    out = subprocess.run([sys.executable, "-c", PROBE, str(output_root)], env=env, capture_output=True,
                         text=True, check=True, cwd=Path(__file__).resolve().parents[1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def line(name: str, samples: list[dict[str, float]]) -> str:
    parts = []
    for key in ("import_s", "setup_s"):
        xs = [s[key] for s in samples]
        parts.append(f"{key} {statistics.median(xs):.2f} s [{min(xs):.2f}-{max(xs):.2f}]")
    return f"{name:<44} n={len(samples)}  " + "  ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="wr-bench-mlflow-") as tmp:
        tmp_p = Path(tmp)
        tpl = tmp_p / "template"
        first = [probe(tmp_p / "first", tpl)]
        fresh = [probe(tmp_p / f"fresh{i}", tpl) for i in range(args.repeat)]
        again = [probe(tmp_p / "fresh0", tpl) for _ in range(args.repeat)]
    print(line("first fresh store (migrates, saves template)", first))
    print(line("later fresh store (copy of the template)", fresh))
    print(line("existing store (rerun, same output root)", again))


if __name__ == "__main__":
    main()
