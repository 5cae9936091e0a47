"""The example metric plugin: a separate distribution, installed, discovered, run and logged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "metric-plugin"
BIN = Path(sys.executable).parent


def test_example_metric_is_short():
    lines = (EXAMPLE / "worldrecall_colour_shift" / "metric.py").read_text().splitlines()
    assert len(lines) <= 40


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The example installed into a throw-away folder (not into this interpreter), put on PYTHONPATH of the
    subprocesses that use it: discovered through its entry point exactly as an installed plugin is."""
    site = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
           str(site), str(EXAMPLE)]
    subprocess.run(pip, check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "WORLDRECALL_PLUGINS"}  # all installed plugins
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.mark.slow
def test_discovered_run_and_logged(installed, tmp_path):
    env = {**installed, "WORLDRECALL_STRICT_PLUGINS": "1"}
    out = subprocess.run([str(BIN / "worldrecall"), "plugins", "--json"], check=True, capture_output=True,
                         text=True, env=env).stdout
    plugin = {p["name"]: p for p in json.loads(out)}["colour_shift"]
    assert plugin["distribution"] == "worldrecall-colour-shift" and plugin["version"] == "0.1.0"
    assert plugin["components"] == {"metric": ["memobench.colour_shift"]}

    out_root = tmp_path / "out"
    cmd = [str(BIN / "worldrecall"), "run", "experiment=colour_shift", "only=[memobench]",
           "models_only=[oracle,appearance_drift]", f"output_root={out_root}", "progress=false",
           "suite.params.n_cases=2", "suite.params.width=96", "suite.params.height=72",
           "suite.params.gt_frames=24", "suite.params.gen_frames=20",
           "aggregator_params.bootstrap.replicates=50", "aggregator_params.paired.replicates=50"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode in (0, 3), proc.stderr[-3000:]
    # the compact console shows the ranked headlines; the full leaderboard (view=full, leaderboard.txt) has the plugin's
    full = next((out_root / "results").glob("*/tables/leaderboard.txt")).read_text()
    assert "colour_shift" in full

    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{out_root.resolve() / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("worldrecall").experiment_id])
    child = next(r for r in runs if r.data.params.get("model") == "oracle")  # the (memobench, oracle) run
    assert child.data.tags["plugin.colour_shift"] == "0.1.0"
    assert "colour_shift" in child.data.metrics  # the plugin metric's primary value, as for every model
    parent = client.get_run(child.data.tags["mlflow.parentRunId"])
    assert parent.data.params["benchmarks.memobench.metrics.colour_shift.thresholds.max_shift"] == "30.0"
    cases = next((out_root / "results").glob("*/tables/cases/memobench/memobench.colour_shift.csv")).read_text()
    assert "memobench.colour_shift" in cases


def test_plugin_config_groups_compose_without_hydra_warnings(installed):
    # a conf/ folder without __init__.py is "not available" to Hydra's pkg:// search path: warned on every run
    assert all((d / "__init__.py").is_file() for d in (EXAMPLE / "worldrecall_colour_shift" / "conf").rglob("*")
               if d.is_dir() and d.name != "__pycache__")
    proc = subprocess.run([str(BIN / "worldrecall"), "run", "--cfg", "job", "experiment=colour_shift"],
                          capture_output=True, text=True, env=installed, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Warning" not in proc.stderr, proc.stderr[-2000:]
    assert "colour_shift:" in proc.stdout  # the plugin's experiment did enable its metric
