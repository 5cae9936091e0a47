"""The README's SLURM path on a real one-node cluster: 4 shard jobs through hydra-submitit-launcher, then merge.

The cluster (munged + slurmctld + slurmd, :mod:`helpers.slurm_cluster`) is started once per session and
skips with its reason only where the packages are missing (``WORLDRECALL_SETUP_CLUSTER=1 scripts/setup.sh``).
The suite is the 9-clip smoke suite (the fewest whose clips fall in all 4 shards) (3 benchmarks x 8 models), built once and shared by every run here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers.slurm_cluster import SlurmCluster, missing_reason

from worldrecall.engine.stages.row_store import rows_files, shards_on_disk

pytestmark = pytest.mark.slow

REASON = missing_reason()
try:
    import hydra_plugins.hydra_submitit_launcher  # noqa: F401
except ImportError:
    REASON = REASON or "hydra-submitit-launcher is not installed (pip install 'worldrecall[launchers]')"

# a per-case delay, only where WR_TEST_CASE_DELAY_S is set (the job to cancel must still be running)
SLOW = """
import os
if os.environ.get("WR_TEST_CASE_DELAY_S"):
    import time
    from worldrecall.engine.stages import pipeline
    _rows = pipeline.CasePipeline.rows
    def rows(self, *a, **k):
        time.sleep(float(os.environ["WR_TEST_CASE_DELAY_S"]))
        return _rows(self, *a, **k)
    pipeline.CasePipeline.rows = rows
"""


@pytest.fixture(scope="session")
def slurm():
    if REASON:
        pytest.skip(REASON)
    cluster = SlurmCluster().start()
    yield cluster
    cluster.stop()


def _wr(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "worldrecall.engine.cli", *args], env=env, capture_output=True,
                       text=True, timeout=timeout, check=False)
    assert r.returncode == 0, f"worldrecall {' '.join(args[:3])} … failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _tables(results: Path) -> dict[str, str]:
    return {str(p.relative_to(results / "tables")): p.read_text() for p in sorted((results / "tables").rglob("*.csv"))}


def _results_dir(out: Path) -> Path:
    (d,) = [p for p in (out / "results").iterdir() if p.is_dir()]
    return d


def _row_keys(results: Path) -> list[tuple[str, ...]]:
    keys = []
    for f in sorted(results.glob("rows-shard-*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip().endswith("}"):
                r = json.loads(line)
                keys.append((r["benchmark"], r["model"], r["case_id"], r["metric"]))
    return keys


def _model_runs(out: Path) -> tuple[list, dict[tuple[str, str], dict[str, float]]]:
    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{out.resolve() / 'mlflow.db'}")
    runs = c.search_runs([c.get_experiment_by_name("worldrecall").experiment_id], max_results=1000)
    per_model = {(r.data.params["benchmark"], r.data.params["model"]): dict(r.data.metrics)
                 for r in runs if r.data.tags.get("worldrecall.kind") == "model"}
    return runs, per_model


def per_model_text(per: dict) -> list:
    return sorted([list(k), json.dumps(v, sort_keys=True)] for k, v in per.items())


def test_four_shards_on_slurm_merge_to_the_single_process_tables(slurm, tmp_path):
    env = {**slurm.env, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "HYDRA_FULL_ERROR": "1"}
    suite = ["experiment=smoke", "suite.params.n_cases=9", f"suite.root={tmp_path / 'suite'}", "progress=false",
             "workers=1"]
    shards = ["shard.count=4", "shard.index=range(4)", "hydra/launcher=submitit_slurm",
              "hydra.launcher.cpus_per_task=1", "hydra.launcher.timeout_min=10"]
    one = tmp_path / "one"
    t0 = time.monotonic()
    _wr(["run", *suite, f"output_root={one}"], env)
    t_single = time.monotonic() - t0  # includes building the suite
    reference = _results_dir(one)

    t0 = time.monotonic()
    clu = tmp_path / "cluster"
    r = _wr(["run", "-m", *suite, f"output_root={clu}", *shards], env)
    t_sharded = time.monotonic() - t0
    merged = _results_dir(clu)
    assert "== sweep summary" not in r.stdout and "over index" not in r.stdout  # shards are not swept values
    assert "== shards merged:" in r.stdout
    assert shards_on_disk(merged) == 4 and all("-of-0004" in f.name for f in rows_files(merged))  # every shard had clips
    assert _tables(merged) == _tables(reference)  # byte for byte: the merge is the single-process run
    assert sorted(_row_keys(merged)) == sorted(_row_keys(reference))
    partial = sorted((merged / "partial").glob("shard-*-of-0004/PARTIAL.md"))
    assert len(partial) == 4 and all("PARTIAL: shard" in p.read_text() for p in partial)

    runs, per_model = _model_runs(clu)
    top = [x for x in runs if "mlflow.parentRunId" not in x.data.tags]
    assert len(top) == 1 and top[0].data.tags["worldrecall.kind"] == "sweep"
    by_id = {x.info.run_id: x for x in runs}
    parents = {by_id[x.data.tags["mlflow.parentRunId"]].info.run_name for x in runs
               if x.data.tags.get("worldrecall.kind") == "model"}
    assert parents == {"merged · 4 shards"}  # the per-model runs are the merged ones, under the one parent
    _, ref_per_model = _model_runs(one)
    assert len(per_model) == 5 * 8  # five benchmarks (WRBench and MIND included) x 8 models; NaN (not applicable) is a value here: compare as JSON text
    assert json.dumps(per_model_text(per_model)) == json.dumps(per_model_text(ref_per_model))

    r = _wr(["aggregate", *suite, f"output_root={clu}", "shard.count=4"], env)
    assert "already logged" in r.stdout and "merged 4 shard file(s), 392 cases, 0 failed" in r.stdout  # (4 x 9 + 13 MIND clips) x 8 models
    assert _tables(merged) == _tables(reference) and len(_model_runs(clu)[0]) == len(runs)
    print(f"\none process: {t_single:.1f} s (incl. the suite build); 4 shards on the one-node cluster: "
          f"{t_sharded:.1f} s wall (launch to merged tables)")

    # a job cancelled mid-run, then the same command again: it resumes, no row twice
    cut = tmp_path / "cancelled"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW)
    slow_env = {**env, "PYTHONPATH": f"{site}{os.pathsep}{env['PYTHONPATH']}", "WR_TEST_CASE_DELAY_S": "0.3"}
    launcher = subprocess.Popen([sys.executable, "-m", "worldrecall.engine.cli", "run", "-m", *suite,
                                 f"output_root={cut}", *shards], env=slow_env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:
        deadline, n_cut = time.monotonic() + 180, 0
        while time.monotonic() < deadline and launcher.poll() is None:
            files = list((cut / "results").glob("*/rows-shard-*.jsonl"))
            if files and max(f.read_text().count("\n") for f in files) >= 2:
                running = slurm.client("squeue", "-h", "-t", "RUNNING", "-o", "%i").split()
                if running:
                    slurm.client("scancel", *running)
                    n_cut = len(running)
                    break
            time.sleep(0.05)
        assert n_cut >= 1, "no shard job was caught running"
        slurm.client("scancel", "-u", "root")  # the pending ones too: the launcher is given up below
    finally:
        launcher.kill()  # without accounting (sacct) submitit cannot see a cancelled job end; a user would ^C
        launcher.wait()
    deadline = time.monotonic() + 60
    while slurm.client("squeue", "-h", "-o", "%i").split() and time.monotonic() < deadline:
        time.sleep(0.2)
    before = _row_keys(_results_dir(cut))
    assert 0 < len(before) < len(_row_keys(reference))
    _wr(["run", "-m", *suite, f"output_root={cut}", *shards], env)  # resubmitted: the same command
    resumed = _results_dir(cut)
    keys = _row_keys(resumed)
    assert len(keys) == len(set(keys)) == len(_row_keys(reference))
    assert set(before) <= set(keys)
    assert _tables(resumed) == _tables(reference)
