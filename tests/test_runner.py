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
from helpers import toy_plugin
from helpers.procs import descendants, wait_gone
from helpers.toy_plugin import make_dataset, toy_config

from worldrecall.core.tables import case_table
from worldrecall.engine.stages.plan import shard_of
from worldrecall.engine.stages.row_store import rows_files
from worldrecall.engine.stages.runner import Runner
from worldrecall.formats.mp4 import write_video
from worldrecall.registry.host import load_plugins

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture()
def host():
    return load_plugins(extra=[toy_plugin], fresh=True)


@pytest.fixture(params=[1, 2], ids=["1-worker", "2-workers"])
def workers(request):
    """The serial and the forked executor: users get 2 on a 2-core machine (the default, workers=0)."""
    return request.param


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


def test_threshold_change_rescores_from_cache_without_measuring(tmp_path, host, workers):
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})  # four distinct videos
    cfg = toy_config(tmp_path, ds, workers=workers)
    first = _run(cfg, host)
    assert first.cache_stats["misses"] == 4  # measured once each (counted in whichever process measured)
    cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = 100.0
    second = _run(cfg, host)
    assert second.cache_stats.get("misses", 0) == 0  # no new measurement
    assert second.cache_stats["hits"] == 4
    assert {r.values["stable"] for r in second.rows} == {1.0}
    assert second.results_dir != first.results_dir  # different thresholds -> different result set


def test_tampered_cache_entry_is_detected_and_recomputed(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0]})
    cfg = toy_config(tmp_path, ds)
    _run(cfg, host)
    entries = list((tmp_path / "out" / "cache" / "measurements").rglob("*.safetensors"))
    assert len(entries) == 1
    from safetensors import safe_open
    from safetensors.numpy import load, save

    data = load(entries[0].read_bytes())
    with safe_open(str(entries[0]), framework="numpy") as f:
        header = f.metadata()
    data["per_frame"] = data["per_frame"] + 1.0  # change a value but keep the stored digest
    entries[0].write_bytes(save(data, metadata=header))
    cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = 11.0  # new result set
    res = Runner(cfg, host).run()
    assert res.cache_stats["corrupt"] == 1 and res.cache_stats["misses"] == 1
    assert res.rows[0].status == "ok"


def test_bad_inputs_fail_one_case_each_and_the_rest_completes(tmp_path, host, workers):
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
    cfg = toy_config(tmp_path, ds, max_failure_rate=0.2, workers=workers)
    res = _run(cfg, host)
    by = {r.case_id: r for r in res.rows}
    assert by["c0"].status == by["c1"].status == "ok"
    expect = {"zero": "empty file", "trunc": "trunc.mp4", "one": "1 frame(s); the toy.halves aligner needs at least 2", "emptydir": "no .png",
              "mixed": "mixed frame sizes", "missing": "generation missing", "escape": "escapes the data root",
              "boom": "RuntimeError"}
    for cid, needle in expect.items():
        assert by[cid].status == "failed", cid
        assert needle in by[cid].reason, (cid, by[cid].reason)
        assert "\n" not in by[cid].reason
    dup = [r for r in res.rows if r.case_id == "c0"]
    assert len(dup) == 1 and dup[0].status == "ok"  # the duplicate id is a warning on the kept row
    assert "duplicate case id 'c0'" in dup[0].warnings[0]
    # results are all written before the exit code is decided
    assert res.exit_code == 3 and res.failure_rate == pytest.approx(8 / 10)
    table = case_table(res.rows)
    assert len(table) == 10


def test_duplicate_case_id_is_a_warning_on_the_good_row(tmp_path, host, workers):
    # with 2 workers this used to record the good case as "failed: load: duplicate case id"
    ds = make_dataset(tmp_path, {"m": [0, 5]})
    data = Path(ds["data_root"])
    cases = json.loads((data / "cases.json").read_text())["cases"]
    (data / "cases.json").write_text(json.dumps({"cases": cases + cases[:1]}))
    res = _run(toy_config(tmp_path, ds, workers=workers), host)
    by = {r.case_id: r for r in res.rows}
    assert len(res.rows) == 2 and by["c0"].status == by["c1"].status == "ok"
    assert by["c0"].warnings == ["duplicate case id 'c0' for model 'm' in the toy loader's output; the later "
                                 "copy was ignored"]
    assert by["c1"].warnings == [] and res.exit_code == 0


def test_a_dead_worker_fails_its_case_only_and_the_run_completes(tmp_path, host):
    ds = make_dataset(tmp_path, {"m": [0, 5, 10, 15]})
    data = Path(ds["data_root"])
    cases = json.loads((data / "cases.json").read_text())["cases"]
    cases.append({"id": "die", "video": "die.mp4"})  # its measure stage SIGKILLs the worker process
    (data / "cases.json").write_text(json.dumps({"cases": cases}))
    write_video(Path(ds["generations"]) / "m" / "die.mp4", np.full((8, 32, 48, 3), 77, np.uint8))
    res = _run(toy_config(tmp_path, ds, workers=2), host)
    by = {r.case_id: r for r in res.rows}
    assert by["die"].status == "failed"
    assert by["die"].reason == ("worker: worker process died while scoring this case (killed by SIGKILL, e.g. the "
                                "out-of-memory killer)")
    assert all(by[f"c{i}"].status == "ok" for i in range(4))
    assert "mean" in res.tables and res.n_failed_cases == 1 and res.exit_code == 0


@pytest.mark.parametrize("n_bad,code", [(1, 0), (2, 3)])
def test_failure_rate_exactly_at_the_limit_passes(tmp_path, host, n_bad, code):
    ds = make_dataset(tmp_path, {"m": [0, 5, 10, 15]})
    data = Path(ds["data_root"])
    cases = json.loads((data / "cases.json").read_text())["cases"]
    for i in range(n_bad):  # each a missing generation: one failed case
        cases.append({"id": f"missing{i}", "video": f"nope{i}.mp4"})
    (data / "cases.json").write_text(json.dumps({"cases": cases}))
    res = _run(toy_config(tmp_path, ds, max_failure_rate=0.2), host)
    # 1 of 5 = 0.2 is at the limit (passes); 2 of 6 = 0.333 is over it (exit code 3)
    assert res.failure_rate == pytest.approx(n_bad / (4 + n_bad)) and res.exit_code == code


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
    from worldrecall.engine.stages.aggregate import aggregate_rows
    from worldrecall.engine.stages.runner import load_rows

    merged = load_rows(parts[0].results_dir)
    assert [(r.row_key, r.values) for r in merged] == [(r.row_key, r.values) for r in whole.rows]
    tables = aggregate_rows(host, merged, toy_config(tmp_path, ds))
    assert tables["mean"]["mean"].tolist() == pytest.approx(whole.tables["mean"]["mean"].tolist())


KILL_SCRIPT = r"""
import sys, time
sys.path.insert(0, {tests!r})
from helpers import toy_plugin
orig = toy_plugin.BrightnessDrift.measure
def slow(self, *a, **k):
    time.sleep(0.4)
    return orig(self, *a, **k)
toy_plugin.BrightnessDrift.measure = slow
from worldrecall.engine.stages.runner import Runner
from worldrecall.registry.host import load_plugins
import json
cfg = json.loads(open({cfg!r}).read())
Runner(cfg, load_plugins(extra=[toy_plugin], fresh=True)).run()
"""


def test_kill_minus_9_then_rerun_resumes_without_duplicates(tmp_path, host, workers):
    ds = make_dataset(tmp_path, {"good": [0, 1, 2, 3, 4], "bad": [50, 51, 52, 53, 54]})  # all distinct
    cfg = toy_config(tmp_path / "k", ds, workers=workers)
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
    workers_alive = descendants(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert results is not None, "the child never wrote rows"
    assert len(workers_alive) == (2 if workers == 2 else 0)
    survivors = wait_gone(workers_alive, 10.0)
    for pid in survivors:  # leave no orphan behind even when this fails
        os.kill(pid, signal.SIGKILL)
    assert survivors == set(), "forked workers outlived their killed parent"
    n_before = len([ln for ln in results.read_text().splitlines() if ln.strip()])
    assert 3 <= n_before < 10
    with open(results, "a") as f:
        f.write('{"benchmark": "toy", "model": "go')  # a torn line, as a kill mid-write leaves it
    resumed = _run(cfg, host)
    # finished cases are not recomputed (some unfinished ones may already be in the measurement cache)
    assert resumed.cache_stats.get("misses", 0) + resumed.cache_stats.get("hits", 0) <= 10 - n_before
    clean = _run(toy_config(tmp_path / "c", ds), host)
    assert [(r.row_key, r.values) for r in resumed.rows] == [(r.row_key, r.values) for r in clean.rows]
    assert not results.exists()  # the resumed run's rows, laid out by benchmark once it ended
    keys = [json.loads(ln)["case_id"] + json.loads(ln)["model"] for f in rows_files(results.parent)
            for ln in f.read_text().splitlines() if ln.strip().endswith("}")]
    assert len(keys) == len(set(keys)) == 10


def test_wrong_threshold_type_is_a_clear_error(tmp_path, host):
    from worldrecall.core.components import ConfigTypeError

    ds = make_dataset(tmp_path, {"m": [0]})
    cfg = toy_config(tmp_path, ds)
    cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"]["tolerance"] = "high"
    with pytest.raises(ConfigTypeError, match=r"toy.brightness.thresholds.tolerance: expected a number, got 'high'"):
        Runner(cfg, host).run()
    cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"] = {"tolerence": 1.0}
    with pytest.raises(ConfigTypeError, match="unknown key"):
        Runner(cfg, host).run()


def test_parallel_workers_give_the_same_rows_and_decode_once(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0, 10, 20, 30], "bad": [50, 60, 70, 80]})  # 8 distinct contents
    seq = _run(toy_config(tmp_path / "a", ds), host)
    runner = Runner(toy_config(tmp_path / "b", ds, workers=2), host)
    par = runner.run()
    assert runner.pool.decode_counts == {}  # the parent decoded nothing: every video was decoded by a worker
    assert [(r.row_key, r.values, r.status) for r in par.rows] == [(r.row_key, r.values, r.status) for r in seq.rows]
    auto = _run(toy_config(tmp_path / "d", ds), host)  # workers=0 (the default): probe one clip, then decide
    assert [(r.row_key, r.values, r.status) for r in auto.rows] == [(r.row_key, r.values, r.status) for r in seq.rows]
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
    # damage one score entry: it is ignored and that row is scored again from its measurement
    entries = (tmp_path / "out" / "cache" / "scores").rglob("*.json")
    entry = max(entries, key=lambda p: p.stat().st_mtime_ns)  # written by the tolerance-45 run
    entry.write_text(entry.read_text().replace('"stable"', '"stabel"'))
    fourth = _run({**cfg, "output_root": str(tmp_path / "out3")}, host)
    assert fourth.cache_stats["score_hits"] == 3 and fourth.cache_stats["hits"] == 1
    assert [(r.row_key[1:], r.values) for r in fourth.rows] == [(r.row_key[1:], r.values) for r in second.rows]


def test_a_sidecar_missing_for_every_case_is_said_once_before_evaluating(tmp_path, caplog):
    import types

    from worldrecall.core.hookspecs import hookimpl

    class NeedsDepth(toy_plugin.BrightnessDrift):
        name = "toy.needs_depth"
        models = ("depth",)

    mod = types.ModuleType("needs_depth")
    mod.register_metrics = hookimpl(lambda register: register(NeedsDepth))
    mod.register_metrics.__doc__ = "A toy metric that needs the depth role."
    host = load_plugins(extra=[toy_plugin, mod], fresh=True)
    ds = make_dataset(tmp_path, {"m": [0, 5, 10]})  # plain mp4s: no ViPE sidecars next to them
    cfg = toy_config(tmp_path, ds, models={"set": "classical"})
    cfg["benchmarks"]["toy"]["metrics"]["needs_depth"] = {"params": {}, "thresholds": {}}
    res = _run(cfg, host)
    by = {(r.case_id, r.metric): r for r in res.rows}
    assert all(by[(f"c{i}", "toy.brightness")].status == "ok" for i in range(3))
    skipped = [by[(f"c{i}", "toy.needs_depth")] for i in range(3)]
    assert {r.status for r in skipped} == {"skipped"} and res.failure_rate == 0.0
    assert "backend sidecar_depth (models.depth) cannot serve any of the 3 toy cases" in skipped[0].reason
    assert "models=reference" in skipped[0].reason
    said = [r for r in caplog.records if "cannot serve any" in r.getMessage()]
    assert len(said) == 1  # once, not once per case


@pytest.mark.parametrize("workers_", [1, 2])
def test_disk_full_stops_the_run_with_one_message_and_a_rerun_resumes(tmp_path, host, workers_, monkeypatch, capsys):
    import errno

    from worldrecall.engine import job as app
    from worldrecall.engine.stages.row_store import ResultStore

    ds = make_dataset(tmp_path, {"good": [0, 1, 2], "bad": [50, 51, 52]})
    cfg = toy_config(tmp_path, ds, workers=workers_)
    real = ResultStore.append
    calls = {"n": 0}

    def append(self, row, flush=True):
        calls["n"] += 1
        if calls["n"] == 3:  # the disk fills up mid-line: half a line is on disk, then ENOSPC
            self.flush()
            with open(self.path, "a") as f:
                f.write('{"benchmark": "toy", "mo')
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, row, flush)

    monkeypatch.setattr(ResultStore, "append", append)
    code = app.run_plain(cfg, host=host)
    err = capsys.readouterr().err
    assert code == app.EXIT_NOT_WRITABLE == 4
    assert "error: cannot append results to" in err and "No space left on device" in err and "resumes" in err
    assert len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1
    monkeypatch.setattr(ResultStore, "append", real)
    resumed = _run(cfg, host)  # the torn line is repaired; the two finished rows are kept, the rest computed
    clean = _run(toy_config(tmp_path / "c", ds), host)
    assert [(r.row_key, r.values) for r in resumed.rows] == [(r.row_key, r.values) for r in clean.rows]
    st = resumed.cache_stats  # the 2 rows written before the disk filled are not computed again
    assert st.get("score_hits", 0) + st.get("hits", 0) + st.get("misses", 0) <= 4


def test_suite_builder_is_a_registered_name_never_code(tmp_path, host):
    from worldrecall.core.components import ConfigTypeError

    ds = make_dataset(tmp_path, {"m": [0]})
    marker = tmp_path / "pwned"
    cfg = toy_config(tmp_path, ds, suite={"builder": "os:system", "root": f"touch {marker}", "params": {}})
    with pytest.raises(ConfigTypeError, match=r"suite.builder: unknown suite 'os:system'; known: .*synthetic"):
        _run(cfg, host)
    assert not marker.exists()


def test_video_caps_are_config_keys_and_fail_one_case_each(tmp_path, host):
    ds = make_dataset(tmp_path, {"m": [0, 5]})  # 8-frame 48x32 videos
    res = _run(toy_config(tmp_path, ds, video={"max_frames": 4, "max_pixels": 40_000_000}), host)
    assert {r.status for r in res.rows} == {"failed"}
    assert all("video.max_frames" in r.reason and "\n" not in r.reason for r in res.rows), res.rows[0].reason
    ok = _run(toy_config(tmp_path / "b", ds, video={"max_frames": 8, "max_pixels": 48 * 32}), host)
    assert {r.status for r in ok.rows} == {"ok"}  # exactly at both limits passes


def test_a_config_error_is_one_line_and_exit_code_2(tmp_path, host, capsys):
    from worldrecall.engine import job as app

    ds = make_dataset(tmp_path, {"m": [0]})
    cfg = toy_config(tmp_path, ds)
    cfg["benchmarks"]["toy"]["metrics"]["brightness"]["thresholds"] = {"tolerence": 1.0}
    assert app.run_plain(cfg, host=host) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: toy.brightness.thresholds.tolerence: unknown key (known: tolerance)"]


def test_a_crashing_preflight_check_skips_nothing(tmp_path, host):
    import types

    from worldrecall.engine.stages.plan import _preflight_one

    def boom(case):
        raise RuntimeError("plugin bug")

    spec = types.SimpleNamespace(name="x", preflight=boom)
    case = types.SimpleNamespace(key="toy/m/c0")
    assert _preflight_one(spec, case) is None  # cannot judge: the metric runs and each case reports itself
    spec.preflight = lambda c: "c0: no sidecar"
    assert _preflight_one(spec, case) == "c0: no sidecar"


def test_a_score_with_an_undeclared_value_fails_the_case_with_the_reason(tmp_path, host, monkeypatch):
    # registered with both values declared; a later version that forgets one must not be shown or ranked
    monkeypatch.setattr(toy_plugin.BrightnessDrift, "values",
                        {"stable": toy_plugin.BrightnessDrift.values["stable"]})
    ds = make_dataset(tmp_path, {"good": [0]})
    res = _run(toy_config(tmp_path, ds), host)
    (row,) = res.rows
    assert row.status == "failed" and row.values == {}
    assert row.reason == ("score: toy.brightness emitted undeclared value(s) 'drift' "
                          "(declare each in the metric's `values`)")


class _Extra(toy_plugin.BrightnessDrift):
    """A second toy metric a plugin registers but no config names."""

    name = "toy.extra"


def _extra_plugin():
    import types

    from worldrecall.core.hookspecs import hookimpl

    mod = types.ModuleType("toy_extra")
    mod.register_metrics = hookimpl(lambda register: register(_Extra))
    return mod


def test_metrics_by_name_switch_on_a_registered_but_unconfigured_metric(tmp_path):
    from worldrecall.core.components import ConfigTypeError
    from worldrecall.engine.stages.plan import enable_metrics

    host = load_plugins(extra=[toy_plugin, _extra_plugin()], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0]})
    plain = toy_config(tmp_path, ds)
    res = _run({**plain, "metrics": ["extra"]}, host)
    assert sorted(r.metric for r in res.rows) == ["toy.brightness", "toy.extra"]
    assert res.results_dir != _run(plain, host).results_dir  # a different set of rows, a different folder
    # a configured metric keeps its thresholds; `enabled: false` yields to the explicit name
    plain["benchmarks"]["toy"]["metrics"]["brightness"]["enabled"] = False
    on = enable_metrics({**plain, "metrics": ["toy.brightness"]}, host)["benchmarks"]["toy"]["metrics"]
    assert on["brightness"] == {"params": {}, "thresholds": {"tolerance": 10.0}, "enabled": True}
    assert plain["benchmarks"]["toy"]["metrics"]["brightness"]["enabled"] is False  # the input is not mutated
    known = r"known: .*memobench\.ors, .*toy\.brightness, toy\.extra, wrbench\.camalign"
    with pytest.raises(ConfigTypeError, match=rf"unknown metric 'nope'; {known}"):
        enable_metrics({**plain, "metrics": ["nope"]}, host)
    with pytest.raises(ConfigTypeError, match=r"benchmark 'toy', which the config does not define \(defined: none"):
        enable_metrics({**plain, "benchmarks": {}, "metrics": ["extra"]}, host)


def test_a_short_metric_name_two_benchmarks_register_is_ambiguous():
    from worldrecall.core.components import ConfigTypeError
    from worldrecall.engine.stages.plan import resolve_metric_name

    host = load_plugins(fresh=True)  # the built-ins: memobench, opis and scene_memory each have a camera gate
    with pytest.raises(ConfigTypeError, match=r"'camera_gate' is registered by several benchmarks \(memobench"):
        resolve_metric_name("camera_gate", host)
    assert resolve_metric_name("ors", host) == "memobench.ors"
