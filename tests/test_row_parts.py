"""A closed shard's rows are one file per metric of each benchmark, kept once in the blob store, without how the
run got them (engine/stages/row_store.py): a re-score or a sweep's job that has an unchanged metric's rows (every
metric but the one it re-scored) links the file an earlier job wrote instead of writing it again."""

from __future__ import annotations

import json
import os
from pathlib import Path

from worldrecall.core.data import ScoreRow
from worldrecall.engine.cache.blobs import BlobStore
from worldrecall.engine.stages.row_digests import row_digests
from worldrecall.engine.stages.row_store import ResultStore, read_rows, rows_files, shards_on_disk

ALIGN = {"phases": {"V": [0, 9], "R": [10, 19]}, "info": {"h": 9}}


def _rows(benchmark: str, value: float = 1.0, metric: str = "metric", **flags: bool) -> list[ScoreRow]:
    return [ScoreRow(benchmark, m, c, f"{benchmark}.{metric}", {"v": value},
                     info={"alignment": ALIGN, "keys": {"score": f"{benchmark}{m}{c}"}, **flags})
            for m in ("m1", "m0") for c in ("c1", "c0")]


def _write(folder: Path, rows: list[ScoreRow], blobs: BlobStore | None) -> ResultStore:
    store = ResultStore(folder, blobs=blobs)
    kept = [store.append(r) for r in rows]
    store.close()
    assert row_digests(kept) == row_digests(rows)
    return store


def test_a_closed_shard_is_one_file_per_metric_in_place_order_and_no_append_file(tmp_path):
    rows = [*_rows("wr"), *_rows("mb", metric="b"), *_rows("mb")]
    store = _write(tmp_path, rows, None)
    assert [p.name for p in rows_files(tmp_path)] == ["rows-shard-0000-of-0001-mb-mb.b.jsonl",
                                                     "rows-shard-0000-of-0001-mb-mb.metric.jsonl",
                                                     "rows-shard-0000-of-0001-wr-wr.metric.jsonl"]
    assert not store.path.exists() and shards_on_disk(tmp_path) == 1
    lines = [json.loads(x) for x in (tmp_path / "rows-shard-0000-of-0001-wr-wr.metric.jsonl").read_text().splitlines()]
    assert [(d["model"], d["case_id"]) for d in lines] == [("m0", "c0"), ("m0", "c1"), ("m1", "c0"), ("m1", "c1")]
    assert row_digests(read_rows(rows_files(tmp_path))) == row_digests(rows)


def test_a_name_that_is_no_plain_word_never_becomes_a_path(tmp_path):
    store = _write(tmp_path, _rows("../x", metric="a/b"), None)
    (part,) = store.parts
    assert part.parent == tmp_path and part.name.startswith("rows-shard-0000-of-0001-h")  # digests, not the names
    assert len(read_rows(rows_files(tmp_path))) == 4


def test_how_the_run_got_a_row_stays_on_its_rows_not_in_the_file(tmp_path):
    store = ResultStore(tmp_path)
    kept = [store.append(r) for r in _rows("mb", cache_hit=True, score_cache_hit=True)]
    store.close()
    assert all(r.info["cache_hit"] and r.info["score_cache_hit"] for r in kept)  # the cache log reads these
    text = "".join(p.read_text() for p in rows_files(tmp_path))
    assert "cache_hit" not in text and '"keys"' in text  # its keys are what the row is; a hit is not


def test_equal_rows_of_two_jobs_are_one_file_and_changed_ones_are_not(tmp_path):
    blobs = BlobStore(tmp_path / "blobs")
    _write(tmp_path / "cold", [*_rows("mb"), *_rows("mb", metric="b"), *_rows("wr")], blobs)
    # a re-score of mb.metric: its other rows read back from the cache (hits), its rows scored again
    _write(tmp_path / "rescore", [*_rows("mb", 2.0, cache_hit=True), *_rows("mb", metric="b", cache_hit=True),
                                  *_rows("wr", cache_hit=True, score_cache_hit=True)], blobs)
    for name in ("wr-wr.metric", "mb-mb.b"):  # another benchmark's and the same benchmark's other metric
        same = [tmp_path / d / f"rows-shard-0000-of-0001-{name}.jsonl" for d in ("cold", "rescore")]
        assert os.path.samefile(*same) and same[0].stat().st_nlink == 3  # and the blob
    changed = [tmp_path / d / "rows-shard-0000-of-0001-mb-mb.metric.jsonl" for d in ("cold", "rescore")]
    assert not os.path.samefile(*changed)
    assert {r.values["v"] for r in read_rows([changed[1]])} == {2.0}


def test_rows_appended_after_a_split_win_when_the_run_is_killed_before_it_closes(tmp_path):
    _write(tmp_path, _rows("mb"), None)
    store = ResultStore(tmp_path)
    store.append(ScoreRow("mb", "m0", "c0", "mb.metric", {"v": 5.0}, info={}))
    store.flush()  # killed here: no close, the append-only file stays beside the parts
    assert [p.name for p in rows_files(tmp_path)] == ["rows-shard-0000-of-0001-mb-mb.metric.jsonl",
                                                     "rows-shard-0000-of-0001.jsonl"]
    for rows in (read_rows(rows_files(tmp_path)), list(ResultStore(tmp_path).done.values())):
        assert {(r.model, r.case_id): r.values["v"] for r in rows}[("m0", "c0")] == 5.0
        assert len(rows) == 4
    resumed = ResultStore(tmp_path)
    resumed.close()  # the resumed run ends: one file again, with the newer row
    assert [p.name for p in rows_files(tmp_path)] == ["rows-shard-0000-of-0001-mb-mb.metric.jsonl"]
    assert {(r.model, r.case_id): r.values["v"] for r in read_rows(rows_files(tmp_path))}[("m0", "c0")] == 5.0


def test_a_shard_another_process_appended_to_is_left_as_it_is(tmp_path):
    store = ResultStore(tmp_path)
    for r in _rows("mb"):
        store.append(r)
    other = ResultStore(tmp_path)  # the same shard, another process: appends after this store read the file
    other.append(ScoreRow("mb", "m9", "c9", "mb.metric", {"v": 1.0}, info={}))
    other._f.close()
    store.close()  # the file holds a row this store does not know: not split, nothing lost
    assert [p.name for p in rows_files(tmp_path)] == ["rows-shard-0000-of-0001.jsonl"]
    assert len(read_rows(rows_files(tmp_path))) == 5


def test_a_part_of_another_layout_is_removed_when_the_shard_is_laid_out_again(tmp_path):
    """A folder written when rows were one file per benchmark: its rows are read, and once the rerun's rows are
    laid out per metric that file is gone (read after the new parts, its old rows would win)."""
    old = tmp_path / "rows-shard-0000-of-0001-mb.jsonl"
    _write(tmp_path, _rows("mb"), None)
    (tmp_path / "rows-shard-0000-of-0001-mb-mb.metric.jsonl").rename(old)
    store = ResultStore(tmp_path)
    assert len(store.done) == 4  # the old layout reads as it did
    store.append(ScoreRow("mb", "m0", "c0", "mb.metric", {"v": 7.0}, info={}))
    store.close()
    assert [p.name for p in rows_files(tmp_path)] == ["rows-shard-0000-of-0001-mb-mb.metric.jsonl"]
    assert {(r.model, r.case_id): r.values["v"] for r in read_rows(rows_files(tmp_path))}[("m0", "c0")] == 7.0
