"""MLflow runs in its own process (``engine/sinks/tracking/process.py``): the job's process never imports it,
the real client still writes the store, the process starts early (``tracking.prefetch``) or when logging
begins, and a job's process that dies leaves no run RUNNING. Each check is a fresh Python process (as
`worldrecall run` is): this test process has imported mlflow already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers.toy_plugin import make_dataset, toy_cli_overrides

mlflow = pytest.importorskip("mlflow")
ROOT = Path(__file__).resolve().parents[1]
_LIGHT = ("aggregator_params.bootstrap.replicates=50", "aggregator_params.paired.reference=good", "report.enabled=false")

RUN = """
import contextlib, io, json, sys
sys.path.insert(0, sys.argv[2])
from helpers import toy_plugin
from worldrecall.engine.cli import main
from worldrecall.engine.sinks.tracking import process
from worldrecall.registry import host as host_mod
host_mod._HOST = host_mod.load_plugins(extra=[toy_plugin], fresh=True)
assert "mlflow" not in sys.modules  # nothing before the job imports it
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(json.loads(sys.argv[1]))
print(json.dumps({"rc": rc, "mlflow_loaded": "mlflow" in sys.modules, "mlflow_processes": len(process.LAUNCHED)}))
"""


def _python(code: str, *args: str, timeout: int = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join([*(env.get("PYTHONPATH") or "").split(os.pathsep), str(ROOT)]).strip(os.pathsep)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout)


@pytest.mark.parametrize("prefetch", ["true", "false"])
def test_a_run_logs_through_the_real_client_in_the_mlflow_process(tmp_path, prefetch):
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    out = tmp_path / "out"
    args = ["run", *toy_cli_overrides(ds, out, "workers=2", *_LIGHT, f"tracking.prefetch={prefetch}", max_side=None)]
    res = _python(RUN, json.dumps(args), str(Path(__file__).parent))
    assert res.returncode == 0, res.stderr[-3000:]
    # the job's process never imported MLflow: one MLflow process did the logging
    assert json.loads(res.stdout.splitlines()[-1]) == {"rc": 0, "mlflow_loaded": False, "mlflow_processes": 1}
    meta = json.loads(next((out / "results").glob("*/meta/tracking.json")).read_text())
    # started as the job began (prefetch), else when logging began; its import is its own time
    assert meta["prefetched"] is (prefetch == "true")
    assert meta["import_s"] > 0 and meta["mlflow_s"] >= meta["import_s"] + meta["setup_s"]
    assert meta["job_s"] >= meta["waited_s"] >= 0
    client = mlflow.tracking.MlflowClient(f"sqlite:///{out.resolve() / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("worldrecall").experiment_id])
    child = {r.data.tags["mlflow.runName"]: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert sorted(child) == ["bad · toy", "good · toy"] and meta["run_id"] in {r.info.run_id for r in runs}
    assert all(r.info.status == "FINISHED" for r in runs)
    # the values themselves: good drifts by 0 and 1 levels (within tolerance 10), bad by 40 and 60
    assert child["good · toy"].data.metrics["brightness"] == 1.0
    assert child["bad · toy"].data.metrics["brightness"] == 0.0
    # the job's files, logged as links to their blobs (tables, meta)
    art = Path(client.get_run(meta["run_id"]).info.artifact_uri.replace("file://", ""))
    written = next((out / "results").glob("*/tables/cases/toy/toy.brightness.csv"))
    assert (art / "tables" / "cases" / "toy" / "toy.brightness.csv").read_bytes() == written.read_bytes()


FORKED = RUN.replace("with contextlib", """import os
def _seen():  # in each forked worker: is MLflow in its memory?
    with open(sys.argv[3], "a") as f:
        f.write(str(any(m == "mlflow" or m.startswith("mlflow.") for m in sys.modules)) + chr(10))
os.register_at_fork(after_in_child=_seen)
with contextlib""", 1)


def test_forked_workers_carry_no_mlflow(tmp_path):
    """A worker forked after MLflow's import would hold its ~0.13 GiB in its own resident memory (the
    per-process bound of issue 37): the job's process never imports it."""
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    out, seen = tmp_path / "out", tmp_path / "forked.txt"
    args = ["run", *toy_cli_overrides(ds, out, "workers=2", *_LIGHT, max_side=None)]
    res = _python(FORKED, json.dumps(args), str(Path(__file__).parent), str(seen))
    assert res.returncode == 0 and json.loads(res.stdout.splitlines()[-1])["rc"] == 0, res.stderr[-3000:]
    assert seen.read_text().split() and set(seen.read_text().split()) == {"False"}
    assert json.loads(next((out / "results").glob("*/meta/tracking.json")).read_text())["prefetched"] is True


def test_without_mlflow_installed_the_job_says_so_once_and_writes_everything_else(tmp_path):
    """The MLflow process cannot import MLflow (here: a package of that name that raises ImportError, first on
    the path): one warning, exit code 0, every other output written."""
    fake = tmp_path / "fake" / "mlflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'mlflow' (test)\")\n")
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    out = tmp_path / "out"
    args = ["run", *toy_cli_overrides(ds, out, "workers=1", *_LIGHT, max_side=None)]
    res = _python(RUN, json.dumps(args), str(Path(__file__).parent),
                  env={"PYTHONPATH": os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")])})
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.splitlines()[-1])["rc"] == 0
    assert res.stderr.count("warning: MLflow is not installed") == 1, res.stderr[-3000:]
    assert next((out / "results").glob("*/tables/cases/toy/toy.brightness.csv")).stat().st_size > 0
    assert not list((out / "results").glob("*/meta/tracking.json")) and not (out / "mlflow.db").exists()


def test_a_job_whose_process_died_after_its_runs_were_made_leaves_them_killed(tmp_path):
    """The job's process ends (killed) between the runs' making and their files: the MLflow process sees its
    input end and ends the job's run KILLED, not RUNNING forever."""
    from worldrecall.engine.sinks.tracking.process import MlflowProcess

    out = tmp_path / "out"
    uri = f"sqlite:///{out.resolve() / 'mlflow.db'}"
    plan = {"config_hash": "c0ffee", "results_digest": "0" * 16, "parent": None, "run_name": "killed job",
            "start": 1.0e9, "end": 1.0e9 + 5, "tags": {}, "metrics": {"n_cases": 2.0}, "params": {"seed": 0},
            "children": [{"name": "m · b", "tags": {}, "metrics": {"x": float("nan")}, "params": {}, "cases": None}]}
    proc = MlflowProcess()
    proc.send({"op": "open", "uri": uri, "tcfg": {"tracking_uri": uri}, "output_root": str(out), "reuse": None,
               "plan": plan})
    proc.close()  # no "finish": as when the job's process is killed
    assert proc.proc.returncode == 0
    client = mlflow.tracking.MlflowClient(uri)
    runs = {r.data.tags["mlflow.runName"]: r for r in client.search_runs(
        [client.get_experiment_by_name("worldrecall").experiment_id])}
    assert runs["killed job"].info.status == "KILLED" and runs["m · b"].info.status == "FINISHED"
    assert runs["killed job"].data.metrics["n_cases"] == 2.0 and str(runs["m · b"].data.metrics["x"]) == "nan"


def test_ctrl_c_leaves_the_mlflow_process_to_the_job(tmp_path):
    """Ctrl-C reaches the whole process group: the MLflow process ignores it (no traceback of its own) and
    answers the job, which decides whether to stop."""
    import signal
    import time

    from worldrecall.engine.sinks.tracking.process import MlflowProcess

    out = tmp_path / "out"
    uri = f"sqlite:///{out.resolve() / 'mlflow.db'}"
    plan = {"config_hash": "c0ffee", "results_digest": "0" * 16, "parent": None, "run_name": "interrupted",
            "start": 1.0e9, "end": 1.0e9 + 5, "tags": {}, "metrics": {"n_cases": 1.0}, "params": {},
            "children": []}
    proc = MlflowProcess()
    time.sleep(1.0)  # past Python's start-up, into the process's own code
    proc.proc.send_signal(signal.SIGINT)
    proc.send({"op": "open", "uri": uri, "tcfg": {"tracking_uri": uri}, "output_root": str(out), "reuse": None,
               "plan": plan})
    proc.send({"op": "finish", "entries": [], "benchmarks": [], "columns": {}, "ui_missing": ""})
    answer = proc.reply()
    assert answer["reused"] is False and proc.proc.returncode == 0, answer
    run = mlflow.tracking.MlflowClient(uri).get_run(answer["run_id"])
    assert run.info.status == "FINISHED" and run.data.tags["mlflow.runName"] == "interrupted"


def test_no_mlflow_process_without_tracking():
    res = _python("from worldrecall.engine.sinks.tracking import process\n"
                  "process.prefetch({'enabled': False}); process.prefetch({'enabled': True, 'prefetch': False})\n"
                  "print(process.LAUNCHED)")
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stderr


RERUN = RUN


def _toy_args(tmp_path: Path, report: bool = False) -> tuple[list[str], Path]:
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    out = tmp_path / "out"
    light = [a for a in _LIGHT if not (report and a.startswith("report."))]
    return ["run", *toy_cli_overrides(ds, out, "workers=1", *light, max_side=None)], out


@pytest.mark.parametrize("report", [False, True])  # with the report, written by a forked child meanwhile
def test_a_rerun_that_changed_nothing_reuses_its_run(tmp_path, report):
    args, out = _toy_args(tmp_path, report)
    first = _python(RERUN, json.dumps(args), str(Path(__file__).parent))
    assert json.loads(first.stdout.splitlines()[-1]) == {"rc": 0, "mlflow_loaded": False, "mlflow_processes": 1}, \
        first.stderr[-3000:]
    rec = json.loads(next((out / "results").glob("*/meta/tracking.json")).read_text())
    unchanged = _python(RERUN, json.dumps(args), str(Path(__file__).parent))
    # nothing changed: no output written again, no MLflow process even started (its run checked in the SQLite store)
    assert json.loads(unchanged.stdout.splitlines()[-1]) == {"rc": 0, "mlflow_loaded": False, "mlflow_processes": 0}, \
        unchanged.stderr[-3000:]
    assert json.loads(next((out / "results").glob("*/meta/tracking.json")).read_text()) == rec
    next((out / "results").glob("*/meta/outputs.json")).unlink()  # without the outputs' record: MLflow's check
    again = _python(RERUN, json.dumps(args), str(Path(__file__).parent))
    # the same config, every row resumed, the same tables: the run is reused (asked through MLflow's client)
    assert json.loads(again.stdout.splitlines()[-1])["rc"] == 0, again.stderr[-3000:]
    rerun = json.loads(next((out / "results").glob("*/meta/tracking.json")).read_text())
    assert rerun["reused"] is True and rerun["run_id"] == rec["run_id"] and rerun["ui"] == rec["ui"]
    assert "reused_at" in rerun
    client = mlflow.tracking.MlflowClient(f"sqlite:///{out.resolve() / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("worldrecall").experiment_id])
    assert len([r for r in runs if "mlflow.parentRunId" not in r.data.tags]) == 1  # no second parent
    # the run deleted in the UI meanwhile: the rerun cannot reuse it and logs through MLflow again
    client.delete_run(rec["run_id"])
    third = _python(RERUN, json.dumps(args), str(Path(__file__).parent))
    assert json.loads(third.stdout.splitlines()[-1]) == {"rc": 0, "mlflow_loaded": False, "mlflow_processes": 1}, \
        third.stderr[-3000:]
    now = json.loads(next((out / "results").glob("*/meta/tracking.json")).read_text())
    assert now["run_id"] != rec["run_id"] and now["reused"] is False


def test_changed_numbers_are_logged_even_with_a_record(tmp_path):
    from worldrecall.engine.sinks.tracking.reuse import reusable, store_uri

    args, out = _toy_args(tmp_path)
    assert json.loads(_python(RERUN, json.dumps(args), str(Path(__file__).parent)).stdout.splitlines()[-1])["rc"] == 0
    results = next((out / "results").glob("*"))
    rec = json.loads((results / "meta" / "tracking.json").read_text())
    uri = store_uri({"tracking_uri": None}, out)
    assert reusable(results, uri, rec["config_hash"], rec["results_digest"])["run_id"] == rec["run_id"]
    assert reusable(results, uri, rec["config_hash"], "0" * 16) is None  # other tables
    assert reusable(results, uri, "other-config", rec["results_digest"]) is None
    assert reusable(results, "file:///elsewhere", rec["config_hash"], rec["results_digest"]) is None


def test_a_sweep_is_launched_without_importing_mlflow_and_its_parent_holds_the_jobs(tmp_path):
    """The sweep's parent run is made and finished by an MLflow process of its own: the launching process (which
    runs the jobs with Hydra's basic launcher) never imports MLflow, and every job nests under the parent."""
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    out = tmp_path / "out"
    args = ["run", "-m", *toy_cli_overrides(ds, out, "workers=1", *_LIGHT, max_side=None),
            "benchmarks.toy.metrics.brightness.thresholds.tolerance=10.0,50.0"]
    res = _python(RUN, json.dumps(args), str(Path(__file__).parent))
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.splitlines()[-1])
    # one MLflow process for the sweep's parent and one for the jobs: the second job logs through the process the
    # first used, whose MLflow is imported already
    assert got == {"rc": 0, "mlflow_loaded": False, "mlflow_processes": 2}
    records = sorted((json.loads(p.read_text()) for p in (out / "results").glob("*/meta/tracking.json")),
                     key=lambda r: r["import_s"])
    assert len(records) == 2 and records[0]["import_s"] == 0.0 < records[1]["import_s"]
    client = mlflow.tracking.MlflowClient(f"sqlite:///{out.resolve() / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("worldrecall").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("worldrecall.kind") == "sweep"]
    jobs = [r for r in runs if r.data.tags.get("worldrecall.kind") == "job"]
    assert parent.info.status == "FINISHED" and parent.data.metrics["n_jobs"] == 2.0
    assert sorted(j.info.run_name for j in jobs) == ["brightness.thresholds.tolerance=10.0",
                                                     "brightness.thresholds.tolerance=50.0"]
    assert all(j.data.tags["mlflow.parentRunId"] == parent.info.run_id for j in jobs)
