"""The built-in aggregators: mean, hierarchical macro average, stratified bootstrap CI, paired difference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from worldrecall.core.components import Aggregator
from worldrecall.core.data import ScoreRow
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)
from worldrecall.core.tables import long_frame, status_counts
from worldrecall.plugins.stats.hierarchy import _level_keys, bootstrap_macro, macro_mean

GROUP = ["benchmark", "model", "metric", "value_name", "backend"]
PAIRED_ORDER = ["benchmark", "metric", "value_name", "backend", "model"]


def _select_values(df: pd.DataFrame, params: Mapping[str, Any]) -> pd.DataFrame:
    """``values: primary`` keeps each metric's primary value (CIs for every diagnostic cost time, not insight)."""
    primary = params.get("primary_values")
    if params.get("values", "all") != "primary" or not primary or df.empty:
        return df
    keep = [primary.get(m) in (v, None) for m, v in zip(df["metric"], df["value_name"])]
    return df[keep]


def _groups(df: pd.DataFrame, by: list[str]):
    """(key, row positions) per group in the order ``df.groupby(by, dropna=False)`` iterates, rows in their
    original order — without building a sub-frame per group (hundreds of groups per run)."""
    if df.empty:
        return
    gb = df.groupby(by, dropna=False, sort=True)
    codes = gb.ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    for key, idx in zip(gb.size().index, np.split(order, bounds)):
        yield (key if isinstance(key, tuple) else (key,)), idx


class MeanAggregator(Aggregator):
    """Plain mean over cases per benchmark × model × metric value × backend, with case counts."""

    name = "mean"
    by_benchmark = True  # grouped by benchmark first, one seed per group
    by_metric = {"mean": GROUP, "status": ["benchmark", "model", "metric"]}  # groups never span metrics
    description = "unweighted mean over scored cases; NaN skipped; failed/skipped counted beside it"
    tables = {"mean": "summary", "status": "status"}

    def aggregate(self, rows: list[ScoreRow], params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
        df = long_frame(rows)
        if df.empty:
            return {"mean": df, "status": status_counts(rows)}
        out = df.groupby(GROUP, dropna=False)["value"].agg(mean="mean", n="count")  # n: non-NaN cases
        return {"mean": out.reset_index(), "status": status_counts(rows)}


class MacroAggregator(Aggregator):
    """Hierarchical macro average: case -> subcategory -> domain -> overall (levels configurable)."""

    name = "macro"
    by_benchmark = True  # grouped by benchmark first, one seed per group
    by_metric = {"macro": GROUP}
    defaults = {"levels": ["subcategory", "domain"]}
    tables = {"macro": "macro"}

    def aggregate(self, rows: list[ScoreRow], params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
        df = long_frame(rows)
        levels = list(params.get("levels", self.defaults["levels"]))
        recs = []
        values = df["value"].to_numpy(float) if not df.empty else np.array([])
        keys = _level_keys(df, levels) if not df.empty else []
        cases = df["case_id"].astype(str).to_numpy() if not df.empty else np.array([])
        for key, idx in _groups(df, GROUP):
            v = values[idx]
            # one value per case in a group: a duplicate case id is refused, as the release's hierarchy does
            recs.append({**dict(zip(GROUP, key)), "macro": macro_mean(v, [k[idx] for k in keys], cases[idx]),
                         "n": int(np.isfinite(v).sum())})
        return {"macro": pd.DataFrame.from_records(recs, columns=GROUP + ["macro", "n"])}


class BootstrapAggregator(Aggregator):
    """Stratified case bootstrap of the hierarchical mean: percentile CI (replicates, seed, level configurable)."""

    name = "bootstrap"
    by_benchmark = True  # grouped by benchmark first, one seed per group
    by_metric = {"bootstrap": GROUP}  # one seed per group, not one stream per call: groups are independent
    defaults = {"replicates": 2000, "seed": 0, "level": 0.95, "levels": ["subcategory", "domain"],
                "values": "primary"}
    tables = {"bootstrap": "intervals"}
    uses_primary_values = True

    def aggregate(self, rows: list[ScoreRow], params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
        p = {**self.defaults, **params}
        df = _select_values(long_frame(rows), p)
        recs = []
        all_values = df["value"].to_numpy(float) if not df.empty else np.array([])
        all_keys = _level_keys(df, p["levels"]) if not df.empty else []
        cases = df["case_id"].astype(str).to_numpy() if not df.empty else np.array([])
        for key, idx in _groups(df, GROUP):
            vals, keys = all_values[idx], [k[idx] for k in all_keys]
            lo, hi = bootstrap_macro(vals, keys, int(p["replicates"]), int(p["seed"]), float(p["level"]))
            recs.append({**dict(zip(GROUP, key)), "estimate": macro_mean(vals, keys, cases[idx]), "ci_low": lo, "ci_high": hi,
                         "n": int(np.isfinite(vals).sum()), "replicates": int(p["replicates"]), "seed": int(p["seed"])})
        return {"bootstrap": pd.DataFrame.from_records(recs, columns=GROUP + ["estimate", "ci_low", "ci_high", "n",
                                                                               "replicates", "seed"])}


class PairedAggregator(Aggregator):
    """Paired difference (model − reference) over shared cases, with a paired stratified bootstrap CI."""

    name = "paired"
    by_benchmark = True  # grouped by benchmark first, one seed per group
    by_metric = {"paired": PAIRED_ORDER}
    defaults = {"reference": "oracle", "replicates": 2000, "seed": 0, "level": 0.95,
                "levels": ["subcategory", "domain"], "values": "primary"}
    tables = {"paired": "paired"}
    uses_primary_values = True

    def aggregate(self, rows: list[ScoreRow], params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
        p = {**self.defaults, **params}
        df = _select_values(long_frame(rows), p)
        cols = ["benchmark", "metric", "value_name", "backend", "model", "reference", "mean_diff", "ci_low",
                "ci_high", "n_shared"]
        if df.empty or p["reference"] not in set(df["model"]):
            return {"paired": pd.DataFrame(columns=cols)}
        recs = []
        for key, g in df.groupby(["benchmark", "metric", "value_name", "backend"], dropna=False):
            ref = g[g["model"] == p["reference"]].set_index("case_id")
            for model, gm in g[g["model"] != p["reference"]].groupby("model"):
                gm = gm.set_index("case_id")
                shared = gm.index.intersection(ref.index)
                if not len(shared):
                    continue
                diff = (gm.loc[shared, "value"] - ref.loc[shared, "value"]).to_numpy(float)
                keys = _level_keys(gm.loc[shared].reset_index(), p["levels"])
                lo, hi = bootstrap_macro(diff, keys, int(p["replicates"]), int(p["seed"]), float(p["level"]))
                recs.append({**dict(zip(["benchmark", "metric", "value_name", "backend"], key)), "model": model,
                             "reference": p["reference"], "mean_diff": macro_mean(diff, keys), "ci_low": lo,
                             "ci_high": hi, "n_shared": int(np.isfinite(diff).sum())})
        return {"paired": pd.DataFrame.from_records(recs, columns=cols)}
