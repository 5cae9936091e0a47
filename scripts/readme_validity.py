"""The README's figures from a default run (never typed by hand): the validity table, the gate-neutrality
table and the printed leaderboard.

    python scripts/readme_validity.py --results worldrecall_out/results/<run-key> --write
    python scripts/readme_validity.py --check          # README matches the snapshots in docs/figures/

``--write`` copies the run's ``tables/validity.csv``, ``tables/validity_gates.csv`` and
``tables/leaderboard.txt`` to ``docs/figures/`` and rewrites the README blocks between their markers
(``<!-- validity-table:begin -->``, ``<!-- gate-table:begin -->``, ``<!-- leaderboard:begin -->`` …);
``tests/test_readme_figures.py`` checks that the README and the snapshots agree.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SNAPSHOT = ROOT / "docs" / "figures" / "validity_default.csv"
GATES = ROOT / "docs" / "figures" / "validity_gates_default.csv"
BOARD = ROOT / "docs" / "figures" / "leaderboard_default.txt"
SUITE = ROOT / "docs" / "figures" / "suite_digest.txt"  # the suite these figures were measured on
BEGIN, END = "<!-- validity-table:begin -->", "<!-- validity-table:end -->"
MARKERS = {"validity-table": SNAPSHOT, "gate-table": GATES, "leaderboard": BOARD}
TABLES = {"validity-table": "validity.csv", "gate-table": "validity_gates.csv", "leaderboard": "leaderboard.txt"}


def render(df: pd.DataFrame) -> str:
    """Markdown: one line per targeted (metric value, counterfactual) with the oracle's wins, notes as footnotes."""
    t = df[df["targeted"].astype(str).str.lower() == "true"].copy()
    t["note"] = t["note"].fillna("").astype(str)
    notes: list[str] = []
    lines = ["| metric : value | catches | oracle better on |", "|:---|:---|---:|"]
    for r in t.sort_values(["metric", "value", "counterfactual"]).itertuples(index=False):
        mark = ""
        if r.note:
            if r.note not in notes:
                notes.append(r.note)
            mark = f" [{notes.index(r.note) + 1}]"
        lines.append(f"| {r.metric} : {r.value} | {r.counterfactual.replace('_', ' ')} | "
                     f"{int(r.n_oracle_better)}/{int(r.n_cases)}{mark} |")
    lines.append("")
    lines += [f"[{i + 1}] {n}" for i, n in enumerate(notes)]
    return "\n".join(lines).rstrip() + "\n"


def render_gates(df: pd.DataFrame) -> str:
    """Markdown: per benchmark gate and model, passes, agreement with the oracle, and whether it holds."""
    lines = ["| gate | model | passed | same as oracle | expected | holds |", "|:---|:---|---:|---:|:---|:---|"]
    for r in df.itertuples(index=False):
        holds = "" if pd.isna(r.holds) else ("yes" if str(r.holds).lower() == "true" else "**no**")
        lines.append(f"| {r.gate.split(':')[0]} | {r.model.replace('_', ' ')} | {int(r.n_passed)}/{int(r.n_cases)} | "
                     f"{int(r.n_same_as_oracle)}/{int(r.n_cases)} | {r.expected} | {holds} |")
    return "\n".join(lines) + "\n"


def render_board(text: str) -> str:
    """The printed leaderboard as a fenced block."""
    return "```\n" + text.strip("\n") + "\n```\n"


def rendered(name: str, tables: Path | None = None) -> str:
    """A snapshot (or, with ``tables``, a run's own ``tables/`` file) rendered as its README block."""
    path = MARKERS[name] if tables is None else Path(tables) / TABLES[name]
    if name == "validity-table":
        return render(pd.read_csv(path))
    if name == "gate-table":
        return render_gates(pd.read_csv(path))
    return render_board(path.read_text())


def block(text: str, name: str = "validity-table") -> str:
    """The README's current generated block (between the markers)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    a, b = text.index(begin) + len(begin), text.index(end)
    return text[a:b].strip("\n") + "\n"


def replace_block(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    a, b = text.index(begin) + len(begin), text.index(end)
    return text[:a] + "\n" + body + text[b:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", type=Path, help="a run's results folder (with tables/validity.csv)")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    if a.write:
        tables = a.results / "tables"
        for name, dst in MARKERS.items():
            shutil.copyfile(tables / TABLES[name], dst)
        cfg = json.loads((a.results / "meta" / "resolved_config.json").read_text())
        manifest = json.loads((Path(cfg["suite"]["root"]) / "manifest.json").read_text())
        SUITE.write_text(f"suite {Path(cfg['suite']['root']).name} content sha256 {manifest['content_digest']}\n")
        text = README.read_text()
        for name in MARKERS:
            text = replace_block(text, name, rendered(name))
        README.write_text(text)
    bad = [name for name in MARKERS if block(README.read_text(), name) != rendered(name)]
    if a.check and bad:
        print(f"README blocks differ from docs/figures/ ({', '.join(bad)}); rerun with --write")
        return 1
    if not a.write and not a.check:
        print("\n".join(rendered(name) for name in MARKERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
