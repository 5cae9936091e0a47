"""The README's figures are generated from a run's tables, and a fresh default run reproduces them.

The last tests regenerate every README block (validity table, gate table, printed leaderboard) from the
session's one fresh default run (``default_run`` in ``tests/conftest.py``: ``worldrecall run output_root=<tmp>``)
with ``scripts/readme_validity.py``'s own functions, and compare them with README.md and ``docs/figures/``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("readme_validity", ROOT / "scripts" / "readme_validity.py")
rv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rv)


def test_render_lists_targeted_cells_with_counts_and_notes():
    df = pd.DataFrame([
        {"metric": "m.ors", "value": "score", "counterfactual": "forgetful", "n_cases": 24, "n_oracle_better": 24,
         "targeted": True, "note": ""},
        {"metric": "m.id", "value": "score", "counterfactual": "appearance_drift", "n_cases": 24,
         "n_oracle_better": 12, "targeted": True, "note": "drift lands in discarded patches"},
        {"metric": "m.ors", "value": "score", "counterfactual": "teleport", "n_cases": 24, "n_oracle_better": 3,
         "targeted": False, "note": ""},
    ])
    assert rv.render(df) == ("| metric : value | catches | oracle better on |\n|:---|:---|---:|\n"
                             "| m.id : score | appearance drift | 12/24 [1] |\n"
                             "| m.ors : score | forgetful | 24/24 |\n\n[1] drift lands in discarded patches\n")


def test_readme_figures_match_the_default_run_snapshots():
    text = rv.README.read_text()
    for name in rv.MARKERS:
        assert rv.block(text, name) == rv.rendered(name), name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(rv.MARKERS))
def test_a_fresh_default_run_regenerates_the_readme_block(default_run, name):
    """What `scripts/readme_validity.py --write` would put in the README from a fresh run is what is there."""
    fresh = rv.rendered(name, default_run.tables)
    assert rv.block(rv.README.read_text(), name) == fresh, (name, default_run.suite_digest())
    assert rv.MARKERS[name].read_bytes() == (default_run.tables / rv.TABLES[name]).read_bytes(), name


@pytest.mark.slow
def test_a_fresh_default_run_prints_the_readme_leaderboard(default_run):
    board = (default_run.tables / rv.TABLES["leaderboard"]).read_text().strip("\n")
    assert board and board in default_run.stdout  # the file is what the console printed
    assert rv.block(rv.README.read_text(), "leaderboard") == rv.render_board(board + "\n")


@pytest.mark.slow
def test_a_fresh_default_run_builds_the_suite_the_figures_were_measured_on(default_run):
    assert default_run.suite_digest() == rv.SUITE.read_text()
