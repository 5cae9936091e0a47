"""``mind.action_gate`` (worldrecall's addition): did the generated camera execute MIND's action program?

The camera gate every benchmark shares (:mod:`worldrecall.gates.camera`) with the *GT camera* as the reference:
the GT trajectory of the frames ``mark_time …`` (the same poses ``mind.action`` compares with — the clip's
``images.txt``, else the ``pose`` role on the GT frames, :func:`worldrecall.plugins.mind.action.gt_camera`) on the
generated frame axis (generated frame ``i`` ↔ GT frame ``mark_time + i``), against the ``pose`` role's trajectory of
the first ``max_frames`` generated frames. Departure in the motion the GT camera makes (rotation and/or
translation, scale fitted), return over the last ``return_tail`` of the frames to the GT's pose there (MIND has no
return phase). A GT camera that does not move, a mirror-test video (no GT) or a clip without a GT camera is *not
measured* (a skipped row saying why), never passed.

Why a gate beside ``mind.action``: the RPE is a per-step error after a Sim(3) fit, and the fit gives a camera that
never moves scale 0, so its error per step is just the GT's own step — small when the program moves slowly. A
frozen camera can therefore look accurate by RPE and by frame-wise LCM on a near-static program; the gate asks
whether the camera went where the program sends it and fails it. The gated view keeps only cases that pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import ConfigTypeError, MeasureContext, Value
from worldrecall.core.data import Alignment, Case, CaseSkip
from worldrecall.gates import camera as gate
from worldrecall.plugins.mind.action import MindAction, gt_camera


class MindActionGate(gate.CameraGateMetric):
    """``passed`` (0/1; None = not measured) against the GT camera from ``mark_time``."""

    name: ClassVar[str] = "mind.action_gate"
    benchmark: ClassVar[str] = "mind"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ("The generated camera executes the action program: departs as the GT camera does "
                                  "and is at the GT camera's pose at the end (camera only)")
    values: ClassVar[dict[str, Value]] = gate.gate_values()
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "max_frames": 97, "gt_images_min": "release"}
    return_label: ClassVar[str] = "the end"

    def __init__(self, params: Mapping[str, Any] | None = None, thresholds: Mapping[str, Any] | None = None):
        super().__init__(params, thresholds)
        if self.params["gt_images_min"] not in ("release", "available"):
            raise ConfigTypeError(f"{self.name}.params.gt_images_min: expected 'release' or 'available', got "
                                  f"{self.params['gt_images_min']!r}")

    def needs_models(self, case: Case) -> bool:
        return case.video is not None and not MindAction.not_scored(case)

    def reference(self, case: Case, alignment: Alignment, n_frames: int) -> tuple[np.ndarray | None, str]:
        """Unused: the GT camera needs the measure context (:meth:`measure` reads it)."""
        return None, "the GT camera is read in measure"

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Generated poses (first ``max_frames``), the GT camera on the same axis (or why there is none)."""
        empty = {"gen_c2w": np.zeros((0, 3, 4)), "ref_c2w": np.zeros((0, 3, 4)), "has_reference": False,
                 "instructed": False, "return_frames": np.zeros(0, dtype=np.int64), "return_from_phase": False}
        why = MindAction.not_scored(case)
        if not why and case.video is None:
            why = "no generated video to estimate the camera from"
        mark = case.annotations.get("mark_time")
        if not why and (isinstance(mark, bool) or not isinstance(mark, int)):
            why = "no integer mark_time (action.json) to place the GT camera on the generated frames"
        if why:
            return {**empty, "reference": why}
        max_frames = int(self.params["max_frames"])
        gen, quality = self.generated_poses(case, ctx)
        gen = gen[:max_frames]
        info: dict[str, Any] = {"pose_quality": quality} if quality else {}
        try:
            ref, label, notes = gt_camera(case, ctx, int(mark), max_frames, int(self.params["max_side"] or 0),
                                          str(self.params["gt_images_min"]))
        except CaseSkip as e:
            return {**empty, "gen_c2w": gen, "reference": str(e), **({"row_info": info} if info else {})}
        if notes:
            info["notes"] = notes
        return {**empty, "gen_c2w": gen, "ref_c2w": np.asarray(ref)[:, :3, :4], "has_reference": True,
                "reference": f"GT camera ({label})", **({"row_info": info} if info else {})}
