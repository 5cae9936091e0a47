"""The aggregate cache: a group's tables are reused only while its rows, params and aggregator are the same;
benchmark-partitioned aggregation gives the tables of aggregating all rows at once."""

from __future__ import annotations

import json

from typing import Any, ClassVar

import pandas as pd
import pytest

from worldrecall import Aggregator, Metric, Value, hookimpl
from worldrecall.core.data import ScoreRow
from worldrecall.engine.cache import Store
from worldrecall.engine.cache.frames import decode_tables, encode_tables, pack_tables
from worldrecall.engine.stages import aggregate as aggregate_stage
from worldrecall.engine.stages.aggregate import aggregate_rows
from worldrecall.registry.host import load_plugins

CALLS: list[tuple[str, tuple[str, ...]]] = []  # (aggregator, benchmarks of the rows it saw)


class Score(Metric):
    name = "bench_a.score"
    benchmark = "bench_a"
    description = "toy"
    primary = "v"
    values = {"v": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="toy value")}


class ScoreB(Score):
    name = "bench_b.score"
    benchmark = "bench_b"


class Total(Aggregator):
    """Sum of ``v`` times ``scale`` per (benchmark, model): counts its calls."""

    name = "toy_total"
    defaults: ClassVar[dict[str, Any]] = {"scale": 1.0}
    tables: ClassVar[dict[str, str]] = {"toy_total": "toy"}
    by_benchmark: ClassVar[bool] = True

    def aggregate(self, rows: list[ScoreRow], params: Any) -> dict[str, pd.DataFrame]:
        CALLS.append((self.name, tuple(sorted({r.benchmark for r in rows}))))
        recs: dict[tuple[str, str], float] = {}
        for r in rows:
            k = (r.benchmark, r.model)
            recs[k] = recs.get(k, 0.0) + float(r.values["v"]) * float(params.get("scale", 1.0))
        return {"toy_total": pd.DataFrame([{"benchmark": b, "model": m, "total": t, "n": 1}
                                           for (b, m), t in sorted(recs.items())])}


class Count(Total):
    name = "toy_count"
    by_benchmark: ClassVar[bool] = False

    def aggregate(self, rows: list[ScoreRow], params: Any) -> dict[str, pd.DataFrame]:
        CALLS.append((self.name, tuple(sorted({r.benchmark for r in rows}))))
        return {"toy_count": pd.DataFrame({"rows": [len(rows)], "label": ["x"]})}


class ToyPlugin:
    @hookimpl
    def register_metrics(self, register):
        register(Score)
        register(ScoreB)

    @hookimpl
    def register_aggregators(self, register):
        register(Total)
        register(Count)


def _rows(a: float = 0.5) -> list[ScoreRow]:
    return [ScoreRow("bench_a", m, "c0", "bench_a.score", {"v": a}) for m in ("m1", "m2")] + \
           [ScoreRow("bench_b", m, "c0", "bench_b.score", {"v": 0.25}) for m in ("m1", "m2")]


def _cfg(tmp_path, scale: float = 1.0) -> dict[str, Any]:
    return {"suite": {}, "aggregators": ["toy_total", "toy_count"], "benchmarks": {},
            "aggregator_params": {"toy_total": {"scale": scale}}, "cache_dir": str(tmp_path / "cache")}


@pytest.fixture
def host():
    return load_plugins(fresh=True, extra=[ToyPlugin()])


class _Counted(Store):
    @property
    def agg_hits(self) -> int:
        return self.hits.get("aggregates", 0)


def _run(host, rows, cfg):
    CALLS.clear()
    store = _Counted(cfg["cache_dir"])  # a fresh store: nothing in memory, as in a new process
    return aggregate_rows(host, rows, cfg, per_benchmark={}, store=store), list(CALLS), store


def test_unchanged_rows_are_not_aggregated_again(host, tmp_path):
    first, calls, _ = _run(host, _rows(), _cfg(tmp_path))
    assert sorted(calls) == [("toy_count", ("bench_a", "bench_b")), ("toy_total", ("bench_a",)),
                             ("toy_total", ("bench_b",))]
    again, calls, cache = _run(host, _rows(), _cfg(tmp_path))
    assert calls == [] and cache.agg_hits == 3
    for name in first:
        assert again[name].to_csv(index=False) == first[name].to_csv(index=False)
        pd.testing.assert_frame_equal(again[name], first[name], check_exact=True)


def test_a_changed_row_reaggregates_its_benchmark_only(host, tmp_path):
    _run(host, _rows(), _cfg(tmp_path))
    tables, calls, _ = _run(host, _rows(a=0.75), _cfg(tmp_path))
    # bench_a's rows changed: it and the all-rows aggregator run again; bench_b's tables come from the cache
    assert sorted(calls) == [("toy_count", ("bench_a", "bench_b")), ("toy_total", ("bench_a",))]
    assert list(tables["toy_total"]["total"]) == [0.75, 0.75, 0.25, 0.25]  # hand: one row per (bench, model)


def test_a_changed_param_reaggregates(host, tmp_path):
    _run(host, _rows(), _cfg(tmp_path))
    tables, calls, _ = _run(host, _rows(), _cfg(tmp_path, scale=2.0))
    assert sorted(calls) == [("toy_total", ("bench_a",)), ("toy_total", ("bench_b",))]
    assert list(tables["toy_total"]["total"]) == [1.0, 1.0, 0.5, 0.5]


def test_a_changed_aggregator_reaggregates(host, tmp_path, monkeypatch):
    _run(host, _rows(), _cfg(tmp_path))
    # an edited aggregator module (its code digest) or another class under the same name: a new key
    real = aggregate_stage.component_identity
    monkeypatch.setattr(aggregate_stage, "component_identity", lambda c: {**real(c), "code": "edited"})
    _, calls, _ = _run(host, _rows(), _cfg(tmp_path))
    assert ("toy_total", ("bench_a",)) in calls and ("toy_count", ("bench_a", "bench_b")) in calls


def test_partitioned_equals_whole(host, tmp_path):
    rows = _rows()
    whole = Total().aggregate(rows, {"scale": 1.0})["toy_total"]
    tables, _, _ = _run(host, rows, _cfg(tmp_path))
    assert tables["toy_total"].to_csv(index=False) == whole.to_csv(index=False)


def test_a_damaged_entry_is_recomputed(host, tmp_path):
    _run(host, _rows(), _cfg(tmp_path))
    for p in (tmp_path / "cache" / "aggregates").rglob("*.json"):  # bench_b's entry holds 0.25: tampered
        doc = json.loads(p.read_text())  # {"digest", "entry"}: the entry's tables are stored deflated
        text = json.dumps({n: t for n, t in decode_raw(doc["entry"]).items()}).replace("0.25", "0.3")
        doc["entry"] = pack_tables(json.loads(text))  # the digest left as it was
        p.write_text(json.dumps(doc))
    tables, calls, _ = _run(host, _rows(), _cfg(tmp_path))  # read from the files: the damaged one recomputed
    assert calls == [("toy_total", ("bench_b",))]
    assert list(tables["toy_total"]["total"]) == [0.5, 0.5, 0.25, 0.25]


def decode_raw(entry: dict) -> dict:
    """A stored table set's JSON (packed or plain), before it becomes frames."""
    import base64
    import zlib

    return json.loads(zlib.decompress(base64.b64decode(entry["data"]))) if entry.get("format") else entry


def test_a_table_json_cannot_carry_exactly_is_not_cached(tmp_path):
    df = pd.DataFrame({"x": [1, 2]}, index=[5, 6])  # a non-default index
    assert encode_tables({"t": df}) is None
    back = decode_tables(encode_tables({"t": pd.DataFrame({"x": [1, 2.5], "s": ["a", None]})}))["t"]
    assert list(back["x"]) == [1.0, 2.5] and back["s"].isna().tolist() == [False, True]


@pytest.mark.parametrize("frame, kept", [
    (pd.DataFrame({"x": [1.0, -0.0, float("nan"), 1e-300, 0.1 + 0.2], "n": [1, 2, 3, 4, 5]}), True),
    (pd.DataFrame({"o": ["a", None, 1, 2.5, True]}), True),  # mixed object cells keep their Python types
    (pd.DataFrame({"o": [(1, 2), "a"]}), False),  # a tuple would come back a list
    (pd.DataFrame({"o": [{"k": 1}, "a"]}).astype({"o": object}), True),
    (pd.DataFrame({"c": pd.Categorical(["a", "b"], categories=["b", "a", "z"])}), False),  # categories lost
    (pd.DataFrame({"i": pd.array([1, None], dtype="Int64")}), True),
    (pd.DataFrame({"s": ["a", None, "é|,\n"], "v": [0.5, None, 2.0]}), True),  # pandas' default strings, missing
    (pd.DataFrame({"t": pd.to_datetime(["2026-01-01", "2026-06-01"])}), False),
])
def test_the_cache_keeps_a_table_only_where_it_reads_back_exactly(tmp_path, frame, kept):
    enc = encode_tables({"t": frame})
    assert (enc is not None) == kept
    if not kept:
        return
    # stored packed (deflated, as the aggregation stage stores them) or plain (as written before): the same frame
    for key, doc in (("ef" * 32, pack_tables(enc)), ("ab" * 32, enc)):
        Store(tmp_path).put_json("aggregates", key, doc)
        back = decode_tables(Store(tmp_path).get_json("aggregates", key))
        pd.testing.assert_frame_equal(back["t"], frame, check_exact=True)
        assert [str(t) for t in back["t"].dtypes] == [str(t) for t in frame.dtypes]
        assert back["t"].to_csv(index=False) == frame.to_csv(index=False)


@pytest.mark.parametrize("dtype, cells", [
    ("float64", [1.0, 2, float("nan"), -0.0, 1e308, float("inf")]),  # ints in a float column: floats
    ("float64", [None, 0.5]),  # a missing cell: NaN
    ("float64", [True, 0.5]), ("float64", ["1.5", 2.0]),  # not plain numbers: what the Series makes of them
    ("int64", [1, -2, 2**62]), ("int64", [1.0, 2.0]), ("int64", [True, 3]), ("int64", [2**64]),  # too large: refused
    ("str", ["a", None, "é|,\n", ""]), ("str", []), ("object", [[1, 2], [3, 4]]), ("object", ["a", 1, None]),
    ("bool", [True, False]), ("Int64", [1, None]), ("float64", []),
])
def test_a_stored_column_decodes_as_a_series_of_its_dtype_would(dtype, cells):
    """The decoder builds numbers and strings without a Series per column: the frame equals the one a Series
    per column gives (values, dtypes, Python types of object cells, index), or both refuse the cells alike."""
    doc = {"columns": ["c", "k"], "dtypes": [dtype, "int64"], "data": [cells, list(range(len(cells)))]}
    try:
        want = pd.DataFrame({"c": pd.Series(cells, dtype=dtype), "k": pd.Series(range(len(cells)), dtype="int64")})
    except (TypeError, ValueError, OverflowError) as e:
        with pytest.raises(type(e)):
            decode_tables({"t": doc})
        return
    got = decode_tables({"t": doc})["t"]
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert [str(t) for t in got.dtypes] == [str(t) for t in want.dtypes]
    assert [type(v) for v in got["c"]] == [type(v) for v in want["c"]]
    assert type(got.index) is type(want.index) and got.to_csv(index=False) == want.to_csv(index=False)


def test_a_stored_table_set_is_deflated():
    """A by-benchmark table set is hundreds of KB of JSON per re-score or sweep job: stored deflated."""
    import json

    frame = pd.DataFrame({"model": [f"m{i % 8}" for i in range(4000)], "metric": ["bench.score"] * 4000,
                          "mean": [round(i / 7, 4) for i in range(4000)]})
    enc = encode_tables({"mean": frame})
    packed = pack_tables(enc)
    assert packed["format"] == "zlib+json" and len(json.dumps(packed)) * 3 < len(json.dumps(enc))
    pd.testing.assert_frame_equal(decode_tables(packed)["mean"], frame, check_exact=True)


def test_stats_aggregators_partition_exactly(tmp_path):
    """mean, macro, bootstrap, paired and ranking declare ``by_benchmark``: the same tables as one call."""
    host = load_plugins(fresh=True, extra=[ToyPlugin()])
    rows = []
    for bench, metric in (("bench_a", "bench_a.score"), ("bench_b", "bench_b.score")):
        for m, base in (("oracle", 0.9), ("m2", 0.4)):
            for i in range(6):
                rows.append(ScoreRow(bench, m, f"c{i}", metric, {"v": base + 0.01 * i},
                                     strata={"subcategory": f"s{i % 2}", "domain": "d"}))
    rows.sort(key=lambda r: r.row_key)
    cfg = {"suite": {}, "aggregators": ["mean", "macro", "bootstrap", "paired", "ranking"], "benchmarks": {},
           "aggregator_params": {"bootstrap": {"replicates": 200}, "paired": {"replicates": 200}}}
    partitioned = aggregate_rows(host, rows, {**cfg, "cache_dir": str(tmp_path)}, per_benchmark={})
    for name in cfg["aggregators"]:
        agg = host.aggregator(name)
        assert agg.by_benchmark
        from worldrecall.engine.stages.aggregate import _params, value_meta

        p = _params(agg, cfg["aggregator_params"].get(name, {}), {n: c.primary for n, c in host.metrics.items()},
                    value_meta(host, rows), {n: b.to_json() for n, b in host.benchmarks.items()})
        for tname, df in agg.aggregate(rows, p).items():
            assert partitioned[tname].to_csv(index=False) == df.to_csv(index=False), tname
            assert [str(t) for t in partitioned[tname].dtypes] == [str(t) for t in df.dtypes], tname


class ScoreA2(Score):
    name = "bench_a.alpha"  # sorts before bench_a.score: the parts' order is not the whole's


class ScoreA3(Score):
    name = "bench_a.zeta"


class ThreeMetrics(ToyPlugin):
    @hookimpl
    def register_metrics(self, register):
        for m in (Score, ScoreB, ScoreA2, ScoreA3):
            register(m)


def _three_metric_rows(shift: float = 0.0) -> list[ScoreRow]:
    rows = []
    for metric in ("bench_a.score", "bench_a.alpha", "bench_a.zeta", "bench_b.score"):
        for m, base in (("oracle", 0.9), ("m2", 0.4), ("a_model", 0.6)):
            for i in range(6):
                status = "failed" if metric == "bench_a.zeta" or (m == "m2" and i == 3) else "ok"
                v = base + 0.01 * i + (shift if metric == "bench_a.alpha" else 0.0)
                rows.append(ScoreRow(metric.split(".")[0], m, f"c{i}", metric,
                                     {"v": v, "w": None if i == 2 else 1 - v} if status == "ok" else {},
                                     status=status, strata={"subcategory": f"s{i % 2}", "domain": "d"}))
    rows.sort(key=lambda r: r.row_key)
    return rows


def test_stats_aggregators_partition_by_metric_exactly(tmp_path):
    """mean, macro, bootstrap and paired declare ``by_metric``: per-metric parts, concatenated and sorted, are
    the tables of one call over all rows — with models and metrics whose name order differs, failed rows and
    a metric without one ok row; a change to one metric's rows aggregates that metric only."""
    host = load_plugins(fresh=True, extra=[ThreeMetrics()])
    rows = _three_metric_rows()
    names = ["mean", "macro", "bootstrap", "paired"]
    cfg = {"suite": {}, "aggregators": names, "benchmarks": {}, "cache_dir": str(tmp_path),
           "aggregator_params": {"bootstrap": {"replicates": 200}, "paired": {"replicates": 200}}}
    partitioned = aggregate_rows(host, rows, cfg, per_benchmark={})
    from worldrecall.engine.stages.aggregate import _params, value_meta

    again = aggregate_rows(host, _three_metric_rows(), cfg, per_benchmark={})  # the parts from the cache
    for tname, df in again.items():
        pd.testing.assert_frame_equal(df, partitioned[tname], check_exact=True)

    for name in names:
        agg = host.aggregator(name)
        assert agg.by_metric
        p = _params(agg, cfg["aggregator_params"].get(name, {}), {n: c.primary for n, c in host.metrics.items()},
                    value_meta(host, rows), {})
        for tname, df in agg.aggregate(rows, p).items():
            assert len(df), tname
            pd.testing.assert_frame_equal(partitioned[tname], df, check_exact=True)
            assert partitioned[tname].to_csv(index=False) == df.to_csv(index=False), tname

    seen: list[tuple[str, ...]] = []
    real = host.aggregator("mean").aggregate
    host.aggregator("mean").aggregate = lambda rs, p: seen.append(tuple(sorted({r.metric for r in rs}))) or real(rs, p)
    aggregate_rows(host, _three_metric_rows(shift=0.001), {**cfg, "aggregators": ["mean"]}, per_benchmark={})
    assert seen == [("bench_a.alpha",)]


def test_how_a_row_was_obtained_is_not_its_content(host, tmp_path):
    """A re-score job reads unchanged rows back from the score memo (info.cache_hit …): still a cache hit;
    any other change of info (a verdict an aggregator may read) is a new key."""
    _run(host, _rows(), _cfg(tmp_path))
    memo_rows = _rows()
    for r in memo_rows:
        r.info = {"cache_hit": True, "score_cache_hit": True}
    _, calls, _ = _run(host, memo_rows, _cfg(tmp_path))
    assert calls == []
    changed = [ScoreRow.from_json(r.to_json()) for r in memo_rows]
    changed[0].info = {**changed[0].info, "verdict": "n/a: no camera instruction"}
    _, calls, _ = _run(host, changed, _cfg(tmp_path))
    assert sorted(calls) == [("toy_count", ("bench_a", "bench_b")), ("toy_total", ("bench_a",))]


def test_rows_and_tables_identical_with_1_and_2_workers_cold_and_rescored(tmp_path):
    """The caches never change a number: 1 and 2 workers give the same rows and tables, cold, warm
    (everything from the memos, in this process) and after a re-score with a changed threshold and back."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from helpers import toy_plugin
    from helpers.toy_plugin import make_dataset, toy_config

    from worldrecall.engine.stages.runner import Runner

    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 5, 10, 15], "bad": [40, 60, 80, 100]})

    def run(root: str, workers: int, tol: float = 10.0):
        cfg = toy_config(tmp_path / root, ds, workers=workers)
        cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = tol
        res = Runner(cfg, host).run()
        rows = [(r.row_key, r.status, r.values) for r in res.rows]
        return rows, {n: df.to_csv(index=False) for n, df in res.tables.items() if hasattr(df, "to_csv")}

    one, two = run("w1", 1), run("w2", 2)
    assert one == two and one[0]
    assert run("w1", 2) == one and run("w2", 1) == one  # warm: rows resumed, tables from the cache
    other = run("w1", 2, tol=20.0)  # a re-score: new results folder, scores from measurements
    assert run("w2", 1, tol=20.0) == other


def test_a_rescore_job_scores_in_this_process_and_a_cold_one_forks(tmp_path, monkeypatch):
    """When every row left needs a score only (alignment memoised, measurement cached: a sweep's re-score
    job), the job scores them here instead of forking workers; a job with anything to measure forks; the
    rows are those of a fresh single-process run either way."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from helpers import toy_plugin
    from helpers.toy_plugin import make_dataset, toy_config

    from worldrecall.engine.stages import executor
    from worldrecall.engine.stages.runner import Runner

    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 5, 10, 15], "bad": [40, 60, 80, 100], "ugly": [9, 9, 9, 9]})
    forks: list[int] = []
    real = executor.ForkExecutor.run
    monkeypatch.setattr(executor.ForkExecutor, "run", lambda self, *a: forks.append(self.workers) or real(self, *a))

    def run(root: str, tol: float, workers: int = 2, cache: str = "cache"):
        cfg = toy_config(tmp_path / root, ds, workers=workers)
        cfg["cache_dir"] = str(tmp_path / cache)
        cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = tol
        return [(r.row_key, r.status, r.values) for r in Runner(cfg, host).run().rows]

    cold = run("a", 10.0)
    assert forks == [2]
    rescored = run("b", 20.0)
    assert forks == [2], "a re-score job forked workers"
    assert rescored == run("c", 20.0, workers=1, cache="fresh") and rescored != cold


def test_a_by_metric_declaration_naming_a_missing_column_says_so(tmp_path):
    """A plugin aggregator whose ``by_metric`` sorts by a column its table lacks fails with one line naming
    the aggregator, the table and the column, not a pandas KeyError from deep inside the reassembly."""

    class Sloppy(Total):
        name = "toy_sloppy"
        by_metric: ClassVar[dict[str, list[str]]] = {"toy_total": ["benchmark", "no_such_column"]}

        def aggregate(self, rows, params):
            recs = [{"benchmark": r.benchmark, "metric": r.metric, "total": 1.0} for r in rows if r.status == "ok"]
            return {"toy_total": pd.DataFrame(recs[:1])}

    class Plugin(ThreeMetrics):
        @hookimpl
        def register_aggregators(self, register):
            register(Sloppy)

    host = load_plugins(fresh=True, extra=[Plugin()])
    cfg = {"suite": {}, "aggregators": ["toy_sloppy"], "benchmarks": {}, "cache_dir": None, "aggregator_params": {}}
    with pytest.raises(ValueError, match=r"aggregator 'toy_sloppy': by_metric sorts table 'toy_total' by "
                                         r"\['no_such_column'\]"):
        aggregate_rows(host, _three_metric_rows(), cfg, per_benchmark={"bench_a": ["toy_sloppy"]})
