"""A rerun that finds nothing changed imports neither pandas nor openpyxl: the modules on its path take pandas
as ``core/lazy.py``'s ``pandas`` and MemoBench's phase sheet is kept parsed between runs (test_code_memo.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OTHER_METRICS = ["visual_quality", "motion_smoothness", "obj_identity", "geo3d", "ors", "camera_controllability",
                 "image_reward", "gt_revisit_sim", "camera_gate", "vqa"]


def _run(out: Path, probe: bool = True) -> subprocess.CompletedProcess:
    code = ("import sys\nfrom worldrecall.engine.cli import main\ntry:\n    rc = main(sys.argv[1:])\n"
            "except SystemExit as e:\n    rc = e.code\n"
            "print('imported:', sorted(m for m in ('pandas', 'openpyxl') if m in sys.modules), file=sys.stderr)\n"
            "sys.exit(rc)\n")
    cmd = [sys.executable, "-c", code, "run", f"output_root={out}", "tracking=none", "progress=false",
           "only=[memobench]", "models_only=[oracle,frozen_camera]", "suite.params.n_cases=2",
           "suite.params.width=96", "suite.params.height=72", "suite.params.gt_frames=24",
           "suite.params.gen_frames=20", "workers=1", "aggregator_params.bootstrap.replicates=20",
           "aggregator_params.paired.replicates=20",
           *[f"++benchmarks.memobench.metrics.{m}.enabled=false" for m in OTHER_METRICS]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_an_unchanged_rerun_imports_neither_pandas_nor_openpyxl(tmp_path):
    out = tmp_path / "out"
    first = _run(out)
    assert "imported: ['openpyxl', 'pandas']" in first.stderr  # the first run reads the sheet and aggregates
    again = _run(out)
    assert "outputs unchanged" in again.stdout, again.stdout[-2000:]
    assert "imported: []" in again.stderr, again.stderr[-2000:]


def test_the_mlflow_process_imports_no_hydra():
    """The MLflow process (sinks/tracking/process.py) reads the modules that plan and log runs, never a config:
    Hydra and OmegaConf (~0.3 s of its core, beside the job's outputs) stay out of it."""
    code = ("import sys\n"
            "from worldrecall.engine.sinks.tracking.reuse import reusable\n"
            "from worldrecall.engine.sinks.tracking.runs import finish_job, open_planned\n"
            "from worldrecall.engine.sinks.tracking.tracker import Tracker\n"
            "print(sorted(m for m in ('hydra', 'omegaconf') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO,
                          check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]", proc.stdout
