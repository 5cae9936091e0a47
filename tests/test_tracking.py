"""MLflow tracking: parent/child runs, redacted params, metrics, artifacts, tags, parallel writers."""

from __future__ import annotations

import multiprocessing as mp
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import toy_plugin  # noqa: E402
from toy_plugin import make_dataset, toy_config  # noqa: E402

from worldrecall.engine.app import run_plain  # noqa: E402
from worldrecall.engine.tracking import flatten, redact  # noqa: E402
from worldrecall.registry.host import load_plugins  # noqa: E402

mlflow = pytest.importorskip("mlflow")


def test_flatten_and_redact():
    flat = flatten({"a": {"api_key": "sk-live", "b": [1, 2]}, "token": "", "judge": {"Password": "x"}})
    assert flat == {"a.api_key": "sk-live", "a.b": "[1, 2]", "token": "", "judge.Password": "x"}
    red = redact(flat)
    assert red["a.api_key"] == "***" and red["judge.Password"] == "***" and red["a.b"] == "[1, 2]"


def test_run_logs_parent_child_params_metrics_artifacts_tags(tmp_path, capsys):
    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds, tracking={"enabled": True, "experiment": "t", "tracking_uri": None, "tags": {}},
                     judge_options={"gemini": {"api_key": "AIza-should-not-appear"}})
    assert run_plain(cfg, host=host, overrides=["x=1"]) == 0
    out = capsys.readouterr().out
    uri = f"sqlite:///{(tmp_path / 'out').resolve() / 'mlflow.db'}"
    assert f"mlflow ui --backend-store-uri {uri}" in out
    assert "== toy" in out  # the leaderboard was printed
    client = mlflow.tracking.MlflowClient(uri)
    exp = client.get_experiment_by_name("t")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 1
    child = children[0]
    assert child.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
    assert child.data.params["judge_options.gemini.api_key"] == "***"
    assert child.data.params["benchmarks.toy.metrics.brightness.thresholds.tolerance"] == "10.0"
    assert child.data.metrics["toy/bad/brightness/drift"] == pytest.approx((37.5 + 56.25) / 2, abs=0.5)
    assert "toy/bad/brightness/stable/ci_low" in child.data.metrics
    tags = child.data.tags
    assert tags["plugin.stats"] == "0.1.0" and tags["worldrecall.version"] == "0.1.0"
    assert len(tags["worldrecall.input_manifest_hash"]) == 16 and "worldrecall.git_commit" in tags
    arts = {a.path for a in client.list_artifacts(child.info.run_id, "tables")}
    assert "tables/cases.csv" in arts and "tables/mean.csv" in arts
    case_files = {a.path for a in client.list_artifacts(child.info.run_id, "cases/toy/bad/c0/toy.brightness")}
    assert case_files == {"cases/toy/bad/c0/toy.brightness/per_frame.json"}
    meta = {a.path for a in client.list_artifacts(child.info.run_id, "meta")}
    assert {"meta/plugin_manifest.json", "meta/resolved_config.json", "meta/timing.json"} <= meta
    # the secret never reaches an artifact either
    local = Path(client.download_artifacts(child.info.run_id, "meta/resolved_config.json", str(tmp_path)))
    assert "AIza-should-not-appear" not in local.read_text()


def _log_job(args):
    uri, i = args
    from worldrecall.engine.tracking import Tracker

    t = Tracker({"tracking_uri": uri, "experiment": "par"}, Path(uri.replace("sqlite:///", "")).parent)
    rid = t.start_run(f"job{i}")
    t.log_params(rid, {f"p{j}": j for j in range(30)})
    t.log_metrics(rid, {f"m{j}": float(j) for j in range(50)})
    t.end_run(rid)
    return rid


def test_parallel_jobs_on_one_sqlite_store_do_not_fail(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    from worldrecall.engine.tracking import Tracker

    Tracker({"tracking_uri": uri, "experiment": "par"}, tmp_path)  # the sweep callback creates it first
    with mp.get_context("spawn").Pool(4) as pool:
        ids = pool.map(_log_job, [(uri, i) for i in range(8)])
    assert len(set(ids)) == 8
    client = mlflow.tracking.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("par").experiment_id])
    assert len(runs) == 8 and all(len(r.data.metrics) == 50 for r in runs)
