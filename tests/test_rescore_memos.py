"""Re-score memos: a file fact is read again when its file changes; the in-process score memo never hides
a deleted, rewritten or tampered entry."""

from __future__ import annotations

import json
import os

from worldrecall.core.digests import stat_memo
from worldrecall.engine.stages.score_memo import ProcessScoreCache


def test_stat_memo_reads_a_file_again_when_it_changes(tmp_path):
    p = tmp_path / "sheet.csv"
    p.write_text("a\n1\n")
    reads = []

    def read():
        reads.append(1)
        return p.read_text()

    assert stat_memo(p, "test.sheet", read) == "a\n1\n"
    assert stat_memo(p, "test.sheet", read) == "a\n1\n" and len(reads) == 1  # unchanged: not opened again
    p.write_text("a\n22\n")  # other size
    assert stat_memo(p, "test.sheet", read) == "a\n22\n" and len(reads) == 2
    st = p.stat()
    p.write_text("a\n33\n")  # same size: the mtime tells
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert stat_memo(p, "test.sheet", read) == "a\n33\n" and len(reads) == 3


def test_score_memo_serves_copies_and_sees_changed_files(tmp_path, caplog):
    c = ProcessScoreCache(tmp_path / "scores")
    c.put("m", "ab" * 32, {"values": {"v": 0.5}, "artifacts": []})
    got = ProcessScoreCache(tmp_path / "scores").get("m", "ab" * 32)  # another job of the process
    assert got == {"values": {"v": 0.5}, "artifacts": []}
    got["values"]["v"] = 9.0  # a caller's copy
    assert c.get("m", "ab" * 32)["values"]["v"] == 0.5
    path = next((tmp_path / "scores").rglob("*.json"))
    doc = json.loads(path.read_text())
    doc["entry"]["values"]["v"] = 0.75  # tampered: the digest no longer matches
    path.write_text(json.dumps(doc))
    assert c.get("m", "ab" * 32) is None and "unreadable" in caplog.text
    path.unlink()
    c.put("m", "ab" * 32, {"values": {"v": 0.25}, "artifacts": []})
    path.unlink()  # deleted after it was memoised: a miss
    assert c.get("m", "ab" * 32) is None


def test_measurement_key_with_the_alignment_serialised_once_is_the_same_key():
    """The pipeline builds a measurement key from the alignment's text computed once per alignment: the
    same key as ``cache_key`` of the whole mapping (so no cache written before is lost)."""
    from worldrecall.core.cache import cache_key
    from worldrecall.core.data import Alignment, Phase
    from worldrecall.engine.stages.pipeline import key_with_alignment

    al = Alignment({"V": Phase("V", 0, 9), "R": Phase("R", 20, 29)},
                   {"n_frames": 30, "warnings": ["w"], "nested": {"b": 1, "a": [1.5, None]}, "path": "x/é"})
    parts = {"metric": "m", "version": "2", "case": "f" * 64, "params": {"z": 1, "a": {"y": [1, 2]}},
             "models": {"flow": "dis_flow@1"}, "optional_models": {}, "extra": None}
    assert key_with_alignment(al, parts) == cache_key({"alignment": al.to_json(), **parts})
    assert key_with_alignment(al, parts) == cache_key({"alignment": al.to_json(), **parts})  # from the object
    assert key_with_alignment(Alignment(), {}) == cache_key({"alignment": Alignment().to_json()})


def test_the_pipelines_keys_are_the_cache_keys_of_their_parts(tmp_path):
    """``CasePipeline.keys`` writes the measurement and score keys from parts serialised once per metric: the
    same keys as ``cache_key`` of the whole mappings, for metrics with optional models, odd params (a path, a
    non-ASCII text, nested mappings) and per-case ``cache_params``."""
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    from worldrecall.core.cache import cache_key
    from worldrecall.core.data import Alignment, Phase

    sys.path.insert(0, str(Path(__file__).parent))
    from helpers import toy_plugin
    from helpers.toy_plugin import make_dataset, toy_config

    from worldrecall.engine.stages.runner import Runner
    from worldrecall.registry.host import load_plugins

    host = load_plugins(extra=[toy_plugin], fresh=True)
    runner = Runner(toy_config(tmp_path, make_dataset(tmp_path, {"good": [0]})), host)
    pipe = runner.pipeline

    class Odd(toy_plugin.BrightnessDrift):
        name = "toy.odd"
        optional_models = ("flow",)
        params = {"max_side": 64, "where": Path("/x/é"), "nested": {"b": [1, 2.5], "a": None}}
        thresholds = {"tolerance": 10.0, "band": [0.1, 0.9]}

        def cache_params(self, case, alignment):
            return {"case": case.case_id, "n": len(alignment.phases)}

    al = Alignment({"A": Phase("A", 0, 3), "B": Phase("B", 4, 7)}, {"n": 8, "note": "ünïcode"})
    for metric in (toy_plugin.BrightnessDrift(), Odd()):
        for cid in ("c0", "c1"):
            case = SimpleNamespace(case_id=cid, fingerprint=lambda cid=cid: cid * 32)
            key, score_key = pipe.keys(metric, case, al)
            want = cache_key({"alignment": al.to_json(), "metric": metric.name, "version": metric.version,
                              "case": case.fingerprint(), "params": metric.params,
                              "models": pipe.hub.identities(metric.models),
                              "optional_models": {r: pipe.hub.selection.get(r) or "" for r in metric.optional_models},
                              "extra": metric.cache_params(case, al)})
            assert key == want
            assert score_key == cache_key({"measurement": want, "version": metric.version,
                                           "thresholds": metric.thresholds, "artifacts": pipe.write_artifacts})


def test_a_job_runs_with_a_larger_young_generation_and_restores_it(monkeypatch):
    """``run_plain`` raises the collector's young-generation threshold for the job and restores it after,
    also when the job raises."""
    import gc

    import pytest

    from worldrecall.engine import job

    before = gc.get_threshold()
    seen = []
    monkeypatch.setattr(job, "_run_plain", lambda *a: seen.append(gc.get_threshold()) or 0)
    assert job.run_plain({}) == 0 and seen[0][0] == 20_000 and gc.get_threshold() == before

    def boom(*a):
        raise RuntimeError("x")

    monkeypatch.setattr(job, "_run_plain", boom)
    with pytest.raises(RuntimeError):
        job.run_plain({})
    assert gc.get_threshold() == before


def test_a_bounded_memo_drops_its_oldest_entries_first():
    from worldrecall.engine.stages.bounded import remember

    memo: dict[str, int] = {}
    assert [remember(memo, k, i, 3) for i, k in enumerate("abcd")] == [0, 1, 2, 3]
    assert memo == {"b": 1, "c": 2, "d": 3}
    remember(memo, "c", 9, 3)  # a key already held keeps its place
    assert list(memo.items()) == [("b", 1), ("c", 9), ("d", 3)]


def test_deferred_score_entries_are_served_by_their_job_and_written_after_it(tmp_path):
    """A job's new score entry is its own until its file is written after the outputs (stages/later.py): the
    same bytes a direct put writes; the next job checks it against its file like any other entry."""
    from worldrecall.engine.stages import later

    entry = {"values": {"v": 0.5, "n": float("nan")}, "artifacts": [], "warnings": ["w"]}
    direct = ProcessScoreCache(tmp_path / "direct")
    direct.put("m", "cd" * 32, entry)
    c = ProcessScoreCache(tmp_path / "scores", defer=True)
    c.put("m", "cd" * 32, entry)
    entry["values"]["v"] = 9.0  # the caller's dict changes after the put: the entry is as it was put
    assert not list((tmp_path / "scores").rglob("*.json"))  # nothing written during the job
    got = c.get("m", "cd" * 32)
    assert got["values"]["v"] == 0.5 and got["warnings"] == ["w"] and c.text_of("m", "cd" * 32) is not None
    later.run_later()
    (written,) = (tmp_path / "scores").rglob("*.json")
    assert written.read_bytes() == next((tmp_path / "direct").rglob("*.json")).read_bytes()
    nxt = ProcessScoreCache(tmp_path / "scores", defer=True)  # the next job of the process
    assert nxt.get("m", "cd" * 32)["values"]["v"] == 0.5  # read from its file, digest checked
    written.unlink()
    assert nxt.get("m", "cd" * 32) is None  # deleted after its job: a miss, as without the memo
    ProcessScoreCache(tmp_path / "scores", defer=True).put("m", "ef" * 32, entry)
    assert ProcessScoreCache(tmp_path / "scores", defer=True).get("m", "ef" * 32) is None  # lost: a miss
    later.run_later()  # (its write, left in the queue, lands now)
    assert ProcessScoreCache(tmp_path / "scores").get("m", "ef" * 32)["values"]["v"] == 9.0


def test_a_forked_worker_writes_its_score_entries_at_once(tmp_path):
    from worldrecall.engine.stages import later

    c = ProcessScoreCache(tmp_path / "scores", defer=True)
    pid = os.fork()
    if pid == 0:  # a worker: its deferred queue would die with it
        try:
            c.put("m", "ab" * 32, {"values": {"v": 1.0}, "artifacts": []})
            os._exit(0 if not later._QUEUE and c.take_recent() else 1)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(list((tmp_path / "scores").rglob("*.json"))) == 1
