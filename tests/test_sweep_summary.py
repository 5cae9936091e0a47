"""The sweep summary: swept keys, affected metrics, the table, the plots, and the callback's parent run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from worldrecall.engine.sinks.sweep_summary import affected, collect, summarise, swept_keys, table


def test_swept_keys_follow_hydra_sweep_syntax():
    task = ["a.b=1,2", "c=[1,2]", "d=range(4)", "+e.f=x,y", "g=3", "h={p: 1, q: 2}", "i=choice(u,v)"]
    assert swept_keys(task) == ["a.b", "d", "e.f", "i"]


def _job(root: Path, num: int, x: str, rows: list[dict]) -> None:
    d = root / str(num)
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"swept": {"benchmarks.b.metrics.m.thresholds.t": x}, "rows": rows}))


def _row(model: str, metric: str, mean: float, lo: float, hi: float) -> dict:
    return {"benchmark": "b", "model": model, "metric": metric, "value": "score", "mean": mean, "ci_low": lo,
            "ci_high": hi, "direction": "↑", "unit": "0–1"}


def _sweep(root: Path) -> None:
    # metric b.ors drops with t for "oracle"; b.flat never changes -> only b.ors is affected
    _job(root, 0, "0.1", [_row("oracle", "b.ors", 0.9, 0.8, 1.0), _row("oracle", "b.flat", 0.5, 0.4, 0.6),
                          _row("frozen", "b.ors", 0.2, 0.1, 0.3), _row("frozen", "b.flat", 0.5, 0.4, 0.6)])
    _job(root, 1, "0.3", [_row("oracle", "b.ors", 0.6, 0.5, 0.7), _row("oracle", "b.flat", 0.5, 0.4, 0.6),
                          _row("frozen", "b.ors", 0.2, 0.1, 0.3), _row("frozen", "b.flat", 0.5, 0.4, 0.6)])
    _job(root, 10, "0.2", [_row("oracle", "b.ors", 0.75, 0.7, 0.8), _row("oracle", "b.flat", 0.5, 0.4, 0.6),
                           _row("frozen", "b.ors", 0.2, 0.1, 0.3), _row("frozen", "b.flat", 0.5, 0.4, 0.6)])


def test_only_affected_metrics_are_summarised_in_swept_order(tmp_path):
    _sweep(tmp_path)
    df = collect(tmp_path)
    assert len(df) == 12 and set(df["x"]) == {"0.1", "0.2", "0.3"}
    aff = affected(df)
    assert set(aff["metric"]) == {"b.ors"}  # b.flat is 0.5 at every value for both models
    wide = table(aff)
    assert list(wide.columns) == ["benchmark", "metric", "model", "0.1", "0.2", "0.3"]  # numeric order, not job order
    oracle = wide[wide["model"] == "oracle"].iloc[0]
    assert oracle["metric"] == "ors (0–1 ↑)"
    assert (oracle["0.1"], oracle["0.2"], oracle["0.3"]) == ("0.9 [0.8, 1]", "0.75 [0.7, 0.8]", "0.6 [0.5, 0.7]")


def test_summarise_writes_table_csv_and_one_plot_per_affected_metric(tmp_path):
    _sweep(tmp_path)
    text, files = summarise(tmp_path, ["benchmarks.b.metrics.m.thresholds.t"])
    assert "1 metric(s) change with t" in text and "0.75 [0.7, 0.8]" in text
    names = {f.name for f in files}
    assert {"sweep_summary.md", "sweep_summary.csv", "sweep_b_ors.png"} == names
    md = (tmp_path / "sweep_summary.md").read_text()
    assert "| benchmark | metric | model | 0.1 | 0.2 | 0.3 |" in md
    import cv2

    assert cv2.imread(str(tmp_path / "sweep_plots" / "sweep_b_ors.png")) is not None


def test_summarise_says_when_nothing_changes(tmp_path):
    for i, x in enumerate(("0.2", "0.9")):
        _job(tmp_path, i, x, [_row("oracle", "b.ors", 0.9, 0.8, 1.0)])
    text, files = summarise(tmp_path, ["t"])
    assert "no metric's primary value changed across the 2 swept values" in text
    assert [f.name for f in files] == ["sweep_summary.md"]


def test_callback_logs_the_summary_to_the_sweep_parent(tmp_path, capsys):
    mlflow = pytest.importorskip("mlflow")
    from worldrecall.engine.hydra_callbacks import MlflowSweepCallback
    from worldrecall.engine.sinks.tracking.sink import PARENT_ENV

    sweep = tmp_path / "sweep"
    cfg = OmegaConf.create({"output_root": str(tmp_path / "out"),
                            "tracking": {"enabled": True, "experiment": "s", "tracking_uri": None, "tags": {}},
                            "hydra": {"sweep": {"dir": str(sweep)},
                                      "overrides": {"task": ["benchmarks.b.metrics.m.thresholds.t=0.1,0.2,0.3",
                                                             "progress=false"]}}})
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    import os

    assert os.environ[PARENT_ENV] == (sweep / "mlflow_parent_run_id").read_text()
    assert json.loads((sweep / "swept_keys.json").read_text()) == ["benchmarks.b.metrics.m.thresholds.t"]
    _sweep(sweep)
    cb.on_multirun_end(cfg)
    out = capsys.readouterr().out
    assert "sweep summary" in out and "oracle" in out
    assert PARENT_ENV not in os.environ
    client = mlflow.tracking.MlflowClient(f"sqlite:///{(tmp_path / 'out').resolve() / 'mlflow.db'}")
    run = client.get_run(cb.run_id)
    assert run.info.run_name == "sweep benchmarks.b.metrics.m.thresholds.t=0.1,0.2,0.3"
    assert run.data.metrics["n_jobs"] == 3.0 and run.info.status == "FINISHED"
    arts = {a.path for a in client.list_artifacts(cb.run_id, "sweep_summary")}
    assert {"sweep_summary/sweep_summary.md", "sweep_summary/sweep_summary.csv",
            "sweep_summary/sweep_b_ors.png"} == arts
    assert not math.isnan(run.data.metrics["n_jobs"])


def test_a_sweep_job_nests_parent_job_model_runs_named_by_the_swept_value(tmp_path, monkeypatch, capsys):
    mlflow = pytest.importorskip("mlflow")
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from helpers import toy_plugin
    from helpers.toy_plugin import make_dataset, toy_config

    from worldrecall.engine.job import run_plain
    from worldrecall.engine.sinks.sweep_summary import SWEPT_ENV
    from worldrecall.engine.sinks.tracking.sink import PARENT_ENV
    from worldrecall.engine.sinks.tracking.tracker import Tracker
    from worldrecall.registry.host import load_plugins

    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds, tracking={"enabled": True, "experiment": "s", "tracking_uri": None, "tags": {}})
    key = "benchmarks.toy.metrics.brightness.thresholds.tolerance"
    parent = Tracker(cfg["tracking"], tmp_path / "out").start_run("sweep")  # what on_multirun_start makes
    monkeypatch.setenv(PARENT_ENV, parent)
    monkeypatch.setenv(SWEPT_ENV, json.dumps([key]))
    sweep = tmp_path / "sweep"
    for i, tol in enumerate((10.0, 50.0)):
        cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = tol
        run_plain(cfg, host=host, overrides=[f"{key}={tol}", "progress=false"], job_dir=sweep / str(i),
                  sweep_dir=sweep)
    capsys.readouterr()
    client = mlflow.tracking.MlflowClient(f"sqlite:///{(tmp_path / 'out').resolve() / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("s").experiment_id])
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent]
    assert sorted(r.info.run_name for r in jobs) == ["brightness.thresholds.tolerance=10.0",
                                                     "brightness.thresholds.tolerance=50.0"]
    for job in jobs:
        kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == job.info.run_id]
        tol = job.info.run_name.split("=")[1]
        assert sorted(r.info.run_name for r in kids) == [f"bad · toy · brightness.thresholds.tolerance={tol}",
                                                         f"good · toy · brightness.thresholds.tolerance={tol}"]
        assert all(r.data.params[f"override.{key}"] == tol for r in kids)  # parallel coordinates use it
        assert "override.progress" not in kids[0].data.params  # only what the sweep varies
    # "bad" drifts by ~37.5 and ~56 on its two cases: stable on neither at tolerance 10, on one at 50
    text, _ = summarise(sweep, [key])
    assert "brightness (0–1 ↑)" in text
    wide = table(affected(collect(sweep)))
    bad = wide[wide["model"] == "bad"].iloc[0]
    assert bad["10.0"].startswith("0 [") and bad["50.0"].startswith("0.5 [")


def test_identical_series_share_one_labelled_line():
    import pandas as pd

    from worldrecall.engine.sinks.sweep_summary import series_groups

    rows = [{"model": m, "x": x, "mean": v, "ci_low": v, "ci_high": v}
            for m, vals in (("a", [0.5, 0.6]), ("b", [0.5, 0.6]), ("c", [0.5, 0.7]))
            for x, v in zip((1, 2), vals)]
    groups = series_groups(pd.DataFrame(rows), [1, 2])
    assert [label for label, _ in groups] == ["a = b", "c"]
