"""Output-root growth, by part, as users run it: a default run, then the same command again (a warm rerun), then
the README's kind of 2-value sweep (``-m … area_min=0.011,0.021``) in the same output root.

Prints the output root's size by part (``worldrecall.engine.sinks.disk.usage``: bytes on disk, a hard-linked file
counted once, as ``du`` counts them) after each step, and what the rerun and the rerun plus the sweep added
(issue 47's target: at most 20 MB for both).

    python benchmarks/output_growth.py [--n-cases 24] [--suite DIR] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from pipeline import SWEEP_KEY, user_env, worldrecall_command


def main() -> None:
    from worldrecall.engine.sinks.disk import usage

    ap = argparse.ArgumentParser()
    ap.add_argument("--n-cases", type=int, default=24)
    ap.add_argument("--suite", default=None, help="a suite folder built before (same --n-cases)")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="wr-growth-"))
    shutil.rmtree(work / "out", ignore_errors=True)
    suite = Path(args.suite).resolve() if args.suite else work / "suite"
    common = [f"output_root={work / 'out'}", f"suite.root={suite}", f"suite.params.n_cases={args.n_cases}",
              "progress=false"]

    def run(*extra: str) -> None:
        flags = [e for e in extra if e.startswith("-")]
        cmd = [*worldrecall_command(), "run", *flags, *common, *[e for e in extra if not e.startswith("-")]]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=user_env(), check=False)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")

    def sizes() -> dict[str, int]:
        got = usage(work / "out")
        # the built suite lives outside the output root when --suite is given; inside, it is cache/synthetic
        return dict(sorted(got.items()))

    run()
    first = sizes()
    run()
    rerun = sizes()
    run("-m", f"{SWEEP_KEY}=0.011,0.021")
    sweep = sizes()

    def grew(a: dict[str, int], b: dict[str, int]) -> dict[str, float]:
        parts = sorted(set(a) | set(b))
        return {k: round((b.get(k, 0) - a.get(k, 0)) / 1e6, 2) for k in parts if b.get(k, 0) != a.get(k, 0)}

    print(json.dumps({
        "default run, MB by part": {k: round(v / 1e6, 2) for k, v in first.items()},
        "default run, MB": round(sum(first.values()) / 1e6, 1),
        "rerun adds, MB": round((sum(rerun.values()) - sum(first.values())) / 1e6, 2),
        "rerun adds, by part": grew(first, rerun),
        "rerun + 2-value sweep add, MB (target <= 20)": round((sum(sweep.values()) - sum(first.values())) / 1e6, 2),
        "rerun + 2-value sweep add, by part": grew(first, sweep),
    }, indent=2))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
