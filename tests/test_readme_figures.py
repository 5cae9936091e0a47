"""The README's validity table is generated from a run's validity table, and says what that run measured."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

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
