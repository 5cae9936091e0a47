"""MemoBench Camera Controllability: rotation ATE of the estimated camera against the GT trajectory.

Measure: c2w poses of all N generated frames from the ``pose`` role (MapAnything in the paper) and the GT
poses resampled to N rows (``round(i·(G-1)/(N-1))``). Score: after first-frame alignment
``R_align = R_gt,0 · R_est,0ᵀ``, per-frame geodesic errors e_i, ``ATE = sqrt(mean e_i²)``; the scale is the
net GT rotation θ = angle(R_gt,0, R_gt,n-1) floored at 10°; ``score = max(0, 1 - ATE / max(θ, 10°))``.
n = min(#GT, #estimated); fewer than 2 estimated poses or N = 1 -> None (errata 4: θ uses GT row n-1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, MissingInput, Value
from worldrecall.core.data import Alignment, Case, file_digest
from worldrecall.gates.camera import estimate_poses
from worldrecall.plugins.memobench import gt as gt_io
from worldrecall.plugins.memobench import rounding, sampling
from worldrecall.plugins.memobench.base import MemoBenchMetric
from worldrecall.plugins.memobench.rotations import geodesic_deg, relative_rotations

_NONE = {"score": None, "score_raw": None, "pct": None, "ATE_RotDeg": None, "TotalGT_RotDeg": None,
         "MeanRotErrorDeg": None, "ATE_RotDeg_raw": None, "TotalGT_RotDeg_raw": None, "MeanRotErrorDeg_raw": None}


def estimate_rotations(case: Case, ctx: MeasureContext, max_side: int) -> np.ndarray:
    """[n, 3, 3] c2w rotations of the generated frames from the ``pose`` role (all frames, one call)."""
    return estimate_poses(case, ctx, max_side)[:, :3, :3]


def controllability(r_gt: np.ndarray, r_est: np.ndarray, min_rotation_deg: float) -> dict[str, float] | None:
    """Unrounded (score, ATE, net GT rotation, mean relative error); None when fewer than 2 poses."""
    if len(r_est) < 2 or len(r_gt) == 0:
        return None
    n = min(len(r_gt), len(r_est))
    gt, est = r_gt[:n], r_est[:n]
    align = gt[0] @ est[0].T
    errs = np.asarray([geodesic_deg(align @ est[i], gt[i]) for i in range(n)])
    ate = float(np.sqrt(np.mean(errs ** 2)))
    total = geodesic_deg(gt[0].T @ gt[-1], np.eye(3))
    score = max(0.0, 1.0 - ate / max(total, min_rotation_deg))
    rel = [geodesic_deg(a, b) for a, b in zip(relative_rotations(gt), relative_rotations(est))]
    return {"score": score, "ate": ate, "total": total, "mean_rel": float(np.mean(rel))}


class CameraControllability(MemoBenchMetric):
    """``score`` on 0-1 (4 dp), ``pct`` the 0-100 leaderboard value, ATE / net GT rotation / mean error in degrees."""

    name: ClassVar[str] = "memobench.camera_controllability"
    description: ClassVar[str] = "Rotation ATE vs GT poses after first-frame alignment, scaled by max(net GT rotation, 10°)"
    primary: ClassVar[str] = "score"
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                       description="camera controllability (1 - ATE / total GT rotation, clipped)"),
        "score_raw": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                           description="camera controllability unrounded"),
        "pct": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                     description="camera controllability x 100"),
        "ATE_RotDeg": Value(higher_is_better=False, range=(0.0, 180.0), unit="deg",
                            description="rotation ATE after alignment"),
        "ATE_RotDeg_raw": Value(higher_is_better=False, range=(0.0, 180.0), unit="deg",
                                description="rotation ATE unrounded"),
        "MeanRotErrorDeg": Value(higher_is_better=False, range=(0.0, 180.0), unit="deg",
                                 description="mean per-frame rotation error"),
        "MeanRotErrorDeg_raw": Value(higher_is_better=False, range=(0.0, 180.0), unit="deg",
                                     description="mean rotation error unrounded"),
        "TotalGT_RotDeg": Value(higher_is_better=None, range=None, unit="deg",
                                description="total GT rotation (the normaliser)"),
        "TotalGT_RotDeg_raw": Value(higher_is_better=None, range=None, unit="deg",
                                    description="total GT rotation unrounded"),
    }
    models: ClassVar[tuple[str, ...]] = ("pose",)
    params: ClassVar[dict[str, Any]] = {"max_side": 640}
    thresholds: ClassVar[dict[str, Any]] = {"min_rotation_deg": 10.0}

    def cache_params(self, case: Case, alignment: Alignment) -> dict[str, Any]:
        """The GT pose file's digest (it is read in measure but is not one of the case's videos)."""
        rel = case.annotations.get("gt_poses")
        p = Path(case.data_root) / rel if rel and case.data_root is not None else None
        return {"gt_poses": file_digest(p) if p is not None and p.is_file() else None}

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        """The GT pose file (poses.npy / camera_full<n>.csv / <id>_mapanything.npz): without it only this
        metric (and the gate) cannot run."""
        return gt_io.missing_gt_poses(case)

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Estimated rotations of all frames and GT rotations resampled to N rows."""
        gt_poses = gt_io.load_gt_poses(case)
        r_est = estimate_rotations(case, ctx, self.params["max_side"])
        n = case.video.num_frames if case.video is not None else len(r_est)
        try:
            rows = sampling.pose_resample_indices(len(gt_poses), n)
        except ZeroDivisionError:  # N = 1: the official resampling divides by zero -> NaN
            rows = []
        return {"R_est": r_est, "R_gt": gt_poses[rows, :3, :3] if rows else np.zeros((0, 3, 3))}

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """``score`` (4 dp), ``pct`` (1-dp percentage, 2-dp composite), degrees (3 dp) and ``*_raw``."""
        res = controllability(np.asarray(measurement["R_gt"]), np.asarray(measurement["R_est"]),
                              thresholds["min_rotation_deg"])
        if res is None or any(math.isnan(v) for v in res.values()):
            return dict(_NONE)
        s4 = rounding.round_py(res["score"], 4)
        return {
            "score": s4,
            "score_raw": res["score"],
            "pct": rounding.round_np(rounding.pct_of("CameraControllability", s4), 2),
            "ATE_RotDeg": rounding.round_py(res["ate"], 3),
            "TotalGT_RotDeg": rounding.round_py(res["total"], 3),
            "MeanRotErrorDeg": rounding.round_py(res["mean_rel"], 3),
            "ATE_RotDeg_raw": res["ate"],
            "TotalGT_RotDeg_raw": res["total"],
            "MeanRotErrorDeg_raw": res["mean_rel"],
        }
