"""The report is written by a forked child while this process writes the tables, the submission and MLflow's
runs (engine/sinks/forked.py): same files as in order, its memos and log lines come back, a dead child costs
nothing, and the job's deferred cache writes are done."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_config

from worldrecall.engine.job import run_plain
from worldrecall.engine.sinks import forked
from worldrecall.engine.sinks.report import html
from worldrecall.registry.host import load_plugins

MODELS = {"good": [0, 1, 2], "bad": [40, 60, 80]}  # no two videos alike: no score-memo hit within a job


def _fresh_memos(monkeypatch) -> None:
    """This process as if it had never written a report."""
    for name in ("_FRAGMENTS", "_SECTION_MEMO", "_CHARTS", "_IMAGES"):
        monkeypatch.setattr(html, name, {})
    monkeypatch.setattr(html, "_KEPT_IMAGES", set())


def _job(tmp_path: Path, name: str, **over) -> Path:
    data = tmp_path / "data"
    ds = make_dataset(data, MODELS) if not data.exists() else {"data_root": str(data / "data"),
                                                                 "generations": str(data / "gen")}
    cfg = toy_config(tmp_path / name, ds, **over)
    assert run_plain(cfg, host=load_plugins(extra=[toy_plugin], fresh=True)) == 0
    return next((tmp_path / name / "out" / "results").iterdir())


def _files(results: Path) -> dict[str, bytes]:
    skip = {"timing.json", "tracking.json", "provenance.json", "resolved_config.json"}  # times, paths, folders
    return {str(p.relative_to(results)): p.read_bytes() for p in sorted(results.rglob("*"))
            if p.is_file() and p.name not in skip}


def _spy(monkeypatch, tmp_path: Path, name: str) -> Path:
    """Record, in a file (the child's memory is its own), the pid of each call of ``html.<name>``."""
    log_file = tmp_path / f"{name}.pids"
    real = getattr(html, name)

    def spied(*a, **k):
        with open(log_file, "a") as f:
            f.write(f"{os.getpid()}\n")
        return real(*a, **k)

    monkeypatch.setattr(html, name, spied)
    return log_file


def _pids(p: Path) -> list[int]:
    return [int(x) for x in p.read_text().split()] if p.exists() else []


def test_a_forked_report_writes_what_the_sinks_in_order_write(tmp_path, monkeypatch):
    pids = _spy(monkeypatch, tmp_path, "write_report")
    _fresh_memos(monkeypatch)
    forked_files = _files(_job(tmp_path, "forked"))
    assert _pids(pids) and all(p != os.getpid() for p in _pids(pids))  # written by a child
    monkeypatch.setattr(forked, "can_fork", lambda: False)
    _fresh_memos(monkeypatch)
    pids.unlink()
    serial_files = _files(_job(tmp_path, "serial"))
    assert _pids(pids) == [os.getpid()]
    assert set(forked_files) == set(serial_files) and "report/index.html" in forked_files
    # byte for byte, once each run's own folder is named alike (rows and the report name their files)
    for name, data in forked_files.items():
        a = data.replace(str(tmp_path / "forked").encode(), b"ROOT")
        b = serial_files[name].replace(str(tmp_path / "serial").encode(), b"ROOT")
        if name.endswith(".jsonl"):  # rows in the order cases finished (two workers)
            a, b = sorted(a.splitlines()), sorted(b.splitlines())
        assert a == b, name


def test_the_childs_rendered_sections_come_back_to_this_process(tmp_path, monkeypatch):
    """A later job of this process finds the child's sections in memory: its own child draws none."""
    _fresh_memos(monkeypatch)
    drawn = _spy(monkeypatch, tmp_path, "_case")
    results = _job(tmp_path, "a")
    first = len(_pids(drawn))
    assert first == 6 and all(p != os.getpid() for p in _pids(drawn))  # 2 models x 3 cases, in the child
    assert len(html._SECTION_MEMO) == 6 and html._IMAGES  # handed back with their images
    # the same rows again, nothing on disk to read them from: only the memo handed back can serve them
    for p in (results.parents[1] / "cache" / "report_sections").glob("??"):
        for f in p.iterdir():
            f.unlink()
    page = (results / "report" / "index.html").read_bytes()
    (results / "report" / "index.html").unlink()
    _job(tmp_path, "a")
    assert len(_pids(drawn)) == first  # not one section drawn again
    assert (results / "report" / "index.html").read_bytes() == page


def test_a_child_that_dies_leaves_its_sink_to_this_process(tmp_path, monkeypatch):
    parent = os.getpid()
    real = html.write_report

    def dies_in_a_child(*a, **k):
        if os.getpid() != parent:
            os._exit(3)  # killed mid-sink, no answer
        return real(*a, **k)

    monkeypatch.setattr(html, "write_report", dies_in_a_child)
    _fresh_memos(monkeypatch)
    results = _job(tmp_path, "dies")  # exit code 0: nothing was lost
    assert b"worldrecall report" in (results / "report" / "index.html").read_bytes()
    timing = json.loads((results / "meta" / "timing.json").read_text())
    assert "outputs.report" in timing


def test_what_the_child_prints_and_logs_is_said_here(tmp_path, monkeypatch, capsys, caplog):
    real = html.write_report

    def chatty(*a, **k):
        print("from the report child")
        logging.getLogger("worldrecall.report_test").warning("a warning from pid-independent code")
        return real(*a, **k)

    monkeypatch.setattr(html, "write_report", chatty)
    _fresh_memos(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="worldrecall.report_test"):
        _job(tmp_path, "chatty")
    assert "from the report child" in capsys.readouterr().out
    assert [r.getMessage() for r in caplog.records if r.name == "worldrecall.report_test"] == \
        ["a warning from pid-independent code"]


def test_a_forked_report_that_raises_fails_as_in_order(tmp_path, monkeypatch, capsys):
    from worldrecall.engine.sinks.base import EXIT_OUTPUT_FAILED

    def boom(*a, **k):
        raise RuntimeError("renderer exploded")

    monkeypatch.setattr(html, "write_report", boom)
    ds = make_dataset(tmp_path / "data", MODELS)
    assert run_plain(toy_config(tmp_path / "x", ds), host=load_plugins(extra=[toy_plugin], fresh=True)) == \
        EXIT_OUTPUT_FAILED
    err = capsys.readouterr().err
    assert err.count("error: output report failed: RuntimeError: renderer exploded") == 1


def test_the_jobs_new_aggregate_entries_are_written_by_the_child(tmp_path, monkeypatch):
    """Deferred cache writes (stages/later.py) go with the forked report; the entries are the serial ones."""
    from worldrecall.engine.stages import aggregate_cache, later

    _fresh_memos(monkeypatch)
    monkeypatch.setattr(aggregate_cache, "_MEMO", {})
    results = _job(tmp_path, "a")
    assert not later._QUEUE  # handed to the child, which writes them
    forked.wait_children()  # the job did not wait for it: the next job's outputs, or the process's exit, do
    root = results.parents[1] / "cache" / "aggregates"
    forked_entries = {p.name: p.read_bytes() for p in root.rglob("*.json")}
    for p in root.rglob("*.json"):
        p.unlink()
    monkeypatch.setattr(aggregate_cache, "_MEMO", {})  # a fresh process: the same rows aggregated again
    monkeypatch.setattr(forked, "can_fork", lambda: False)
    _job(tmp_path, "a")
    assert not later._QUEUE
    assert forked_entries and forked_entries == {p.name: p.read_bytes() for p in root.rglob("*.json")}


def test_this_process_goes_on_while_the_child_writes_the_deferred_entries(tmp_path, monkeypatch):
    """The child answers first, then writes the job's deferred cache entries: this process takes the answer
    and writes its next sinks meanwhile, and the job ends without waiting for the child: the next job's
    outputs (or this process's exit) wait for it."""
    from worldrecall.engine.sinks import base
    from worldrecall.engine.stages import later

    go, seen = tmp_path / "parent-joined", tmp_path / "child-saw"
    real_run_later = later.run_later

    def run_later_after_the_join():  # in the child: waits (at most 60 s) until this process has joined it
        if os.getpid() != parent:
            for _ in range(600):
                if go.exists():
                    seen.write_text("joined first")
                    break
                import time

                time.sleep(0.1)
        real_run_later()

    parent = os.getpid()
    monkeypatch.setattr(later, "run_later", run_later_after_the_join)
    real_join = forked.Forked.join

    def join(self):
        n = real_join(self)
        go.write_text("")  # the answer is here: the child may go on
        return n

    monkeypatch.setattr(forked.Forked, "join", join)
    reaped = []
    real_reap = forked.Forked.reap
    monkeypatch.setattr(forked.Forked, "reap", lambda self: reaped.append(self.sink.name) or real_reap(self))
    _fresh_memos(monkeypatch)
    results = _job(tmp_path, "a")
    assert reaped == [] and forked._WRITING  # the end of the job did not wait: its child may still be writing
    _job(tmp_path, "b")  # the next job's outputs wait for it before they fork their own
    assert reaped[0] == "report" and base.write_sinks
    assert seen.read_text() == "joined first"  # the join did not wait for the child's cache writes either
    forked.wait_children()
    assert reaped == ["report", "report"] and not forked._WRITING
    assert list((results.parents[1] / "cache" / "aggregates").rglob("*.json"))  # its entries are there


def test_no_fork_where_another_thread_runs(monkeypatch):
    import threading

    assert forked.can_fork()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="some-library-pool", daemon=True)
    t.start()
    try:
        assert not forked.can_fork()  # its locks could be held at the fork, forever in the child
    finally:
        stop.set()
        t.join()
    for name in ("mlflow-import", "tqdm_monitor"):  # waited for at every fork; a progress bar's, for good
        quiet = threading.Thread(target=stop.wait, name=name, daemon=True)
        stop.clear()
        quiet.start()
        try:
            assert forked.can_fork()
        finally:
            stop.set()
            quiet.join()


def test_a_job_with_progress_bars_still_forks_its_report(tmp_path, monkeypatch):
    """A progress bar starts tqdm's monitor thread for the life of the process: that must not turn the
    overlap off for every later job (a sweep in a terminal)."""
    pids = _spy(monkeypatch, tmp_path, "write_report")
    _fresh_memos(monkeypatch)
    _job(tmp_path, "bars", progress=True)
    _job(tmp_path, "bars2", progress=True)
    assert len(_pids(pids)) == 2 and all(p != os.getpid() for p in _pids(pids))


@pytest.mark.parametrize("workers", [1, 2])
def test_mlflow_makes_its_runs_while_the_report_is_written_and_logs_it_after(tmp_path, monkeypatch, workers):
    pytest.importorskip("mlflow")
    from worldrecall.engine.sinks.tracking import runs

    order: list[str] = []
    real_open, real_finish = runs.open_job, runs.finish_job
    monkeypatch.setattr(runs, "open_job", lambda *a, **k: order.append("open") or real_open(*a, **k))

    def finish(tracker, opened, files):
        order.append("finish:" + ",".join(sorted(p.name for p in files if p.suffix == ".html")))
        return real_finish(tracker, opened, files)

    monkeypatch.setattr(runs, "finish_job", finish)
    _fresh_memos(monkeypatch)
    results = _job(tmp_path, "tracked", tracking={"enabled": True, "prefetch": False}, workers=workers)
    assert order == ["open", "finish:index.html"]  # runs made once; the report logged once it is there
    rec = json.loads((results / "meta" / "tracking.json").read_text())
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=rec["uri"])
    runs_made = client.search_runs([client.get_experiment_by_name("worldrecall").experiment_id])
    assert len(runs_made) == 1 + len(MODELS)  # the job and one per (benchmark, model), no duplicate
    arts = {a.path for a in client.list_artifacts(rec["run_id"], "report")}
    assert arts == {"report/index.html"}


def test_a_fork_that_fails_writes_the_sink_here_in_order(tmp_path, monkeypatch):
    def no_fork():
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(forked.os, "fork", no_fork)
    pids = _spy(monkeypatch, tmp_path, "write_report")
    _fresh_memos(monkeypatch)
    results = _job(tmp_path, "nofork", workers=1)  # (no worker forks either)
    assert _pids(pids) == [os.getpid()] and (results / "report" / "index.html").is_file()


class _Files:
    """A sink that writes named files (forking or not), and one that reads what was written before it."""

    def __init__(self, name: str, files: list[str], forks: bool, root: Path) -> None:
        self.name, self.files, self.forks, self.root = name, files, forks, root
        self.reads_outputs = False

    def write(self, result, ctx):
        out = []
        for f in self.files:
            (self.root / f).write_text(f)
            out.append(self.root / f)
        return out


def test_two_forked_sinks_keep_every_file_in_its_place(tmp_path):
    """Files of sinks forked at different places come back at those places: as if written in order."""
    from worldrecall.engine.sinks.base import SinkContext, write_sinks

    seen: list[list[str]] = []

    class Reader:
        name = "reader"

        def write(self, result, ctx):
            seen.append([p.name for p in ctx.written])
            return []

    class Result:
        exit_code = 0

    sinks = [_Files("a", ["a1", "a2"], True, tmp_path), _Files("b", ["b1"], False, tmp_path),
             _Files("c", ["c1", "c2"], True, tmp_path), _Files("d", ["d1"], False, tmp_path), Reader()]
    ctx = SinkContext(host=None)
    assert write_sinks(Result(), ctx, sinks) == 0
    assert seen == [["a1", "a2", "b1", "c1", "c2", "d1"]]
    assert {"a.wait", "c.wait"} <= set(ctx.seconds)  # both were forked
