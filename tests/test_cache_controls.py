"""The cache controls a user reaches through the CLI, in fresh processes: ``worldrecall cache info | clear |
prune | explain`` and ``cache.mode=use|refresh|off``.

The plugin is installed into a throw-away folder (a ``.dist-info`` with its entry point, on ``PYTHONPATH``) and
logs each measurement it computes, so a test can count what a run computed again.
"""

from __future__ import annotations

import json
import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from worldrecall.engine.cache.explain import read_log
from worldrecall.formats.mp4 import write_video

PLUGIN = '''
"""A loader, an aligner and a metric with a param and a threshold; measure() logs each call."""
from pathlib import Path

from worldrecall.core.components import Aligner, Loader, Metric, Value
from worldrecall.core.data import Alignment, Case, CaseSkip, Phase
from worldrecall.core.hookspecs import hookimpl

LOG = Path(__file__).with_name("measured.log")


class CtlLoader(Loader):
    name = "ctl"
    benchmark = "ctl"

    def load(self, request):
        for model, gen in request.generations.items():
            for video in sorted(Path(gen).glob("*.mp4")):
                yield Case("ctl", video.stem, model, request.pool.get(video), strata={"domain": "d"})


class CtlAligner(Aligner):
    name = "ctl.split"
    min_frames = 2

    def align(self, case, params):
        n = case.video.num_frames
        return Alignment({"A": Phase("A", 0, n // 2 - 1), "B": Phase("B", n // 2, n - 1)}, {"n": n})


class CtlMetric(Metric):
    name = "ctl.drift"
    benchmark = "ctl"
    primary = "drift"
    values = {"drift": Value(higher_is_better=False, range=None, unit="levels", description="B minus A"),
              "big": Value(higher_is_better=False, range=(0.0, 1.0), unit="", description="drift over tolerance")}
    params = {"gain": 1.0, "partial": False, "skip_bad": False}
    thresholds = {"tolerance": 5.0}

    def measure(self, case, alignment, ctx):
        with open(LOG, "a") as f:
            f.write(case.key + "\\n")
        if self.params["skip_bad"] and case.model == "bad":  # as a metric that finds its input wanting
            raise CaseSkip("no usable phase in " + case.case_id, info={"n": alignment.info["n"]})
        if self.params["partial"]:  # as a judge that left a question unanswered: scored, never kept
            ctx.not_kept.append("judge left question 2 unanswered")
        fr = case.video.frames().astype(float)
        a, b = alignment.phases["A"], alignment.phases["B"]
        return {"a": float(fr[a.start:a.end + 1].mean()), "b": float(fr[b.start:b.end + 1].mean()) * self.params["gain"]}

    def score(self, m, thresholds):
        d = m["b"] - m["a"]
        return {"drift": d, "big": float(abs(d) > thresholds["tolerance"])}


@hookimpl
def register_loaders(register):
    register(CtlLoader())


@hookimpl
def register_aligners(register):
    register(CtlAligner())


@hookimpl
def register_metrics(register):
    register(CtlMetric)
'''


def _video(path: Path, delta: int, n: int = 8) -> None:
    fr = np.full((n, 32, 48, 3), 100, np.uint8)
    fr[n // 2:] += np.uint8(delta)
    write_video(path, fr, fps=8)


@pytest.fixture
def world(tmp_path: Path) -> dict:
    site = tmp_path / "site"
    pkg = site / "ctlplug"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(PLUGIN)
    dist = site / "ctlplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ctlplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[worldrecall]\nctlplug = ctlplug\n")
    for model, deltas in {"good": [0, 2], "bad": [40, 60]}.items():
        for i, d in enumerate(deltas):
            _video(tmp_path / "gen" / model / f"c{i}.mp4", d)
    env = dict(os.environ)
    import worldrecall  # this checkout first: the subprocess imports the code under test

    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(worldrecall.__file__).parents[1]),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["WORLDRECALL_PLUGINS"] = env.get("WORLDRECALL_PLUGINS", "") + ",ctlplug"
    return {"tmp": tmp_path, "pkg": pkg, "env": env, "out": tmp_path / "out"}


def _cli(world: dict, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-c", "import sys; from worldrecall.engine.cli import main; "
                           "sys.exit(main(sys.argv[1:]))", *args], env=world["env"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc


def _run(world: dict, *extra: str, workers: int = 1) -> dict[tuple[str, str], dict]:
    _cli(world, "run", f"output_root={world['out']}", "suite=none", "only=[ctl]", f"workers={workers}",
         "progress=false", "tracking=none", "report.enabled=false", "aggregators=[mean]", "+benchmarks.ctl.loader=ctl",
         "+benchmarks.ctl.aligner=ctl.split", f"+benchmarks.ctl.generations={world['tmp'] / 'gen'}",
         "+benchmarks.ctl.metrics={drift:{}}", *extra)
    rows = {}
    for f in sorted((world["out"] / "results").glob("*/rows-shard-*.jsonl"), key=lambda p: p.stat().st_mtime):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            rows[(r["model"], r["case_id"])] = r
    return rows


def _measured(world: dict) -> int:
    log = world["pkg"] / "measured.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _info(world: dict) -> dict[str, dict]:
    doc = json.loads(_cli(world, "cache", "info", "--json", f"output_root={world['out']}").stdout)
    return {k["kind"]: k for k in doc["kinds"]}


def _store_files(world: dict) -> list[Path]:
    return sorted(p for p in (world["out"] / "cache").rglob("*") if p.is_file())


def test_info_clear_and_prune_count_what_a_run_stored(world):
    _run(world)
    kinds = _info(world)
    # 4 cases x 1 metric: one alignment, measurement, score and their key ingredients each
    assert kinds["alignments"]["entries"] == 4 and kinds["measurements"]["entries"] == 4
    assert kinds["scores"]["entries"] == 4 and kinds["ingredients"]["entries"] == 12
    assert kinds["measurements"]["bytes"] == sum(p.stat().st_size for p in (world["out"] / "cache" / "measurements")
                                                 .rglob("*.safetensors"))
    text = _cli(world, "cache", "info", f"output_root={world['out']}").stdout
    assert "measurements" in text and "total" in text and "result rows" in text
    # a prune by age keeps what was just used; by size removes the least recently used first
    scores = sorted((world["out"] / "cache" / "scores").rglob("*.json"))
    old = time.time() - 30 * 86400
    os.utime(scores[0], (old, old))
    done = json.loads(_cli(world, "cache", "prune", "--older-than", "7d", "--json", f"output_root={world['out']}").stdout)
    assert done["entries"] == 1 and not scores[0].exists() and all(p.exists() for p in scores[1:])
    total = sum(k["bytes"] for k in _info(world).values())
    oldest = min((p for p in _store_files(world) if "measurements" in p.parts), key=lambda p: p.stat().st_mtime)
    os.utime(oldest, (old, old))
    done = json.loads(_cli(world, "cache", "prune", "--max-size", str(total - 1), "--json",
                           f"output_root={world['out']}").stdout)
    assert done["entries"] == 1 and not oldest.exists() and done["left_bytes"] <= total - 1
    # a warm rerun after the prune computes again exactly what was pruned (the pruned measurement's case)
    before = _measured(world)
    _run(world)
    assert _measured(world) == before  # its score was kept on disk as a row: nothing to compute
    _cli(world, "cache", "clear", "--kind", "measurements", f"output_root={world['out']}")
    assert _info(world).get("measurements", {"entries": 0})["entries"] == 0
    assert _info(world)["scores"]["entries"] >= 3
    out = _cli(world, "cache", "clear", f"output_root={world['out']}").stdout
    assert "cleared the cache" in out
    assert sum(k["entries"] for k in _info(world).values()) == 0
    assert list((world["out"] / "results").glob("*/rows-shard-*.jsonl"))  # results are not cache


def test_bad_cache_arguments_exit_2_with_a_did_you_mean(world):
    err = _cli(world, "cache", "inof", code=2).stderr
    assert "did you mean 'info'?" in err and err.count("\n") == 1
    err = _cli(world, "cache", "clear", "--kind", "measurement", f"output_root={world['out']}", code=2).stderr
    assert "did you mean 'measurements'?" in err
    err = _cli(world, "cache", "prune", "--older-than", "7dys", f"output_root={world['out']}", code=2).stderr
    assert "--older-than" in err and "did you mean" in err
    err = _cli(world, "cache", "prune", "--max-size", "2Gx", f"output_root={world['out']}", code=2).stderr
    assert "--max-size" in err
    err = _cli(world, "cache", "prune", "--max-sise", "2G", f"output_root={world['out']}", code=2).stderr
    assert "did you mean '--max-size'?" in err
    err = _cli(world, "run", "cache.mode=refesh", f"output_root={world['out']}", "suite=none", code=2).stderr
    assert "cache.mode" in err and "did you mean 'refresh'?" in err
    assert "cache info|clear|prune|explain" in _cli(world, "--help").stderr


def test_refresh_recomputes_and_overwrites_off_reads_and_writes_nothing(world):
    first = _run(world)
    assert _measured(world) == 4
    stored = {p: p.stat().st_mtime_ns for p in _store_files(world) if "measurements" in p.parts}
    time.sleep(0.05)
    _run(world)
    assert _measured(world) == 4  # a warm rerun computes nothing
    refreshed = _run(world, "cache.mode=refresh")
    assert _measured(world) == 8  # every case measured again
    assert all(p.stat().st_mtime_ns > t for p, t in stored.items())  # and overwritten in place
    assert {k: r["values"] for k, r in refreshed.items()} == {k: r["values"] for k, r in first.items()}
    _cli(world, "cache", "clear", f"output_root={world['out']}")
    off = _run(world, "cache.mode=off")
    assert _measured(world) == 12  # nothing read: the rows on disk do not stand either
    assert _store_files(world) == []  # and nothing written under cache_dir
    assert {k: r["values"] for k, r in off.items()} == {k: r["values"] for k, r in first.items()}


def test_the_cache_log_says_same_keys_once_and_explain_writes_them_out(world):
    _run(world)
    _run(world, "cache.mode=refresh")  # every row written again under the keys it had
    logs = sorted((world["out"] / "results").glob("*/meta/cache_log.json.gz"))
    assert len(logs) == 1
    rows = read_log(logs[0])["rows"]
    assert rows and all(r["previous"] == {"from": logs[0].parents[1].name, "status": r["status"],
                                          "same_keys": True} for r in rows)
    doc = json.loads(_cli(world, "cache", "explain", "ctl", "--json", f"output_root={world['out']}").stdout)
    assert len(doc) == len(rows)
    for rec in doc:  # as if the keys had been written twice
        assert rec["previous"] == {"from": logs[0].parents[1].name, "status": rec["status"],
                                   "key": rec["row_key"], "keys": rec["keys"]}
        assert set(rec["keys"]) == {"alignment", "measurement", "score"}
    _run(world, "models_only=[good,bad]")  # the same rows in a new results folder: every score read from the cache
    doc = json.loads(_cli(world, "cache", "explain", "ctl", "--json", f"output_root={world['out']}").stdout)
    assert {rec["outcome"] for rec in doc} == {"score"}
    for rec in doc:
        assert rec["previous"]["keys"] == rec["keys"] and rec["previous"]["from"] == logs[0].parents[1].name
        assert rec["why"] == [f"same keys as the previous row (results {logs[0].parents[1].name}): a new row in "
                              "this results folder, its score read from the cache"]


def test_explain_says_reused_on_a_rerun_and_names_the_param_that_changed(world):
    _run(world)
    out = _cli(world, "cache", "explain", "ctl", "good", "c0", "drift", f"output_root={world['out']}").stdout
    assert "ctl / good / c0 / ctl.drift: computed" in out
    assert "no earlier row" in out
    # the ingredients: component identity, libraries, inputs' digests, params
    for part in ("identity.name: ctl.drift", "identity.code:", "identity.libraries.numpy:", "inputs.case:",
                 "params.params.gain: 1.0", "params.thresholds.tolerance: 5.0"):
        assert part in out, part
    _run(world)
    out = _cli(world, "cache", "explain", "ctl", "good", f"output_root={world['out']}").stdout
    assert out.count("reused: the row on disk was kept") == 2
    _run(world, "+benchmarks.ctl.metrics.drift.params.gain=2.0")
    out = _cli(world, "cache", "explain", "ctl", "bad", "c1", f"output_root={world['out']}").stdout
    assert "ctl / bad / c1 / ctl.drift: computed" in out
    assert "measurement key changed since the previous row" in out and "params.params.gain: 1.0 -> 2.0" in out
    _run(world, "+benchmarks.ctl.metrics.drift.params.gain=2.0", "+benchmarks.ctl.metrics.drift.thresholds.tolerance=50")
    doc = json.loads(_cli(world, "cache", "explain", "ctl", "bad", "c1", "ctl.drift", "--json",
                          f"output_root={world['out']}").stdout)
    assert doc[0]["outcome"] == "measurement"  # the measurement reused, only scored again
    assert any("params.thresholds.tolerance: 5.0 -> 50" in w for w in doc[0]["why"])
    err = _cli(world, "cache", "explain", "ctl", "goood", f"output_root={world['out']}", code=2).stderr
    assert "did you mean 'good'?" in err


JUDGE_PLUGIN = '''
"""A yes/no probe judge whose answers the test scripts (mode.txt); it logs every question list it is asked."""
from pathlib import Path

from worldrecall.core.hookspecs import hookimpl
from worldrecall.core.judges import JudgeResponse, JudgeSpec

HERE = Path(__file__).parent


class Flaky:
    model_id = "flaky-1"

    def ask(self, video, system_prompt, questions, schema, *, prompt=""):
        with open(HERE / "asked.log", "a") as f:
            f.write(str(video) + "\\n")
        mode = (HERE / "mode.txt").read_text().strip()
        answers = []
        for q in questions:
            if q["id"].startswith("D3_") and mode == "omit":
                continue  # a reply the judge could not be made to answer
            p = float("nan") if q["id"].startswith("D3_") and mode == "nan" else 0.75
            answers.append({"id": q["id"], "p_yes": p})
        return JudgeResponse(answers=answers, usage={}, raw="", model_id=self.model_id)


@hookimpl
def register_judges(register):
    register(JudgeSpec(name="flaky", factory=lambda options: Flaky()))
'''


def test_a_judge_answer_that_is_no_probability_is_no_score_and_is_asked_again(tmp_path):
    site = tmp_path / "site"
    pkg = site / "flakyjudge"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(JUDGE_PLUGIN)
    dist = site / "flakyjudge-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: flakyjudge\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[worldrecall]\nflakyjudge = flakyjudge\n")
    env = dict(os.environ)
    import worldrecall

    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(worldrecall.__file__).parents[1]),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["WORLDRECALL_PLUGINS"] = env.get("WORLDRECALL_PLUGINS", "") + ",flakyjudge"
    world = {"env": env}
    out = tmp_path / "out"

    def run(mode: str) -> dict[tuple[str, str], dict]:
        (pkg / "mode.txt").write_text(mode)
        _cli(world, "run", "experiment=smoke", f"output_root={out}", "only=[wrbench]", "workers=1",
             "progress=false", "tracking=none", "report.enabled=false", "aggregators=[mean]",
             "max_failure_rate=1.0", "benchmarks.wrbench.metrics.probes.params.judge=flaky")
        rows = {}
        for f in (out / "results").glob("*/rows-shard-*.jsonl"):
            for line in f.read_text().splitlines():
                r = json.loads(line)
                if r["metric"] == "wrbench.probes":
                    rows[(r["model"], r["case_id"])] = r
        return rows

    def asked() -> int:
        log = pkg / "asked.log"
        return len(log.read_text().splitlines()) if log.exists() else 0

    rows = run("nan")
    n = asked()
    assert n == len(rows) > 0
    for r in rows.values():  # never a NaN (or any) number: the row failed, saying which answers were unusable
        assert r["status"] == "failed" and "d3" not in r["values"], r
        assert "measure: judge flaky (flaky-1)" in r["reason"] and "D3_POSITION_RELATION=nan" in r["reason"]
    rows = run("omit")
    assert asked() == 2 * n  # nothing of the failed asks was kept: every case is asked again
    assert all(r["status"] == "failed" and "probe_status partial: no answer to D3_" in r["reason"] for r in rows.values())
    rows = run("good")
    assert asked() == 3 * n
    assert all(r["status"] == "ok" and r["values"]["d3"] == round(1.75 / 3, 6) for r in rows.values()), rows
    run("good")
    assert asked() == 3 * n  # a complete answer is kept


def test_a_measurement_the_metric_marks_not_kept_is_scored_and_measured_again_next_run(world):
    partial = "+benchmarks.ctl.metrics.drift.params.partial=true"
    rows = _run(world, partial)
    assert _measured(world) == 4
    for r in rows.values():  # a value, said to be provisional, and no key a rerun could keep
        assert r["status"] == "ok" and r["values"]["drift"] is not None and not r["key"]
        assert "judge left question 2 unanswered (not kept: measured again on the next run)" in r["warnings"]
    assert _info(world).get("scores", {"entries": 0})["entries"] == 0
    assert _info(world).get("measurements", {"entries": 0})["entries"] == 0
    _run(world, partial)
    assert _measured(world) == 8  # asked again
    _run(world)
    _run(world)
    assert _measured(world) == 12  # a complete measurement is kept


def test_a_skip_decided_while_measuring_is_kept_under_the_measurement_key(world):
    skip = "+benchmarks.ctl.metrics.drift.params.skip_bad=true"
    first = _run(world, skip)
    assert _measured(world) == 4
    bad = {k: r for k, r in first.items() if k[0] == "bad"}
    assert {(r["status"], r["reason"], r["info"]["n"]) for r in bad.values()} == {
        ("skipped", f"ctl.drift skipped: no usable phase in {c}", 8) for c in ("c0", "c1")}
    assert _info(world)["skips"]["entries"] == 2
    # a new threshold is a new results folder: every row is settled from the store, the skips included, and
    # no measure() runs (before, the two skipped cases went to a worker and were measured again)
    again = _run(world, skip, "+benchmarks.ctl.metrics.drift.thresholds.tolerance=7.0")
    assert _measured(world) == 4
    for k, r in bad.items():
        assert (again[k]["status"], again[k]["reason"], again[k]["info"]["n"]) == (r["status"], r["reason"], 8)
        assert again[k]["key"] and again[k]["key"] != r["key"]  # a row's key covers the thresholds; final under it
    assert {again[k]["values"]["big"] for k in again if k[0] == "good"} == {0.0}
    # the skip is the measurement's: new content (the case's fingerprint) is measured again, never served
    _video(world["tmp"] / "gen" / "bad" / "c0.mp4", 41)
    third = _run(world, skip, "+benchmarks.ctl.metrics.drift.thresholds.tolerance=7.0")
    assert _measured(world) == 5 and third[("bad", "c0")]["key"] != bad[("bad", "c0")]["key"]
    # other params, another measurement key: all four cases are measured, and the bad ones now score
    fourth = _run(world)
    assert _measured(world) == 9 and fourth[("bad", "c1")]["status"] == "ok"


def test_a_rescore_links_the_cache_log_keys_of_the_metrics_it_did_not_change(tmp_path):
    """The log's keys are kept one part per metric through the blob store: a job that changed one metric's keys
    writes that part and links the others to the earlier job's bytes; the log reads back with every row's keys."""
    from worldrecall.core.data import ScoreRow
    from worldrecall.engine.cache.explain import keys_dir, write_log

    def rows(score_key: str) -> list[ScoreRow]:
        out = []
        for metric, key in (("b.x", score_key), ("b.y", "y" * 64)):
            for case in ("c1", "c2"):
                r = ScoreRow("b", "m", case, metric, {"v": 1.0}, key=f"{key[:60]}{case}",
                             info={"keys": {"alignment": "a" * 64, "measurement": "m" * 64, "score": key}})
                out.append(r)
        return out

    first, second = (write_log(tmp_path / "results" / name, 0, 1, rs, {r.row_key for r in rs}, {}, "use")
                     for name, rs in (("one", rows("1" * 64)), ("two", rows("2" * 64))))
    parts = {p.name: p for p in keys_dir(first).iterdir()}, {p.name: p for p in keys_dir(second).iterdir()}
    assert sorted(parts[0]) == sorted(parts[1]) == ["b.x.json.gz", "b.y.json.gz"]
    assert os.path.samefile(parts[0]["b.y.json.gz"], parts[1]["b.y.json.gz"])  # unchanged: one file on disk
    assert not os.path.samefile(parts[0]["b.x.json.gz"], parts[1]["b.x.json.gz"])
    for log, score in ((first, "1" * 64), (second, "2" * 64)):
        doc = read_log(log)
        assert {(tuple(e["place"]), e["key"], e["keys"]["score"]) for e in doc["rows"]} == {
            (r.row_key, r.key, r.info["keys"]["score"]) for r in rows(score)}
    assert b"2" * 64 not in gzip.decompress(second.read_bytes())  # the per-run part holds no key


@pytest.mark.parametrize("workers", [1, 2])
def test_a_new_results_folder_takes_an_earlier_folders_rows_only_under_the_same_key(world, workers):
    """A config that changes no row's key but writes a new results folder (here ``models_only``, listing every
    model) takes the newest finished folder's rows as they are, byte for byte, without the score or the
    measurement the cache held for them; the cases whose input changed are measured again (in two forked
    workers with ``workers=2``), never taken."""
    import shutil

    first = _run(world)
    assert _measured(world) == 4
    old_dir = next((world["out"] / "results").iterdir())
    old_lines = {tuple(json.loads(ln)[k] for k in ("model", "case_id")): ln
                 for f in old_dir.glob("rows-shard-*.jsonl") for ln in f.read_text().splitlines()}
    for kind in ("scores", "measurements", "skips"):  # rows can no longer come from the cache
        shutil.rmtree(world["out"] / "cache" / kind, ignore_errors=True)
    changed = {("good", "c0"): 7, ("bad", "c1"): 9}
    for (model, case), delta in changed.items():  # these inputs changed: their rows' keys are new
        _video(world["tmp"] / "gen" / model / f"{case}.mp4", delta)

    second = _run(world, "models_only=[bad,good]", workers=workers)
    assert _measured(world) == 6  # the changed cases only
    new_dir = next(p for p in (world["out"] / "results").iterdir() if p != old_dir)
    new_lines = {tuple(json.loads(ln)[k] for k in ("model", "case_id")): ln
                 for f in new_dir.glob("rows-shard-*.jsonl") for ln in f.read_text().splitlines()}
    assert sorted(new_lines) == sorted(old_lines) and len(new_lines) == 4
    for place in new_lines:
        if place in changed:
            assert new_lines[place] != old_lines[place]
            assert second[place]["key"] != first[place]["key"] and second[place]["status"] == "ok"
        else:
            assert new_lines[place] == old_lines[place]  # the earlier row, as it was written
    outcomes = {tuple(e["place"][1:3]): e["outcome"] for e in read_log(new_dir / "meta" / "cache_log.json.gz")["rows"]}
    assert outcomes == {("good", "c0"): "computed", ("good", "c1"): "score", ("bad", "c0"): "score",
                        ("bad", "c1"): "computed"}
    # the same rows read back through the library's reader (the alignment restored from this folder's file)
    from worldrecall.engine.stages.row_store import read_rows, rows_files

    assert [r.to_json() for r in read_rows(rows_files(new_dir)) if (r.model, r.case_id) not in changed] == \
        [r.to_json() for r in read_rows(rows_files(old_dir)) if (r.model, r.case_id) not in changed]
