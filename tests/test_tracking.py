"""MLflow tracking: parent/child runs, redacted params, metrics, artifacts, tags, parallel writers."""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing as mp
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_config

from worldrecall.core.components import Metric, Value
from worldrecall.core.data import CaseFailure
from worldrecall.core.hookspecs import hookimpl
from worldrecall.engine.job import run_plain
from worldrecall.engine.redaction import flatten, redact
from worldrecall.engine.sinks.tracking.tracker import EXPERIMENT_KIND_TAG
from worldrecall.registry.host import load_plugins

mlflow = pytest.importorskip("mlflow")


def test_flatten_and_redact():
    flat = flatten({"a": {"api_key": "sk-live", "b": [1, 2]}, "token": "", "judge": {"Password": "x"}})
    assert flat == {"a.api_key": "sk-live", "a.b": "[1, 2]", "token": "", "judge.Password": "x"}
    red = redact(flat)
    assert red["a.api_key"] == "***" and red["judge.Password"] == "***" and red["a.b"] == "[1, 2]"


class Flaky(Metric):
    """Fails on every case of model ``bad``: its value is not applicable there (NaN in MLflow, not dropped)."""

    name = "toy.flaky"
    benchmark = "toy"
    primary = "score"
    values = {"score": Value(higher_is_better=True, range=(0.0, 1.0), description="toy score")}

    def measure(self, case, alignment, ctx):
        if case.model == "bad":
            raise CaseFailure(f"{case.case_id}: not applicable to this model")
        return {"x": 0.25}

    def score(self, m, thresholds):
        return {"score": m["x"]}


class _FlakyPlugin:
    @hookimpl
    def register_metrics(self, register):
        """The flaky metric."""
        register(Flaky)


class _DeclaredToy:
    @hookimpl
    def register_benchmarks(self, register):
        """The toy benchmark ranked by its brightness stability (no gate)."""
        from worldrecall import Benchmark

        register(Benchmark("toy", headline=("toy.brightness:stable",)))


def _runs(uri: str, experiment: str = "t"):
    client = mlflow.tracking.MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return client, exp, client.search_runs([exp.experiment_id], max_results=1000)


def _toy_run(tmp_path, **over):
    host = load_plugins(extra=[toy_plugin, _FlakyPlugin()], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds, tracking={"enabled": True, "experiment": "t", "tracking_uri": None, "tags": {}},
                     judge_options={"gemini": {"api_key": "AIza-should-not-appear"}}, **over)
    cfg["benchmarks"]["toy"]["metrics"]["flaky"] = {"params": {}, "thresholds": {}}
    return host, cfg


def test_declared_benchmark_logs_each_models_rank(tmp_path, capsys):
    host, cfg = _toy_run(tmp_path)
    host = load_plugins(extra=[toy_plugin, _FlakyPlugin(), _DeclaredToy()], fresh=True)
    assert run_plain(cfg, host=host, overrides=[]) == 0
    assert "toy · all cases" in capsys.readouterr().out
    _, _, runs = _runs(f"sqlite:///{(tmp_path / 'out').resolve() / 'mlflow.db'}")
    by_model = {r.data.params["model"]: r.data.metrics for r in runs if "mlflow.parentRunId" in r.data.tags}
    # "good" is stable on both cases (1.0), "bad" on neither (0.0): ranks 1 and 2, no tie, no gated view
    assert (by_model["good"]["rank"], by_model["bad"]["rank"]) == (1.0, 2.0)
    assert by_model["good"]["rank.all"] == 1.0 and by_model["good"]["rank_tied"] == 0.0
    assert "rank.gated" not in by_model["good"]


def _unique_bytes(root: Path, exclude: tuple[str, ...] = ("mlflow.db",)) -> int:
    """Bytes under ``root`` counting each inode once (as du does)."""
    seen, total = set(), 0
    for p in root.rglob("*"):
        if p.is_file() and p.name not in exclude:
            st = p.stat()
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    return total


def test_one_run_per_benchmark_and_model_with_identical_keys_and_nan(tmp_path, capsys):
    host, cfg = _toy_run(tmp_path)
    t0 = time.time()
    assert run_plain(cfg, host=host, overrides=["x=1"]) == 0
    out = capsys.readouterr().out
    uri = f"sqlite:///{(tmp_path / 'out').resolve() / 'mlflow.db'}"
    assert f"mlflow ui --backend-store-uri {uri}" in out
    assert "toy" in out and "full tables (view=full)" in out  # the compact leaderboard was printed
    client, exp, runs = _runs(uri)
    # the printed link opens the runs view (MLflow 3.17 takes it from workflowType, not from the tag alone)
    assert f"#/experiments/{exp.experiment_id}/runs?workflowType=machine_learning" in out
    # MLflow 3 opens the experiment on the model-training runs view, not the GenAI overview
    assert exp.tags[EXPERIMENT_KIND_TAG] == "custom_model_development"
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 2
    parent = parents[0]
    assert parent.info.run_name == "worldrecall · toy"
    assert {r.info.run_name for r in children} == {"good · toy", "bad · toy"}
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in children)
    by_model = {r.data.params["model"]: r for r in children}
    # identical metric keys across models; the flaky metric failed on every case of "bad": NaN, not dropped
    assert set(by_model["good"].data.metrics) == set(by_model["bad"].data.metrics)
    assert {"brightness", "brightness.drift", "brightness.ci_low", "brightness.ci_high", "flaky", "n_cases",
            "failure_rate"} <= set(by_model["bad"].data.metrics)
    assert math.isnan(by_model["bad"].data.metrics["flaky"])
    assert by_model["good"].data.metrics["flaky"] == pytest.approx(0.25)
    # drift of "bad": |100 - 140| and |100 - 160| on textured frames ≈ (37.5 + 56.25) / 2 after encoding
    assert by_model["bad"].data.metrics["brightness.drift"] == pytest.approx((37.5 + 56.25) / 2, abs=0.5)
    assert by_model["bad"].data.metrics["n_cases"] == 2.0
    for r in children:
        assert r.data.params["benchmark"] == "toy" and len(r.data.params["config_hash"]) == 12
        assert "backends" in r.data.params and "backend_set" in r.data.params
    # parent: the headline numbers, the full (redacted) config and provenance
    assert parent.data.metrics["n_cases"] == 4.0  # 2 models x 2 cases
    assert parent.data.metrics["toy.brightness.best"] == pytest.approx(1.0)  # "good" is stable on both cases
    assert parent.data.tags["best.toy.brightness"].startswith("good")
    assert parent.data.params["judge_options.gemini.api_key"] == "***"
    assert parent.data.params["benchmarks.toy.metrics.brightness.thresholds.tolerance"] == "10.0"
    assert parent.data.tags["plugin.stats"] == "0.1.0" and parent.data.tags["worldrecall.version"] == "0.1.0"
    assert len(parent.data.tags["worldrecall.input_manifest_hash"]) == 16
    # durations are the job's real wall time, not the few ms of logging
    wall = parent.data.metrics["wall_s"]
    assert t0 - 0.5 <= parent.info.start_time / 1000 <= t0 + 1.5
    assert (parent.info.end_time - parent.info.start_time) / 1000 >= wall - 0.05
    arts = {a.path for a in client.list_artifacts(parent.info.run_id, "tables")}
    assert "tables/cases" in arts and "tables/mean" in arts  # mean: one file per benchmark; cases: per metric
    arts = {a.path for a in client.list_artifacts(parent.info.run_id, "tables/cases/toy")}
    assert "tables/cases/toy/toy.brightness.csv" in arts
    arts = {a.path for a in client.list_artifacts(parent.info.run_id, "tables/mean")}
    assert arts == {"tables/mean/toy.csv", "tables/mean/toy.md"}
    md = Path(client.download_artifacts(parent.info.run_id, "tables/mean/toy.md", str(tmp_path / "dl")))
    lines = md.read_text().splitlines()
    assert lines[0].startswith("| benchmark | model |") and set(lines[1]) <= set("|:-")  # a real pipe table
    meta = {a.path for a in client.list_artifacts(parent.info.run_id, "meta")}
    assert {"meta/plugin_manifest.json", "meta/resolved_config.json", "meta/timing.json"} <= meta
    # the page and its pictures (stored once as blobs, logged as links beside it)
    assert {a.path for a in client.list_artifacts(parent.info.run_id, "report")} == {
        "report/index.html", "report/cases.toy.html", "report/assets"}
    local = Path(client.download_artifacts(parent.info.run_id, "meta/resolved_config.json", str(tmp_path / "dl")))
    assert "AIza-should-not-appear" not in local.read_text()  # the secret never reaches an artifact either
    # per-case files: an index pointing into the content-addressed blob store, not copies
    idx = json.loads(Path(client.download_artifacts(by_model["bad"].info.run_id, "cases/index.json",
                                                    str(tmp_path / "dl2"))).read_text())
    files = {(e["case_id"], e["metric"], e["file"]) for e in idx["files"]}
    assert files == {("c0", "toy.brightness", "per_frame.json"), ("c1", "toy.brightness", "per_frame.json")}
    for e in idx["files"]:
        blob = Path(idx["blob_root"]) / e["blob"]
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == e["sha256"]


def test_rerun_and_warm_store_add_references_not_copies(tmp_path, capsys):
    host, cfg = _toy_run(tmp_path)
    out_root = (tmp_path / "out").resolve()
    # a warm store made before the experiment-kind tag existed: the tracker adds the tag
    out_root.mkdir(parents=True, exist_ok=True)  # older MLflow (3.4) does not create the folder itself
    client = mlflow.tracking.MlflowClient(f"sqlite:///{out_root / 'mlflow.db'}")
    client.create_experiment("t", artifact_location=(out_root / "mlartifacts").as_uri())
    assert run_plain(cfg, host=host) == 0
    blobs_before = {p.name: p.stat().st_size for p in (out_root / "blobs").rglob("*") if p.is_file()}
    bytes_before = _unique_bytes(out_root)
    assert run_plain(cfg, host=host) == 0  # resumed: every row final, same tables, same report
    capsys.readouterr()
    _, exp, runs = _runs(f"sqlite:///{out_root / 'mlflow.db'}")
    assert exp.tags[EXPERIMENT_KIND_TAG] == "custom_model_development"
    # same config, same tables: the earlier run is reused, not a second parent with duplicate children
    assert len([r for r in runs if "mlflow.parentRunId" not in r.data.tags]) == 1
    blobs_after = {p.name: p.stat().st_size for p in (out_root / "blobs").rglob("*") if p.is_file()}
    new = {k: v for k, v in blobs_after.items() if k not in blobs_before and k != "digests.json"}
    # only what really changed is stored again: timing.json (new wall times); tables, report, cases: references
    assert all(k.endswith(".json") and v < 20_000 for k, v in new.items()), new
    # every artifact file of the MLflow store is a hard link to a blob: no bytes copied into it
    blob_inodes = {p.stat().st_ino for p in (out_root / "blobs").rglob("*") if p.is_file()}
    art = [p for p in (out_root / "mlartifacts").rglob("*") if p.is_file()]
    assert art and all(p.stat().st_ino in blob_inodes for p in art)
    assert _unique_bytes(out_root) - bytes_before < 100_000  # rows' resume marker, timing, hydra-free run


def _log_job(args):
    uri, i = args
    from worldrecall.engine.sinks.tracking.tracker import Tracker

    t = Tracker({"tracking_uri": uri, "experiment": "par"}, Path(uri.replace("sqlite:///", "")).parent)
    rid = t.start_run(f"job{i}")
    t.log_batch(rid, metrics={f"m{j}": float(j) for j in range(50)}, params={f"p{j}": j for j in range(30)})
    t.end_run(rid)
    return rid


def test_parallel_jobs_on_one_sqlite_store_do_not_fail(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    from worldrecall.engine.sinks.tracking.tracker import Tracker

    Tracker({"tracking_uri": uri, "experiment": "par"}, tmp_path)  # the sweep callback creates it first
    with mp.get_context("spawn").Pool(4) as pool:
        ids = pool.map(_log_job, [(uri, i) for i in range(8)])
    assert len(set(ids)) == 8
    client = mlflow.tracking.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("par").experiment_id])
    assert len(runs) == 8 and all(len(r.data.metrics) == 50 for r in runs)


def test_a_benchmarks_content_digest_leaves_out_only_what_names_the_job():
    """Two jobs log the same runs for a benchmark exactly when its digest is equal: the swept values, config hash
    and results folder do not count, a number, a param, a run's own tag or the provenance do; a benchmark name
    MLflow's tag keys and filters cannot carry is never pointed to (always logged)."""
    from worldrecall.engine.sinks.tracking.runs import benchmark_contents

    def child(bench="b", value=0.5, **params):
        return {"params": {"benchmark": bench, "model": "m", "config_hash": "c1", **params}, "metrics": {"x": value},
                "tags": {"worldrecall.version": "1", "worldrecall.config_hash": "c1"}, "cases": None}

    job = {"worldrecall.version": "1", "worldrecall.results_dir": "/r/1", "worldrecall.overrides": "a=1"}
    base = benchmark_contents([child(**{"override.t": "1"})], job)
    other_job = {**job, "worldrecall.results_dir": "/r/2", "worldrecall.overrides": "a=2"}
    renamed = child(**{"override.t": "2"})
    renamed["params"]["config_hash"] = renamed["tags"]["worldrecall.config_hash"] = "c2"
    assert benchmark_contents([renamed], other_job) == base
    assert benchmark_contents([child(value=0.6, **{"override.t": "1"})], job) != base
    assert benchmark_contents([child(backends="x", **{"override.t": "1"})], job) != base
    assert benchmark_contents([child(**{"override.t": "1"})], {**job, "worldrecall.git_commit": "abc"}) != base
    assert benchmark_contents([child(bench="odd`name'"), child(bench="ok-1.x")], job).keys() == {"ok-1.x"}
