"""Runner: measure->score split, cache, resume, per-case isolation, sharding, failure rate."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import toy_plugin
from toy_plugin import make_dataset, toy_config
from worldrecall.engine.runner import Runner, shard_of
from worldrecall.engine.tables import case_table
from worldrecall.core.video import write_video
from worldrecall.registry.host import load_plugins

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture()
def host():
    return load_plugins(extra=[toy_plugin], fresh=True)


def _run(cfg, host):
    return Runner(cfg, host).run()


def test_scores_match_hand_computed_and_tables(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0, 0], "bad": [40, 60]})
    res = _run(toy_config(tmp_path, ds), host)
    rows = {(r.model, r.case_id): r for r in res.rows}
    assert len(res.rows) == 4 and all(r.status == "ok" for r in res.rows)
    # 15/16 of the pixels rise by 40 in the second half (1/16 are texture fixed at 30): 40 * 15/16 = 37.5
    assert rows[("bad", "c0")].values["drift"] == pytest.approx(37.5, abs=0.5)
    assert rows[("bad", "c0")].values["stable"] == 0.0
    assert rows[("good", "c1")].values["stable"] == 1.0
    mean = res.tables["mean"]
    bad = mean[(mean.model == "bad") & (mean.value_name == "drift")]["mean"].item()
    assert bad == pytest.approx((37.5 + 56.25) / 2, abs=0.5)   # (40 + 60) * 15/16 / 2
    paired = res.tables["paired"]
    d = paired[(paired.model == "bad") & (paired.value_name == "stable")]
    assert d["mean_diff"].item() == pytest.approx(-1.0)  # macro over strata a, b: (-1 + -1) / 2
    assert res.exit_code == 0


def test_each_video_decoded_once_per_run(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0, 0, 0]})
    res = _run(toy_config(tmp_path, ds), host)
    assert res.decode_counts and set(res.decode_counts.values()) == {1}


def test_threshold_change_rescores_from_cache_without_measuring(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})  # four distinct videos
    cfg = toy_config(tmp_path, ds)
    toy_plugin.MEASURE_CALLS.clear()
    first = _run(cfg, host)
    assert len(toy_plugin.MEASURE_CALLS) == 4
    cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = 100.0
    second = _run(cfg, host)
    assert len(toy_plugin.MEASURE_CALLS) == 4  # no new measurement
    assert second.cache_stats["hits"] == 4
    assert {r.values["stable"] for r in second.rows} == {1.0}
    assert second.results_dir != first.results_dir  # different thresholds -> different result set


def test_tampered_cache_entry_is_detected_and_recomputed(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0]})
    cfg = toy_config(tmp_path, ds)
    _run(cfg, host)
    entries = list((tmp_path / "out" / "cache" / "measurements").rglob("*.npz"))
    assert len(entries) == 1
    with np.load(entries[0], allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    data["per_frame"] = data["per_frame"] + 1.0  # change a value but keep the stored digest
    np.savez(entries[0], **data)
    cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = 11.0  # new result set
    toy_plugin.MEASURE_CALLS.clear()
    runner = Runner(cfg, host)
    res = runner.run()
    assert runner.cache.corrupt == 1 and len(toy_plugin.MEASURE_CALLS) == 1
    assert res.rows[0].status == "ok"


def test_bad_inputs_fail_one_case_each_and_the_rest_completes(tmp_path, host):
    ds = make_dataset(tmp_path, {"m": [0, 0]})
    gen = Path(ds["generations"]) / "m"
    data = Path(ds["data_root"])
    (gen / "zero.mp4").write_bytes(b"")
    good = (gen / "c0.mp4").read_bytes()
    (gen / "trunc.mp4").write_bytes(good[: len(good) // 3])
    write_video(gen / "one.mp4", np.full((1, 32, 48, 3), 90, np.uint8))
    (gen / "empty_dir").mkdir()
    mixed = gen / "mixed"
    mixed.mkdir()
    import cv2

    cv2.imwrite(str(mixed / "0000.png"), np.zeros((32, 48, 3), np.uint8))
    cv2.imwrite(str(mixed / "0001.png"), np.zeros((30, 40, 3), np.uint8))
    write_video(gen / "boom.mp4", np.full((4, 32, 48, 3), 90, np.uint8))
    cases = json.loads((data / "cases.json").read_text())["cases"]
    cases += [{"id": "zero", "video": "zero.mp4"}, {"id": "trunc", "video": "trunc.mp4"},
              {"id": "one", "video": "one.mp4"}, {"id": "emptydir", "video": "empty_dir"},
              {"id": "mixed", "video": "mixed"}, {"id": "missing", "video": "nope.mp4"},
              {"id": "escape", "video": "../../../etc/passwd"}, {"id": "c0", "video": "c0.mp4"},
              {"id": "boom", "video": "boom.mp4"}]
    (data / "cases.json").write_text(json.dumps({"cases": cases}))
    cfg = toy_config(tmp_path, ds, max_failure_rate=0.2)
    res = _run(cfg, host)
    by = {r.case_id: r for r in res.rows}
    assert by["c0"].status == by["c1"].status == "ok"
    expect = {"zero": "empty file", "trunc": "trunc.mp4", "one": "only 1 frame", "emptydir": "no .png",
              "mixed": "mixed frame sizes", "missing": "generation missing", "escape": "escapes the data root",
              "boom": "RuntimeError"}
    for cid, needle in expect.items():
        assert by[cid].status == "failed", cid
        assert needle in by[cid].reason, (cid, by[cid].reason)
        assert "\n" not in by[cid].reason
    dup = [r for r in res.rows if r.case_id == "c0"]
    assert len(dup) == 1  # the duplicate id is reported in the log, not a second row
    # results are all written before the exit code is decided
    assert res.exit_code == 3 and res.failure_rate == pytest.approx(8 / 10)
    table = case_table(res.rows)
    assert len(table) == 10


def test_duplicate_case_ids_are_reported(tmp_path, host):
    ds = make_dataset(tmp_path, {"m": [0]})
    data = Path(ds["data_root"])
    cases = json.loads((data / "cases.json").read_text())["cases"]
    (data / "cases.json").write_text(json.dumps({"cases": cases + cases}))
    runner = Runner(toy_config(tmp_path, ds), host)
    plan = runner.plan()[0]
    items = runner._load(plan)
    errs = [i for i in items if not hasattr(i, "video")]
    assert len(items) == 2 and "duplicate case id 'c0'" in errs[0].reason


def test_sharding_partitions_cases_and_aggregate_merges(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0] * 6, "bad": [50] * 6})
    whole = _run(toy_config(tmp_path / "w", ds), host)
    parts = []
    for i in range(2):
        cfg = toy_config(tmp_path / "s", ds, shard={"count": 2, "index": i})
        parts.append(_run(cfg, host))
    assert parts[0].results_dir == parts[1].results_dir
    ids = [{r.case_id for r in p.rows if shard_of(r.case_id, 2) == i} for i, p in enumerate(parts)]
    assert not ids[0] & ids[1] and ids[0] | ids[1] == {f"c{i}" for i in range(6)}
    from worldrecall.engine.runner import aggregate_rows, load_rows

    merged = load_rows(parts[0].results_dir)
    assert [(r.row_key, r.values) for r in merged] == [(r.row_key, r.values) for r in whole.rows]
    tables = aggregate_rows(host, merged, toy_config(tmp_path, ds))
    assert tables["mean"]["mean"].tolist() == pytest.approx(whole.tables["mean"]["mean"].tolist())


KILL_SCRIPT = r"""
import sys, time
sys.path.insert(0, {tests!r})
import toy_plugin
orig = toy_plugin.BrightnessDrift.measure
def slow(self, *a, **k):
    time.sleep(0.4)
    return orig(self, *a, **k)
toy_plugin.BrightnessDrift.measure = slow
from worldrecall.engine.runner import Runner
from worldrecall.registry.host import load_plugins
import json
cfg = json.loads(open({cfg!r}).read())
Runner(cfg, load_plugins(extra=[toy_plugin], fresh=True)).run()
"""


def test_kill_minus_9_then_rerun_resumes_without_duplicates(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0, 1, 2, 3, 4], "bad": [50, 51, 52, 53, 54]})  # all distinct
    cfg = toy_config(tmp_path / "k", ds)
    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps(cfg))
    script = KILL_SCRIPT.format(tests=str(Path(__file__).parent), cfg=str(cfg_path))
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)})
    results = None
    deadline = time.time() + 120
    while time.time() < deadline:
        files = list((tmp_path / "k" / "out" / "results").rglob("rows-shard-*.jsonl"))
        if files and len(files[0].read_text().splitlines()) >= 3:
            results = files[0]
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert results is not None, "the child never wrote rows"
    n_before = len([ln for ln in results.read_text().splitlines() if ln.strip()])
    assert 3 <= n_before < 10
    with open(results, "a") as f:
        f.write('{"benchmark": "toy", "model": "go')  # a torn line, as a kill mid-write leaves it
    toy_plugin.MEASURE_CALLS.clear()
    resumed = _run(cfg, host)
    assert len(toy_plugin.MEASURE_CALLS) <= 10 - n_before  # finished cases are not recomputed
    clean = _run(toy_config(tmp_path / "c", ds), host)
    assert [(r.row_key, r.values) for r in resumed.rows] == [(r.row_key, r.values) for r in clean.rows]
    keys = [json.loads(ln)["case_id"] + json.loads(ln)["model"] for ln in results.read_text().splitlines()
            if ln.strip().endswith("}")]
    assert len(keys) == len(set(keys)) == 10


def test_wrong_threshold_type_is_a_clear_error(tmp_path, host):
    from worldrecall.core.components import ConfigTypeError

    ds = make_dataset(tmp_path, {"m": [0]})
    cfg = toy_config(tmp_path, ds)
    cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = "high"
    with pytest.raises(ConfigTypeError, match=r"toy.brightness.thresholds.tolerance: expected a number, got 'high'"):
        Runner(cfg, host).plan()
    cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"] = {"tolerence": 1.0}
    with pytest.raises(ConfigTypeError, match="unknown key"):
        Runner(cfg, host).plan()


def test_parallel_workers_give_the_same_rows_and_decode_once(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0, 10, 20, 30], "bad": [50, 60, 70, 80]})  # 8 distinct contents
    seq = _run(toy_config(tmp_path / "a", ds), host)
    par = _run(toy_config(tmp_path / "b", ds, workers=2), host)
    assert [(r.row_key, r.values, r.status) for r in par.rows] == [(r.row_key, r.values, r.status) for r in seq.rows]
    assert len(par.decode_counts) == 8 and set(par.decode_counts.values()) == {1}
    # every (case, metric) went through the cache once; identical encodes may share an entry (content
    # addressing), and two workers may both miss on the same content at the same moment
    st = par.cache_stats
    assert st["hits"] + st["misses"] + st["score_hits"] == 8 and st["misses"] >= seq.cache_stats["misses"]


def test_warm_rerun_with_new_threshold_decodes_nothing_and_damaged_score_memo_is_rescored(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0, 10], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds)
    first = _run(cfg, host)
    assert len(first.decode_counts) == 4
    # a new threshold: every row is re-scored from cached measurements; frame counts (for the aligner)
    # come from the video-facts cache, so no video is decoded
    cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = 45.0
    second = _run(cfg, host)
    assert second.decode_counts == {} and second.cache_stats["hits"] == 4
    # the same config in a fresh results folder: every score comes from the score memo
    third = _run({**cfg, "output_root": str(tmp_path / "out2")}, host)
    assert third.cache_stats["score_hits"] == 4 and third.cache_stats["hits"] == 0
    # damage one memo entry: it is ignored and that row is scored again from its measurement
    entries = (tmp_path / "out" / "cache" / "scores" / "toy.brightness").rglob("*.json")
    entry = max(entries, key=lambda p: p.stat().st_mtime_ns)  # written by the tolerance-45 run
    entry.write_text(entry.read_text().replace('"stable"', '"stabel"'))
    fourth = _run({**cfg, "output_root": str(tmp_path / "out3")}, host)
    assert fourth.cache_stats["score_hits"] == 3 and fourth.cache_stats["hits"] == 1
    assert [(r.row_key[1:], r.values) for r in fourth.rows] == [(r.row_key[1:], r.values) for r in second.rows]
