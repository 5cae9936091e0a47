"""MemoBench GTRevisitSim (diagnostic): image-embedding cosine of 3 R-phase frames vs the GT R phase."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.plugins.memobench import gt as gt_io
from worldrecall.plugins.memobench import rounding, sampling
from worldrecall.plugins.memobench.base import MemoBenchMetric, capped_frames, phase_info, pick


def _unit(e: np.ndarray) -> np.ndarray:
    e = np.asarray(e, dtype=np.float32)
    return e / np.linalg.norm(e, axis=-1, keepdims=True)


class GTRevisitSim(MemoBenchMetric):
    """``score`` = mean clipped cosine (4 dp, 0-1); ``pct`` on 0-100. Not on the leaderboard."""

    name: ClassVar[str] = "memobench.gt_revisit_sim"
    description: ClassVar[str] = "CLIP ViT-B/32 cosine of generated vs GT R-phase frames (3 pairs)"
    primary: ClassVar[str] = "score"
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                       description="mean CLIP cosine of generated vs GT R-phase frames (4 dp)"),
        "score_raw": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                           description="GT revisit similarity unrounded"),
        "pct": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                     description="GT revisit similarity x 100"),
    }
    models: ClassVar[tuple[str, ...]] = ("image_embedder",)
    params: ClassVar[dict[str, Any]] = {"max_side": 640}
    thresholds: ClassVar[dict[str, Any]] = {}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Cosines of the 3 (GT native, generated capped) pairs."""
        frames = capped_frames(case, self.params["max_side"])
        _, r, n = phase_info(alignment)
        info = alignment.info
        pairs = sampling.revisit_pairs(int(info["r_gt"]), int(info["G"]), r, n)
        gt_frames = gt_io.read_gt_frames(case, [g for g, _ in pairs])
        model = ctx.models.get("image_embedder")
        e_gt = _unit(model.embed(gt_frames, case=case, indices=None))
        e_gen = _unit(model.embed(pick(frames, [k for _, k in pairs]), case=case, indices=[k for _, k in pairs]))
        if e_gt.shape != e_gen.shape or len(e_gt) != len(pairs):
            raise CaseFailure(f"image_embedder returned shapes {e_gt.shape} / {e_gen.shape} for {len(pairs)} pairs")
        cos = np.asarray([float(np.dot(a, b)) for a, b in zip(e_gt, e_gen)], dtype=np.float64)
        return {"pairs": np.asarray(pairs, dtype=np.int64), "cos": cos}

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """``score`` (4 dp), ``score_raw``, ``pct`` (1-dp percentage, 2-dp composite)."""
        cos = np.clip(np.asarray(measurement["cos"], dtype=np.float64), 0.0, 1.0)
        if len(cos) == 0:
            return {"score": None, "score_raw": None, "pct": None}
        s = float(np.mean(cos))
        s4 = rounding.round_py(s, 4)
        return {"score": s4, "score_raw": s, "pct": rounding.round_np(rounding.pct_of("GTRevisitSim", s4), 2)}
