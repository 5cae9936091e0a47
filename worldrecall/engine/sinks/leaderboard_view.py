"""The printed leaderboard: each benchmark's declared, ranked views (camera-gated first), then the rest.

A benchmark that declares its headline, ranking and gate (``register_benchmarks``) gets the views an
aggregator built for it (tables of kind ``view``, one line per cell: :data:`worldrecall.core.components.
VIEW_COLUMNS`), with the cells other aggregators add (kind ``view_columns``) beside its own, in the order,
wording and ranks the tables carry — the engine only lays them out. Metrics no view covers, and benchmarks
that declare nothing, get the generic view: each metric's primary value (mean and CI) with the unit and
direction its ``value_meta`` declares, never ranked by anything but that value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from worldrecall.engine.sinks.results_view import (
    column_rows,
    direction_label,
    missing,
    short_metric,
    summary,
    tables_of_kind,
    unit_label,
    value_meta,
)


def fmt(v: Any, lo: Any = None, hi: Any = None, digits: int = 3) -> str:
    """``0.812 [0.75, 0.87]``; ``n/a`` for NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    s = f"{v:.{digits}f}"
    if lo is not None and hi is not None and not (pd.isna(lo) or pd.isna(hi)):
        s += f" [{lo:.{max(digits - 1, 1)}f}, {hi:.{max(digits - 1, 1)}f}]"
    return s


def _digits(unit: str) -> int:
    return 3 if unit in ("0–1", "fraction") else 2


def _concat(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(list(tables.values()), ignore_index=True) if tables else pd.DataFrame()


def leaderboard_views(result: Any, host: Any) -> list[tuple[str, pd.DataFrame, str]]:
    """(title, table of formatted cells, footnote) per view, in print order."""
    # the view tables' cells as records, grouped here (a few hundred cells: no sub-frame per view)
    views = _records(_concat(tables_of_kind(host, result.tables, "view")))
    cells = _records(_concat(tables_of_kind(host, result.tables, "view_columns")))
    out: list[tuple[str, pd.DataFrame, str]] = []
    models: dict[str, set[str]] = {}  # benchmark -> its models (every view lists each, scored or not)
    for r in result.rows:
        models.setdefault(r.benchmark, set()).add(r.model)
    for bench in sorted(models):
        mine = [c for c in views if c["benchmark"] == bench]
        covered: set[str] = set()
        groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}  # (order, backend) -> its cells, as groupby
        for c in mine:
            if not (missing(c["order"]) or missing(c["backend"])):
                groups.setdefault((c["order"], c["backend"]), []).append(c)
        several = len({b for _, b in groups}) > 1  # name the backends only where they differ
        for key in sorted(groups):
            v = groups[key]
            extra = [c for c in cells if c["benchmark"] == bench and c["variant"] == v[0]["variant"]]
            out.append(_declared_view(v, extra, several))
            covered |= {c["metric"] for c in v + extra if not missing(c["metric"])}
        if mine:
            rest = _generic_view(result, host, bench, models[bench], exclude=covered)
            if rest[1].shape[1] > 1:
                out.append(rest)
        else:
            out.append(_generic_view(result, host, bench, models[bench]))
    return out


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return df.to_dict("records") if len(df) else []


def _declared_view(view: list[dict[str, Any]], extra: list[dict[str, Any]],
                   name_backend: bool) -> tuple[str, pd.DataFrame, str]:
    """One ranked view (its cells, and the cells other aggregators add): a row per model in rank order
    (unranked last, then by position: the stable order ``sort_values`` gives), a column per declared cell."""
    firsts: dict[Any, dict[str, Any]] = {}
    for c in view:
        firsts.setdefault(c["model"], c)  # each model's first cell, as drop_duplicates keeps it

    def order(c: dict[str, Any]) -> tuple[Any, ...]:
        rank, pos = c["rank"], c["position"]
        return (missing(rank), 0.0 if missing(rank) else rank, missing(pos), 0 if missing(pos) else pos)

    ordered = sorted(firsts.values(), key=order)
    columns = list(dict.fromkeys(c["column"] for c in view))
    extra_cols = list(dict.fromkeys(c["column"] for c in extra))
    cells: dict[tuple[Any, Any], dict[str, Any]] = {}  # (model, column) -> its first cell, as the rows order
    for c in view + extra:
        cells.setdefault((c["model"], c["column"]), c)
    recs = []
    for m in ordered:
        rec: dict[str, Any] = {"rank": m["rank_label"], "model": m["model"], "cases": int(m["n_cases"])}
        for col in columns + [c for c in extra_cols if c not in columns]:
            h = cells.get((m["model"], col))
            if h is None:
                continue
            head = f"{col} ({h['unit']} {h['direction']})".replace("( ", "(")
            ungated = m["rank_label"] == "✗" and h["direction"] != "·"
            rec[head] = "—" if ungated else fmt(h["mean"], h["ci_low"], h["ci_high"], int(h["digits"]))
        recs.append(rec)
    first = view[0]
    title = str(first["title"]) + (f" [backends {first['backend']}]" if name_backend else "")
    return title, pd.DataFrame(recs).fillna("n/a"), str(first["note"])


def _generic_view(result: Any, host: Any, bench: str, models: set[str],
                  exclude: set[str] | None = None) -> tuple[str, pd.DataFrame, str]:
    s = summary(host, result.tables)
    s = s[(s["benchmark"] == bench) & ~s["metric"].isin(exclude or set())]
    prim = {n: getattr(c, "primary", "") for n, c in host.metrics.items()}
    s = s[[prim.get(m) == v for m, v in zip(s["metric"], s["value"])]]
    recs: dict[str, dict[str, Any]] = {}
    for metric, value, model, mean, ci_low, ci_high in column_rows(s, "metric", "value", "model", "mean", "ci_low",
                                                                   "ci_high"):
        meta = value_meta(host, metric, value)
        unit = unit_label(meta)
        head = f"{short_metric(metric, bench)} ({unit} {direction_label(meta)})".replace("( ", "(")
        rec = recs.setdefault(model, {"model": model, "_key": math.nan})
        rec[head] = fmt(mean, ci_low, ci_high, _digits(unit))
        if math.isnan(rec["_key"]) and not math.isnan(mean) and meta is not None and meta.higher_is_better is not None:
            rec["_key"] = -mean if meta.higher_is_better else mean
    for m in sorted(models):
        recs.setdefault(m, {"model": m, "_key": math.nan})
    df = pd.DataFrame(list(recs.values()))
    df = df.sort_values(["_key", "model"], na_position="last").drop(columns="_key").fillna("n/a")
    note = ("n/a = not applicable on every case of that model (e.g. Scene Memory F1 when the camera never left "
            "and returned); [a, b] = 95% bootstrap CI; ↑ higher is better, ↓ lower is better, · diagnostic.")
    if df.shape[1] <= 1:
        note = "no scores: every case failed or was skipped (reasons: tables/cases.csv, tables/status.md)"
    title = (f"{bench} · other metrics (in no ranked view; mean of each metric's primary value)" if exclude
             else f"{bench} · mean of each metric's primary value")
    return title, df.reset_index(drop=True), note


def leaderboard_text(result: Any, host: Any) -> str:
    """Every view (gated first) as the console prints it; also written to ``tables/leaderboard.txt``."""
    views = leaderboard_views(result, host)
    if not views:
        return "no scores\n"
    parts = []
    for title, df, note in views:
        parts.append(f"\n== {title} ==\n" + _table_text(df) + f"\n{note}\n")
    return "".join(parts)


def _table_text(df: pd.DataFrame) -> str:
    """``df.to_string(index=False)`` of a view (its cells are formatted strings)."""
    return df.to_string(index=False) if len(df) else "(no rows)"


def print_leaderboard(result: Any, host: Any) -> None:
    """Print every view (gated first) and the path of the HTML report when there is one."""
    print(leaderboard_text(result, host), end="")
    report = result.results_dir / "report" / "index.html"
    if report.exists():
        print(f"\nreport: {report.resolve()}  (open in a browser; self-contained)")
