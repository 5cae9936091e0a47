"""MLflow's own cost per `worldrecall run` invocation: importing mlflow, opening the store, logging the job.

Each invocation is a fresh Python process running a real (small) `worldrecall run` through the CLI's entry
function: the toy benchmark of ``tests/helpers/toy_plugin.py`` on 8 models x 4 cases of 96 frames at 320x240 (so
the job decodes video, as a real run does, with the GIL released), ``workers=1`` (``--workers``), MLflow on,
into a SQLite store under the output root. The numbers are the run's own ``meta/tracking.json``:

  import_s   the MLflow process importing mlflow and its SQL store (on another core than the job's; with
             ``tracking.prefetch=true``, the default, started as the job begins, else when
             logging begins),
  setup_s    the store's own setup: creating/migrating a new SQLite store or opening an existing one,
             the experiment, the stale-run check,
  log_s      logging the job: parent run, one run per (benchmark, model), params, metrics, artifacts,
  mlflow_s   the MLflow process's cost: import_s + setup_s + log_s,
  job_s      what the job's own process spent on MLflow: the plan, the files' blobs, waiting (waited_s),
  run_s      the whole `worldrecall run` call (the job's own work included), to see the net effect.

Cases: the very first fresh store (no template yet: MLflow migrates it), later fresh stores (new output
roots: a copy of the migrated template), and an existing store (a rerun into the same output root: every
row resumed, the earlier MLflow run reused) -- each with the prefetch on (default) and off. Prints the
median and range over ``--repeat`` invocations.

    python benchmarks/mlflow_setup.py [--repeat 3] [--workers 1]
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

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
MODELS = 8

PROBE = """
import contextlib, io, json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from helpers import toy_plugin
from worldrecall.engine.cli import main
from worldrecall.registry import host as host_mod
host_mod._HOST = host_mod.load_plugins(extra=[toy_plugin], fresh=True)
t0 = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(json.loads(sys.argv[1]))
run_s = time.perf_counter() - t0
tj = json.loads(next(Path(sys.argv[2]).glob("results/*/meta/tracking.json")).read_text())
print(json.dumps({"rc": rc, "run_s": run_s, **tj}))
"""


def make_dataset(root: Path, n_cases: int = 4, frames: int = 96) -> dict[str, str]:
    """The toy layout (``cases.json`` + ``gen/<model>/<case>.mp4``) with videos a decoder has work on."""
    import numpy as np

    from worldrecall.formats.mp4 import write_video

    cases = [{"id": f"c{i}", "video": f"c{i}.mp4", "stratum": "ab"[i % 2]} for i in range(n_cases)]
    (root / "data").mkdir(parents=True)
    (root / "data" / "cases.json").write_text(json.dumps({"cases": cases}))
    rng = np.random.default_rng(0)
    for m in range(MODELS):
        for c in cases:
            fr = rng.integers(0, 200, (frames, 240, 320, 3), dtype=np.uint8)
            write_video(root / "gen" / f"m{m}" / c["video"], fr, fps=8, preset="ultrafast")
    return {"data_root": str(root / "data"), "generations": str(root / "gen")}


def run_args(out: Path, ds: dict, prefetch: bool, workers: int) -> list[str]:
    models = {f"m{i}": "ok" for i in range(MODELS)}
    return ["run", f"output_root={out}", "suite=none", "only=[toy]", "+benchmarks.toy.loader=toy",
            "+benchmarks.toy.aligner=toy.halves", f"+benchmarks.toy.data_root={ds['data_root']}",
            f"+benchmarks.toy.generations={ds['generations']}",
            "+benchmarks.toy.metrics={brightness:{params:{},thresholds:{tolerance:10.0}}}",
            "progress=false", f"workers={workers}", "aggregator_params.bootstrap.replicates=50",
            f"aggregator_params.paired.reference={next(iter(models))}", "report.enabled=false",
            f"tracking.prefetch={str(prefetch).lower()}"]


def probe(out: Path, ds: dict, template_dir: Path, prefetch: bool, workers: int) -> dict[str, float]:
    env = {**os.environ, "WORLDRECALL_MLFLOW_TEMPLATE_DIR": str(template_dir)}
    env.pop("MLFLOW_TRACKING_URI", None)
    res = subprocess.run([sys.executable, "-c", PROBE, json.dumps(run_args(out, ds, prefetch, workers)), str(out), str(TESTS)],
                         env=env, capture_output=True, text=True, cwd=ROOT)
    if res.returncode != 0:
        raise SystemExit(f"probe failed:\n{res.stderr[-3000:]}")
    s = json.loads(res.stdout.strip().splitlines()[-1])
    if s["rc"] != 0:
        raise SystemExit(f"worldrecall run exited {s['rc']}:\n{res.stderr[-3000:]}")
    return {"import_s": s["import_s"], "setup_s": s["setup_s"],
            "log_s": s["mlflow_s"] - s["import_s"] - s["setup_s"], "mlflow_s": s["mlflow_s"],
            "job_s": s.get("job_s", 0.0), "run_s": s["run_s"]}


def line(name: str, samples: list[dict[str, float]]) -> str:
    parts = []
    for key in ("mlflow_s", "import_s", "setup_s", "log_s", "job_s", "run_s"):
        xs = [s[key] for s in samples]
        rng = f" [{min(xs):.2f}-{max(xs):.2f}]" if len(xs) > 1 else ""
        parts.append(f"{key} {statistics.median(xs):.2f}{rng}")
    return f"{name:<40} n={len(samples)}  " + "  ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="wr-bench-mlflow-") as tmp:
        tmp_p = Path(tmp)
        ds = make_dataset(tmp_p)
        w = args.workers
        lines = []
        for prefetch in (True, False):
            tpl = tmp_p / f"template-{prefetch}"  # each mode pays its own first migration
            tag = "prefetch on " if prefetch else "prefetch off"
            first = [probe(tmp_p / f"first-{prefetch}", ds, tpl, prefetch, w)]
            fresh = [probe(tmp_p / f"fresh-{prefetch}-{i}", ds, tpl, prefetch, w) for i in range(args.repeat)]
            again = [probe(tmp_p / f"fresh-{prefetch}-0", ds, tpl, prefetch, w) for _ in range(args.repeat)]
            lines += [line(f"{tag}: first fresh store (migrates)", first),
                      line(f"{tag}: later fresh store (template)", fresh),
                      line(f"{tag}: rerun, same output root", again)]
    print(f"seconds per invocation (median [range]), workers={args.workers}; mlflow_s = import_s + setup_s + log_s")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
