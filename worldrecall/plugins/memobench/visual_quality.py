"""MemoBench Visual Quality: LAION aesthetic (0-10) and CLIP-IQA+ (0-1) over every 4th frame.

Both are normalised with fixed ranges (aesthetic / 10, IQA as is; no dataset min-max), turned into
1-decimal percentages and averaged: ``VisualQuality = round((aes_pct + iqa_pct) / 2, 2)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Value
from worldrecall.core.data import Alignment, Case
from worldrecall.plugins.memobench import rounding, sampling
from worldrecall.plugins.memobench.base import MemoBenchMetric, batched, capped_frames, pick


def _scores(model: Any, frames: np.ndarray, idx: list[int], case: Case, batch: int) -> np.ndarray:
    out: list[float] = []
    for chunk in batched(idx, batch):
        out += [float(v) for v in np.asarray(model.score_frames(pick(frames, chunk), case=case, indices=list(chunk)))]
    return np.asarray(out, dtype=np.float64)


def _raw_pct(raw: float, lo: float, hi: float) -> float:
    return min(max((raw - lo) / (hi - lo) * 100, 0.0), 100.0)


class VisualQuality(MemoBenchMetric):
    """``VisualQuality`` (0-100) from ``AestheticScore`` and ``ImageQuality``."""

    name: ClassVar[str] = "memobench.visual_quality"
    description: ClassVar[str] = "LAION aesthetic + CLIP-IQA+ on every 4th frame, fixed-range normalised"
    primary: ClassVar[str] = "score"
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 100.0), unit="",
                       description="visual quality: mean of the two percentages (2 dp)"),
        "score_raw": Value(higher_is_better=True, range=(0.0, 100.0), unit="",
                           description="visual quality unrounded"),
        "AestheticScore": Value(higher_is_better=True, range=None, unit="",
                                description="mean LAION aesthetic score of the sampled frames (4 dp)"),
        "AestheticScore_pct": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                                    description="aesthetic score on the fixed aesthetic_range, x 100"),
        "ImageQuality": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                              description="mean CLIP-IQA+ of the sampled frames, clipped per frame (4 dp)"),
        "ImageQuality_pct": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                                  description="image quality on the fixed iqa_range, x 100"),
    }
    models: ClassVar[tuple[str, ...]] = ("aesthetic", "iqa")
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "sample_step": 4}
    thresholds: ClassVar[dict[str, Any]] = {"aesthetic_range": [0.0, 10.0], "iqa_range": [0.0, 1.0]}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Per-frame aesthetic and IQA scores of frames 0, step, 2·step, …"""
        frames = capped_frames(case, self.params["max_side"])
        idx = sampling.visual_quality_indices(len(frames), self.params["sample_step"])
        return {
            "indices": np.asarray(idx, dtype=np.int64),
            "aesthetic": _scores(ctx.models.get("aesthetic"), frames, idx, case, ctx.batch_size),
            "iqa": _scores(ctx.models.get("iqa"), frames, idx, case, ctx.batch_size),
        }

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Clip means (4 dp; 0.0 for no samples), their pct (1 dp) and the 2-dp average ``score``."""
        aes = np.asarray(measurement["aesthetic"], dtype=np.float64)
        iqa = np.clip(np.asarray(measurement["iqa"], dtype=np.float64), 0.0, 1.0)  # per-frame clip (official)
        a_raw = float(np.mean(aes)) if len(aes) else 0.0
        q_raw = float(np.mean(iqa)) if len(iqa) else 0.0
        a4, q4 = rounding.round_py(a_raw, 4), rounding.round_py(q_raw, 4)
        (a_lo, a_hi), (q_lo, q_hi) = thresholds["aesthetic_range"], thresholds["iqa_range"]
        a_pct, q_pct = rounding.pct(a4, a_lo, a_hi), rounding.pct(q4, q_lo, q_hi)
        # row-wise NaN-skipping mean of the two percentages, as the official pandas step
        pcts = [p for p in (a_pct, q_pct) if p is not None]
        raws = [v for v in (_raw_pct(a_raw, a_lo, a_hi), _raw_pct(q_raw, q_lo, q_hi)) if not np.isnan(v)]
        return {
            "AestheticScore": a4,
            "ImageQuality": q4,
            "AestheticScore_pct": a_pct,
            "ImageQuality_pct": q_pct,
            "score": rounding.round_np(sum(pcts) / len(pcts), 2) if pcts else None,
            "score_raw": sum(raws) / len(raws) if raws else None,
        }
