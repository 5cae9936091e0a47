"""The README's and docs/validity.md's figures from a default run (never typed by hand).

    python scripts/readme_validity.py --results worldrecall_out/results/<run-key> --write
    python scripts/readme_validity.py --check          # the documents match the snapshots in docs/figures/

``--write`` copies the run's ``tables/`` files the figures come from (``ranking.csv``: the ranked views'
cells, which a run writes one file per benchmark, ``ranking/<benchmark>.csv``, joined here; ``validity.csv``,
``validity_gates.csv``; ``leaderboard.txt``: every view as ``view=full`` prints it) to ``docs/figures/`` and
rewrites each generated block between its markers (``<!-- verdict:begin -->`` …):

- README.md ``verdict``: MemoBench's compact view, as the console prints it;
- README.md ``headline-validity``: each benchmark's ranked value against every counterfactual;
- docs/validity.md ``leaderboard``: the compact view of every benchmark with its legend, as printed;
- docs/validity.md ``gate-table`` and ``validity-table``: gate neutrality and the full validity matrix.

``tests/test_readme_figures.py`` checks that the documents and the snapshots agree, and that a fresh default
run regenerates them.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from a checkout: this checkout's worldrecall

from worldrecall.engine.sinks.leaderboard_view import compact_text_of

README = ROOT / "README.md"
VALIDITY_DOC = ROOT / "docs" / "validity.md"
FIGURES = ROOT / "docs" / "figures"
SUITE = FIGURES / "suite_digest.txt"  # the suite these figures were measured on
# a run's tables/ file -> its snapshot
SNAPSHOTS = {"ranking.csv": FIGURES / "ranking_default.csv", "validity.csv": FIGURES / "validity_default.csv",
             "validity_gates.csv": FIGURES / "validity_gates_default.csv",
             "leaderboard.txt": FIGURES / "leaderboard_default.txt"}
VERDICT_BENCHMARK = "memobench"  # the README's first picture


def read_views(path: Any) -> pd.DataFrame:
    """A ``ranking.csv`` read back as the view cells it was written from (an empty backend stays empty)."""
    df = pd.read_csv(path)
    df["backend"] = df["backend"].fillna("")
    return df


def render_verdict(path: Any) -> str:
    """One benchmark's compact view (title and table), as the console prints it."""
    views = read_views(path)
    return "```\n" + compact_text_of(views[views["benchmark"] == VERDICT_BENCHMARK], legend=False).strip("\n") \
        + "\n```\n"


def render_compact(path: Any) -> str:
    """Every benchmark's compact view and the legend under them, as the console prints them."""
    return "```\n" + compact_text_of(read_views(path)).strip("\n") + "\n```\n"


def render_headlines(path: Any) -> str:
    """Markdown: per benchmark, each value of its ranked metric (not its protocol gate) against every
    counterfactual: on how many cases the oracle scores better; bold where that failure is the value's target."""
    from worldrecall.core.components import split_ref
    from worldrecall.registry.host import load_plugins

    df = pd.read_csv(path)
    cfs = sorted(df["counterfactual"].unique())
    lines = ["| ranked value | " + " | ".join(c.replace("_", " ") for c in cfs) + " |",
             "|:---|" + "---:|" * len(cfs)]
    for name, decl in sorted(load_plugins().benchmarks.items()):
        metric = split_ref(decl.ranking)[0]
        mine = df[(df["metric"] == metric) & (df["metric"] + ":" + df["value"] != (decl.protocol_gate or ""))]
        for value, rows in mine.groupby("value", sort=True):
            cells = {r.counterfactual: (f"{int(r.n_oracle_better)}/{int(r.n_cases)}",
                                        str(r.targeted).lower() == "true") for r in rows.itertuples(index=False)}
            row = [f"**{c[0]}**" if c[1] else c[0] for c in (cells.get(cf, ("–", False)) for cf in cfs)]
            lines.append(f"| {metric} : {value} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


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


# block -> (the document holding it, the tables/ file it is rendered from, how)
BLOCKS: dict[str, tuple[Path, str, Callable[[Any], str]]] = {
    "verdict": (README, "ranking.csv", render_verdict),
    "headline-validity": (README, "validity.csv", render_headlines),
    "leaderboard": (VALIDITY_DOC, "ranking.csv", render_compact),
    "gate-table": (VALIDITY_DOC, "validity_gates.csv", lambda p: render_gates(pd.read_csv(p))),
    "validity-table": (VALIDITY_DOC, "validity.csv", lambda p: render(pd.read_csv(p))),
}


def run_file(tables: Path, table: str) -> bytes:
    """A run's ``tables/`` file as one file: ``ranking.csv`` is written one file per benchmark
    (``ranking/<benchmark>.csv``), read here as their concatenation (the header once), in benchmark order."""
    whole = Path(tables) / table
    if whole.is_file():
        return whole.read_bytes()
    parts = sorted((Path(tables) / whole.stem).glob(f"*{whole.suffix}"))
    if not parts:
        raise FileNotFoundError(f"{whole}: neither the file nor its per-benchmark folder {whole.stem}/ is there")
    texts = [p.read_bytes() for p in parts]
    return texts[0] + b"".join(t.split(b"\n", 1)[1] for t in texts[1:])


def rendered(name: str, tables: Path | None = None) -> str:
    """A block rendered from its snapshot (or, with ``tables``, from a run's own ``tables/`` file)."""
    _, table, how = BLOCKS[name]
    return how(SNAPSHOTS[table] if tables is None else io.BytesIO(run_file(tables, table)))


def block(text: str, name: str) -> str:
    """A document's current generated block (between the markers)."""
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
        for table, dst in SNAPSHOTS.items():
            dst.write_bytes(run_file(tables, table))
        cfg = json.loads((a.results / "meta" / "resolved_config.json").read_text())
        manifest = json.loads((Path(cfg["suite"]["root"]) / "manifest.json").read_text())
        SUITE.write_text(f"suite {Path(cfg['suite']['root']).name} content sha256 {manifest['content_digest']}\n")
        for doc in {d for d, _, _ in BLOCKS.values()}:
            text = doc.read_text()
            for name, (where, _, _) in BLOCKS.items():
                if where == doc:
                    text = replace_block(text, name, rendered(name))
            doc.write_text(text)
    bad = [name for name, (doc, _, _) in BLOCKS.items() if block(doc.read_text(), name) != rendered(name)]
    if a.check and bad:
        print(f"generated blocks differ from docs/figures/ ({', '.join(bad)}); rerun with --write")
        return 1
    if not a.write and not a.check:
        print("\n".join(rendered(name) for name in BLOCKS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
