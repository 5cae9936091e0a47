"""``mind.result``: the release's ``Result.json`` numbers as tables, per clip and per perspective × test type.

``mind_clips`` has one row per (model, case) — the release's ``data`` entries (mirror videos: its
``video_results``): ``path`` (the clip folder), ``perspective``, ``test_type``, ``video_name`` (mirror),
``error`` (a failed row's reason), ``mark_time``, ``total_time``, ``sample_frames``, and every value of the
MIND metrics under the release's names where it has one (``lcm_avg_mse`` … ``lcm_length``,
``gsc_avg_mse`` … for mirror videos, ``dino_avg_dino_mse``, ``visual_avg_imaging``, ``visual_avg_aesthetic``,
``action_<value>``), plus ``skipped`` (metric: reason) for values that were not measured.
``mind_groups`` has one row per (model, perspective, test type): the number of clips and, per value, the plain
mean over the clips that have it and how many do (``<column>_n``). The release writes per-clip numbers only and
publishes no composite; these means are the grouping its paper tables report, and nothing is averaged across
values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, ClassVar

from worldrecall.core.components import Aggregator
from worldrecall.core.data import ScoreRow
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)

BENCHMARK = "mind"
# (metric, value) -> the release's Result.json name
RELEASE_NAMES = {
    ("mind.lcm", "mse"): "lcm_avg_mse", ("mind.lcm", "psnr"): "lcm_avg_psnr", ("mind.lcm", "ssim"): "lcm_avg_ssim",
    ("mind.lcm", "lpips"): "lcm_avg_lpips", ("mind.lcm", "frames"): "lcm_length",
    ("mind.mirror", "mse"): "gsc_avg_mse", ("mind.mirror", "psnr"): "gsc_avg_psnr",
    ("mind.mirror", "ssim"): "gsc_avg_ssim", ("mind.mirror", "lpips"): "gsc_avg_lpips",
    ("mind.mirror", "frames"): "gsc_length",
    ("mind.dino", "mse"): "dino_avg_dino_mse", ("mind.dino", "frames"): "dino_length",
    ("mind.visual_quality", "imaging"): "visual_avg_imaging", ("mind.visual_quality", "aesthetic"):
        "visual_avg_aesthetic", ("mind.visual_quality", "frames"): "visual_length",
}
FACTS = ("mark_time", "total_time", "sample_frames")
KEYS = ["model", "case_id", "path", "perspective", "test_type", "video_name", "error", *FACTS]


def column(metric: str, value: str) -> str:
    """The ``mind_clips`` column of one metric value (the release's name, else ``<short metric>_<value>``)."""
    return RELEASE_NAMES.get((metric, value), f"{metric.split('.', 1)[-1]}_{value}")


def _clip_of(case_id: str) -> tuple[str, str]:
    parts = case_id.split("/")
    if len(parts) >= 4 and parts[1] == "mirror_test":
        return parts[2], parts[3] + ".mp4"
    return (parts[2] if len(parts) >= 3 else case_id), ""


class MindResult(Aggregator):
    """Per-clip Result.json numbers and their per-(perspective, test type) means."""

    name: ClassVar[str] = "mind.result"
    description: ClassVar[str] = "MIND Result.json per clip (mind_clips) and per perspective x test type (mind_groups)"
    defaults: ClassVar[dict[str, Any]] = {}
    tables: ClassVar[dict[str, str]] = {"mind_clips": "cases", "mind_groups": "leaderboard"}

    def aggregate(self, rows: list[ScoreRow], params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
        """``mind_clips`` and ``mind_groups`` (module doc)."""
        clips: dict[tuple[str, str], dict[str, Any]] = {}
        errors: dict[tuple[str, str], list[str]] = defaultdict(list)
        skipped: dict[tuple[str, str], list[str]] = defaultdict(list)
        value_cols: list[str] = []
        for r in sorted(rows, key=lambda r: (r.model, r.case_id, r.metric)):
            if r.benchmark != BENCHMARK:
                continue
            key = (r.model, r.case_id)
            path, video = _clip_of(r.case_id)
            rec = clips.setdefault(key, {"model": r.model, "case_id": r.case_id, "path": path,
                                         "perspective": r.strata.get("perspective", ""),
                                         "test_type": r.strata.get("test_type", ""), "video_name": video})
            for f in FACTS:
                if f in (r.info or {}) and rec.get(f) is None:
                    rec[f] = r.info[f]
            if r.status == "failed":
                errors[key].append(f"{r.metric}: {r.reason}")
            elif r.status == "skipped":
                skipped[key].append(f"{r.metric}: {r.reason}")
            if r.status != "ok":
                continue
            for v, x in sorted(r.values.items()):
                col = column(r.metric, v)
                if col not in value_cols:
                    value_cols.append(col)
                rec[col] = x
        order = sorted(value_cols)
        out = []
        for key, rec in sorted(clips.items()):
            rec["error"] = "; ".join(errors.get(key, [])) or None
            rec["skipped"] = "; ".join(skipped.get(key, [])) or None
            out.append(rec)
        clip_cols = [*KEYS, *order, "skipped"]
        clips_df = pd.DataFrame([{c: r.get(c) for c in clip_cols} for r in out], columns=clip_cols)
        groups = []
        by_group: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for rec in out:
            by_group[(rec["model"], rec["perspective"], rec["test_type"])].append(rec)
        for (model, persp, tt), recs in sorted(by_group.items()):
            g: dict[str, Any] = {"model": model, "perspective": persp, "test_type": tt, "n_clips": len(recs),
                                 "n_errors": sum(1 for r in recs if r.get("error"))}
            for c in order:
                vals = [float(r[c]) for r in recs if r.get(c) is not None]
                g[c] = sum(vals) / len(vals) if vals else None
                g[f"{c}_n"] = len(vals)
            groups.append(g)
        group_cols = ["model", "perspective", "test_type", "n_clips", "n_errors",
                      *[x for c in order for x in (c, f"{c}_n")]]
        return {"mind_clips": clips_df,
                "mind_groups": pd.DataFrame([{c: g.get(c) for c in group_cols} for g in groups], columns=group_cols)}
