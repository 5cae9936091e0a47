"""The README's and docs/validity.md's figures are generated from a run's tables, and a fresh default run
reproduces them.

The slow tests regenerate every generated block (the README's MemoBench picture and headline-validity
matrix; docs/validity.md's printed leaderboard, gate table and validity table) from the session's one fresh
default run (``default_run`` in ``tests/conftest.py``: ``worldrecall run output_root=<tmp>``) with
``scripts/readme_validity.py``'s own functions, and compare them with the documents and ``docs/figures/``;
the printed blocks must be what that run printed. The README holds no other measured figure (speed lines
name their command and point to docs/performance.md).
"""

from __future__ import annotations

import importlib.util
import re
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


def test_generated_blocks_match_the_default_run_snapshots():
    for name, (doc, _, _) in rv.BLOCKS.items():
        assert rv.block(doc.read_text(), name) == rv.rendered(name), (doc.name, name)


def test_the_readme_is_read_in_five_minutes():
    """Issue 38: the first screen answers what it measures, install, scoring your model, reading the results."""
    text = rv.README.read_text()
    assert len(text.splitlines()) <= 200
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads[:3] == ["## Install and run", "## Scoring your own model", "## Reading the results"]
    names = {"MemoBench": "memobench", "OPIS": "opis", "Scene Memory F1": "scene_memory", "WRBench": "wrbench"}
    for bench, name in names.items():
        assert f"**{bench}" in text and f"only=[{name}]" in text  # each benchmark's layout on disk, its command
    assert "worldrecall models fetch" in text


def test_every_readme_link_to_a_file_resolves():
    text = rv.README.read_text()
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith("http"):
            assert (rv.ROOT / target).exists(), target


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(rv.BLOCKS))
def test_a_fresh_default_run_regenerates_the_block(default_run, name):
    """What `scripts/readme_validity.py --write` would put in the README or docs/validity.md from a fresh run
    is what is there."""
    doc, _, _ = rv.BLOCKS[name]
    assert rv.block(doc.read_text(), name) == rv.rendered(name, default_run.tables), (name, default_run.suite_digest())


@pytest.mark.slow
@pytest.mark.parametrize("table", sorted(rv.SNAPSHOTS))
def test_a_fresh_default_run_writes_the_snapshots(default_run, table):
    assert rv.SNAPSHOTS[table].read_bytes() == rv.run_file(default_run.tables, table), table


@pytest.mark.slow
@pytest.mark.parametrize("name", ["verdict", "leaderboard"])
def test_the_printed_blocks_are_what_a_fresh_default_run_prints(default_run, name):
    """The README's picture and docs/validity.md's printout are the console's compact view, verbatim."""
    doc, _, _ = rv.BLOCKS[name]
    printed = rv.block(doc.read_text(), name).removeprefix("```\n").removesuffix("```\n")
    assert printed.strip("\n") in default_run.stdout
    assert max(len(line) for line in printed.splitlines()) <= 120


@pytest.mark.slow
def test_a_fresh_default_run_builds_the_suite_the_figures_were_measured_on(default_run):
    assert default_run.suite_digest() == rv.SUITE.read_text()
