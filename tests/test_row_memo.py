"""A sweep's re-score job takes what did not change as this process wrote it before: rows (as read back from
their lines), alignments, measurements. Each memo gives what a fresh process would compute or read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from worldrecall.core.data import ScoreRow
from worldrecall.engine.stages import measurement_memo, pipeline, row_memo
from worldrecall.engine.stages.row_digests import row_content
from worldrecall.engine.stages.row_store import ResultStore, read_rows
from worldrecall.registry.host import load_plugins

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import BrightnessDrift, make_dataset, toy_config


class LateDrift(BrightnessDrift):
    """A second toy metric, so that a re-score of one leaves the other's rows unchanged."""

    name = "toy.late"
    scored: list[str] = []

    def score(self, m, thresholds):
        LateDrift.scored.append("late")
        return super().score(m, thresholds)


class _Late:
    @toy_plugin.hookimpl
    def register_metrics(self, register):
        register(LateDrift)


def _fresh_process() -> None:
    row_memo.forget_all()
    pipeline._ALIGNED.clear()
    measurement_memo._MEMO.clear()
    measurement_memo._BYTES[0] = 0


def _run_with(tmp_path, workers: int):
    """``run(root, tol)``: a job of the toy benchmark with two metrics, brightness at tolerance ``tol`` and
    late at 10, over one dataset (cache folder ``cache`` under ``tmp_path``)."""
    from worldrecall.engine.stages.runner import Runner

    host = load_plugins(extra=[toy_plugin, _Late()], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 5, 10], "bad": [40, 60, 80]})

    def run(root: str, tol: float, cache: str = "cache", workers: int = workers):
        cfg = toy_config(tmp_path / root, ds, workers=workers)
        cfg["cache_dir"] = str(tmp_path / cache)
        metrics = cfg["benchmarks"]["toy"]["metrics"]
        metrics["late"] = {"params": {}, "thresholds": {"tolerance": 10.0}}
        metrics["brightness"]["thresholds"]["tolerance"] = tol
        return Runner(cfg, host).run()

    return run


def _content(rows, tmp_path, cache: str) -> str:
    """The rows' content, artifacts named relative to their cache folder (each run has its own)."""
    return json.dumps([row_content(r) for r in rows], sort_keys=True).replace(str(tmp_path / cache), "CACHE")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_rescore_job_takes_each_unchanged_row_as_appended_before(tmp_path, workers):
    run = _run_with(tmp_path, workers)
    _fresh_process()
    run("a", 10.0)  # cold
    b = run("b", 20.0)  # a re-score of brightness: late's rows come from the score memo
    LateDrift.scored.clear()
    c = run("c", 30.0)  # and again: late's rows are now taken as b appended them
    assert LateDrift.scored == []  # nothing of late is scored again, with the memo pass or without
    late_b = {r.row_key: r for r in b.rows if r.metric == "toy.late"}
    late_c = [r for r in c.rows if r.metric == "toy.late"]
    assert len(late_c) == 6 and all(r is late_b[r.row_key] for r in late_c)
    assert not any(r is late_b.get(r.row_key) for r in c.rows if r.metric == "toy.brightness")
    # the rows and the file are what reading the file gives, and what a fresh process computes
    written = read_rows(c.results_dir.glob("rows-shard-*.jsonl"))
    assert [r.to_json() for r in written] == [r.to_json() for r in c.rows]
    _fresh_process()
    fresh = run("d", 30.0, cache="fresh")
    assert _content(fresh.rows, tmp_path, "fresh") == _content(c.rows, tmp_path, "cache")
    assert fresh.tables["mean"].equals(c.tables["mean"])


@pytest.mark.parametrize("workers", [1, 2])
def test_the_first_rescore_job_after_a_cold_one_takes_the_unchanged_rows_as_foreseen(tmp_path, workers):
    """A cold job builds, for each case its workers finished, the rows a later job would rebuild from the
    score memo (by that job's own memo pass): the first re-score job takes them instead of serialising them
    again, and they are what a fresh process computes. The cold job's counters are not changed by it."""
    from worldrecall.engine.stages import score_memo

    run = _run_with(tmp_path, workers)
    _fresh_process()
    score_memo._MEMO.clear()
    cold = run("a", 10.0)
    assert cold.cache_stats.get("score_hits", 0) == 0  # foreseeing is not a memo hit
    foreseen = dict(row_memo._ROWS)
    assert len(foreseen) == 12  # both metrics' six rows, under the memo keys of the cold thresholds
    b = run("b", 20.0)  # a re-score of brightness: late's rows are the foreseen ones
    late = [r for r in b.rows if r.metric == "toy.late"]
    assert len(late) == 6 and all(any(r is f for f in foreseen.values()) for r in late)
    assert not any(any(r is f for f in foreseen.values()) for r in b.rows if r.metric == "toy.brightness")
    written = read_rows(b.results_dir.glob("rows-shard-*.jsonl"))
    assert [r.to_json() for r in written] == [r.to_json() for r in b.rows]
    _fresh_process()
    score_memo._MEMO.clear()
    fresh = run("c", 20.0, cache="fresh")
    assert _content(fresh.rows, tmp_path, "fresh") == _content(b.rows, tmp_path, "cache")


def test_a_job_told_no_later_job_follows_foresees_nothing(tmp_path):
    from worldrecall.engine.stages.runner import Runner

    host = load_plugins(extra=[toy_plugin, _Late()], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 5, 10], "bad": [40, 60, 80]})
    _fresh_process()
    cold = Runner(toy_config(tmp_path / "a", ds, workers=2), host, foresee=False).run()
    assert cold.rows and not row_memo._ROWS and "foresee" not in cold.timing


def test_a_row_is_recalled_only_for_what_determines_it():
    row = ScoreRow("toy", "m", "c0", "toy.a", {"x": 0.5}, strata={"s": "a"}, backend={"flow": "dis_flow"},
                   info={"videos": {"generated": "/v.mp4"}}, warnings=["w"])
    entry, ctx = '{"values": {"x": 0.5}}', row_memo.context({"s": "a"}, {"generated": "/v.mp4"})
    key = row_memo.memo_key(row, "k" * 64, entry, ctx)
    assert row_memo.memo_key(ScoreRow.from_json(row.to_json()), "k" * 64, entry, ctx) == key
    for change in ({"warnings": ["w", "another"]}, {"backend": {"flow": "raft"}}, {"metric_version": "2"},
                   {"model": "n"}, {"status": "skipped"}):
        other = ScoreRow.from_json({**row.to_json(), **change})
        assert row_memo.memo_key(other, "k" * 64, entry, ctx) != key, change
    for strata, videos in (({"s": "b"}, {"generated": "/v.mp4"}), ({"s": "a"}, {"generated": "/w.mp4"})):
        assert row_memo.memo_key(row, "k" * 64, entry, row_memo.context(strata, videos)) != key
    assert row_memo.memo_key(row, "j" * 64, entry, ctx) != key
    assert row_memo.memo_key(row, "k" * 64, '{"values": {"x": 0.25}}', ctx) != key
    # the note said on a row whose values are systematically absent, and the warnings the row had before the
    # memo entry filled it (passed where the row already holds the entry's own)
    assert row_memo.memo_key(row, "k" * 64, entry, ctx, "x is never produced here") != key
    assert row_memo.memo_key(row, "k" * 64, entry, ctx, None, ("w",)) == key
    assert row_memo.memo_key(row, "k" * 64, entry, ctx, None, ("w", "from the entry")) != key


def test_the_store_keeps_rows_as_read_back_from_their_lines(tmp_path):
    """Rows with numpy numbers and tuples are kept as a reader of the file sees them (floats, lists); with
    another shard's file in the folder, that one is read too; a resumed store knows the earlier rows."""
    store = ResultStore(tmp_path)
    odd = ScoreRow("toy", "m", "c0", "toy.a", {"x": np.float32(0.5), "y": float("nan")},
                   info={"alignment": {"phases": {"A": (0, 3)}}, "n": np.int64(3)})
    kept = store.append(odd)
    store.append(ScoreRow("toy", "m", "c1", "toy.a", {"x": 1.0}))
    store.append(ScoreRow("toy", "m", "c0", "toy.a", {"x": 0.25}))  # a later line for the same row wins
    store.close()
    assert kept is not odd and kept.info == {"alignment": {"phases": {"A": [0, 3]}}, "n": 3}
    assert type(kept.values["x"]) is float
    from_file = read_rows([store.path])
    assert [json.dumps(r.to_json(), sort_keys=True) for r in store.all_rows()] == \
        [json.dumps(r.to_json(), sort_keys=True) for r in from_file]
    assert [r.values["x"] for r in store.all_rows()] == [0.25, 1.0]
    other = ResultStore(tmp_path, 1, 2)
    other.append(ScoreRow("toy", "m", "c2", "toy.a", {"x": 2.0}))
    other.close()
    assert [r.case_id for r in ResultStore(tmp_path).all_rows()] == ["c0", "c1", "c2"]


def test_measurements_kept_in_memory_are_what_a_load_gives(tmp_path, monkeypatch):
    from worldrecall.core.cache import MeasurementCache

    _fresh_process()
    cache = measurement_memo.ProcessMeasurementCache(tmp_path)
    m = {"a": np.arange(6.0).reshape(2, 3), "meta": (1, 2), "x": 0.5}
    cache.store("toy.a", "k" * 64, m)
    assert not measurement_memo._MEMO  # computed here: nothing kept (a worker's measurement stays its own)
    plain = MeasurementCache(tmp_path).load("toy.a", "k" * 64)
    first = cache.load("toy.a", "k" * 64)  # read: kept
    assert measurement_memo._MEMO
    first["a"][0, 0] = 99.0  # a caller that changes what it got changes nothing for the next one
    first["meta"].append(3)
    again = cache.load("toy.a", "k" * 64)
    assert np.array_equal(again["a"], plain["a"]) and again["meta"] == plain["meta"] == [1, 2]
    assert again["x"] == 0.5 and again["a"].dtype == plain["a"].dtype
    MeasurementCache(tmp_path).store("toy.a", "k" * 64, {**m, "x": 0.75})  # the file changes: read again
    assert cache.load("toy.a", "k" * 64)["x"] == 0.75
    _fresh_process()
    monkeypatch.setattr(measurement_memo, "_OWNER", -1)  # a forked worker: reads, keeps nothing
    assert cache.load("toy.a", "k" * 64)["x"] == 0.75 and not measurement_memo._MEMO


def test_the_row_memo_is_bounded_by_the_lines_it_holds(monkeypatch):
    from worldrecall.engine.stages.row_store import parse_line, row_line

    row_memo.forget_all()
    monkeypatch.setattr(row_memo, "MEMO_LINE_BYTES", 1000)
    rows = [parse_line(row_line(ScoreRow("toy", "m", f"c{i}", "toy.a", {"x": float(i)}))) for i in range(20)]
    for i, r in enumerate(rows):
        row_memo.remember(("k", i), r)
    assert row_memo._BYTES[0] <= 1000 and row_memo._BYTES[0] == sum(len(r._line) for r in row_memo._ROWS.values())
    assert row_memo.recall(("k", 19)) is rows[19] and row_memo.recall(("k", 0)) is None  # the oldest went first
    row_memo.forget_all()


def test_a_cold_jobs_workers_hand_their_memo_entries_to_the_parent(tmp_path, monkeypatch):
    """The score and alignment memo entries forked workers wrote reach the parent with their rows: a re-score
    job after a cold one (a sweep's second job) reads no entry of an unchanged metric, and no alignment, from
    disk; its rows are a fresh process's."""
    from worldrecall.core import cache as core_cache

    run = _run_with(tmp_path, 2)
    _fresh_process()
    from worldrecall.engine.stages import score_memo
    score_memo._MEMO.clear()
    run("a", 10.0)  # cold: measured and scored in two forked workers
    read: list[tuple[str, str]] = []
    real = core_cache.ScoreCache.get
    monkeypatch.setattr(core_cache.ScoreCache, "get",
                        lambda self, metric, key: read.append((self.root.name, metric)) or real(self, metric, key))
    rescored = run("b", 20.0)
    # only what the re-scored metric needs: its new score entries (none yet) and its measurements' input notes
    assert read and set(read) == {("scores", "toy.brightness"), ("input_notes", "toy.brightness")}
    monkeypatch.setattr(core_cache.ScoreCache, "get", real)
    _fresh_process()
    score_memo._MEMO.clear()
    fresh = run("c", 20.0, cache="fresh", workers=1)
    assert _content(rescored.rows, tmp_path, "cache") == _content(fresh.rows, tmp_path, "fresh")

