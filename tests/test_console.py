"""What a user reads after `worldrecall run`, through the CLI in fresh output roots: the compact leaderboard
fits 120 columns and says where the full tables are; `view=full` prints the wide views; no third-party INFO
chatter unless `verbose=true`; a bad `view` is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from worldrecall.engine.sinks.leaderboard_view import WIDTH

SMOKE = "experiment=smoke"  # a 2-case suite, every benchmark, MLflow and the report on


def _run(root: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_LOGGING_LEVEL", "COLUMNS")}
    # a fresh MLflow store template, as on a user's first run: MLflow creates its tables (and says so at INFO)
    env["WORLDRECALL_MLFLOW_TEMPLATE_DIR"] = str(root / "mlflow-template")
    return subprocess.run([sys.executable, "-m", "worldrecall.engine.cli", "run", SMOKE, f"output_root={root}",
                           *overrides], capture_output=True, text=True, env=env, timeout=900, check=False)


@pytest.fixture(scope="module")
def default_view(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("console")
    return root, _run(root)


def test_the_default_view_fits_120_columns(default_view):
    root, done = default_view
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    # the leaderboard part: from the first view's title to the line saying where the full tables are
    board = out[out.index("== memobench"):out.index("full tables (view=full):")]
    assert max(len(line) for line in board.splitlines()) <= WIDTH
    for bench in ("memobench", "opis", "scene_memory", "wrbench", "mind"):
        assert f"== {bench} · camera-gated view" in board
    assert "all cases (" not in board and "PSNR" not in board  # the wide views stay in the file
    results = next(root.glob("results/*"))
    line = next(x for x in out.splitlines() if x.startswith("full tables (view=full): "))
    assert line.endswith(f"{results / 'tables' / 'leaderboard.txt'}; the report and MLflow below")
    # the file holds every view, as `view=full` prints them
    assert "== memobench · all cases" in (results / "tables" / "leaderboard.txt").read_text()


def test_no_third_party_info_chatter_by_default(default_view):
    _, done = default_view
    both = done.stdout + done.stderr
    assert "INFO mlflow" not in both and "alembic" not in both  # a fresh MLflow store was created
    assert "font cache" not in both


def test_view_full_prints_the_wide_tables_and_verbose_lets_info_through(tmp_path):
    done = _run(tmp_path, "view=full", "verbose=true")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "== memobench · all cases" in done.stdout and "PSNR (dB ↑)" in done.stdout
    assert "full tables (view=full):" not in done.stdout
    assert "INFO mlflow" in done.stdout + done.stderr  # MLflow's own lines, asked for


def test_a_bad_view_is_one_line_and_exit_2(tmp_path):
    done = _run(tmp_path, "view=wide")
    assert done.returncode == 2
    assert "view='wide': expected one of compact, full" in done.stderr
    assert not (tmp_path / "results").exists()  # stopped before any work
