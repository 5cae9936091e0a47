"""``wrbench.camera_gate`` (worldrecall's addition): did the generated camera look away and come back?

The shared gate (:mod:`worldrecall.gates.camera`) on the ``pose`` role's trajectory against the requested one:
the ``target_poses`` sidecar (D1-CamPrec's target) resampled to the generated frames, else the requested
go-and-return yaw as an instruction (a triangle to ``requested_yaw_deg``, left for ``yaw_LR``). The return
frames are the ``wrbench.phases`` returned phase. A static or uncontrolled camera requests no look-away: not
applicable. The gate reads only cameras, never the probes or the target's visibility.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import Value
from worldrecall.core.data import Alignment, Case
from worldrecall.formats.arrays import load_npy
from worldrecall.gates import camera as gate
from worldrecall.plugins.wrbench import d1


def triangle_yaw(n: int, peak_deg: float) -> np.ndarray:
    """[n, 4, 4] OpenCV c2w turning to ``peak_deg`` (signed, right positive) at mid-video and back."""
    out = np.tile(np.eye(4), (n, 1, 1))
    for i in range(n):
        a = math.radians(peak_deg * (1.0 - abs(2.0 * i / max(n - 1, 1) - 1.0)))
        out[i, :3, :3] = [[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]]
    return out


class WRBenchCameraGate(gate.CameraGateMetric):
    """``passed`` (None = no look-away requested) with the departure / return evidence."""

    name: ClassVar[str] = "wrbench.camera_gate"
    benchmark: ClassVar[str] = "wrbench"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ("The generated camera departs as requested and is back at the requested pose "
                                  "over the returned phase (camera only)")
    values: ClassVar[dict[str, Value]] = gate.gate_values()
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "requested_yaw_deg": 30.0}
    return_label: ClassVar[str] = "the returned phase"

    def reference(self, case: Case, alignment: Alignment, n_frames: int) -> tuple[np.ndarray | None, str]:
        """The requested trajectory on the generated axis, or why there is none."""
        camera = str(case.annotations.get("camera", ""))
        if camera in ("static", "uncontrolled") or not alignment.info.get("look_away", True):
            return None, f"no look-away requested ({alignment.info.get('source') or camera})"
        if "target_poses" in case.sidecars:
            target = d1.expand_poses(load_npy(case.sidecars["target_poses"]))
            rows = np.round(np.linspace(0, len(target) - 1, n_frames)).astype(int)
            return target[rows], "requested trajectory"
        if camera.startswith("yaw"):
            peak = float(case.annotations.get("requested_yaw_deg") or self.params["requested_yaw_deg"])
            sign = -1.0 if camera == "yaw_LR" else 1.0
            return triangle_yaw(n_frames, sign * peak), f"instructed go-and-return yaw ({camera}, {peak:g} deg)"
        return None, f"camera {camera!r}: no requested trajectory (target_pose_path) to test against"

    def return_frames(self, case: Case, alignment: Alignment, n_frames: int) -> list[int] | None:
        """The returned phase of ``wrbench.phases``."""
        ph = alignment.phases.get("returned")
        return None if ph is None else [i for i in ph.indices() if i < n_frames]
