"""Camera-execution gate (worldrecall's addition): did the generated camera execute the reference motion?

MemoBench's memory metrics assume the camera left the target during D and came back in R; a model that
never turns away "remembers" perfectly. The gate tests the camera and nothing else
(:mod:`worldrecall.gates.camera`): the ``pose`` role's trajectory of the generated video against the GT
trajectory resampled to the generated frames, departure in the motion the GT camera makes, return over the
R phase (frames r … N-1) to the GT's pose there. A case without GT poses has no reference: *not applicable*.

Target absence in D (``absence_fraction``, from the optional ``segmenter``) is kept as a diagnostic on the
row: it is what forgetting produces, so it never decides the gate. Poses and candidates are stored, so every
threshold re-scores without models.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, MissingInput, Value
from worldrecall.core.data import Alignment, Case, CaseFailure, file_digest
from worldrecall.gates import camera as gate
from worldrecall.plugins.memobench import gt as gt_io
from worldrecall.plugins.memobench import sampling
from worldrecall.plugins.memobench.base import MemoBenchMetric, batched, optional_model, phase_info
from worldrecall.plugins.memobench.ors import candidate_arrays


def absent_fraction(cand_frame: np.ndarray, cand_coverage: np.ndarray, cand_score: np.ndarray, n_frames: int,
                    area_min: float, area_max: float, min_score: float) -> float | None:
    """Fraction of frames without any candidate of coverage in [area_min, area_max] and score >= min_score."""
    if n_frames == 0:
        return None
    hit = (cand_coverage >= area_min) & (cand_coverage <= area_max) & (cand_score >= min_score)
    present = set(np.asarray(cand_frame)[hit].tolist())
    return (n_frames - len(present)) / n_frames


class CameraGate(gate.CameraGateMetric, MemoBenchMetric):
    """``passed`` (0/1; None = no GT trajectory), departure and return evidence, target absence as a diagnostic."""

    name: ClassVar[str] = "memobench.camera_gate"
    version: ClassVar[str] = "3"  # 3: batched angles (last-digit changes in diagnostics): cached scores are not mixed in
    description: ClassVar[str] = ("The generated camera departs as the GT camera does and is back at the GT pose "
                                  "over the R phase (camera only; target absence is a diagnostic)")
    values: ClassVar[dict[str, Value]] = {
        **gate.gate_values(),
        "absence_fraction": Value(higher_is_better=None, range=(0.0, 1.0), unit="",
                                  description="diagnostic: fraction of D-phase frames without the target"),
    }
    optional_models: ClassVar[tuple[str, ...]] = ("segmenter",)
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "absence_check": True, "absence_max_frames": 16}
    thresholds: ClassVar[dict[str, Any]] = {
        **gate.GATE_THRESHOLDS,
        "absence_score": 0.5, "area_min": 0.0005, "area_max": 0.70,   # the absence diagnostic only
    }
    return_label: ClassVar[str] = "R"

    def cache_params(self, case: Case, alignment: Alignment) -> dict[str, Any]:
        """The GT pose file's digest (read in measure, not one of the case's videos)."""
        rel = case.annotations.get("gt_poses")
        p = Path(case.data_root) / rel if rel and case.data_root is not None else None
        return {"gt_poses": file_digest(p) if p is not None and p.is_file() else None}

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        """The GT trajectory the gate compares the camera with: without it the gate is not measured (skipped,
        naming the file), never failed."""
        return gt_io.missing_gt_poses(case)

    def reference(self, case: Case, alignment: Alignment, n_frames: int) -> tuple[np.ndarray | None, str]:
        """The GT trajectory resampled to the generated frames (the official pose resampling)."""
        if not case.annotations.get("gt_poses"):
            return None, "no GT trajectory for this clip (MemoBench ships no other camera instruction)"
        gt_poses = gt_io.load_gt_poses(case)
        try:
            rows = sampling.pose_resample_indices(len(gt_poses), n_frames)
        except ZeroDivisionError:  # one generated frame: nothing to resample onto
            return None, "one generated frame: no trajectory"
        return gt_poses[rows], "GT trajectory"

    def return_frames(self, case: Case, alignment: Alignment, n_frames: int) -> list[int]:
        """The R phase: frames r … N-1 of the ``memobench.phases`` alignment."""
        _, r, n = phase_info(alignment)
        return list(range(r, min(n, n_frames)))

    def optional_roles(self) -> dict[str, str]:
        """The target-absence test needs the segmenter role (only when ``params.absence_check``)."""
        if not self.params["absence_check"]:
            return {}
        return {"segmenter": "the target-absence test (absence_passed, absence_fraction)"}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """The gate's measurement plus segmenter candidates on up to ``absence_max_frames`` D frames
        (the absence diagnostic)."""
        out = super().measure(case, alignment, ctx)
        out.update(absence_measured=False, absence_n=0, cand_frame=np.zeros(0, dtype=np.int64),
                   cand_coverage=np.zeros(0), cand_score=np.zeros(0))
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
        try:
            for chunk in batched(interior, ctx.batch_size):
                per_frame += seg.segment([frames[i] for i in chunk], query, case=case, indices=list(chunk))
        except CaseFailure as e:
            # the diagnostic's backend cannot serve this video (a sidecar segmenter without sidecars): the
            # gate does not read it, so it stays measured; the row says why absence_fraction is null
            case.warnings.append(f"absence_fraction not computed: {e}")
            return out
        if len(per_frame) != len(interior):
            raise CaseFailure(f"segmenter returned {len(per_frame)} frames of candidates for {len(interior)} frames")
        out.update(candidate_arrays(per_frame), absence_measured=True, absence_n=len(interior),
                   absence_backend=backend or "", absence_indices=np.asarray(interior, dtype=np.int64))
        return out

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Gate decision and its camera evidence; the absence diagnostic beside it (never part of the decision)."""
        frac = None
        if bool(measurement["absence_measured"]):
            frac = absent_fraction(np.asarray(measurement["cand_frame"]), np.asarray(measurement["cand_coverage"]),
                                   np.asarray(measurement["cand_score"]), int(measurement["absence_n"]),
                                   thresholds["area_min"], thresholds["area_max"], thresholds["absence_score"])
        return {**super().score(measurement, thresholds), "absence_fraction": frac}
