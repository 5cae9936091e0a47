"""Score rows as tables: the long per-value frame every aggregator starts from, and the wide per-case table."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from worldrecall.core.data import ScoreRow

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
