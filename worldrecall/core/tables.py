"""Score rows as tables: the long per-value frame every aggregator starts from, and the wide per-case table."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from worldrecall.core.data import ScoreRow
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)

LONG_COLUMNS = ["benchmark", "model", "case_id", "metric", "value_name", "value", "backend"]


def backend_signature(backend: dict[str, str]) -> str:
    """``flow=dis_flow,pose=sidecar_pose``: tables group by it so backends never mix silently."""
    return ",".join(f"{k}={v}" for k, v in sorted(backend.items()) if v) or "-"


def long_frame(rows: Iterable[ScoreRow], ok_only: bool = True) -> pd.DataFrame:
    """One line per (row, value) with strata as columns; failed/skipped rows dropped unless asked."""
    recs = []
    for r in rows:
        if ok_only and r.status != "ok":
            continue
        sig = backend_signature(r.backend)  # once per row, not per value
        strata = {f"strata.{k}": v for k, v in r.strata.items()}
        for name, v in r.values.items():
            recs.append({"benchmark": r.benchmark, "model": r.model, "case_id": r.case_id, "metric": r.metric,
                         "value_name": name, "value": float("nan") if v is None else float(v),
                         "backend": sig, **strata})
    if not recs:
        return pd.DataFrame(columns=LONG_COLUMNS)
    return pd.DataFrame.from_records(recs)


def case_table(rows: Iterable[ScoreRow]) -> pd.DataFrame:
    """The per-case table: one line per (benchmark, model, case, metric) with status, reason and values."""
    recs = []
    for r in rows:
        rec = {"benchmark": r.benchmark, "model": r.model, "case_id": r.case_id, "metric": r.metric,
               "status": r.status, "reason": r.reason, "backend": backend_signature(r.backend),
               "metric_version": r.metric_version}
        rec.update({f"strata.{k}": v for k, v in r.strata.items()})
        rec.update({f"value.{k}": v for k, v in r.values.items()})
        recs.append(rec)
    df = pd.DataFrame.from_records(recs)
    if len(df):
        df = df.sort_values(["benchmark", "model", "case_id", "metric"]).reset_index(drop=True)
    return df


def status_counts(rows: Iterable[ScoreRow]) -> pd.DataFrame:
    """Per (benchmark, model, metric): how many cases were ok, failed, skipped."""
    recs = [{"benchmark": r.benchmark, "model": r.model, "metric": r.metric, "status": r.status} for r in rows]
    if not recs:
        return pd.DataFrame(columns=["benchmark", "model", "metric", "ok", "failed", "skipped"])
    df = pd.DataFrame.from_records(recs)
    out = df.groupby(["benchmark", "model", "metric", "status"]).size().unstack("status", fill_value=0)
    for c in ("ok", "failed", "skipped"):
        if c not in out:
            out[c] = 0
    return out[["ok", "failed", "skipped"]].reset_index()


def read_tables(tables_dir: Path) -> dict[str, pd.DataFrame]:
    """A run's ``tables/`` read back whole: each ``<name>.csv``; each table written one file per benchmark
    (a folder ``<name>/<benchmark>.csv``) as its parts concatenated in benchmark order, as the run held it; and
    the per-case table, written one file per metric (``cases/<benchmark>/<metric>.csv``), as ``cases`` (every
    row, sorted by benchmark, model, case, metric) and ``cases.<benchmark>``. A file with no rows gives an
    empty frame. A results folder of an earlier version (``cases.<benchmark>.csv``) reads the same way."""
    tables_dir = Path(tables_dir)
    if not tables_dir.is_dir():
        return {}
    out = {csv.stem: _read_csv(csv) for csv in sorted(tables_dir.glob("*.csv"))}
    for folder in sorted(p for p in tables_dir.iterdir() if p.is_dir() and p.name != "cases"):
        parts = [_read_csv(p) for p in sorted(folder.glob("*.csv"))]
        if parts:
            out[folder.name] = pd.concat(parts, ignore_index=True)
    for bench in sorted(p for p in (tables_dir / "cases").glob("*") if p.is_dir()):
        parts = [df for df in map(_read_csv, sorted(bench.glob("*.csv"))) if len(df.columns)]
        if parts:
            out[f"cases.{bench.name}"] = _case_order(pd.concat(parts, ignore_index=True))
    cases = [df for name, df in out.items() if name.startswith("cases.")]
    if cases:
        out["cases"] = _case_order(pd.concat(cases, ignore_index=True))
    return out


def _case_order(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in the per-case table's order (benchmark, model, case, metric), as :func:`case_table` sorts them."""
    keys = ["benchmark", "model", "case_id", "metric"]
    if not len(df) or not set(keys) <= set(df.columns):
        return df
    return df.sort_values(keys, kind="stable").reset_index(drop=True)


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:  # a table with no rows is written as an empty file
        return pd.DataFrame()
