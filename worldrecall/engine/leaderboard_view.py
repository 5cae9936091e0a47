"""The printed leaderboard: the camera-gated view first, the all-cases view beside it, units and directions.

For a benchmark whose aggregator declares leaderboard tables (kinds ``leaderboard_gated``,
``leaderboard_intervals``, ``leaderboard_columns``), those tables are printed as they are — one scale per
column, the aggregator's own. Models that never passed the gate are marked and listed last, never ranked
above models that did. Any other benchmark gets the generic view: each metric's primary value (mean and
CI) with the unit and direction its ``value_meta`` declares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from worldrecall.engine.results_view import (
    direction_label,
    short_metric,
    summary,
    tables_of_kind,
    unit_label,
    value_meta,
)

NOT_RANKED = "✗ never executed the return: not ranked"


def fmt(v: Any, lo: Any = None, hi: Any = None, digits: int = 3) -> str:
    """``0.812 [0.75, 0.87]``; ``n/a`` for NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    s = f"{v:.{digits}f}"
    if lo is not None and hi is not None and not (math.isnan(lo) or math.isnan(hi)):
        s += f" [{lo:.{max(digits - 1, 1)}f}, {hi:.{max(digits - 1, 1)}f}]"
    return s


def _digits(unit: str) -> int:
    return 3 if unit in ("0–1", "fraction") else 2


def _one(tables: Mapping[str, pd.DataFrame], bench: str) -> pd.DataFrame | None:
    hits = [t for n, t in tables.items() if n.startswith(bench)]
    return hits[0] if hits else None


def leaderboard_views(result: Any, host: Any, split: str = "all") -> list[tuple[str, pd.DataFrame, str]]:
    """(title, table of formatted cells, footnote) per view, in print order."""
    out: list[tuple[str, pd.DataFrame, str]] = []
    gated_t = tables_of_kind(host, result.tables, "leaderboard_gated")
    ci_t = tables_of_kind(host, result.tables, "leaderboard_intervals")
    col_t = tables_of_kind(host, result.tables, "leaderboard_columns")
    main_t = tables_of_kind(host, result.tables, "leaderboard")
    benches = sorted({r.benchmark for r in result.rows})
    for bench in benches:
        gated, ci, cols, main = (_one(t, bench) for t in (gated_t, ci_t, col_t, main_t))
        if gated is not None and ci is not None and cols is not None and main is not None:
            out.extend(_gated_views(bench, gated, ci, cols, main, split))
            # metrics the leaderboard has no column for (e.g. a third-party plugin's) still get printed
            rest = _generic_view(result, host, bench, exclude=set(cols["metric"]))
            if rest[1].shape[1] > 1:
                out.append(rest)
        else:
            out.append(_generic_view(result, host, bench))
    return out


def _header(meta_row: Any) -> str:
    arrow = "↑" if bool(meta_row["higher_is_better"]) else "↓"
    return f"{meta_row['label']} ({meta_row['unit']} {arrow})"


def _gated_views(bench: str, gated: pd.DataFrame, ci: pd.DataFrame, cols: pd.DataFrame, main: pd.DataFrame,
                 split: str) -> list[tuple[str, pd.DataFrame, str]]:
    meta = cols.set_index("column")
    gate_col = [c for c in gated.columns if c in meta.index and meta.loc[c].get("role") == "gate"]
    gate = gate_col[0] if gate_col else None
    g = gated[gated["split"] == split]
    if not len(g):
        split = str(gated["split"].iloc[-1])
        g = gated[gated["split"] == split]
    c = ci[ci["split"] == split]
    views = []
    for variant, table, n_col in (("gated", g, "n_gated"), ("all", main[main["split"] == split], "n_cases")):
        use = [k for k in table.columns if k in meta.index and k != gate
               and c[(c["variant"] == variant) & (c["column"] == k)]["mean"].notna().any()]
        recs = []
        for row in table.itertuples(index=False):
            r = row._asdict()
            passed = r.get(gate) if gate else None
            never = variant == "gated" and (r.get(n_col, 0) == 0)
            rec = {"model": r["model"] + (" ✗" if (gate and passed == 0) else ""),
                   "cases": int(r.get(n_col, 0))}
            if gate:
                rec[_header(meta.loc[gate])] = fmt(passed, digits=2)
            for k in use:
                hit = c[(c["variant"] == variant) & (c["model"] == r["model"]) & (c["column"] == k)]
                m = hit["mean"].iloc[0] if len(hit) else math.nan
                lo = hit["ci_low"].iloc[0] if len(hit) else None
                hi = hit["ci_high"].iloc[0] if len(hit) else None
                rec[_header(meta.loc[k])] = "—" if never else fmt(m, lo, hi, _digits(meta.loc[k]["unit"]))
            rate = 0.0 if passed is None or math.isnan(passed) else float(passed)
            rec["_order"] = (never, -rate, r["model"])  # never-passed last; then by gate pass rate
            recs.append(rec)
        df = pd.DataFrame(recs)
        if len(df):
            df = df.sort_values("_order", key=lambda s: s.map(lambda t: t)).drop(columns="_order")
        title = (f"{bench} · camera-gated view (only cases where the camera executed the return; split {split})"
                 if variant == "gated" else f"{bench} · all cases (split {split})")
        note = ("✗ = the model never passed the camera gate; its gated cells are empty, so it cannot rank above "
                "models that did. [a, b] = 95% bootstrap CI. ↑ higher is better, ↓ lower is better."
                if variant == "gated" else "✗ = never passed the camera gate: its numbers here are not memory "
                "scores of a returning camera.")
        views.append((title, df.reset_index(drop=True), note))
    return views


def _generic_view(result: Any, host: Any, bench: str, exclude: set[str] | None = None) -> tuple[str, pd.DataFrame, str]:
    s = summary(host, result.tables)
    s = s[(s["benchmark"] == bench) & ~s["metric"].isin(exclude or set())]
    prim = {n: getattr(c, "primary", "") for n, c in host.metrics.items()}
    s = s[[prim.get(m) == v for m, v in zip(s["metric"], s["value"])]]
    recs: dict[str, dict[str, Any]] = {}
    for r in s.itertuples(index=False):
        meta = value_meta(host, r.metric, r.value)
        unit = unit_label(meta)
        head = f"{short_metric(r.metric, bench)} ({unit} {direction_label(meta)})".replace("( ", "(")
        rec = recs.setdefault(r.model, {"model": r.model, "_key": math.nan})
        rec[head] = fmt(r.mean, r.ci_low, r.ci_high, _digits(unit))
        if math.isnan(rec["_key"]) and not math.isnan(r.mean) and meta is not None and meta.higher_is_better is not None:
            rec["_key"] = -r.mean if meta.higher_is_better else r.mean
    models = sorted({r.model for r in result.rows if r.benchmark == bench})
    for m in models:
        recs.setdefault(m, {"model": m, "_key": math.nan})
    df = pd.DataFrame(list(recs.values()))
    df = df.sort_values(["_key", "model"], na_position="last").drop(columns="_key").fillna("n/a")
    note = ("n/a = not applicable on every case of that model (e.g. Scene Memory F1 when the camera never left "
            "and returned); [a, b] = 95% bootstrap CI; ↑ higher is better, ↓ lower is better, · diagnostic.")
    if df.shape[1] <= 1:
        note = "no scores: every case failed or was skipped (reasons: tables/cases.csv, tables/status.md)"
    title = (f"{bench} · other metrics (no leaderboard column; mean of the primary value)" if exclude
             else f"{bench} · mean of each metric's primary value")
    return title, df.reset_index(drop=True), note


def print_leaderboard(result: Any, host: Any) -> None:
    """Print every view (gated first) and the path of the HTML report when there is one."""
    views = leaderboard_views(result, host)
    if not views:
        print("no scores")
    for title, df, note in views:
        print(f"\n== {title} ==")
        print(df.to_string(index=False) if len(df) else "(no rows)")
        print(note)
    report = result.results_dir / "report" / "index.html"
    if report.exists():
        print(f"\nreport: {report.resolve()}  (open in a browser; self-contained)")
