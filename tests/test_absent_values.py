"""Nothing is silently missing on the default path: values no backend can give are said once and marked on
rows; the synthetic suite's by-design absence of a real split is not warned about.

One `worldrecall run` as a user types it (a subprocess, a fresh output root) on a tiny synthetic suite,
MemoBench's pixel fidelity only, on the default (classical) backends, which have no perceptual backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

REPO = Path(__file__).resolve().parents[1]
OTHER_METRICS = ["visual_quality", "motion_smoothness", "obj_identity", "geo3d", "ors", "camera_controllability",
                 "image_reward", "gt_revisit_sim", "camera_gate", "vqa"]


@pytest.fixture(scope="module")
def default_path_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = tmp_path_factory.mktemp("absent") / "out"
    cmd = [sys.executable, "-m", "worldrecall.engine.cli", "run", f"output_root={out}", "tracking=none",
           "progress=false", "report.enabled=false", "only=[memobench]", "models_only=[oracle,frozen_camera]",
           "suite.params.n_cases=2", "suite.params.width=96", "suite.params.height=72",
           "suite.params.gt_frames=24", "suite.params.gen_frames=20", "workers=1",
           "aggregator_params.bootstrap.replicates=20", "aggregator_params.paired.replicates=20",
           *[f"++benchmarks.memobench.metrics.{m}.enabled=false" for m in OTHER_METRICS]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for p in out.glob("results/*/rows-shard-*.jsonl") for line in p.read_text().splitlines()]
    return proc, rows


def test_lpips_without_a_perceptual_backend_is_said_once_and_marked_on_rows(default_path_run):
    proc, rows = default_path_run
    said = [line for line in (proc.stdout + proc.stderr).splitlines()  # Hydra logs to stdout
            if "LPIPS" in line and "not computed" in line]
    assert len(said) == 1, proc.stdout + proc.stderr
    assert ("memobench.pixel_fidelity: LPIPS (V/D/R/ALL_LPIPS) not computed: no backend selected for role "
            "'perceptual'") in said[0]
    both = proc.stdout + proc.stderr
    assert both.index("LPIPS (V/D/R/ALL_LPIPS) not computed") < both.index("== memobench")  # before the scores
    pf = [r for r in rows if r["metric"] == "memobench.pixel_fidelity"]
    assert len(pf) == 4  # 2 clips x 2 models
    for r in pf:
        assert r["status"] == "ok" and r["values"]["ALL_LPIPS"] is None and r["values"]["ALL_PSNR"] is not None
        assert any(w.startswith("memobench.pixel_fidelity: LPIPS") for w in r["warnings"]), r["warnings"]


def test_no_warning_about_the_real_split_the_suite_never_has(default_path_run):
    proc, _ = default_path_run
    said = proc.stdout + proc.stderr
    assert "no real clips" not in said and "Real_ExitReenter" not in said


def test_missing_real_sheet_is_still_warned_where_the_release_has_a_real_folder(tmp_path, caplog):
    from worldrecall.plugins.memobench.loader import MemoBenchLoader

    (tmp_path / "Real_Raw").mkdir()
    loader = MemoBenchLoader()
    with caplog.at_level("WARNING"):
        assert loader._real(tmp_path, {**loader.defaults}, {}) == []
    assert any("no Real_ExitReenter.xlsx/.csv under" in r.getMessage() for r in caplog.records)
    caplog.clear()
    (tmp_path / "Real_Raw").rmdir()
    with caplog.at_level("WARNING"):
        assert loader._real(tmp_path, {**loader.defaults}, {}) == []
    assert not caplog.records


def test_values_null_on_every_scored_row_are_listed_once():
    from worldrecall.core.components import Metric, Value
    from worldrecall.core.data import ScoreRow
    from worldrecall.engine.stages.absence import all_null_values

    class M(Metric):
        name, benchmark, primary = "b.m", "b", "score"
        values: ClassVar[dict[str, Value]] = {"dyn": Value(higher_is_better=True, range=(0.0, 1.0)), "diag": Value(higher_is_better=None, range=None)}

    rows = [ScoreRow("b", "x", "c1", "b.m", {"score": 0.5, "dyn": None, "diag": None}),
            ScoreRow("b", "y", "c1", "b.m", {"score": 0.7, "dyn": None, "diag": None}),
            ScoreRow("b", "z", "c1", "b.m", {}, status="failed")]
    assert all_null_values(rows, {"b.m": M}) == [
        "b.m: dyn null on every one of the 2 scored b rows (per case: tables/cases/b/b.m.csv)"]  # diag: a diagnostic
    rows[1].values["dyn"] = 0.1
    assert all_null_values(rows, {"b.m": M}) == []
    rows[1].values["dyn"] = None
    assert all_null_values(rows, {"b.m": M}, announced=["b.m"]) == []  # already said before evaluating
