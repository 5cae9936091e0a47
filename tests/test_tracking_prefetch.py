"""MLflow's import overlaps the job (``tracking.prefetch``): the real client still writes the store, and a fork
while the background import runs is safe. Each check is a fresh Python process (as `worldrecall run` is):
this test process has imported mlflow already."""

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
from worldrecall.registry import host as host_mod
host_mod._HOST = host_mod.load_plugins(extra=[toy_plugin], fresh=True)
assert "mlflow" not in sys.modules  # nothing before the job imports it
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(json.loads(sys.argv[1]))
print(json.dumps({"rc": rc}))
"""


def _python(code: str, *args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout)


@pytest.mark.parametrize("prefetch", ["true", "false"])
def test_a_run_with_the_prefetch_logs_through_the_real_client(tmp_path, prefetch):
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    out = tmp_path / "out"
    args = ["run", *toy_cli_overrides(ds, out, "workers=2", *_LIGHT, f"tracking.prefetch={prefetch}", max_side=None)]
    res = _python(RUN, json.dumps(args), str(Path(__file__).parent))
    assert res.returncode == 0 and json.loads(res.stdout.splitlines()[-1])["rc"] == 0, res.stderr[-3000:]
    meta = json.loads(next((out / "results").glob("*/meta/tracking.json")).read_text())
    # the thread ran (and only when asked); what the job waited for is what tracking.json calls the import
    assert (meta["prefetch_s"] > 0) == (prefetch == "true")
    assert meta["mlflow_s"] >= meta["import_s"] + meta["setup_s"]
    client = mlflow.tracking.MlflowClient(f"sqlite:///{out.resolve() / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("worldrecall").experiment_id])
    child = {r.data.tags["mlflow.runName"]: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert sorted(child) == ["bad · toy", "good · toy"] and meta["run_id"] in {r.info.run_id for r in runs}
    # the values themselves: good drifts by 0 and 1 levels (within tolerance 10), bad by 40 and 60
    assert child["good · toy"].data.metrics["brightness"] == 1.0
    assert child["bad · toy"].data.metrics["brightness"] == 0.0


FORKED = RUN.replace("with contextlib", """import os
def _seen():  # in each forked worker: is MLflow in its memory?
    with open(sys.argv[3], "a") as f:
        f.write(str(any(m == "mlflow" or m.startswith("mlflow.") for m in sys.modules)) + chr(10))
os.register_at_fork(after_in_child=_seen)
with contextlib""", 1)


def test_workers_are_forked_before_the_import_and_carry_no_mlflow(tmp_path):
    """The import starts once every case is evaluated: a worker forked after it would hold MLflow's ~0.13 GiB
    in its own resident memory (the per-process bound of issue 37)."""
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    out, seen = tmp_path / "out", tmp_path / "forked.txt"
    args = ["run", *toy_cli_overrides(ds, out, "workers=2", *_LIGHT, max_side=None)]
    res = _python(FORKED, json.dumps(args), str(Path(__file__).parent), str(seen))
    assert res.returncode == 0 and json.loads(res.stdout.splitlines()[-1])["rc"] == 0, res.stderr[-3000:]
    assert seen.read_text().split() and set(seen.read_text().split()) == {"False"}
    meta = json.loads(next((out / "results").glob("*/meta/tracking.json")).read_text())
    assert meta["prefetch_s"] > 0  # and the import still ran in the background


FORK = """
import multiprocessing as mp, sys
from worldrecall.engine.sinks.tracking import tracker
tracker.prefetch({"enabled": True, "prefetch": True})
assert tracker.PREFETCH.thread.is_alive()  # still importing when the fork comes

def child(q):
    import mlflow.store.tracking.sqlalchemy_store  # would hang on a module lock held by a vanished thread
    q.put("imported")

q = mp.get_context("fork").Queue()
p = mp.get_context("fork").Process(target=child, args=(q,))
p.start()
p.join(60)
print("alive" if p.is_alive() else q.get(timeout=5), tracker.PREFETCH.waited_s > 0)
if p.is_alive():
    p.kill()
"""


def test_a_fork_during_the_background_import_waits_for_it():
    res = _python(FORK)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["imported", "True"]  # the parent waited (before the fork), the child imported


def test_no_prefetch_without_tracking():
    res = _python("from worldrecall.engine.sinks.tracking import tracker\n"
                  "tracker.prefetch({'enabled': False}); tracker.prefetch({'enabled': True, 'prefetch': False})\n"
                  "print(tracker.PREFETCH.thread)")
    assert res.returncode == 0 and res.stdout.strip() == "None", res.stderr


RERUN = RUN.replace('print(json.dumps({"rc": rc}))',
                    'print(json.dumps({"rc": rc, "mlflow_loaded": "mlflow" in sys.modules}))')


def _toy_args(tmp_path: Path, report: bool = False) -> tuple[list[str], Path]:
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    out = tmp_path / "out"
    light = [a for a in _LIGHT if not (report and a.startswith("report."))]
    return ["run", *toy_cli_overrides(ds, out, "workers=1", *light, max_side=None)], out


@pytest.mark.parametrize("report", [False, True])  # with the report, written by a forked child meanwhile
def test_a_rerun_that_changed_nothing_reuses_its_run(tmp_path, report):
    args, out = _toy_args(tmp_path, report)
    first = _python(RERUN, json.dumps(args), str(Path(__file__).parent))
    assert json.loads(first.stdout.splitlines()[-1]) == {"rc": 0, "mlflow_loaded": True}, first.stderr[-3000:]
    rec = json.loads(next((out / "results").glob("*/meta/tracking.json")).read_text())
    unchanged = _python(RERUN, json.dumps(args), str(Path(__file__).parent))
    # nothing changed: no output written again, MLflow not even imported (its run checked in the SQLite store)
    assert json.loads(unchanged.stdout.splitlines()[-1]) == {"rc": 0, "mlflow_loaded": False}, unchanged.stderr[-3000:]
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
    assert json.loads(third.stdout.splitlines()[-1]) == {"rc": 0, "mlflow_loaded": True}, third.stderr[-3000:]
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
