"""Rankings the benchmarks declare: ties from the paired bootstrap, a failed gate never helps, any benchmark."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from worldrecall import Benchmark, Metric, Value, hookimpl
from worldrecall.core.data import ScoreRow
from worldrecall.engine.sinks.leaderboard_view import leaderboard_views
from worldrecall.engine.stages.aggregate import aggregate_rows
from worldrecall.plugins.stats.ranking import RankingAggregator, tie_ranks
from worldrecall.registry.host import load_plugins


def test_tie_ranks_are_competition_ranks():
    ties = {("a", "b"), ("c", "d")}
    ranks = tie_ranks(["a", "b", "c", "d", "e"], lambda x, y: (x, y) in ties)
    assert ranks == {"a": (1, True), "b": (1, True), "c": (3, True), "d": (3, True), "e": (5, False)}
    # a wide-CI model further down that the leader cannot tell apart does not jump the models in between
    ranks = tie_ranks(["a", "b", "c"], lambda x, y: (x, y) in {("a", "c")})
    assert ranks == {"a": (1, False), "b": (2, False), "c": (3, False)}


class Recall(Metric):
    """A toy third-party metric: how much of the object came back (0-1)."""

    name = "toybench.recall"
    benchmark = "toybench"
    description = "toy recall"
    primary = "recall"
    values = {"recall": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="recall")}


class ToyGate(Metric):
    name = "toybench.gate"
    benchmark = "toybench"
    description = "toy camera gate"
    primary = "passed"
    values = {"passed": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                              description="camera executed the path")}


class ToyPlugin:
    @hookimpl
    def register_metrics(self, register):
        register(Recall)
        register(ToyGate)

    @hookimpl
    def register_benchmarks(self, register):
        register(Benchmark("toybench", headline=("toybench.recall:recall",), gate="toybench.gate:passed",
                           notes=("toy note",)))


def _rows(table: dict[str, list[tuple[float, float | None]]]) -> list[ScoreRow]:
    rows = []
    for model, per_case in table.items():
        for i, (recall, passed) in enumerate(per_case):
            rows.append(ScoreRow("toybench", model, f"c{i}", "toybench.recall", {"recall": recall}))
            rows.append(ScoreRow("toybench", model, f"c{i}", "toybench.gate", {"passed": passed},
                                 info={"verdict": "n/a: no camera instruction"} if passed is None else {}))
    return rows


def _views(rows: list[ScoreRow]):
    host = load_plugins(fresh=True, extra=[ToyPlugin()])
    cfg = {"suite": {}, "aggregator_params": {"ranking": {"replicates": 500}}, "aggregators": ["mean", "ranking"],
           "benchmarks": {}}
    result = SimpleNamespace(rows=rows, tables=aggregate_rows(host, rows, cfg), results_dir=None)
    return {t.split(" · ")[1].split(" (")[0]: (df, note) for t, df, note in leaderboard_views(result, host)}


def test_a_third_party_benchmark_gets_gated_ranked_views_without_engine_changes():
    rows = _rows({
        "oracle": [(0.9, 1), (0.8, 1), (0.85, 1), (0.95, 1)],
        "twin": [(0.9, 1), (0.8, 1), (0.85, 1), (0.95, 1)],      # identical scores: a tie, shown as 1=
        "lucky": [(1.0, 1), (0.1, 0), (0.1, 0), (0.1, 0)],        # passes once, scores 1.0 there
        "frozen": [(1.0, 0), (1.0, 0), (1.0, 0), (1.0, 0)],       # never moves: best all-cases recall
    })
    views = _views(rows)
    gated, gnote = views["camera-gated view"]
    assert list(gated["model"]) == ["oracle", "twin", "lucky", "frozen"]
    assert list(gated["rank"]) == ["1=", "1=", "3", "✗"]
    # lucky's conditional mean over its one passed case is 1.0, above the oracle's 0.875 — but its rank counts
    # the three failed gates as 0: (1.0 + 0 + 0 + 0) / 4 = 0.25
    assert gated.loc[2, "recall:recall (0–1 ↑)"] == "1.000"
    assert gated.loc[2, "recall ranked (failed gate = 0) (0–1 ↑)"].startswith("0.250")
    assert "toy note" in gnote
    everything, _ = views["all cases"]
    assert everything.loc[0, "model"] == "frozen" and everything.loc[0, "rank"] == "1"


def test_gate_not_measured_anywhere_is_said_and_nobody_is_failed():
    """Issue 43: a gate that gave no verdict on any case is "not measured", never ✗ for every model."""
    rows = _rows({"a": [(0.5, None), (0.6, None)], "b": [(0.4, None), (0.7, None)]})
    views = _views(rows)
    assert "camera-gated view" not in views
    everything, note = views["all cases"]
    assert list(everything["rank"]) == ["1= (gate not measured)", "1= (gate not measured)"]  # tied: 2 cases
    assert "✗" not in everything.to_string()
    assert note.startswith("no camera-gated view: toybench.gate not measured (n/a: no camera instruction)")


def test_a_model_whose_gate_was_never_measured_is_marked_not_failed():
    rows = _rows({"a": [(0.5, 1), (0.6, 1)], "b": [(0.4, None), (0.7, None)]})
    views = _views(rows)
    gated, gnote = views["camera-gated view"]
    assert list(gated["rank"]) == ["1", "gate not measured"] and "✗" not in list(gated["rank"])
    assert "gate not measured = no case of that model has a measured camera gate" in gnote
    everything, _ = views["all cases"]
    assert dict(zip(everything["model"], everything["rank"])) == {"b": "1= (gate not measured)", "a": "1="}


def test_ranking_reads_only_declarations():
    agg = RankingAggregator()
    rows = _rows({"a": [(0.5, 1), (0.6, 1)]})
    assert agg.aggregate(rows, {"benchmarks": {}})["ranking"].empty  # nothing declared: no view
    decl = Benchmark("toybench", headline=("toybench.recall:recall",)).to_json()
    meta = {"toybench.recall": {"recall": {"higher_is_better": True, "range": [0, 1], "unit": ""}}}
    t = agg.aggregate(rows, {"benchmarks": {"toybench": decl}, "value_meta": meta, "replicates": 100})["ranking"]
    assert set(t["variant"]) == {"all"} and t["mean"].iloc[0] == pytest.approx(0.55)
    assert not math.isnan(t["rank"].iloc[0])


def test_benchmark_declaration_is_validated():
    with pytest.raises(ValueError, match="'<metric>:<value>'"):
        Benchmark("x", headline=("x.recall",))
    with pytest.raises(ValueError, match="rank_by 'x.a:b' is not one of its headline values"):
        Benchmark("x", headline=("x.c:d",), rank_by="x.a:b")


def test_plugins_json_lists_each_benchmarks_declaration():
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "worldrecall.engine.cli", "plugins", "--json"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    declared = {b["name"]: b for p in json.loads(out) for b in p.get("benchmarks", [])}
    assert declared["memobench"]["rank_by"] == "memobench.ors:score"
    assert declared["memobench"]["gate"] == "memobench.camera_gate:passed"
    assert declared["opis"]["rank_by"] == "opis.opis:opis" and declared["opis"]["gate"] == "opis.camera_gate:passed"
    assert declared["scene_memory"]["rank_by"] == "scene_memory.memory_scene_f1:f1"
    assert declared["scene_memory"]["protocol_gate"] == "scene_memory.memory_scene_f1:gate"


def test_submission_bundle_round_trips_and_equals_the_tables(tmp_path):
    import json

    import jsonschema

    from worldrecall.engine.sinks import SinkContext
    from worldrecall.engine.sinks.submission import SCHEMA, SubmissionSink
    from worldrecall.engine.stages.config import resolve_config
    from worldrecall.engine.stages.provenance import config_hash
    from worldrecall.engine.stages.result import build_result

    rows = _rows({"oracle": [(0.9, 1), (0.8, 1)], "frozen": [(1.0, 0), (1.0, 0)]})
    host = load_plugins(fresh=True, extra=[ToyPlugin()])
    cfg = {"suite": {}, "aggregator_params": {"ranking": {"replicates": 200}}, "aggregators": ["mean", "ranking"],
           "benchmarks": {}, "output_root": str(tmp_path), "cache_dir": str(tmp_path / "cache")}
    tables = aggregate_rows(host, rows, cfg)
    result = build_result(tmp_path, rows, tables, resolve_config(cfg), host.plugins.values())
    paths = SubmissionSink().write(result, SinkContext(host))
    assert sorted(str(p.relative_to(tmp_path / "submission")) for p in paths) == [
        "aggregate.json", "cases/toybench/toybench.gate.jsonl", "cases/toybench/toybench.recall.jsonl",
        "provenance.json", "schema.json"]
    doc = json.loads((tmp_path / "submission" / "aggregate.json").read_text())
    jsonschema.validate(doc, SCHEMA)
    toy = doc["benchmarks"]["toybench"]
    assert toy["declaration"]["rank_by"] == "toybench.recall:recall"
    gated, everything = toy["views"]
    assert (gated["variant"], everything["variant"]) == ("gated", "all")
    # the numbers are the ranking table's: oracle's recall over its passed cases (0.9 + 0.8) / 2
    t = tables["ranking"]
    want = t[(t.variant == "gated") & (t.model == "oracle") & (t.column == "recall:recall")]["mean"].iloc[0]
    cell = gated["models"][0]["cells"]["recall:recall"]
    assert gated["models"][0]["model"] == "oracle" and cell["mean"] == want == pytest.approx(0.85)
    assert gated["models"][1]["rank_label"] == "✗" and gated["models"][1]["rank"] is None
    lines = [x for m in ("gate", "recall") for x in
             (tmp_path / "submission" / "cases" / "toybench" / f"toybench.{m}.jsonl").read_text().splitlines()]
    assert len(lines) == len(rows) and json.loads(lines[0])["benchmark"] == "toybench"
    prov = json.loads((tmp_path / "submission" / "provenance.json").read_text())
    assert prov["config_hash"] == config_hash(resolve_config(cfg)) and prov["plugins"]["stats"]["version"]
    assert prov["n_cases"] == 4 and prov["n_failed_cases"] == 0
    # the CPU kernels the numbers were computed with (numerics/isa.py), as this process pinned them
    from worldrecall.numerics import isa

    assert prov["cpu_kernels"] == json.loads(json.dumps(isa.state()))
    from worldrecall.engine.sinks.tracking.sink import provenance_tags

    assert provenance_tags(result, [])["worldrecall.cpu_kernels"] == isa.summary(isa.state())
    # the installed versions, and how they compare with the lock setup.sh installs from
    from importlib import metadata

    assert prov["packages"]["installed"]["numpy"] == metadata.version("numpy")
    assert prov["packages"]["lock"].endswith("requirements.lock") or "differ from requirements.lock" in prov["packages"]["lock"]
    assert provenance_tags(result, [])["worldrecall.packages"].startswith(f"sha256 {prov['packages']['digest'][:16]}; ")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "schema": "other"}, SCHEMA)


def test_view_entries_read_from_columns_are_pandas_groups(tmp_path):
    """aggregate.json's views read straight from the view table's columns are the ones pandas' groupby and
    sort_values give (views by benchmark/order/variant, a view's rows by position with numpy's quicksort,
    models in order of first appearance), for the table in any row order, with ties across models."""
    import random

    from worldrecall.engine.sinks import submission
    from worldrecall.engine.stages.config import resolve_config

    host = load_plugins(fresh=True, extra=[ToyPlugin()])
    cfg = {"suite": {}, "aggregator_params": {"ranking": {"replicates": 50}}, "aggregators": ["mean", "ranking"],
           "benchmarks": {}}
    rows = _rows({"oracle": [(0.9, 1), (0.8, 1)], "frozen": [(1.0, 0), (1.0, 0)], "drift": [(0.5, 1), (0.4, 0)]})
    tables = aggregate_rows(host, rows, resolve_config(cfg))
    view = next(t for name, t in tables.items() if name.endswith("ranking"))
    # more models per view than numpy's insertion-sort cut-off (16 rows): the quicksort's own tie order counts
    big = pd.concat([view.assign(benchmark=b, model=view["model"] + f"_{i}")
                     for b in ("toy", "a_first", "zz") for i in range(4)], ignore_index=True)
    assert big.groupby(["benchmark", "order", "variant"]).size().min() > 16
    rnd = random.Random(0)
    for k in range(40):
        t = big.sample(frac=1.0, random_state=k).reset_index(drop=True)
        if k % 2:
            t["position"] = [rnd.randint(0, 2) for _ in range(len(t))]
        assert submission._view_entries(t) == submission._view_entries_by_pandas(t), k
