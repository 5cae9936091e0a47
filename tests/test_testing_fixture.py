"""The plugin authors' fixture (``worldrecall.testing``: ``worldrecall_run``), tested as pytest tests its own
``pytester``: a generated test file runs in a fresh pytest session that loads the fixture with ``-p``."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "metric-plugin"

AUTHOR_TESTS = '''
import numpy as np
import pytest
import worldrecall_colour_shift

from worldrecall import Metric, Value, hookimpl
from worldrecall.testing import PluginLoadError


def test_example_plugin_rows(worldrecall_run):
    run = worldrecall_run(plugins=[worldrecall_colour_shift], metrics=["colour_shift"])
    run.assert_ok()
    rows = run.rows_for("memobench.colour_shift")
    assert sorted(r["model"] for r in rows) == ["appearance_drift", "oracle"]
    assert {r["metric"] for r in run.rows} == {"memobench.colour_shift"}  # only the plugin's metric ran
    for r in rows:  # score = max(0, 1 - shift / max_shift), max_shift 30 (the plugin's default threshold)
        assert r["status"] == "ok"
        assert r["values"]["score"] == pytest.approx(max(0.0, 1.0 - r["values"]["shift"] / 30.0))
    shift = {r["model"]: r["values"]["shift"] for r in rows}
    assert shift["oracle"] < shift["appearance_drift"]  # the drifting model comes back in other colours
    cases = run.tables["cases"]  # every benchmark's per-case table (written one file per metric)
    assert len(cases[cases["metric"] == "memobench.colour_shift"]) == 2
    assert run.results_dir is not None and (run.results_dir / "tables" / "cases" / "memobench" / "memobench.colour_shift.csv").is_file()


class Broken(Metric):
    name = "memobench.broken"
    benchmark = "memobench"
    version = "1"
    description = "always raises"
    primary = "score"
    values = {"score": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="never computed")}

    def measure(self, case, alignment, ctx):
        raise RuntimeError("boom 42")

    def score(self, m, thresholds):
        return {"score": 1.0}


class BrokenPlugin:
    @hookimpl
    def register_metrics(self, register):
        register(Broken)


def test_failing_plugin_is_reported(worldrecall_run):
    run = worldrecall_run(plugins=[BrokenPlugin()], metrics=["broken"])
    assert run.exit_code == 3  # every case failed: past max_failure_rate
    run.assert_ok()


class NotRegistering:
    @hookimpl
    def register_metrics(self, register):
        raise ValueError("cannot register")


def test_registration_failure_raises(worldrecall_run):
    with pytest.raises(PluginLoadError, match="NotRegistering.*cannot register"):
        worldrecall_run(plugins=[NotRegistering()], metrics=["broken"])
'''


def test_fixture_runs_a_plugin_and_reports_a_failing_one(pytester, monkeypatch):
    # the example plugin, importable but not installed; the session runs in its own process, as a plugin
    # author's does: an in-process one takes back the modules it imported (PIL's image plugins among them), and
    # a later test of this process saving a PNG then found PIL's registry without PNG
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(EXAMPLE), os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(test_author=AUTHOR_TESTS)
    result = pytester.runpytest_subprocess("-p", "worldrecall.testing", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    # the failing test names the metric, the case and the exception, and the exit code
    result.stdout.fnmatch_lines(["*test_failing_plugin_is_reported*",
                                 "*worldrecall run exited 3 (2 failed row(s))*",
                                 "*memobench.broken appearance_drift/*: failed: measure: *RuntimeError: boom 42*"])


def test_fixture_is_a_published_pytest_plugin():
    """``pip install worldrecall`` makes the fixture available: a ``pytest11`` entry point named as the
    module, so ``-p worldrecall.testing`` (as above) and the installed entry point are one plugin."""
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert eps == {"worldrecall.testing": "worldrecall.testing"}
