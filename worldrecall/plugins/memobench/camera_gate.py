"""Camera-execution gate (worldrecall's addition): did the generated camera really leave and come back?

MemoBench's memory metrics assume the target left the view during D and returned in R. A model that
never turns away "remembers" perfectly. The gate passes a case when

* pose: the view direction (camera forward axis; frame 0's is the target's direction) departs by more
  than ``depart_deg`` from frame 0's and later returns to within ``return_tol_deg`` of it — from the
  ``pose`` role's rotations; or
* absence (optional): the ``segmenter`` finds no in-band candidate with score >= ``absence_score`` in at
  least ``absence_min_fraction`` of the D frames strictly between h and r.

Per-frame angles and segmenter candidates are stored, so every threshold is re-scored without models.
The leaderboard reports each memory metric over all cases (official) and over gated cases only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.plugins.memobench import sampling
from worldrecall.plugins.memobench.base import MemoBenchMetric, batched, optional_model, phase_info
from worldrecall.plugins.memobench.camera_controllability import estimate_rotations
from worldrecall.plugins.memobench.ors import candidate_arrays
from worldrecall.plugins.memobench.rotations import forward_angles_deg


def departure_and_return(angles: np.ndarray, mode: str = "after_departure") -> tuple[float, float]:
    """(max departure, return error) in degrees from per-frame angles to frame 0's view direction.

    ``after_departure``: the return error is the smallest angle at or after the farthest frame;
    ``last_frame``: the angle of the last frame.
    """
    if len(angles) == 0:
        return 0.0, 0.0
    k = int(np.argmax(angles))
    ret = float(angles[-1]) if mode == "last_frame" else float(np.min(angles[k:]))
    return float(angles[k]), ret


def absent_fraction(cand_frame: np.ndarray, cand_coverage: np.ndarray, cand_score: np.ndarray, n_frames: int,
                    area_min: float, area_max: float, min_score: float) -> float | None:
    """Fraction of frames without any candidate of coverage in [area_min, area_max] and score >= min_score."""
    if n_frames == 0:
        return None
    hit = (cand_coverage >= area_min) & (cand_coverage <= area_max) & (cand_score >= min_score)
    present = set(np.asarray(cand_frame)[hit].tolist())
    return (n_frames - len(present)) / n_frames


class CameraGate(MemoBenchMetric):
    """``passed`` (0/1), ``max_departure_deg``, ``return_error_deg`` (+ which test passed)."""

    name: ClassVar[str] = "memobench.camera_gate"
    description: ClassVar[str] = "Camera left (> 25°) and returned (< 10°) to the target's view, or the target was absent in D"
    range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    primary: ClassVar[str] = "passed"
    values: ClassVar[dict[str, Value]] = {
        "passed": Value(True, (0.0, 1.0), "", "the camera left the target and returned (1) or not (0)"),
        "pose_passed": Value(True, (0.0, 1.0), "", "the pose test of the gate"),
        "absence_passed": Value(True, (0.0, 1.0), "", "the target-absence test of the gate"),
        "absence_fraction": Value(None, (0.0, 1.0), "", "fraction of D-phase frames without the target"),
        "max_departure_deg": Value(None, None, "deg", "largest rotation away from the start"),
        "return_error_deg": Value(False, None, "deg", "rotation left at the end of the return"),
    }
    models: ClassVar[tuple[str, ...]] = ("pose",)
    optional_models: ClassVar[tuple[str, ...]] = ("segmenter",)
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "absence_check": True, "absence_max_frames": 16}
    thresholds: ClassVar[dict[str, Any]] = {
        "depart_deg": 25.0, "return_tol_deg": 10.0, "return_mode": "after_departure",
        "use_absence": True, "absence_score": 0.5, "absence_min_fraction": 0.8,
        "area_min": 0.0005, "area_max": 0.70,
    }

    def optional_roles(self) -> dict[str, str]:
        """The target-absence test needs the segmenter role (only when ``params.absence_check``)."""
        if not self.params["absence_check"]:
            return {}
        return {"segmenter": "the target-absence test (absence_passed, absence_fraction)"}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Per-frame view-direction angles; segmenter candidates on up to ``absence_max_frames`` D frames."""
        angles = forward_angles_deg(estimate_rotations(case, ctx, self.params["max_side"]))
        out: dict[str, Any] = {"angles": angles, "absence_measured": False, "absence_n": 0,
                               "cand_frame": np.zeros(0, dtype=np.int64), "cand_coverage": np.zeros(0),
                               "cand_score": np.zeros(0)}
        seg, backend = optional_model(ctx, "segmenter") if self.params["absence_check"] else (None, None)
        query = case.annotations.get("ors_query") or case.subject
        if seg is None or not query or case.video is None:
            return out
        h, r, n = phase_info(alignment)
        interior = list(range(h + 1, min(r, n)))
        if len(interior) > self.params["absence_max_frames"] > 0:
            interior = sorted(set(sampling.uniform_indices(h + 1, r - 1, self.params["absence_max_frames"], n)))
        frames = case.video.frames()
        per_frame: list[Any] = []
        for chunk in batched(interior, ctx.batch_size):
            per_frame += seg.segment([frames[i] for i in chunk], query, case=case, indices=list(chunk))
        if len(per_frame) != len(interior):
            raise CaseFailure(f"segmenter returned {len(per_frame)} frames of candidates for {len(interior)} frames")
        out.update(candidate_arrays(per_frame), absence_measured=True, absence_n=len(interior),
                   absence_backend=backend or "", absence_indices=np.asarray(interior, dtype=np.int64))
        return out

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Gate decision and its evidence."""
        dep, ret = departure_and_return(np.asarray(measurement["angles"], dtype=np.float64), thresholds["return_mode"])
        pose_ok = dep > thresholds["depart_deg"] and ret <= thresholds["return_tol_deg"]
        frac = None
        if bool(measurement["absence_measured"]):
            frac = absent_fraction(np.asarray(measurement["cand_frame"]), np.asarray(measurement["cand_coverage"]),
                                   np.asarray(measurement["cand_score"]), int(measurement["absence_n"]),
                                   thresholds["area_min"], thresholds["area_max"], thresholds["absence_score"])
        absent_ok = None if frac is None else frac >= thresholds["absence_min_fraction"]
        passed = pose_ok or (bool(thresholds["use_absence"]) and bool(absent_ok))
        return {
            "passed": float(passed),
            "max_departure_deg": dep,
            "return_error_deg": ret,
            "pose_passed": float(pose_ok),
            "absence_fraction": frac,
            "absence_passed": None if absent_ok is None else float(absent_ok),
        }

    def artifacts(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any], out_dir: Path) -> list[Path]:
        """``gate_trace.json``: the view direction's angle to frame 0 per frame, the two thresholds and the
        verdict, for the report."""
        v = self.score(measurement, thresholds)
        angles = np.asarray(measurement["angles"], dtype=np.float64)
        verdict = "pass" if v["passed"] else "fail"
        trace = {"kind": "worldrecall.trace", "verdict": verdict,
                 "title": f"camera gate {verdict.upper()}: left {v['max_departure_deg']:.0f}°, "
                          f"returned to {v['return_error_deg']:.0f}°" + (
                              f", target absent in {v['absence_fraction']:.0%} of D" if v["absence_fraction"] is not None else ""),
                 "x_label": "generated frame", "y_label": "angle to frame 0 (°)",
                 "x": list(range(len(angles))), "series": [{"label": "view direction vs frame 0",
                                                            "y": [round(float(a), 2) for a in angles]}],
                 "hlines": [{"y": float(thresholds["depart_deg"]), "label": "must depart beyond"},
                            {"y": float(thresholds["return_tol_deg"]), "label": "must return within"}]}
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "gate_trace.json"
        path.write_text(json.dumps(trace))
        return [path]
