"""The end of a multirun sweep: each affected metric against the swept value, as a table and plots.

Every job writes ``<job dir>/summary.json`` (its swept overrides and the mean/CI of each metric's primary
value per benchmark x model, with direction and unit from ``value_meta``). At ``on_multirun_end`` the
Hydra callback reads them all: a metric is *affected* when some model's mean differs between swept
values. The summary is printed, written under the sweep folder (``sweep_summary.md`` / ``.csv``, one PNG
per affected metric with CI bands) and logged to the sweep's parent run.

Shards are not swept values: ``shard.index``/``shard.count`` are never swept keys, a shard job's own summary
is marked partial and skipped, and the merged result (written by the last shard, see
:mod:`worldrecall.engine.stages.shards`) stands for its configuration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.atomic import atomic_write_text
from worldrecall.core.data import finite_float
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)
from worldrecall.engine.sinks.pipe_table import pipe_table
from worldrecall.engine.sinks.results_view import direction_label, summary, unit_label, value_meta
from worldrecall.engine.stages.shards import is_shard_key

SWEPT_FILE = "swept_keys.json"
SWEPT_ENV = "WORLDRECALL_SWEPT_KEYS"


def swept_keys(task_overrides: Iterable[str]) -> list[str]:
    """Keys a Hydra multirun sweeps: ``k=a,b``, ``k=range(..)``, ``k=choice(..)``, ``k=glob(..)``.

    Shard keys never count: shards split one configuration's cases, they are not values to compare.
    """
    out = []
    for o in task_overrides:
        k, eq, v = str(o).partition("=")
        if not eq or is_shard_key(k):
            continue
        depth, comma = 0, False
        for ch in v:  # a comma inside [..] / {..} / (..) is a list value, not a sweep
            depth += ch in "[{(" and 1 or 0
            depth -= ch in "]})" and 1 or 0
            comma |= ch == "," and depth == 0
        if comma or v.startswith(("range(", "choice(", "glob(", "interval(")):
            out.append(k.lstrip("+~"))
    return out


def job_summary(result: Any, host: Any, swept: Mapping[str, str], partial: bool = False) -> dict[str, Any]:
    """What ``summary.json`` holds for one job: swept values and primary values' means and CIs
    (``partial``: a shard job's own tables, skipped by :func:`collect`)."""
    s = summary(host, result.tables)
    recs = []
    for r in s.itertuples(index=False):
        cls = host.metrics.get(r.metric)
        if cls is None or getattr(cls, "primary", "") != r.value:
            continue
        meta = value_meta(host, r.metric, r.value)
        recs.append({"benchmark": r.benchmark, "model": r.model, "metric": r.metric, "value": r.value,
                     "mean": finite_float(r.mean), "ci_low": finite_float(r.ci_low),
                     "ci_high": finite_float(r.ci_high),
                     "direction": direction_label(meta), "unit": unit_label(meta)})
    return {"swept": dict(swept), "results_dir": str(result.results_dir), "partial": partial, "rows": recs}


def write_job_summary(job_dir: Path, result: Any, host: Any, overrides: list[str], keys: list[str],
                      partial: bool = False) -> Path:
    swept = {k.lstrip("+~"): v for k, _, v in (o.partition("=") for o in overrides) if k.lstrip("+~") in keys}
    return atomic_write_text(Path(job_dir) / "summary.json",
                             json.dumps(job_summary(result, host, swept, partial), indent=1))




class JobSummarySink:
    """A Hydra job's own files: ``results_dir.txt`` and, in a sweep, ``summary.json`` (what the sweep
    summary reads at ``on_multirun_end``; a shard's is marked partial)."""

    name = "job_summary"

    def write(self, result: Any, ctx: Any) -> list[Path]:
        if ctx.job_dir is None:
            return []
        job_dir = Path(ctx.job_dir)
        job_dir.mkdir(parents=True, exist_ok=True)
        paths = [atomic_write_text(job_dir / "results_dir.txt", str(result.results_dir))]
        if ctx.sweep_dir is not None:
            paths.append(write_job_summary(job_dir, result, ctx.host, list(ctx.overrides),
                                           current_swept_keys(ctx.sweep_dir), partial=result.partial))
        return paths


def collect(sweep_dir: Path) -> pd.DataFrame:
    """One line per (job, benchmark, model, metric) from every job's ``summary.json``."""
    recs = []
    for p in sorted(Path(sweep_dir).glob("*/summary.json"), key=lambda p: (len(p.parent.name), p.parent.name)):
        d = json.loads(p.read_text())
        if d.get("partial"):  # a shard's own tables: its configuration's merged summary stands for it
            continue
        label = " ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in d["swept"].items()) or p.parent.name
        x = next(iter(d["swept"].values()), p.parent.name) if len(d["swept"]) == 1 else label
        for r in d["rows"]:
            recs.append({"job": p.parent.name, "swept": label, "x": x, "results_dir": d.get("results_dir", ""), **r})
    return pd.DataFrame(recs)


def affected(df: pd.DataFrame, tol: float = 1e-12) -> pd.DataFrame:
    """Rows of the metrics whose mean changes across swept values for at least one model."""
    if df.empty:
        return df
    keep = []
    for _, g in df.groupby(["benchmark", "metric"]):
        spread = g.groupby("model")["mean"].agg(lambda s: (s.max() - s.min()) if s.notna().any() else 0.0)
        if (spread > tol).any() or g.groupby("model")["mean"].apply(lambda s: s.isna().any() and s.notna().any()).any():
            keep.append(g)
    return pd.concat(keep, ignore_index=True) if keep else df.iloc[0:0]


def _sort_x(xs: Iterable[Any]) -> list[Any]:
    xs = list(dict.fromkeys(xs))
    try:
        return sorted(xs, key=float)
    except (TypeError, ValueError):
        return xs


def table(df: pd.DataFrame) -> pd.DataFrame:
    """Wide table: one line per (benchmark, metric, model), one column per swept value, ``mean [lo, hi]``."""
    if df.empty:
        return pd.DataFrame()
    xs = _sort_x(df["x"])
    recs = []
    for (bench, metric, model), g in df.groupby(["benchmark", "metric", "model"], sort=True):
        first = g.iloc[0]
        rec = {"benchmark": bench, "metric": f"{metric.split('.', 1)[-1]} ({first['unit']} {first['direction']})",
               "model": model}
        for x in xs:
            hit = g[g["x"] == x]
            rec[str(x)] = _cell(hit.iloc[0]) if len(hit) else ""
        recs.append(rec)
    return pd.DataFrame(recs)


def _cell(r: Any) -> str:
    if r["mean"] is None or (isinstance(r["mean"], float) and math.isnan(r["mean"])):
        return "n/a"
    s = f"{r['mean']:.4g}"
    if r["ci_low"] is not None and r["ci_high"] is not None and not (math.isnan(r["ci_low"]) or math.isnan(r["ci_high"])):
        s += f" [{r['ci_low']:.3g}, {r['ci_high']:.3g}]"
    return s


def plots(df: pd.DataFrame, out_dir: Path, swept_label: str) -> list[Path]:
    """One PNG per affected metric: mean vs swept value per model, shaded 95% CI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: list[Path] = []
    xs = _sort_x(df["x"])
    numeric = all(_isnum(x) for x in xs)
    for (bench, metric), g in df.groupby(["benchmark", "metric"]):
        fig, ax = plt.subplots(figsize=(8.4, 3.8))
        xv = [float(x) for x in xs] if numeric else list(range(len(xs)))
        for label, gm in series_groups(g, xs):
            m = gm["mean"].astype(float).to_numpy()
            (line,) = ax.plot(xv, m, marker="o", ms=3, label=label)
            lo, hi = gm["ci_low"].astype(float).to_numpy(), gm["ci_high"].astype(float).to_numpy()
            ax.fill_between(xv, lo, hi, alpha=0.07, color=line.get_color(), linewidth=0)  # light: 8 bands overlap
        if not numeric:
            ax.set_xticks(range(len(xs)), [str(x) for x in xs], rotation=30, ha="right", fontsize=7)
        elif min(map(float, xs)) > 0 and max(map(float, xs)) / min(map(float, xs)) >= 20:
            ax.set_xscale("log")  # swept values spanning decades (thresholds usually do)
            ax.set_xticks([float(x) for x in xs], [str(x) for x in xs], fontsize=7)
            ax.minorticks_off()
        first = g.iloc[0]
        ax.set_xlabel(swept_label)
        ax.set_ylabel(f"{metric.split('.', 1)[-1]} ({first['unit']} {first['direction']})")
        ax.set_title(f"{bench}: {metric.split('.', 1)[-1]} vs {swept_label} (mean, 95% CI band)", fontsize=9)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)
        p = Path(out_dir) / f"sweep_{metric.replace('.', '_')}.png"
        p.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(p, dpi=100, bbox_inches="tight")  # the canvas grows to the legend outside the axes
        plt.close(fig)
        out.append(p)
    return out


def series_groups(g: pd.DataFrame, xs: list[Any]) -> list[tuple[str, pd.DataFrame]]:
    """One plotted series per distinct curve: models whose means agree at every swept value share one line,
    labelled ``a = b`` (eight overlapping lines read as one otherwise)."""
    groups: list[tuple[list[str], pd.DataFrame, Any]] = []
    for model, gm in g.groupby("model"):
        gm = gm.set_index("x").reindex(xs)
        m = gm["mean"].astype(float).to_numpy()
        for names, _, ref in groups:
            if np.allclose(m, ref, rtol=0.0, atol=1e-12, equal_nan=True):
                names.append(str(model))
                break
        else:
            groups.append(([str(model)], gm, m))
    return [(" = ".join(names), gm) for names, gm, _ in groups]


def _isnum(x: Any) -> bool:
    try:
        float(x)
        return True
    except (TypeError, ValueError):
        return False


def summarise(sweep_dir: Path, keys: list[str]) -> tuple[str, list[Path]]:
    """Text to print and files written (``sweep_summary.md``/``.csv``, plots) for the sweep in ``sweep_dir``."""
    df = collect(sweep_dir)
    if df.empty:
        if any(Path(sweep_dir).glob("*/summary.json")):  # only shards' partial summaries: no merge happened
            return ("sweep summary: the shards ended without a merge (did one fail?); merge what they wrote with "
                    "`worldrecall aggregate shard.count=<n>` and the same overrides"), []
        return "sweep summary: no job summaries found", []
    if not keys:  # only shards were swept: one merged configuration, nothing to compare
        return _merged_summary(sweep_dir, df)
    label = ", ".join(k.rsplit(".", 1)[-1] for k in keys) or "job"
    aff = affected(df)
    n_vals = df["x"].nunique()
    head = f"== sweep summary: {len(df['job'].unique())} jobs over {label} ({', '.join(map(str, _sort_x(df['x'])))}) =="
    if aff.empty:
        text = (f"{head}\nno metric's primary value changed across the {n_vals} swept values "
                f"(every model, every benchmark): this threshold does not matter on these cases.")
        md = text + "\n"
        files = [atomic_write_text(Path(sweep_dir) / "sweep_summary.md", md)]
        return text, files
    wide = table(aff)
    n_aff = aff.groupby(["benchmark", "metric"]).ngroups
    text = f"{head}\n{n_aff} metric(s) change with {label}; mean [95% CI] per swept value:\n{wide.to_string(index=False)}"
    files = [atomic_write_text(Path(sweep_dir) / "sweep_summary.md",
                               f"# Sweep summary: {label}\n\n" + pipe_table(wide)),
             atomic_write_text(Path(sweep_dir) / "sweep_summary.csv", aff.to_csv(index=False))]
    files += plots(aff, Path(sweep_dir) / "sweep_plots", label)
    return text, files


def _merged_summary(sweep_dir: Path, df: pd.DataFrame) -> tuple[str, list[Path]]:
    """A multirun that only split cases into shards: the merged result's primary values, one column."""
    dirs = sorted(set(df["results_dir"])) if "results_dir" in df else []
    wide = table(df.assign(x="merged"))
    text = (f"== shards merged: {', '.join(dirs) or sweep_dir} ==\nmean [95% CI] of each metric's primary value "
            f"(all shards):\n{wide.to_string(index=False)}")
    files = [atomic_write_text(Path(sweep_dir) / "sweep_summary.md", "# Merged shards\n\n" + pipe_table(wide))]
    return text, files


def current_swept_keys(sweep_dir: Path | None) -> list[str]:
    """The swept keys the sweep callback recorded (environment first, then the sweep folder's file)."""
    import os

    env = os.environ.get(SWEPT_ENV)
    if env:
        return list(json.loads(env))
    p = Path(sweep_dir) / SWEPT_FILE if sweep_dir is not None else None
    return list(json.loads(p.read_text())) if p is not None and p.exists() else []
