"""The README's validity table, generated from a run's ``tables/validity.csv`` (never typed by hand).

    python scripts/readme_validity.py --results worldrecall_out/results/<run-key> --write
    python scripts/readme_validity.py --check          # README matches docs/figures/validity_default.csv

``--write`` copies the run's validity table to ``docs/figures/validity_default.csv`` and rewrites the block
between the README's ``<!-- validity-table:begin -->`` / ``<!-- validity-table:end -->`` markers;
``tests/test_readme_figures.py`` checks that the README and that snapshot agree.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SNAPSHOT = ROOT / "docs" / "figures" / "validity_default.csv"
BEGIN, END = "<!-- validity-table:begin -->", "<!-- validity-table:end -->"


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


def block(text: str) -> str:
    """The README's current generated block (between the markers)."""
    a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[a:b].strip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", type=Path, help="a run's results folder (with tables/validity.csv)")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    if a.write:
        shutil.copyfile(a.results / "tables" / "validity.csv", SNAPSHOT)
        text = README.read_text()
        i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
        README.write_text(text[:i] + "\n" + render(pd.read_csv(SNAPSHOT)) + text[j:])
    table = render(pd.read_csv(SNAPSHOT))
    if a.check and block(README.read_text()) != table:
        print("README validity table differs from docs/figures/validity_default.csv; rerun with --write")
        return 1
    if not a.write and not a.check:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
