"""Sharding is not sweeping: shard jobs are partial, labelled so, and merged into one result per configuration."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from helpers.toy_plugin import make_dataset, toy_cli_overrides

from worldrecall.engine.cli import hydra_run
from worldrecall.engine.sinks.sweep_summary import collect, swept_keys
from worldrecall.engine.stages.shards import finish_shard


def _overrides(out: Path, ds: dict) -> list[str]:
    return toy_cli_overrides(ds, out, "workers=1", "aggregator_params.bootstrap.replicates=100")


def _tables(results: Path) -> dict[str, str]:
    return {str(p.relative_to(results / "tables")): p.read_text() for p in sorted((results / "tables").rglob("*.csv"))}


def _runs(out: Path) -> list:
    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{out.resolve() / 'mlflow.db'}")
    return c.search_runs([c.get_experiment_by_name("worldrecall").experiment_id])


def test_shard_keys_are_never_swept_keys():
    assert swept_keys(["shard.index=range(4)", "shard.count=4", "a.tol=1,2", "+b=choice(x,y)", "c=[1,2]"]) == \
        ["a.tol", "b"]
    assert swept_keys(["+shard.index=0,1"]) == []


def test_exactly_one_shard_claims_the_merge_in_any_order(tmp_path):
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        res, sweep = tmp_path / f"r{order}", tmp_path / f"s{order}"
        claims = [finish_shard(res, sweep, i, 3) for i in order]
        assert claims == [False, False, True]  # the last to end merges
        assert finish_shard(res, sweep, order[-1], 3) is False  # a rerun of that job does not merge again
    # another sweep over the same results folder (a resubmission) merges once more
    assert [finish_shard(tmp_path / "r[0, 1, 2]", tmp_path / "again", i, 3) for i in range(3)] == [False, False, True]


def test_collect_skips_partial_shard_summaries(tmp_path):
    rec = {"benchmark": "toy", "model": "m", "metric": "toy.brightness", "value": "stable", "mean": 1.0,
           "ci_low": None, "ci_high": None, "direction": "↑", "unit": "0–1"}
    for job, partial in (("0", True), ("1", False)):
        (tmp_path / job).mkdir()
        (tmp_path / job / "summary.json").write_text(json.dumps(
            {"swept": {}, "results_dir": "R", "partial": partial, "rows": [rec]}))
    assert collect(tmp_path)["job"].tolist() == ["1"]


def test_shard_multirun_reports_the_merge_not_the_shards(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0, 1, 2, 3, 4, 5], "bad": [50, 51, 52, 53, 54, 55]})
    assert hydra_run([*_overrides(tmp_path / "one", ds), "tracking=none"]) == 0
    (single,) = (tmp_path / "one" / "results").iterdir()
    capsys.readouterr()

    out = tmp_path / "sh"
    assert hydra_run(["-m", *_overrides(out, ds), "shard.count=2", "shard.index=range(2)"]) == 0
    text = capsys.readouterr().out
    assert "== sweep summary" not in text and "over index" not in text  # before: "over index (0, 1)"
    assert "shard 1/2 done" in text and "shard 2/2 done" in text and "last of 2 shards: merging" in text
    assert "== shards merged:" in text
    (merged,) = (out / "results").iterdir()
    assert _tables(merged) == _tables(single)  # the merged tables are the single-process ones, byte for byte
    for i in range(2):
        part = merged / "partial" / f"shard-{i:04d}-of-0002"
        assert (part / "PARTIAL.md").read_text().startswith(f"PARTIAL: shard {i + 1} of 2")
        assert (part / "tables" / "mean" / "toy.csv").exists()
    # the first shard's own tables saw only its cases (partial), never written over the merged ones
    first = (merged / "partial" / "shard-0000-of-0002" / "tables" / "cases" / "toy" / "toy.brightness.csv").read_text()
    assert first.count("\n") < _tables(single)["cases/toy/toy.brightness.csv"].count("\n")
    runs = _runs(out)
    top = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert [r.data.tags["worldrecall.kind"] for r in top] == ["sweep"]
    by_id = {r.info.run_id: r for r in runs}
    models = [r for r in runs if r.data.tags.get("worldrecall.kind") == "model"]
    assert len(models) == 2 and {by_id[r.data.tags["mlflow.parentRunId"]].info.run_name for r in models} == \
        {"merged · 2 shards"}
    assert {r.data.params["model"]: r.data.metrics["n_cases"] for r in models} == {"good": 6.0, "bad": 6.0}


def test_shards_with_a_swept_threshold_compare_merged_values_only(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0, 1, 2, 3], "bad": [40, 41, 60, 61]})
    out = tmp_path / "sw"
    code = hydra_run(["-m", *_overrides(out, ds), "benchmarks.toy.metrics.brightness.thresholds.tolerance=5.0,100.0",
                      "shard.count=2", "shard.index=range(2)"])
    assert code == 0
    text = capsys.readouterr().out
    # 4 jobs ran, but the summary compares 2 merged configurations: one per tolerance, never per shard
    assert "sweep summary: 2 jobs over tolerance (5.0, 100.0)" in text and "index" not in text.split("sweep summary")[-1]
    sweep = next((out / "hydra-multirun").glob("*/*"))
    summaries = [json.loads(p.read_text()) for p in sweep.glob("*/summary.json")]
    merged = [s for s in summaries if not s["partial"]]
    assert len(summaries) == 4 and len(merged) == 2
    stable = {s["swept"]["benchmarks.toy.metrics.brightness.thresholds.tolerance"]:
              {r["model"]: r["mean"] for r in s["rows"]} for s in merged}
    # bad drifts ~37.5 / 38.4 / 56.25 / 57.2 (x 15/16 of the pixels): none within 5, all within 100
    assert stable == {"5.0": {"good": 1.0, "bad": 0.0}, "100.0": {"good": 1.0, "bad": 1.0}}
