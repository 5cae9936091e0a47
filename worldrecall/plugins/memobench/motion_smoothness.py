"""MemoBench Motion Smoothness: flow warp error over the V and R phases, exp(-err / tau).

Measure: for consecutive sampled frames (A, B) of V (0, 4, … <= h) and R (r, r+4, … <= N-1), forward flow
A->B from the ``flow`` role, then the official warp: sample the *earlier* frame A at p + F(p) (bilinear,
``align_corners=True``, border padding, [0, 1] images) and compare with B at p. Every pair's error is stored,
so tau and the short-phase rule are re-scored without rerunning flow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.plugins.memobench import rounding, sampling
from worldrecall.plugins.memobench.base import MemoBenchMetric, batched, capped_frames, phase_info

PHASES = ("V", "R")


def warp_error(a: np.ndarray, b: np.ndarray, flow: np.ndarray) -> float:
    """Mean |A(p + F(p)) - B(p)| over pixels and channels, frames uint8 RGB scaled to [0, 1] (float32).

    ``flow`` is [H, W, 2] (x, y) pixels, forward A->B. Zero flow gives ≈5e-9, not exactly 0 (errata 4).
    """
    import torch
    import torch.nn.functional as F

    h, w = a.shape[:2]
    if flow.shape[:2] != (h, w) or flow.shape[-1] != 2:
        raise CaseFailure(f"flow backend returned shape {tuple(flow.shape)} for {w}x{h} frames")
    t1 = torch.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1).float().div(255).unsqueeze(0)
    t2 = torch.from_numpy(np.ascontiguousarray(b)).permute(2, 0, 1).float().div(255).unsqueeze(0)
    fl = np.ascontiguousarray(flow, dtype=np.float32)
    # (p + F(p)) / (size - 1) * 2 - 1 per axis, normalised to [-1, 1] for align_corners=True: the float32
    # operations torch would run, in numpy, written straight into the [1, H, W, 2] grid (fewer temporaries)
    grid = np.empty((1, h, w, 2), np.float32)
    np.add(fl[..., 0], np.arange(w, dtype=np.float32)[None, :], out=grid[0, ..., 0])
    np.add(fl[..., 1], np.arange(h, dtype=np.float32)[:, None], out=grid[0, ..., 1])
    with np.errstate(divide="ignore", invalid="ignore"):  # a 1-pixel side divides by 0, as torch does
        grid[..., 0] /= np.float32(w - 1)
        grid[..., 1] /= np.float32(h - 1)
    grid *= np.float32(2.0)
    grid -= np.float32(1.0)
    warped = F.grid_sample(t1, torch.from_numpy(grid), mode="bilinear", padding_mode="border", align_corners=True)
    return float(warped.sub_(t2).abs_().mean().item())


def phase_score(n_samples: int, errors: np.ndarray, tau: float, min_samples: int,
                short_phase_zero: bool) -> float | None:
    """One phase: exp(-mean_err / tau); fewer than ``min_samples`` samples -> 0.0 (official) or None (skip)."""
    if n_samples < min_samples:
        return 0.0 if short_phase_zero else None
    mean_err = float(np.mean(errors)) if len(errors) else 1.0
    return float(np.exp(-mean_err / tau))


class MotionSmoothness(MemoBenchMetric):
    """``MotionSmoothness`` (0-100) = round(clip(100 · TemporalScore), 1); TemporalScore = mean of phase scores."""

    name: ClassVar[str] = "memobench.motion_smoothness"
    description: ClassVar[str] = "Flow warp error over V and R samples (RAFT in the paper), exp(-err/0.15)"
    primary: ClassVar[str] = "score"
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                       description="motion smoothness (official scale, x100, rounded)"),
        "score_raw": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                           description="motion smoothness unrounded"),
        "TemporalScore": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                               description="temporal score"),
        "TemporalScore_pct": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                                   description="temporal score x 100"),
        "V_score": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="V-phase smoothness"),
        "R_score": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="R-phase smoothness"),
    }
    models: ClassVar[tuple[str, ...]] = ("flow",)
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "sample_step": 4}
    thresholds: ClassVar[dict[str, Any]] = {"tau": 0.15, "min_samples": 3, "short_phase_zero": True}
    imports: ClassVar[tuple[str, ...]] = ("torch", "torch.nn.functional")  # the official warp (warp_error)

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Warp error of every consecutive sampled pair of V and R."""
        frames = capped_frames(case, self.params["max_side"])
        h, r, n = phase_info(alignment)
        idx = sampling.motion_phase_indices(h, r, n, self.params["sample_step"])
        flow_model = ctx.models.get("flow")
        out: dict[str, Any] = {}
        for p in PHASES:
            ids = idx[p]
            out[f"{p}_scored"] = ids is not None
            ids = ids or []
            pairs = [(ids[i], ids[i + 1]) for i in range(len(ids) - 1)]
            errs: list[float] = []
            for chunk in batched(pairs, ctx.batch_size):
                flows = flow_model.flow([(frames[a], frames[b]) for a, b in chunk], case=case, indices=list(chunk))
                errs += [warp_error(frames[a], frames[b], np.asarray(f)) for (a, b), f in zip(chunk, flows)]
            out[f"{p}_indices"] = np.asarray(ids, dtype=np.int64)
            out[f"{p}_errors"] = np.asarray(errs, dtype=np.float64)
        return out

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """TemporalScore (4 dp), its pct (1 dp) and MotionSmoothness (2 dp) = ``score``."""
        values: dict[str, float | None] = {}
        scores = []
        for p in PHASES:
            s = None
            if bool(measurement[f"{p}_scored"]):
                s = phase_score(len(measurement[f"{p}_indices"]), np.asarray(measurement[f"{p}_errors"]),
                                thresholds["tau"], thresholds["min_samples"], thresholds["short_phase_zero"])
                if s is not None:
                    scores.append(s)
            values[f"{p}_score"] = s
        t = float(np.mean(scores)) if scores else 0.0
        t4 = rounding.round_py(t, 4)
        t_pct = rounding.pct_of("TemporalScore", t4)
        values.update({
            "TemporalScore": t4,
            "TemporalScore_pct": t_pct,
            "score": rounding.round_np(t_pct, 2),
            "score_raw": None if math.isnan(t) else min(max(t * 100, 0.0), 100.0),
        })
        return values
