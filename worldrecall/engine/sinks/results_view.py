"""Read a run's aggregated tables by the kind their aggregator declares, in one normalised shape.

Aggregators declare ``tables = {table name: kind}`` (``summary``, ``intervals``, ``leaderboard``,
``validity`` …). The engine reads tables only through these declarations and each metric's
``value_meta`` — it never names a plugin or guesses a direction from a value's name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from worldrecall.core.components import UndeclaredValue
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)

SUMMARY_COLUMNS = ["benchmark", "model", "metric", "value", "mean", "ci_low", "ci_high", "n"]


def table_kinds(host: Any, tables: Mapping[str, Any]) -> dict[str, str]:
    """Table name -> declared kind, for every table of the run (a per-benchmark prefix ``<bench>.`` allowed)."""
    declared: dict[str, str] = {}
    for agg in (getattr(host, "components", {}) or {}).get("aggregator", {}).values():
        declared.update(getattr(agg, "tables", {}) or {})
    out: dict[str, str] = {}
    for name in tables:
        base = name.split(".", 1)[-1] if name not in declared and "." in name else name
        kind = declared.get(name) or declared.get(base)
        if kind:
            out[name] = kind
    return out


def column_rows(df: pd.DataFrame, *names: str) -> Any:
    """A frame's rows as tuples of these columns' Python values (what ``itertuples`` gives, without a
    namedtuple and a box per cell: a job's tables have thousands of cells); none for a frame without rows
    (an empty selection may have no columns at all: ``s[[]]``)."""
    return zip(*(df[c].tolist() for c in names)) if len(df) else iter(())


def missing(v: Any) -> bool:
    """A cell read from a table column (``tolist``, records) that pandas counts as missing: None or NaN."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def tables_of_kind(host: Any, tables: Mapping[str, Any], kind: str) -> dict[str, pd.DataFrame]:
    """Every non-empty table of one kind."""
    kinds = table_kinds(host, tables)
    return {n: t for n, t in tables.items() if kinds.get(n) == kind and hasattr(t, "columns") and len(t)}


def _norm(df: pd.DataFrame) -> pd.DataFrame:
    return df.rename(columns={"value_name": "value", "estimate": "mean"})


def summary(host: Any, tables: Mapping[str, Any]) -> pd.DataFrame:
    """Mean (and CI where an ``intervals`` table has one) per benchmark x model x metric x value."""
    means = [_norm(t) for t in tables_of_kind(host, tables, "summary").values()]
    if not means:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    df = pd.concat(means, ignore_index=True)
    keys = ["benchmark", "model", "metric", "value"]
    df = df.drop_duplicates(keys)[keys + ["mean"] + (["n"] if "n" in df else [])]
    ints = [_norm(t) for t in tables_of_kind(host, tables, "intervals").values()]
    if ints:
        ci = pd.concat(ints, ignore_index=True).drop_duplicates(keys)[keys + ["ci_low", "ci_high"]]
        df = df.merge(ci, on=keys, how="left")
    for c in SUMMARY_COLUMNS:
        if c not in df:
            df[c] = math.nan
    return df[SUMMARY_COLUMNS]


def view_ranks(host: Any, tables: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, tuple[float, str]]]:
    """(benchmark, model) -> variant -> (rank, label) from the run's ranked views (``view`` tables)."""
    out: dict[tuple[str, str], dict[str, tuple[float, str]]] = {}
    for t in tables_of_kind(host, tables, "view").values():
        for r in t.drop_duplicates(["benchmark", "variant", "model"]).itertuples(index=False):
            out.setdefault((r.benchmark, r.model), {})[r.variant] = (float(r.rank), str(r.rank_label))
    return out


def short_metric(metric: str, benchmark: str) -> str:
    """``memobench.ors`` -> ``ors`` within its benchmark."""
    return metric[len(benchmark) + 1:] if metric.startswith(benchmark + ".") else metric


def metric_key(metric: str, value: str, benchmark: str, host: Any) -> str:
    """The MLflow key of one value: the metric's short name for its primary value, else ``<metric>.<value>``."""
    short = short_metric(metric, benchmark)
    cls = host.metrics.get(metric) if hasattr(host, "metrics") else None
    return short if cls is not None and getattr(cls, "primary", "") == value else f"{short}.{value}"


def value_meta(host: Any, metric: str, value: str) -> Any:
    """The metric's declared metadata of one value (None for a metric no plugin registers any more, or a value
    it does not declare: shown as a diagnostic, never ranked)."""
    cls = host.metrics.get(metric) if hasattr(host, "metrics") else None
    try:
        return cls.value_meta(value) if cls is not None and hasattr(cls, "value_meta") else None
    except UndeclaredValue:
        return None


def direction_label(meta: Any) -> str:
    """"↑" (higher is better), "↓" (lower is better) or "·" (a diagnostic, never ranked)."""
    if meta is None or meta.higher_is_better is None:
        return "·"
    return "↑" if meta.higher_is_better else "↓"


def unit_label(meta: Any) -> str:
    """Unit, else the declared range (``0–1``), else empty."""
    if meta is None:
        return ""
    if meta.unit:
        return meta.unit
    if meta.range:
        lo, hi = meta.range
        return f"{lo:g}–{hi:g}"
    return ""
