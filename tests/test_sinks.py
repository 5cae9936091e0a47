"""Outputs are sinks over one frozen result: isolated, in a declared order; the job resolves its config once
and its exit code comes back through Hydra's own job returns."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_cli_overrides, toy_config

from worldrecall.engine.cli import hydra_run
from worldrecall.engine.job import run_plain
from worldrecall.engine.sinks import SinkContext, job_sinks, merge_sinks, shard_sinks, write_sinks
from worldrecall.engine.sinks.base import EXIT_OUTPUT_FAILED
from worldrecall.engine.stages.result import build_result
from worldrecall.registry.host import load_plugins


@pytest.fixture()
def host():
    return load_plugins(extra=[toy_plugin], fresh=True)


class _Writes:
    def __init__(self, name: str, folder: Path):
        self.name, self.folder = name, folder

    def write(self, result, ctx):
        p = self.folder / f"{self.name}.txt"
        p.write_text(f"{result.n_cases} cases; before me: {[q.name for q in ctx.written]}")
        return [p]


class _Crashes:
    name = "crashes"

    def write(self, result, ctx):
        raise RuntimeError("disk on fire")


def _result(tmp_path, max_failure_rate=1.0):
    from worldrecall.core.data import ScoreRow
    from worldrecall.engine.stages.config import resolve_config

    rows = [ScoreRow("toy", "m", f"c{i}", "toy.brightness", {"v": float(i)}) for i in range(3)]
    cfg = resolve_config({"max_failure_rate": max_failure_rate, "output_root": str(tmp_path)})
    return build_result(tmp_path, rows, {}, cfg)


def test_a_crashing_sink_is_one_line_the_later_sinks_still_write_and_the_code_says_so(tmp_path, capsys):
    result = _result(tmp_path)
    ctx = SinkContext(host=None)
    code = write_sinks(result, ctx, [_Writes("first", tmp_path), _Crashes(), _Writes("last", tmp_path)])
    assert code == EXIT_OUTPUT_FAILED == 5
    assert ctx.failed == ["crashes"] and [p.name for p in ctx.written] == ["first.txt", "last.txt"]
    assert (tmp_path / "last.txt").read_text() == "3 cases; before me: ['first.txt']"  # each sees the earlier paths
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: output crashes failed: RuntimeError: disk on fire (the other outputs were written; "
                   "rerun the same command to retry)"]
    assert set(ctx.seconds) == {"first", "crashes", "last"}


def test_a_failed_run_keeps_its_own_exit_code_when_a_sink_also_fails(tmp_path):
    result = dataclasses.replace(_result(tmp_path), exit_code=3)
    assert write_sinks(result, SinkContext(host=None), [_Crashes()]) == 3


def test_the_result_is_frozen_so_no_sink_changes_what_the_next_sees(tmp_path):
    result = _result(tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.rows = ()  # type: ignore[misc]
    assert isinstance(result.rows, tuple) and result.provenance.config_hash == result.provenance.config_hash
    assert len(result.provenance.input_manifest_sha256) == 64


def test_the_sink_lists_say_what_each_job_writes_and_in_which_order():
    names = [s.name for s in job_sinks()]
    assert names == ["tables", "mlflow_start", "table_text", "plots", "report", "submission", "timing", "job_summary",
                     "mlflow", "outputs_record", "console", "disk"]
    # a shard writes partial files, logs and prints nothing
    assert [s.name for s in shard_sinks()] == [n for n in names[:8] if n != "mlflow_start"]
    assert [s.name for s in merge_sinks(2, None, "d")] == names


def test_a_job_resolves_its_config_once(tmp_path, host, monkeypatch):
    from omegaconf import OmegaConf

    from worldrecall.engine.stages import config as config_mod

    calls = []
    real = OmegaConf.structured

    def counting(obj, *a, **k):
        if obj is config_mod.WorldrecallSchema:
            calls.append(1)
        return real(obj, *a, **k)

    monkeypatch.setattr(OmegaConf, "structured", counting)
    ds = make_dataset(tmp_path, {"good": [0, 1]})
    assert run_plain(toy_config(tmp_path, ds), host=host) == 0
    assert len(calls) == 1  # the runner, the report and the sinks read the job's resolved config


def test_the_worst_job_exit_code_comes_back_through_hydras_job_returns(tmp_path, toy_host):
    """A multirun where one job ends past max_failure_rate (exit 3) and one passes: the command exits 3."""
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    ov = toy_cli_overrides(ds, tmp_path / "out", "workers=1", "aggregator_params.bootstrap.replicates=50",
                           "tracking=none")
    (Path(ds["generations"]) / "bad" / "c1.mp4").unlink()  # one of 4 cases fails: generation missing
    assert hydra_run([*ov, "max_failure_rate=1.0"]) == 0
    assert hydra_run([*ov, "max_failure_rate=0.1"]) == 3  # a run: its own code
    assert hydra_run(["-m", *ov, "max_failure_rate=0.0,1.0"]) == 3
    assert hydra_run(["-m", *ov, "max_failure_rate=1.0,0.9"]) == 0


def test_hydra_flags_that_would_run_the_job_outside_the_launcher_are_refused(tmp_path, capsys):
    """`--config-dir` & co. would run the job through hydra.main, which drops its exit code: exit 2 instead."""
    assert hydra_run(["--config-dir", str(tmp_path), f"output_root={tmp_path}"]) == 2
    assert capsys.readouterr().err.strip() == ("error: `worldrecall run` does not take Hydra's --config-dir; use "
                                               "hydra.searchpath=[file:///abs/dir]")
    assert not (tmp_path / "results").exists()  # nothing ran


CSV_SINK = '''
"""A third party's output: every ok row's values as a flat CSV for another tool."""
import csv

from worldrecall import Sink, hookimpl


class FlatCsv(Sink):
    name = "flat_csv"

    def write(self, result, ctx):
        out = result.results_dir / "flat.csv"
        with open(out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "case", "metric", "value", "number"])
            for r in sorted(result.rows, key=lambda r: r.row_key):
                for k, v in sorted(r.values.items()):
                    w.writerow([r.model, r.case_id, r.metric, k, v])
        return [out]


@hookimpl
def register_sinks(register):
    register(FlatCsv)
'''


def test_a_third_party_sink_is_registered_by_hook_and_written_with_the_job(tmp_path):
    """``register_sinks``: a plugin's CSV exporter runs with every job, after the built-in files and before
    MLflow (which logs the file it returns), through the same CLI users type."""
    import csv
    import json

    from helpers.tmp_plugin import env_with, install, worldrecall_cli

    site = tmp_path / "site"
    install(site, "flatcsv", CSV_SINK)
    install(site, "toyplug", (Path(__file__).parent / "helpers" / "toy_plugin.py").read_text())
    env = env_with(site, "flatcsv", "toyplug")
    listed = worldrecall_cli(env, "plugins")
    assert listed.returncode == 0 and "flat_csv" in listed.stdout, listed.stdout + listed.stderr
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    proc = worldrecall_cli(env, "run", *toy_cli_overrides(ds, tmp_path / "out"), "workers=1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    flat = list((tmp_path / "out" / "results").glob("*/flat.csv"))
    assert len(flat) == 1
    lines = list(csv.reader(flat[0].open()))
    rows = [json.loads(x) for f in flat[0].parent.glob("rows-shard-*.jsonl") for x in f.read_text().splitlines()]
    assert len(lines) - 1 == sum(len(r["values"]) for r in rows) > 0
    timing = json.loads((flat[0].parent / "meta" / "timing.json").read_text())
    assert "outputs.flat_csv" in timing  # it ran before timing, with the other file sinks
