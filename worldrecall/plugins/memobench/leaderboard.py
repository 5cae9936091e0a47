"""The ``memobench.leaderboard`` aggregator: the paper's table per split, with bootstrap CIs and gating.

Columns and scales follow the official leaderboard: the five 0-100 composites and ImageReward (0-100),
ORS (0-1 as in the paper; ×100 with ``ors_percent``), GT_ALL PSNR / SSIM / LPIPS in native units and the
four VQA dimensions (per-clip 0-1 ×100). Each value is the unweighted mean over a model's cases
(NaN-skipping; failed cases are left out), per split: synthetic, real and all (pooled). worldrecall adds
case-bootstrap CIs, best/second marks, the camera-gate pass rate and every memory column re-computed over
gated cases only.

Model names are canonicalised as the official leaderboard does (alias table, else lower-case;
``canonical_models``), so ``CogVideoX`` and ``cogvideo`` are one row. Official result folders
(``official_eval_dir`` / ``official_ors_dir`` / ``official_vqa_dir``, read by
:mod:`worldrecall.plugins.memobench.official_results`) are imported as extra models labelled
``official_label`` (default ``"{model} (official)"``), so published numbers and a run's own sit side by side.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import VIEW_CELL_COLUMNS, Aggregator, merge_typed
from worldrecall.core.data import ScoreRow
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)
from worldrecall.plugins.memobench.official_results import canonical_model, official_rows

BENCHMARK = "memobench"

# column -> (metric, value key, scale)
COLUMNS: dict[str, tuple[str, str, float]] = {
    "VisualQuality": ("memobench.visual_quality", "score", 1.0),
    "MotionSmoothness": ("memobench.motion_smoothness", "score", 1.0),
    "ObjIdentityConsistency": ("memobench.obj_identity", "score", 1.0),
    "Geo3DConsistency": ("memobench.geo3d", "score", 1.0),
    "CameraControllability": ("memobench.camera_controllability", "pct", 1.0),
    "ImageRewardScore": ("memobench.image_reward", "pct", 1.0),
    "ORS": ("memobench.ors", "score", 1.0),
    "GT_ALL_PSNR": ("memobench.pixel_fidelity", "ALL_PSNR", 1.0),
    "GT_ALL_SSIM": ("memobench.pixel_fidelity", "ALL_SSIM", 1.0),
    "GT_ALL_LPIPS": ("memobench.pixel_fidelity", "ALL_LPIPS", 1.0),
    "InstructionFollowing": ("memobench.vqa", "InstructionFollowing", 100.0),
    "ObjectBackground": ("memobench.vqa", "ObjectBackground", 100.0),
    "ContinuityOfMemory": ("memobench.vqa", "ContinuityOfMemory", 100.0),
    "PhysicsAdherence": ("memobench.vqa", "PhysicsAdherence", 100.0),
}
PRETTY = {"VisualQuality": "VisQual", "MotionSmoothness": "MotSmooth", "ObjIdentityConsistency": "ObjConsist",
          "Geo3DConsistency": "3DConsist", "CameraControllability": "CamCtrl", "ImageRewardScore": "ImgReward",
          "ORS": "ORS", "GT_ALL_PSNR": "PSNR", "GT_ALL_SSIM": "SSIM", "GT_ALL_LPIPS": "LPIPS",
          "InstructionFollowing": "VQA-IF", "ObjectBackground": "VQA-OB", "ContinuityOfMemory": "VQA-CM",
          "PhysicsAdherence": "VQA-PA", "GatePassRate": "GatePass"}
GATE = "GatePassRate"
# unit of each column as shown (after its scale); PSNR in dB, the composites 0-100, the rest as the paper prints
UNITS = {"GT_ALL_PSNR": "dB", "ORS": "0–1", "GT_ALL_SSIM": "0–1", "GT_ALL_LPIPS": "0–1", GATE: "fraction"}


def lower_columns(value_meta: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> set[str]:
    """Columns whose source value its metric declares lower-is-better (``value_meta`` from the engine)."""
    return {c for c, (m, v, _) in COLUMNS.items()
            if ((value_meta.get(m) or {}).get(v) or {}).get("higher_is_better") is False}


def column_table(ors_percent: bool = False, lower: set[str] | frozenset[str] = frozenset()) -> pd.DataFrame:
    """What each leaderboard column is: label, source metric/value, scale, unit and direction (for readers
    such as the printed leaderboard and the HTML report, which must not guess)."""
    recs = [{"column": c, "label": PRETTY.get(c, c), "metric": m, "value": v,
             "scale": 100.0 if c == "ORS" and ors_percent else s,
             "unit": "0–100" if c == "ORS" and ors_percent else UNITS.get(c, "0–100"),
             "higher_is_better": c not in lower, "role": "score"} for c, (m, v, s) in COLUMNS.items()]
    recs.append({"column": GATE, "label": PRETTY[GATE], "metric": "memobench.camera_gate", "value": "passed",
                 "scale": 1.0, "unit": "fraction", "higher_is_better": True, "role": "gate"})
    return pd.DataFrame(recs)


def case_table(rows: list[ScoreRow], ors_percent: bool = False, gate_metric: str = "memobench.camera_gate",
               canonical: bool = False) -> pd.DataFrame:
    """One row per (model, split, case): every leaderboard column (NaN when missing/failed) and ``gate``.

    ``canonical``: model names go through the official alias table / lower-casing first.
    """
    recs: dict[tuple[str, str, str], dict[str, Any]] = {}
    by_metric: dict[str, list[tuple[str, str, float]]] = {}
    for col, (metric, key, scale) in COLUMNS.items():
        if col == "ORS" and ors_percent:
            scale = 100.0
        by_metric.setdefault(metric, []).append((col, key, scale))
    for r in rows:
        if r.benchmark != BENCHMARK:
            continue
        split = r.strata.get("split", "")
        model = canonical_model(r.model) if canonical else r.model
        rec = recs.setdefault((model, split, r.case_id), {"model": model, "split": split, "case_id": r.case_id})
        if r.status != "ok":
            continue
        if r.metric == gate_metric:
            v = r.values.get("passed")
            rec["gate"] = np.nan if v is None else float(v)
        for col, key, scale in by_metric.get(r.metric, ()):
            v = r.values.get(key)
            rec[col] = np.nan if v is None else float(v) * scale
    cols = ["model", "split", "case_id", *COLUMNS, "gate"]
    df = pd.DataFrame(list(recs.values()), columns=cols)
    return df.astype({c: float for c in [*COLUMNS, "gate"]})


def bootstrap_ci(x: np.ndarray, replicates: int, rng: np.random.Generator, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile CIs of the NaN-skipping column means of ``x`` [cases, columns] under case resampling (one
    set of resampled case indices shared by every column)."""
    n, c = x.shape
    lo, hi = np.full(c, np.nan), np.full(c, np.nan)
    if n == 0 or replicates <= 0:
        return lo, hi
    idx = rng.integers(0, n, size=(replicates, n))
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN replicates are expected for sparse columns
        for j in range(c):
            col = x[:, j]
            if not np.isnan(col).all():
                means = np.nanmean(col[idx], axis=1)
                if not np.isnan(means).all():
                    lo[j], hi[j] = np.nanpercentile(means, q)
    return lo, hi


def _nanmean(col: np.ndarray) -> float:
    v = col[~np.isnan(col)]
    return float(np.sum(v) / len(v)) if len(v) else np.nan


def marks(table: pd.DataFrame, columns: list[str], lower: set[str] | frozenset[str] = frozenset()) -> pd.DataFrame:
    """"best" / "second" per column within each split (``lower``: lower is better; ties share a mark)."""
    out = table[["split", "model"]].copy()
    splits = table["split"].to_numpy(dtype=object)
    # each split's rows, splits in order of first appearance (what ``groupby(sort=False)`` visits)
    groups = [np.flatnonzero(splits == s) for s in dict.fromkeys(splits)]
    for col in columns:
        x = table[col].to_numpy(dtype=float)
        labels = np.full(len(table), "", dtype=object)
        for rows in groups:
            g = x[rows]
            vals = sorted(np.unique(g[~np.isnan(g)]).tolist(), reverse=col not in lower)
            for rank, label in ((0, "best"), (1, "second")):
                if len(vals) > rank:
                    labels[rows[np.isclose(g, vals[rank])]] = label
        out[col] = pd.Series(labels, index=out.index, dtype=str)
    return out


OFFICIAL_MEAN = "Official mean"


def official_mean(row: Mapping[str, Any], columns: list[str], ors_percent: bool) -> float:
    """The official HTML view's ranking value: mean of the row's non-null columns, LPIPS as 100 − LPIPS and ORS
    on the official CSV's ×100 scale (spec §4; it mixes dB, 0–1 and 0–100 as the official page does)."""
    vals = []
    for c in columns:
        v = row.get(c)
        if v is None or (isinstance(v, float) and np.isnan(v)):
            continue
        v = float(v)
        if c == "GT_ALL_LPIPS":
            v = 100.0 - v
        elif c == "ORS" and not ors_percent:
            v *= 100.0
        vals.append(v)
    return float(np.mean(vals)) if vals else np.nan


def view_cells(main: pd.DataFrame, gated: pd.DataFrame, ci: pd.DataFrame, coltab: pd.DataFrame, split: str,
               ors_percent: bool) -> pd.DataFrame:
    """The paper's columns and the official HTML ranking value as cells of the ranked views (kind
    ``view_columns``): each column with its CI, unit and direction, for the gated and the all-cases view."""
    meta = {rec["column"]: rec for rec in coltab.to_dict("records")}
    bounds: dict[tuple[Any, Any, Any, Any], tuple[Any, Any]] = {}  # the first CI record per key, looked up once
    for rec in ci.loc[ci["split"] == split, ["model", "variant", "column", "ci_low", "ci_high"]].itertuples(index=False):
        bounds.setdefault((split, rec.model, rec.variant, rec.column), (rec.ci_low, rec.ci_high))
    recs = []
    for variant, table in (("gated", gated), ("all", main)):
        t = table[table["split"] == split]
        cols = [c for c in COLUMNS if c in t.columns and c != "ORS"]
        cells = {}  # what a column's cells say besides their numbers, drawn once
        for c in cols:
            m = meta[c]
            unit = str(m["unit"])
            cells[c] = {"column": str(m["label"]), "metric": str(m["metric"]), "unit": unit,
                        "direction": "↑" if bool(m["higher_is_better"]) else "↓",
                        "digits": 3 if unit in ("0–1", "fraction") else 2}
        for row in t.to_dict("records"):
            for c in cols:
                hit = bounds.get((split, row["model"], variant, c))
                recs.append({"benchmark": BENCHMARK, "variant": variant, "model": row["model"], **cells[c],
                             "mean": row.get(c, np.nan),
                             "ci_low": hit[0] if hit else np.nan, "ci_high": hit[1] if hit else np.nan})
            recs.append({"benchmark": BENCHMARK, "variant": variant, "model": row["model"], "column": OFFICIAL_MEAN,
                         "metric": "", "unit": "mixed", "direction": "↑", "digits": 2,
                         "mean": official_mean(row, [c for c in COLUMNS if c in t.columns], ors_percent),
                         "ci_low": np.nan, "ci_high": np.nan})
    return pd.DataFrame(recs, columns=VIEW_CELL_COLUMNS)


class MemoBenchLeaderboard(Aggregator):
    """Paper-style MemoBench leaderboard per split with CIs, marks, gate pass rate and gated columns."""

    name: ClassVar[str] = "memobench.leaderboard"
    description: ClassVar[str] = "MemoBench leaderboard (synthetic / real / all) with bootstrap CIs and camera gating"
    # the official result folders it imports: their files' contents are part of its cache key
    path_params: ClassVar[tuple[str, ...]] = ("official_eval_dir", "official_ors_dir", "official_vqa_dir")
    defaults: ClassVar[dict[str, Any]] = {
        "splits": ["synthetic", "real", "all"],
        "replicates": 1000,
        "seed": 0,
        "level": 0.95,
        "ors_percent": False,                  # official CSV shows ORS ×100; the paper 0-1
        "camctrl_rescale_below_one": True,     # official heuristic: a CameraControllability mean < 1 is ×100
        "gate_metric": "memobench.camera_gate",
        "gated_columns": ["ObjIdentityConsistency", "Geo3DConsistency", "ORS", "GT_ALL_PSNR", "GT_ALL_SSIM",
                          "GT_ALL_LPIPS", "ObjectBackground", "ContinuityOfMemory"],
        "canonical_models": True,              # official: alias table, else lower-case (cogvideo == CogVideoX)
        "official_eval_dir": "",               # official result folders to import next to this run ("" = none)
        "official_ors_dir": "",
        "official_vqa_dir": "",
        "official_label": "{model} (official)",  # imported model name; "{model}" pools with this run's rows
    }
    uses_value_meta: ClassVar[bool] = True
    tables: ClassVar[dict[str, str]] = {
        "memobench_leaderboard": "leaderboard", "memobench_leaderboard_gated": "leaderboard_gated",
        "memobench_leaderboard_ci": "leaderboard_intervals", "memobench_leaderboard_marks": "leaderboard_marks",
        "memobench_leaderboard_columns": "leaderboard_columns", "memobench_cases": "cases",
        "memobench_view_cells": "view_columns"}

    def aggregate(self, rows: list[ScoreRow], params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
        """Tables ``memobench_``: leaderboard, leaderboard_gated, leaderboard_ci (long), leaderboard_marks, cases."""
        params = dict(params or {})
        lower = lower_columns(params.pop("value_meta", None) or {})  # directions as the metrics declare them
        p = merge_typed(self.defaults, params, f"{self.name}.params")
        if p["official_eval_dir"] or p["official_ors_dir"] or p["official_vqa_dir"]:
            rows = [*rows, *official_rows(p["official_eval_dir"] or None, p["official_ors_dir"] or None,
                                          p["official_vqa_dir"] or None, p["official_label"])]
        cases = case_table(rows, p["ors_percent"], p["gate_metric"], p["canonical_models"])
        cols = list(COLUMNS)
        gated_cols = [c for c in p["gated_columns"] if c in COLUMNS]
        main, gated, ci = [], [], []
        # the case table as arrays, taken apart by boolean masks (as fast as pandas' filters are slow); a
        # mask keeps the rows' order, so every mean and bootstrap draw is the one of the filtered frame
        values = cases[cols].to_numpy(dtype=float)
        gates = cases["gate"].to_numpy(dtype=float)
        split_of = cases["split"].to_numpy(dtype=object)
        model_of = cases["model"].to_numpy(dtype=object)
        gated_at = [cols.index(c) for c in gated_cols]
        for split in p["splits"]:
            in_split = np.ones(len(cases), dtype=bool) if split == "all" else split_of == split
            for model in sorted(set(model_of[in_split].tolist())):
                mine = in_split & (model_of == model)
                rate = _nanmean(gates[mine])
                for variant, rows, use, at in (("all", mine, cols, list(range(len(cols)))),
                                               ("gated", mine & (gates == 1.0), gated_cols, gated_at)):
                    x = values[rows][:, at]
                    means = np.array([_nanmean(x[:, j]) for j in range(len(use))])
                    stream = [p["seed"], zlib.crc32(f"{split}|{model}|{variant}".encode())]
                    lo, hi = bootstrap_ci(x, p["replicates"], np.random.default_rng(stream), p["level"])
                    if p["camctrl_rescale_below_one"] and "CameraControllability" in use:
                        j = use.index("CameraControllability")
                        if means[j] < 1:  # the official heuristic meant for 0-1 files (also hits real 0-100 means < 1)
                            means[j], lo[j], hi[j] = means[j] * 100, lo[j] * 100, hi[j] * 100
                    n_counts = (~np.isnan(x)).sum(axis=0)
                    for j, col in enumerate(use):
                        ci.append({"split": split, "model": model, "variant": variant, "column": col,
                                   "mean": means[j], "ci_low": lo[j], "ci_high": hi[j], "n": int(n_counts[j])})
                    row = {"split": split, "model": model, "n_cases": int(rows.sum()), **dict(zip(use, means))}
                    if variant == "all":
                        main.append({**row, GATE: rate})
                    else:
                        gated.append({"split": split, "model": model, "n_gated": int(rows.sum()), GATE: rate,
                                      **dict(zip(use, means))})
        main_df = pd.DataFrame(main, columns=["split", "model", "n_cases", *cols, GATE])
        gated_df = pd.DataFrame(gated, columns=["split", "model", "n_gated", GATE, *gated_cols])
        ci_df = pd.DataFrame(ci, columns=["split", "model", "variant", "column", "mean", "ci_low", "ci_high", "n"])
        coltab = column_table(p["ors_percent"], lower)
        return {
            "memobench_leaderboard": main_df,
            "memobench_leaderboard_gated": gated_df,
            "memobench_leaderboard_ci": ci_df,
            "memobench_leaderboard_marks": marks(main_df, [*cols, GATE], lower),
            "memobench_leaderboard_columns": coltab,
            "memobench_cases": cases,
            "memobench_view_cells": view_cells(main_df, gated_df, ci_df, coltab, "all", p["ors_percent"]),
        }


def to_markdown(tables: Mapping[str, pd.DataFrame], split: str = "all", variant: str = "all",
                with_ci: bool = False, drop_empty: bool = True) -> str:
    """Markdown table of one split (``variant``: all | gated): best **bold**, second <u>underlined</u>."""
    key = "memobench_leaderboard" if variant == "all" else "memobench_leaderboard_gated"
    t = tables[key]
    t = t[t["split"] == split].reset_index(drop=True)
    cols = [c for c in t.columns if c in COLUMNS or c == GATE]
    if drop_empty:
        cols = [c for c in cols if t[c].notna().any()]
    coltab = tables.get("memobench_leaderboard_columns")
    lower = set(coltab.loc[~coltab["higher_is_better"].astype(bool), "column"]) if coltab is not None else set()
    mk = marks(t, cols, lower)
    ci = tables.get("memobench_leaderboard_ci")
    lines = ["| Model | " + " | ".join(PRETTY.get(c, c) for c in cols) + " |",
             "|:---|" + "|".join("---:" for _ in cols) + "|"]
    for i, row in t.iterrows():
        cells = []
        for c in cols:
            v = row[c]
            if pd.isna(v):
                cells.append("—")
                continue
            s = f"{v:.2f}"
            if with_ci and ci is not None and c in COLUMNS:
                hit = ci[(ci["split"] == split) & (ci["model"] == row["model"]) & (ci["variant"] == variant)
                         & (ci["column"] == c)]
                if len(hit) and pd.notna(hit["ci_low"].iloc[0]):
                    s += f" [{hit['ci_low'].iloc[0]:.2f}, {hit['ci_high'].iloc[0]:.2f}]"
            label = mk.loc[i, c]
            cells.append(f"**{s}**" if label == "best" else f"<u>{s}</u>" if label == "second" else s)
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
