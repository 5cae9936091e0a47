"""The printed leaderboard: each benchmark's declared, ranked views (camera-gated first), then the rest.

A benchmark that declares its headline, ranking and gate (``register_benchmarks``) gets the views an
aggregator built for it (tables of kind ``view``, one line per cell: :data:`worldrecall.core.components.
VIEW_COLUMNS`), with the cells other aggregators add (kind ``view_columns``) beside its own, in the order,
wording and ranks the tables carry — the engine only lays them out. Metrics no view covers, and benchmarks
that declare nothing, get the generic view: each metric's primary value (mean and CI) with the unit and
direction its ``value_meta`` declares, never ranked by anything but that value.

The console prints the *compact* view by default (:func:`compact_text`, ``view=compact``): per benchmark its
first declared view (the camera-gated one) cut to rank, model, the ranked headline with its CI, the gate's
pass count and the all-cases rank — one table per benchmark that fits a 120-column terminal. The wide views
(:func:`leaderboard_text`) are always written to ``tables/leaderboard.txt`` and printed with ``view=full``.
"""

from __future__ import annotations

import json
import math
import os
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worldrecall.core.components import GATE_NOT_MEASURED
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)
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
    rows: dict[str, list[Any]] = {}  # benchmark -> its rows (every view lists each model, scored or not)
    for r in result.rows:
        rows.setdefault(r.benchmark, []).append(r)
    if not rows:
        return out
    means = summary(host, result.tables)  # every benchmark's generic view reads it: once
    for bench in sorted(rows):
        models = {r.model for r in rows[bench]}
        mine = [c for c in views if c["benchmark"] == bench]
        covered = _covered(rows[bench], host.benchmarks.get(bench))
        shown: set[str] = set()
        groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}  # (order, backend) -> its cells, as groupby
        for c in mine:
            if not (missing(c["order"]) or missing(c["backend"])):
                groups.setdefault((c["order"], c["backend"]), []).append(c)
        several = len({b for _, b in groups}) > 1  # name the backends only where they differ
        for key in sorted(groups):
            v = groups[key]
            extra = [c for c in cells if c["benchmark"] == bench and c["variant"] == v[0]["variant"]]
            out.append(_declared_view(v, extra, several, covered))
            shown |= {c["metric"] for c in v + extra if not missing(c["metric"])}
        if mine:
            rest = _generic_view(means, host, bench, models, exclude=shown)
            if rest[1].shape[1] > 1:
                out.append(rest)
        else:
            out.append(_generic_view(means, host, bench, models))
    return out


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return df.to_dict("records") if len(df) else []


def _declared_view(view: list[dict[str, Any]], extra: list[dict[str, Any]], name_backend: bool,
                   covered: dict[tuple[str, str], set[str]] | None = None) -> tuple[str, pd.DataFrame, str]:
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
        rec: dict[str, Any] = {"rank": m["rank_label"], "model": m["model"], "cases": _cases(m, covered)}
        for col in columns + [c for c in extra_cols if c not in columns]:
            h = cells.get((m["model"], col))
            if h is None:
                continue
            head = f"{col} ({h['unit']} {h['direction']})".replace("( ", "(")
            ungated = m["rank_label"] in ("✗", GATE_NOT_MEASURED) and h["direction"] != "·"
            rec[head] = "—" if ungated else fmt(h["mean"], h["ci_low"], h["ci_high"], int(h["digits"]))
        recs.append(rec)
    first = view[0]
    title = str(first["title"]) + (f" [backends {first['backend']}]" if name_backend else "")
    return title, pd.DataFrame(recs).fillna("n/a"), str(first["note"])


def _covered(rows: Any, decl: Any) -> dict[tuple[str, str], set[str]]:
    """(model, variant) -> the cases on which the benchmark's first headline value has a value: in the gated
    view only those whose gate passed. The ``cases`` column says how many of them the mean covers."""
    if decl is None or not decl.headline:
        return {}
    metric, value = decl.headline[0].split(":", 1)
    gate_metric, gate_value = decl.gate.split(":", 1) if decl.gate else ("", "")
    valued: dict[str, set[str]] = {}
    passed: dict[str, set[str]] = {}
    for r in rows:
        if r.status != "ok":
            continue
        if r.metric == metric and r.values.get(value) is not None and not missing(r.values[value]):
            valued.setdefault(r.model, set()).add(r.case_id)
        if gate_metric and r.metric == gate_metric and r.values.get(gate_value) == 1.0:
            passed.setdefault(r.model, set()).add(r.case_id)
    out: dict[tuple[str, str], set[str]] = {}
    for m, cases in valued.items():
        out[(m, "all")] = cases
        out[(m, "gated")] = cases & passed.get(m, set())
    return out


def _cases(cell: dict[str, Any], covered: dict[tuple[str, str], set[str]] | None) -> int | str:
    """The model's case count; ``n/N`` where the first headline's mean covers only n of its N cases."""
    n = int(cell["n_cases"])
    if covered is None:
        return n
    nv = len(covered.get((cell["model"], cell["variant"]), set()))
    return n if nv >= n else f"{nv}/{n}"


def _generic_view(means: pd.DataFrame, host: Any, bench: str, models: set[str],
                  exclude: set[str] | None = None) -> tuple[str, pd.DataFrame, str]:
    """``means``: the run's :func:`~worldrecall.engine.sinks.results_view.summary`."""
    s = means[(means["benchmark"] == bench) & ~means["metric"].isin(exclude or set())]
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
        note = (f"no scores: every case failed or was skipped (reasons: tables/cases/{bench}/, "
                f"tables/status/{bench}.md)")
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


WIDTH = 120  # the compact view fits a terminal this wide
VIEWS = ("compact", "full")
COMPACT_LEGEND = (
    "1= : tied with the leader (the paired 95% bootstrap CI of the difference contains 0) · ✗ : no case passed the "
    "camera gate (not ranked) · the ranked value counts a failed gate as its worst · [a, b] : 95% bootstrap CI · "
    "all-cases rank: the published protocol's ranking, gate ignored")
_MODEL_CHARS = 32  # longer model names are cut (with …) so the table keeps its width


def compact_views(views: pd.DataFrame) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) per benchmark (and backend set) from the view tables' cells (:data:`VIEW_COLUMNS`).

    Each benchmark's first declared view (lowest ``order``: the camera-gated one where the gate ran) gives
    rank, model and its first column (the ranked headline) with its CI. Where the benchmark also has an
    ``all`` view, ``gate passed`` is the model's case count in the first view over its cases the gate judged
    (``n_gate_measured``; else its count in the ``all`` view), and ``all-cases rank`` its rank there (the published protocol's number, gate ignored)."""
    cells = _records(views)
    out: list[tuple[str, list[str], list[list[str]]]] = []
    for bench in sorted({c["benchmark"] for c in cells}):
        groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}  # (order, backend) -> its cells
        for c in cells:
            if c["benchmark"] == bench and not (missing(c["order"]) or missing(c["backend"])):
                groups.setdefault((c["order"], c["backend"]), []).append(c)
        if not groups:
            continue
        variant = groups[min(groups)][0]["variant"]
        several = len({b for _, b in groups}) > 1  # name the backends only where they differ
        for (_, backend), view in sorted(groups.items()):
            if view[0]["variant"] != variant:
                continue
            everyone = next((g for (_, b), g in sorted(groups.items())
                             if b == backend and g[0]["variant"] == "all" and variant != "all"), None)
            out.append(_compact_view(view, everyone, several))
    return out


def _compact_view(view: list[dict[str, Any]], everyone: list[dict[str, Any]] | None,
                  name_backend: bool) -> tuple[str, list[str], list[list[str]]]:
    """One benchmark's compact table: its view's first column, the gate's count and the all-cases rank."""
    h0 = view[0]
    head_col = h0["column"]
    header = ["rank", "model", f"{head_col} ({h0['unit']} {h0['direction']})".replace("( ", "(")]
    if everyone is not None:
        header += ["gate passed", "all-cases rank"]
    all_by_model: dict[Any, dict[str, Any]] = {}
    for c in everyone or []:
        all_by_model.setdefault(c["model"], c)
    firsts: dict[Any, dict[str, Any]] = {}
    heads: dict[Any, dict[str, Any]] = {}
    for c in view:
        firsts.setdefault(c["model"], c)
        if c["column"] == head_col:
            heads.setdefault(c["model"], c)

    def order(c: dict[str, Any]) -> tuple[Any, ...]:  # as _declared_view orders the full view
        rank, pos = c["rank"], c["position"]
        return (missing(rank), 0.0 if missing(rank) else rank, missing(pos), 0 if missing(pos) else pos)

    rows = []
    for m in sorted(firsts.values(), key=order):
        h = heads.get(m["model"])
        value = ("—" if m["rank_label"] in ("✗", GATE_NOT_MEASURED) or h is None
                 else fmt(h["mean"], h["ci_low"], h["ci_high"], int(h["digits"])))
        name = str(m["model"])
        row = [str(m["rank_label"]), name if len(name) <= _MODEL_CHARS else name[:_MODEL_CHARS - 1] + "…", value]
        if everyone is not None:
            a = all_by_model.get(m["model"])
            # over the cases the gate judged: one it gave no verdict on (a mirror video) is not a failed one
            judged = a.get("n_gate_measured") if a else None
            judged = a["n_cases"] if a and missing(judged) else judged
            passed = ("not measured" if m["rank_label"] == GATE_NOT_MEASURED  # never "0/N": the gate gave no verdict
                      else f"{int(m['n_cases'])}/{int(judged)}") if a else "n/a"
            row += [passed, str(a["rank_label"])] if a else ["n/a", "n/a"]
        rows.append(row)
    title = str(h0["title"]) + (f" [backends {h0['backend']}]" if name_backend else "")
    return title, header, rows


def compact_legend(compact: list[tuple[str, list[str], list[list[str]]]]) -> str:
    """:data:`COMPACT_LEGEND`, without its ✗ clause where no table shows a ✗ (a gate not measured is no ✗)."""
    if any(c == "✗" for _, _, rows in compact for r in rows for c in r):
        return COMPACT_LEGEND
    return COMPACT_LEGEND.replace(" · ✗ : no case passed the camera gate (not ranked)", "")


def _grid(header: list[str], rows: list[list[str]]) -> str:
    """A plain table: the model column left-aligned, every other column right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return " ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    return "\n".join(line(r) for r in [header, *rows])


def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(text, WIDTH, break_on_hyphens=False)) if text else ""


def compact_text_of(views: pd.DataFrame, legend: bool = True) -> str:
    """The compact view as printed, from the view tables' cells (a run's ``tables/`` read back gives the same);
    ``legend``: with the lines explaining its symbols under it."""
    compact = compact_views(views)
    parts = [f"\n{_wrap(f'== {t} ==')}\n{_grid(h, r)}\n" for t, h, r in compact]
    if not parts or not legend:
        return "".join(parts)
    text = "".join(parts) + "\n" + _wrap(compact_legend(compact)) + "\n"
    reasons = _not_measured_reasons(views)
    if any(GATE_NOT_MEASURED in c for _, _, rows in compact for r in rows for c in r):
        text += _wrap(f"{GATE_NOT_MEASURED} : the camera gate gave no verdict for any case of that model (not a "
                      f"failed gate; the model is ranked on all cases){reasons}") + "\n"
    return text


def gate_not_measured(views: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(benchmark, model) -> why its camera gate was not measured, for every model a view labels so (the MLflow
    runs' tag; the console and the report show the same labels)."""
    out: dict[tuple[str, str], str] = {}
    reasons = {b: w for b, w in _reason_items(views)}
    for c in _records(views):
        if GATE_NOT_MEASURED in str(c.get("rank_label") or ""):
            out.setdefault((str(c["benchmark"]), str(c["model"])), reasons.get(str(c["benchmark"]), "no verdict"))
    return out


def _reason_items(views: pd.DataFrame) -> list[tuple[str, str]]:
    said: dict[str, str] = {}
    for c in _records(views):
        note = str(c.get("note") or "")
        for marker in ("no camera-gated view: ", f"{GATE_NOT_MEASURED} = "):
            if note.startswith(marker) and c["benchmark"] not in said:
                said[str(c["benchmark"])] = note.split(" · ", 1)[0].removeprefix(marker)
    return sorted(said.items())


def _not_measured_reasons(views: pd.DataFrame) -> str:
    """``; <benchmark>: <why>`` per benchmark whose views' notes say why a gate was not measured ("" when none)."""
    return "".join(f"; {b}: {w}" for b, w in _reason_items(views))


def compact_frames(result: Any, host: Any) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) per benchmark of the compact view (the HTML report's first screen)."""
    views = _concat(tables_of_kind(host, result.tables, "view"))
    return [(t, pd.DataFrame(r, columns=h)) for t, h, r in compact_views(views)]


def compact_text(result: Any, host: Any) -> str:
    """The compact view of a result: each declared benchmark's ranked headline (:func:`compact_views`); a
    benchmark that declares no views is named, its metrics being in the full tables only."""
    views = _concat(tables_of_kind(host, result.tables, "view"))
    text = compact_text_of(views)
    other = sorted({r.benchmark for r in result.rows} - set(views.get("benchmark", [])))
    if other:
        text += _wrap(f"no declared headline (every metric's mean is in the full tables): {', '.join(other)}") + "\n"
    return text or "no scores\n"


def assumed_lines(rows: Any) -> list[str]:
    """One line per benchmark and assumed reference (rows' ``info["assumed"]``, as the metrics declare them): what
    the run assumed instead of reading it from the case, on how many cases, and the setting that changes it."""
    groups: dict[tuple[str, str, str, str], tuple[set[str], set[tuple[str, str]]]] = {}
    for r in rows:
        for name, a in ((r.info or {}).get("assumed") or {}).items():
            if isinstance(a, Mapping):
                values, cases = groups.setdefault((r.benchmark, str(name), str(a.get("source") or ""),
                                                   str(a.get("set") or "")), (set(), set()))
                values.add(json.dumps(a.get("value"), default=str))
                cases.add((r.model, r.case_id))
    out = []
    for (bench, name, source, how), (values, cases) in sorted(groups.items()):
        v = json.loads(next(iter(values))) if len(values) == 1 else None
        shown = (f"{v:g}" if isinstance(v, float) else str(v)) if len(values) == 1 else "per case (rows' info.assumed)"
        out.append(f"{bench}: assumed: {name} = {shown}" + (f" ({source})" if source else "")
                   + f" on {len(cases)} case(s)" + (f"; set {how} to change it" if how else ""))
    return out


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies under it (a shorter line), else absolute."""
    try:
        return os.path.relpath(path.resolve()) if path.resolve().is_relative_to(Path.cwd()) else str(path.resolve())
    except (OSError, ValueError):
        return str(path)


def print_leaderboard(result: Any, host: Any, view: str = "compact", mlflow: bool = False) -> None:
    """Print the compact view (``view="compact"``) or every view, gated first (``"full"``), then the HTML report's
    path; the compact view says where the full tables are (``mlflow``: the MLflow links follow)."""
    report = result.results_dir / "report" / "index.html"
    if view == "full":
        print(leaderboard_text(result, host), end="")
    else:
        print(compact_text(result, host), end="")
        print()
        also = (["the report"] if report.exists() else []) + (["MLflow"] if mlflow else [])
        print(f"full tables (view=full): {_shown(result.results_dir / 'tables' / 'leaderboard.txt')}"
              + (f"; {' and '.join(also)} below" if also else ""))
    if report.exists():
        print(f"\nreport: {_shown(report)}  (open in a browser)")
