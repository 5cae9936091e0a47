"""Pipeline benchmark on the synthetic suite, measured in one run of this script.

Prints:
  (a) cost of an 8-configuration threshold sweep / cost of one run (both cold: empty measurement cache),
  (b) decodes per video per run,
  (c) end-to-end wall time / model-forward time (time spent inside perception backends),
  plus the warm re-run time (everything cached).

    python benchmarks/pipeline.py [--n-cases 24] [--sweep-key benchmarks.memobench.metrics.ors.thresholds.area_max]

The suite is built once before timing (its build time is reported separately).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from worldrecall.core.cli import compose
from worldrecall.core.runner import Runner
from worldrecall.registry.host import load_plugins

SWEEP_VALUES = ["0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"]


def _cfg(out: Path, suite_cache: Path, n_cases: int, extra: list[str]) -> dict:
    return compose([f"output_root={out}", f"cache_dir={out / 'cache'}", "tracking=none", "progress=false",
                    f"suite.root={suite_cache}", f"suite.params.n_cases={n_cases}", *extra])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-cases", type=int, default=24)
    ap.add_argument("--sweep-key", default="benchmarks.memobench.metrics.ors.thresholds.area_max")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="wr-bench-"))
    suite = work / "suite"
    host = load_plugins()

    t0 = time.perf_counter()
    Runner(_cfg(work / "warmup", suite, args.n_cases, ["only=[]"]), host).build_suite()
    build = time.perf_counter() - t0

    # one run, cold measurement cache
    t0 = time.perf_counter()
    single = Runner(_cfg(work / "single", suite, args.n_cases, []), host).run()
    t_single = time.perf_counter() - t0

    # warm re-run of the same config (rows final -> resume; then a fresh results dir with warm cache)
    t0 = time.perf_counter()
    Runner(_cfg(work / "single", suite, args.n_cases, ["aggregator_params.bootstrap.seed=1"]), host).run()
    t_warm = time.perf_counter() - t0

    # 8-configuration sweep, cold cache: the first config measures, the other 7 re-score
    t0 = time.perf_counter()
    sweep_out = work / "sweep"
    decodes = []
    for v in SWEEP_VALUES:
        res = Runner(_cfg(sweep_out, suite, args.n_cases, [f"{args.sweep_key}={v}"]), host).run()
        decodes.append(res.cache_stats)
    t_sweep = time.perf_counter() - t0

    counts = list(single.decode_counts.values())
    model_s = sum(single.model_seconds.values())
    e2e = single.timing.get("total", t_single) - single.timing.get("suite_build", 0.0)
    report = {
        "suite_build_s": round(build, 2),
        "single_run_cold_s": round(t_single, 2),
        "single_run_warm_s": round(t_warm, 2),
        "sweep8_cold_s": round(t_sweep, 2),
        "(a) sweep8 / single": round(t_sweep / t_single, 3),
        "(b) decodes per video (mean, max)": [round(sum(counts) / max(len(counts), 1), 3), max(counts, default=0)],
        "videos decoded": len(counts),
        "(c) end-to-end / model-forward": round(e2e / model_s, 3) if model_s else None,
        "model_forward_s": {k: round(v, 2) for k, v in single.model_seconds.items()},
        "timing_single": {k: round(v, 2) for k, v in single.timing.items()},
        "sweep_cache_stats": decodes,
        "cases": single.n_cases,
    }
    print(json.dumps(report, indent=2))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
