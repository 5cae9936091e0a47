"""The MLflow step as a user meets it: reruns, the printed `mlflow ui` line, the printed scale, fresh stores.

Runs go through the `worldrecall run` entry function on a fresh output root (the toy benchmark keeps them
small); the UI check starts the very command the run printed.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_cli_overrides

from worldrecall.core.data import ScoreRow
from worldrecall.core.hookspecs import hookimpl
from worldrecall.engine.cli import main
from worldrecall.engine.sinks.leaderboard_view import leaderboard_views
from worldrecall.engine.sinks.tracking import tracker as tracking
from worldrecall.engine.sinks.tracking.runs import per_model_metrics
from worldrecall.registry import host as host_mod

mlflow = pytest.importorskip("mlflow")


class _DeclaredToy:
    @hookimpl
    def register_benchmarks(self, register):
        """The toy benchmark declared with its headline (brightness stability), as MemoBench declares its own."""
        from worldrecall import Benchmark

        register(Benchmark("toy", headline=("toy.brightness:stable",)))


@pytest.fixture()
def declared_toy_host():
    host_mod._HOST = host_mod.load_plugins(extra=[toy_plugin, _DeclaredToy()], fresh=True)
    yield host_mod._HOST
    host_mod._HOST = None


def _args(tmp_path: Path, ds: dict) -> list[str]:
    return ["run", *toy_cli_overrides(ds, tmp_path / "out", "workers=1", "aggregator_params.bootstrap.replicates=50",
                                      "aggregator_params.paired.reference=good", "report.enabled=false",
                                      max_side=None)]


def _runs(tmp_path: Path) -> list:
    client = mlflow.tracking.MlflowClient(f"sqlite:///{(tmp_path / 'out').resolve() / 'mlflow.db'}")
    exp = client.get_experiment_by_name("worldrecall")
    return client.search_runs([exp.experiment_id], max_results=1000)


def _tops(runs: list) -> list:
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags]


def test_rerun_of_the_same_config_reuses_the_run(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    assert main(_args(tmp_path, ds)) == 0
    first = _runs(tmp_path)
    assert len(_tops(first)) == 1 and len(first) == 3  # parent + one run per (benchmark, model)
    parent = _tops(first)[0]
    capsys.readouterr()
    assert main(_args(tmp_path, ds)) == 0  # every row resumed: same rows, same outputs
    out = capsys.readouterr().out
    # nothing changed: no output is written again, MLflow is not opened, and the line names the run that stands
    assert "outputs unchanged: " in out and f"MLflow run {parent.info.run_id} stands" in out
    assert sorted(r.info.run_id for r in _runs(tmp_path)) == sorted(r.info.run_id for r in first)
    # without the outputs' record (removed, or from an older version): MLflow's own reuse check, as before
    next((tmp_path / "out" / "results").glob("*/meta/outputs.json")).unlink()
    assert main(_args(tmp_path, ds)) == 0
    out = capsys.readouterr().out
    again = _runs(tmp_path)
    assert sorted(r.info.run_id for r in again) == sorted(r.info.run_id for r in first)  # no duplicates
    assert f"same config and same numbers as run {parent.info.run_id}; nothing logged again" in out
    # reused without MLflow's client (the store is read, not written): the reuse is recorded beside the tables
    rec = json.loads(next((tmp_path / "out" / "results").glob("*/meta/tracking.json")).read_text())
    assert rec["reused"] is True and rec["run_id"] == parent.info.run_id and rec["reused_at"]


def test_rerun_with_other_numbers_supersedes_the_earlier_runs(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    video = Path(ds["generations"]) / "bad" / "c1.mp4"
    good_bytes = video.read_bytes()
    video.write_bytes(b"not a video")  # this case fails on the first run …
    assert main(_args(tmp_path, ds)) == 0
    old_ids = {r.info.run_id for r in _runs(tmp_path)}
    video.write_bytes(good_bytes)  # … and is retried (failed rows are not final) once the file is fixed
    assert main(_args(tmp_path, ds)) == 0
    runs = _runs(tmp_path)
    new = [r for r in runs if r.info.run_id not in old_ids]
    new_parent = next(iter(_tops(new)))
    assert len(new) == 3
    for r in runs:
        if r.info.run_id in old_ids:  # every earlier run, parent and children, says what replaced it
            assert r.data.tags["worldrecall.superseded_by"] == new_parent.info.run_id
            assert r.data.tags["worldrecall.current"] == "false"
        else:
            assert r.data.tags["worldrecall.current"] == "true"


def test_a_rescore_points_to_the_runs_of_a_benchmark_it_did_not_change(tmp_path, toy_host, capsys):
    """Another config whose numbers for a benchmark are those a current run logged (a threshold no case
    crosses) logs no (benchmark, model) runs for it: its run points to them (worldrecall.same_as.<benchmark>),
    and its printed link opens them. When the run that holds them is superseded, the runs pointed to stay
    current; a benchmark nobody points to is superseded as before."""
    key = "benchmarks.toy.metrics.brightness.thresholds.tolerance"
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    video = Path(ds["generations"]) / "bad" / "c1.mp4"
    good_bytes = video.read_bytes()
    video.write_bytes(b"not a video")  # a failed case: fixed before the third run, so its numbers change
    assert main([*_args(tmp_path, ds), f"{key}=100.0"]) == 0
    (first,) = _tops(_runs(tmp_path))
    capsys.readouterr()
    assert main([*_args(tmp_path, ds), f"{key}=200.0"]) == 0  # bad's one case drifts ~37.5: stable at both
    out = capsys.readouterr().out
    runs = _runs(tmp_path)
    (second,) = [r for r in _tops(runs) if r.info.run_id != first.info.run_id]
    kids = lambda run: sorted(r.data.params["model"] for r in runs  # noqa: E731
                              if r.data.tags.get("mlflow.parentRunId") == run.info.run_id)
    assert kids(first) == ["bad", "good"] and kids(second) == []
    assert second.data.tags["worldrecall.same_as.toy"] == first.info.run_id
    assert f"MLflow: toy came out as run {first.info.run_id[:8]} (" in out
    link = next(x for x in out.splitlines() if x.startswith("  toy: ")).split(": ", 1)[1]
    client = mlflow.tracking.MlflowClient(f"sqlite:///{(tmp_path / 'out').resolve() / 'mlflow.db'}")
    view = json.loads(client.get_experiment_by_name("worldrecall").tags[
        "mlflow.sharedViewState." + re.search(r"viewStateShareKey=(\w+)", link).group(1)])
    assert view["searchFilter"].startswith(f"tags.mlflow.parentRunId = '{first.info.run_id}'")
    video.write_bytes(good_bytes)
    assert main([*_args(tmp_path, ds), f"{key}=100.0"]) == 0  # the first config again, with other numbers
    runs = _runs(tmp_path)
    by_id = {r.info.run_id: r for r in runs}
    assert by_id[first.info.run_id].data.tags["worldrecall.current"] == "false"  # superseded by the third run
    held = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == first.info.run_id]
    assert len(held) == 2 and all(r.data.tags["worldrecall.current"] == "true" and
                                  "worldrecall.superseded_by" not in r.data.tags for r in held)  # the second's
    third = [r for r in _tops(runs) if r.info.run_id not in (first.info.run_id, second.info.run_id)]
    assert len(third) == 1 and kids(third[0]) == ["bad", "good"]  # its own numbers: logged


def test_printed_ui_command_uses_the_venv_and_starts_the_ui(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0], "bad": [40]})
    assert main(_args(tmp_path, ds)) == 0
    lines = capsys.readouterr().out.splitlines()
    ui = next(x for x in lines if " ui --backend-store-uri " in x)
    exe = shlex.split(ui)[0]
    assert Path(exe).name == "mlflow" and (Path.cwd() / exe).resolve() == (Path(sys.executable).parent / "mlflow").resolve()
    if tracking.ui_missing_module():
        pytest.skip(f"the ui extra is not installed here ({tracking.ui_missing_module()})")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([*shlex.split(ui), "--port", str(port), "--workers", "1"], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline, ok = time.time() + 120, False
        while time.time() < deadline and proc.poll() is None and not ok:
            try:
                ok = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200
            except OSError:
                time.sleep(1)
        assert ok, (proc.poll(), proc.stdout.read().decode(errors="replace")[-2000:] if proc.poll() is not None else "")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the workers it started: this test's own group
        proc.wait(timeout=30)


def test_printed_link_opens_the_runs_of_this_invocation_in_a_real_browser(tmp_path, declared_toy_host, capsys):
    """The real `mlflow ui`, the link the run prints, headless Chromium: the page lists this invocation's
    per-model runs of the benchmark (not the collapsed parent), ranked, with the benchmark's declared headline
    as metric columns; a screenshot is kept in the test's folder."""
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists() or tracking.ui_missing_module():
        pytest.skip("needs Debian's chromium and the ui extra")
    ds = make_dataset(tmp_path, {"good": [0], "bad": [40]})
    assert main([*_args(tmp_path, ds), "aggregator_params.paired.reference=good"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ui = next(x for x in lines if " ui --backend-store-uri " in x)
    link = next(x for x in lines if x.startswith("  toy: ")).split(": ", 1)[1]
    assert "viewStateShareKey=" in link and "searchFilter" not in link  # a filter in the URL overrides the view
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([*shlex.split(ui), "--port", str(port), "--workers", "1"], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, ok = time.time() + 120, False
        while time.time() < deadline and not ok:
            try:
                ok = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200
            except OSError:
                time.sleep(1)
        assert ok
        url = link.replace("127.0.0.1:5000", f"127.0.0.1:{port}")
        shot = tmp_path / "mlflow_runs.png"
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000", "--window-size=1400,900"]
        dom = subprocess.run([str(chromium), *flags, "--dump-dom", url], capture_output=True, text=True,
                             timeout=180).stdout
        subprocess.run([str(chromium), *flags, f"--screenshot={shot}", url], capture_output=True, timeout=180)
        print(f"screenshot: {shot}")
        (tmp_path / "mlflow_runs.html").write_text(dom)
        text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())  # what the page shows, without its markup
        assert "good · toy" in text and "bad · toy" in text, text[-3000:]
        assert "2 matching runs" in text, text[-3000:]  # the two per-model runs, not the invocation's parent
        # the declared headline (toy.brightness:stable, logged as "brightness") and the rank are columns,
        # with each run's values: good is stable on its case (1) and ranks 1st, bad is not (0) and ranks 2nd
        assert set(re.findall(r'col-id="metrics\.`([^`]+)`"', dom)) == {"rank", "brightness"}  # not .drift
        cells: dict[tuple[str, str], str] = {}
        for seg in dom.split('row-index="')[1:]:  # each grid row (its index first), in every container
            for col, value in re.findall(r'col-id="metrics\.`([^`]+)`".*?class="ag-cell-value">([^<]*)<', seg):
                cells.setdefault((seg.split('"', 1)[0], col), value)
        assert text.index("good · toy") < text.index("bad · toy")  # rows sorted by rank
        assert (cells.get(("0", "rank")), cells.get(("0", "brightness"))) == ("1", "1"), cells
        assert (cells.get(("1", "rank")), cells.get(("1", "brightness"))) == ("2", "0"), cells
        assert shot.is_file() and shot.stat().st_size > 10_000
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_missing_ui_module_prints_the_install_line_first(tmp_path, monkeypatch):
    monkeypatch.setattr(tracking, "UI_MODULES", ("flask", "no_such_ui_module_xyz"))
    t = tracking.Tracker({"experiment": "x"}, tmp_path)
    first, second = t.ui_command().splitlines()[:2]
    assert first.startswith("the MLflow UI needs the ui extra (no_such_ui_module_xyz is not installed): ")
    assert first.endswith("install 'worldrecall[ui]'") and " ui --backend-store-uri " in second


def test_fresh_store_after_the_first_is_a_copy_of_the_migrated_template(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("WORLDRECALL_MLFLOW_TEMPLATE_DIR", str(tmp_path / "tpl"))
    tracking.Tracker({"experiment": "worldrecall"}, tmp_path / "a")
    assert tracking.template_path().is_file()
    caplog.clear()
    with caplog.at_level("INFO"):
        t = tracking.Tracker({"experiment": "worldrecall"}, tmp_path / "b")
    # no schema migration ran (alembic logs each as "Running upgrade a -> b"; MLflow 3.4 logs "Creating initial
    # tables" even for a complete store, so that line says nothing)
    assert not [r for r in caplog.records if "Running upgrade" in r.getMessage()]
    rid = t.start_run("x")
    t.log_batch(rid, metrics={"m": 1.0})
    t.end_run(rid)
    client = mlflow.tracking.MlflowClient(t.uri)
    assert client.get_run(rid).data.metrics == {"m": 1.0}
    # its runs' artifacts go to this store's own folder (MLflow's unused Default experiment keeps the
    # template's location: worldrecall never writes MLflow's tables itself)
    exp = client.get_experiment_by_name("worldrecall")
    assert exp.artifact_location == (tmp_path / "b").resolve().joinpath("mlartifacts").as_uri()


class _ViewAgg:
    """Declares ranked views the way the ranking aggregator and MemoBench's leaderboard do."""

    name = "lb"
    tables: ClassVar[dict[str, str]] = {"x_view": "view", "x_cells": "view_columns"}


def test_mlflow_logs_the_printed_leaderboard_at_the_printed_scale():
    # hand-made views: the metric's own mean is 0.9367 (0-1), the printed column is in points
    base = {"benchmark": "x", "order": 0, "title": "x · all cases", "note": "", "backend": "", "digits": 2,
            "unit": "points", "direction": "↑", "metric": "x.cam"}
    view = pd.DataFrame([{**base, "variant": v, "order": int(v == "all"), "title": f"x · {v}", "model": m,
                          "position": p, "rank": r, "rank_label": lab, "n_cases": 2, "column": "Score",
                          "mean": 0.5, "ci_low": math.nan, "ci_high": math.nan}
                         for v in ("gated", "all")
                         for m, p, r, lab in (("oracle", 0, 1.0, "1"), ("frozen", 1, math.nan, "✗"))])
    cells = pd.DataFrame([{**{k: base[k] for k in ("benchmark", "metric", "unit", "direction", "digits")},
                           "variant": v, "model": m, "column": "CamCtrl", "mean": mean, "ci_low": mean - 1,
                           "ci_high": mean + 1}
                          for m, v, mean in (("oracle", "all", 93.67), ("oracle", "gated", 95.5),
                                             ("frozen", "all", 12.25), ("frozen", "gated", math.nan))])
    host = SimpleNamespace(components={"aggregator": {"lb": _ViewAgg()}}, metrics={}, benchmarks={})
    rows = [ScoreRow("x", m, "c1", "x.cam", {"v": 0.9}) for m in ("oracle", "frozen")]
    result = SimpleNamespace(tables={"x_view": view, "x_cells": cells}, rows=rows)
    per = per_model_metrics(result, host)
    assert per[("x", "oracle")]["leaderboard.CamCtrl"] == 93.67
    assert per[("x", "oracle")]["leaderboard_gated.CamCtrl"] == 95.5
    assert per[("x", "frozen")]["leaderboard.CamCtrl"] == 12.25
    assert math.isnan(per[("x", "frozen")]["leaderboard_gated.CamCtrl"])
    assert per[("x", "oracle")]["rank"] == 1.0 and math.isnan(per[("x", "frozen")]["rank"])
    # the console prints the same numbers under the same label
    printed = {title: df for title, df, _ in leaderboard_views(result, host)}
    all_view = next(df for t, df in printed.items() if t == "x · all")
    cell = all_view.loc[all_view["model"] == "oracle", "CamCtrl (points ↑)"].iloc[0]
    assert cell.startswith("93.67")


def test_link_columns_are_each_declared_headline_as_logged():
    from worldrecall.engine.sinks.tracking.views import headline_keys

    host = host_mod.load_plugins(fresh=True)
    # OPIS declares opis:opis (its primary value: logged under the short name) then three sub-scores
    # (logged as "<metric>.<value>"); MemoBench declares ORS's score, its primary value
    assert headline_keys(host, "opis", []) == ["rank", "opis", "opis.presence", "opis.identity", "opis.structure"]
    assert headline_keys(host, "memobench", []) == ["rank", "ors"]
    # an undeclared benchmark: each metric's primary value, from the rows
    toy = host_mod.load_plugins(extra=[toy_plugin], fresh=True)
    rows = [ScoreRow("toy", "good", "c1", "toy.brightness", {"stable": 1.0, "drift": 0.5})]
    assert headline_keys(toy, "toy", rows) == ["rank", "brightness"]
