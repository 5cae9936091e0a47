"""A typo on the command line is exit 2 and one line (name, known names, did-you-mean), before any work.

Every test runs the `worldrecall` entry function the way a user types it, on a fresh output root; the
default config's checks fire before the synthetic suite would be built, so nothing is rendered.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers.toy_plugin import make_dataset, toy_cli_overrides

from worldrecall.engine.cli import main
from worldrecall.registry import host as host_mod
from worldrecall.registry.names import did_you_mean, unknown_name


@pytest.fixture()
def builtin_host():
    host_mod._HOST = None
    yield
    host_mod._HOST = None


def _run(tmp_path: Path, *overrides: str) -> int:
    return main(["run", f"output_root={tmp_path / 'out'}", "tracking=none", "progress=false", *overrides])


@pytest.mark.parametrize(("override", "line"), [
    ("only=[memobnech]",
     "error: only: unknown benchmark 'memobnech'; known: memobench, mind, opis, scene_memory, wrbench; did you mean 'memobench'?"),
    ("models_only=[oracel]",
     ("error: models_only: unknown model 'oracel'; known: appearance_drift, forgetful, frozen_camera, "
     "hallucinated_background, oracle, state_reset, teleport, wrong_trajectory; did you mean 'oracle'?")),
    ("+benchmarks.memobench.metrics.orz={}", "error: benchmarks.memobench.metrics: unknown metric 'orz'; known: "),
    ("models.flow=dis_flw", ("error: models.flow: unknown flow backend 'dis_flw'; known: dis_flow, raft_large; "
                            "did you mean 'dis_flow'?")),
    ("models.flwo=dis_flow", "error: models: unknown role 'flwo'; known: "),
    ("models.set=clasical", ("error: models.set: unknown backend set 'clasical'; known: classical, reference; "
                            "did you mean 'classical'?")),
    ("suite.builder=synthetc", ("error: suite.builder: unknown suite 'synthetc'; known: synthetic; "
                               "did you mean 'synthetic'?")),
    ("suite=synthetc", ("error: suite=synthetc: unknown suite option 'synthetc'; known: none, synthetic; "
                       "did you mean 'synthetic'?")),
    ("only=[]", ("error: the run selects no benchmark (configured: memobench, scene_memory, opis, wrbench, mind; only=[]); "
                "set allow_empty=true to allow an empty run")),
])
def test_unknown_name_is_exit_2_with_one_line_before_any_work(tmp_path, builtin_host, capsys, override, line):
    assert _run(tmp_path, override) == 2
    captured = capsys.readouterr()
    err = [x for x in captured.err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith(line), err
    assert "Traceback" not in captured.err and "no scores" not in captured.out
    # nothing was built, scored or written: no suite in the cache, no results folder
    assert not (tmp_path / "out" / "cache" / "synthetic").exists()
    assert not (tmp_path / "out" / "results").exists()


def test_metric_typo_names_the_close_metric(tmp_path, builtin_host, capsys):
    assert _run(tmp_path, "+benchmarks.memobench.metrics.orz={}") == 2
    assert capsys.readouterr().err.strip().endswith("; did you mean 'ors'?")


def _toy(tmp_path: Path, ds: dict) -> list[str]:
    return toy_cli_overrides(ds, None, "workers=1", max_side=None)


def test_models_only_typo_on_generation_folders(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0], "bad": [50]})
    assert _run(tmp_path, *_toy(tmp_path, ds), "models_only=[goood]") == 2
    assert capsys.readouterr().err.strip() == ("error: models_only: unknown model 'goood'; known: bad, good; "
                                               "did you mean 'good'?")
    # a valid name passes; `models.<role>=` works without `+` (roles come from plugins)
    assert _run(tmp_path, *_toy(tmp_path, ds), "models_only=[good]", "models.flow=dis_flow") == 0


def test_zero_cases_is_an_error_unless_allowed(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": []})  # a data root that lists no case
    assert _run(tmp_path, *_toy(tmp_path, ds)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the run selects no case (benchmarks: toy") and "allow_empty=true" in err
    assert _run(tmp_path, *_toy(tmp_path, ds), "allow_empty=true") == 0


def test_did_you_mean_wording():
    assert did_you_mean("memobnech", ["opis", "memobench"]) == "did you mean 'memobench'?"
    assert did_you_mean("zzz", ["opis", "memobench"]) == ""
    assert unknown_name("model", "x", [], "models_only") == "models_only: unknown model 'x'; known: none"


def test_version_lists_package_and_plugins():
    out = subprocess.run([sys.executable, "-m", "worldrecall.engine.cli", "--version"], capture_output=True,
                         text=True, timeout=120, check=False, cwd=Path(__file__).parents[1])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    from worldrecall import __version__

    assert lines[0] == f"worldrecall {__version__}"
    names = {line.split()[0] for line in lines[1:]}
    assert {"memobench", "opis", "scene_memory", "synthetic", "models"} <= names


@pytest.mark.parametrize(("override", "hint"), [
    ("video.max_byte=1G", "did you mean 'video.max_bytes'?"),
    ("vidoe.max_bytes=1G", "did you mean 'video'?"),
    ("report.enabeld=false", "did you mean 'report.enabled'?"),
])
def test_a_misspelled_config_key_is_exit_2_with_a_did_you_mean(tmp_path, capsys, override, hint):
    assert _run(tmp_path, override) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and err[0].endswith(hint)
