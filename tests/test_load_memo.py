"""A later job of the same process takes copies of a loader's cases while nothing under the paths it reads has
changed (engine/stages/load_memo.py): the same rows as a fresh process, the loader's messages said again, and
the loader run again for any change, addition or removal there."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest

from worldrecall.engine.stages import load_memo, measurement_memo, pipeline, row_memo, score_memo
from worldrecall.engine.stages.row_digests import row_content
from worldrecall.registry.host import load_plugins

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import ToyLoader, make_dataset, toy_config


def _fresh_process() -> None:
    load_memo.forget_all()
    row_memo.forget_all()
    pipeline._ALIGNED.clear()
    measurement_memo._MEMO.clear()
    measurement_memo._BYTES[0] = 0
    score_memo._MEMO.clear()


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """``run(out, tol, workers=1)`` over one toy dataset; ``calls`` counts the loader's runs. The toy loader
    reads its data root and generation folders only, so it may declare it; it logs and prints a line."""
    from worldrecall.engine.stages.runner import Runner

    calls: list[int] = []
    real = ToyLoader.load

    def load(self, request):
        calls.append(1)
        logging.getLogger("toy.loader").warning("toy: case c9 is listed nowhere (said by the loader)")
        print("toy loader: printed once per load")
        yield from real(self, request)

    monkeypatch.setattr(ToyLoader, "load", load)
    monkeypatch.setattr(ToyLoader, "reads_request_paths_only", True, raising=False)
    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 5, 10], "bad": [40, 60, 80]})

    def run(out: str, tol: float, workers: int = 1, cache: str = "cache"):
        cfg = toy_config(tmp_path / out, ds, workers=workers)
        cfg["cache_dir"] = str(tmp_path / cache)
        cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = tol
        return Runner(cfg, host).run()

    _fresh_process()
    yield run, calls, ds
    _fresh_process()


def _content(rows, tmp_path, cache: str) -> str:
    return json.dumps([row_content(r) for r in rows], sort_keys=True).replace(str(tmp_path / cache), "CACHE")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_later_job_takes_the_cases_and_gives_a_fresh_process_rows(toy, tmp_path, workers, caplog, capsys):
    run, calls, _ = toy
    run("a", 10.0, workers)
    capsys.readouterr()
    caplog.clear()
    b = run("b", 20.0, workers)  # a re-score: same data, same load
    assert len(calls) == 1
    # what the loader said is said by every job that takes its cases
    assert "listed nowhere" in caplog.text and "printed once per load" in capsys.readouterr().out
    said = [r for r in caplog.records if "listed nowhere" in r.getMessage()]
    assert said and said[-1].created >= b.started_at  # said by this job, at its time
    _fresh_process()
    fresh = run("c", 20.0, workers, cache="fresh")
    assert len(calls) == 2
    assert _content(fresh.rows, tmp_path, "fresh") == _content(b.rows, tmp_path, "cache")
    assert fresh.tables["mean"].equals(b.tables["mean"])


def test_the_copies_are_the_jobs_own(toy, monkeypatch):
    """Each job's cases have their own warning lists and its own pool's videos, with the fingerprint, frame
    rate and content hash the earlier job found (so it fingerprints nothing again)."""
    from worldrecall.engine.stages import runner as runner_mod

    run, calls, _ = toy
    got: list[list] = []
    real = load_memo.load

    def spy(plan, shard_index, shard_count, pool, fresh, keep=True):
        items = real(plan, shard_index, shard_count, pool, fresh, keep)
        got.append((pool, items))
        return items

    monkeypatch.setattr(runner_mod.load_memo, "load", spy)
    run("a", 10.0)
    run("b", 20.0)
    (pool_a, first), (pool_b, second) = got
    assert len(calls) == 1 and len(first) == len(second) == 6
    for x, y in zip(first, second):
        assert x is not y and x.key == y.key and x.warnings == y.warnings and x.warnings is not y.warnings
        assert y.__dict__["_fingerprint"] == x.fingerprint()
        assert y.video is pool_b.get(y.video.path) and y.video is not x.video
        assert y.video.known() == x.video.known()


@pytest.mark.parametrize("change", ["rewrite", "add", "remove", "nothing"])
def test_any_change_under_the_read_paths_loads_again(toy, change):
    run, calls, ds = toy
    run("a", 10.0)
    gen = Path(ds["generations"])
    if change == "rewrite":  # the case list itself: another case
        p = Path(ds["data_root"]) / "cases.json"
        doc = json.loads(p.read_text())
        doc["cases"] = doc["cases"][:2]
        p.write_text(json.dumps(doc))
    elif change == "add":  # a file in a generation folder
        (gen / "good" / "notes.txt").write_text("new")
    elif change == "remove":
        os.remove(gen / "bad" / "c2.mp4")
    b = run("b", 20.0)
    assert len(calls) == (1 if change == "nothing" else 2)
    if change == "rewrite":
        assert {r.case_id for r in b.rows} == {"c0", "c1"}
    if change == "remove":
        failed = [r for r in b.rows if r.model == "bad" and r.case_id == "c2"]
        assert failed and all(r.status == "failed" and "generation missing" in r.reason for r in failed)


def test_a_loader_that_does_not_declare_it_runs_every_job(toy, monkeypatch):
    run, calls, _ = toy
    monkeypatch.setattr(ToyLoader, "reads_request_paths_only", False)
    run("a", 10.0)
    run("b", 20.0)
    assert len(calls) == 2


def test_a_job_no_later_job_follows_keeps_and_walks_nothing(toy, monkeypatch):
    """``worldrecall run`` without ``-m`` (``foresee=False``): its loads are not kept, nor its paths walked."""
    from worldrecall.engine.stages.runner import Runner

    run, calls, ds = toy
    walked: list[int] = []
    real = load_memo._walk
    monkeypatch.setattr(load_memo, "_walk", lambda roots: walked.append(1) or real(roots))
    host = load_plugins(extra=[toy_plugin], fresh=True)
    tmp = Path(ds["data_root"]).parent
    Runner(toy_config(tmp / "last", ds), host, foresee=False).run()
    assert len(calls) == 1 and not walked and not load_memo._MEMO
    run("a", 10.0)  # a job a later one may follow keeps its load ...
    Runner(toy_config(tmp / "last2", ds), host, foresee=False).run()  # ... which the last job takes
    assert len(calls) == 2 and len(walked) == 2


def test_paths_with_too_many_entries_are_not_watched(toy, monkeypatch):
    run, calls, _ = toy
    monkeypatch.setattr(load_memo, "MAX_ENTRIES", 3)
    run("a", 10.0)
    run("b", 20.0)
    assert len(calls) == 2 and load_memo._UNWATCHED and not load_memo._MEMO


def test_the_walk_follows_links_once_and_notes_dangling_ones(tmp_path):
    root = tmp_path / "d"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("x")
    os.symlink(root, root / "sub" / "loop")  # a folder linked into itself: entered once
    os.symlink(tmp_path / "gone", root / "dangling")
    entries = list(load_memo._entries([str(root)]))
    paths = [e[0] for e in entries]
    assert paths.count(str(root / "sub" / "f.txt")) == 1 and len(paths) == len(set(paths))
    assert (str(root / "dangling"), "dangling") in entries
    walk = load_memo._walk([str(root)])
    assert walk == load_memo._walk([str(root)])
    (root / "sub" / "f.txt").write_text("xy")  # content (size) changed
    assert load_memo._walk([str(root)]) != walk
