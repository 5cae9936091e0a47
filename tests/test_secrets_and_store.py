"""Secrets never reach disk, new MLflow stores survive simultaneous jobs, killed runs do not stay RUNNING."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from helpers.toy_plugin import make_dataset, toy_cli_overrides

from worldrecall.engine.cli import hydra_run

SECRET = "sk-PLANTED-7f3a9c1e5b"


def _grep(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_a_planted_secret_appears_in_no_file_under_the_output_root(tmp_path, toy_host):
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    out = tmp_path / "out"
    code = hydra_run([
        "-m", *toy_cli_overrides(ds, out, "workers=1", "aggregator_params.bootstrap.replicates=50"),
        f"+judge_options.gemini.api_key={SECRET}",        # a config value under a secret key
        f"+tracking.tags.service_token={SECRET}",          # a tag
        f"tracking.run_name='sweep api_key={SECRET}'",  # a run name that carries one
        "benchmarks.toy.metrics.brightness.thresholds.tolerance=5.0,40.0",  # a sweep: parent, jobs, children
    ])
    assert code == 0
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in files) and any(".hydra" in p.parts for p in files)
    assert _grep(out, SECRET.encode()) == []  # MLflow store, artifacts, tables, Hydra's own files, report


def _open_store(uri: str, q: mp.Queue) -> None:
    from worldrecall.engine.sinks.tracking.tracker import Tracker

    try:
        t = Tracker({"tracking_uri": uri}, Path(uri[len("sqlite:///"):]).parent)
        run = t.start_run(f"job-{os.getpid()}")
        t.end_run(run)
        q.put("ok")
    except Exception as e:  # reported to the parent as the failure
        q.put(f"{type(e).__name__}: {e}")


def test_four_jobs_starting_together_on_a_new_store_all_get_their_runs(tmp_path):
    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    ctx = mp.get_context("spawn")  # like launcher jobs: separate interpreters, no shared client
    q = ctx.Queue()
    procs = [ctx.Process(target=_open_store, args=(uri, q)) for _ in range(4)]
    for p in procs:
        p.start()
    results = [q.get(timeout=240) for _ in procs]
    for p in procs:
        p.join()
    assert results == ["ok"] * 4
    from mlflow.tracking import MlflowClient

    c = MlflowClient(uri)
    runs = c.search_runs([c.get_experiment_by_name("worldrecall").experiment_id])
    assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}


def test_a_killed_run_is_closed_by_the_next_invocation(tmp_path):
    from mlflow.tracking import MlflowClient

    from worldrecall.engine.sinks.tracking.tracker import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    script = (f"import os, sys, time; from pathlib import Path; from worldrecall.engine.sinks.tracking.tracker import Tracker; "
              f"t = Tracker({{'tracking_uri': {uri!r}}}, Path({str(tmp_path)!r})); "
              f"print(t.start_run('doomed'), flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    run_id = proc.stdout.readline().strip()
    c = MlflowClient(uri)
    assert c.get_run(run_id).info.status == "RUNNING"
    Tracker({"tracking_uri": uri}, tmp_path)  # the owner is alive: left alone
    assert c.get_run(run_id).info.status == "RUNNING"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    Tracker({"tracking_uri": uri}, tmp_path)  # a rerun opens the store: the orphan is closed
    assert c.get_run(run_id).info.status == "KILLED"
