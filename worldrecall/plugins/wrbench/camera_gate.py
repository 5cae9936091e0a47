"""``wrbench.camera_gate`` (worldrecall's addition): did the generated camera look away and come back?

The shared gate (:mod:`worldrecall.gates.camera`) on the ``pose`` role's trajectory against the requested one:
the ``target_poses`` sidecar (D1-CamPrec's target) resampled to the generated frames, else the requested
go-and-return yaw as an instruction (a triangle to ``requested_yaw_deg``, left for ``yaw_LR``). The return
frames are the ``wrbench.phases`` returned phase. A static or uncontrolled camera requests no look-away: not
measured. The gate reads only cameras, never the probes or the target's visibility.

The peak yaw defaults to the release's own: WRBench's ``yaw_RL``/``yaw_LR`` presets turn to
``DEFAULT_YAW_PEAK_DEG`` = 60° (``src/wrbench/presets.py`` of JinPLu/WRBench @ 629595dc) over the first half of
the frames and back. A reference the gate assumed — that peak, or phases taken from the camera type alone — is
recorded on the row (``info["assumed"]``) and said once on the console.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Value
from worldrecall.core.data import Alignment, Case
from worldrecall.formats.arrays import load_npy
from worldrecall.gates import camera as gate
from worldrecall.plugins.wrbench import d1


RELEASE_YAW_PEAK_DEG = 60.0  # DEFAULT_YAW_PEAK_DEG of the release's camera presets (yaw_RL / yaw_LR)
YAW_KEY = "benchmarks.wrbench.metrics.camera_gate.params.requested_yaw_deg"


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
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "requested_yaw_deg": RELEASE_YAW_PEAK_DEG}
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

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """The shared gate's measurement, with every reference it assumed rather than read from the case."""
        out = super().measure(case, alignment, ctx)
        assumed = self.assumptions(case, alignment, out)
        if assumed:  # on the row (info.assumed) and said once on the console
            out.setdefault("row_info", {})["assumed"] = assumed
        return out

    def assumptions(self, case: Case, alignment: Alignment, m: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """What the gate assumed for this case: the requested peak yaw when the manifest gives neither a target
        trajectory nor ``requested_yaw_deg``, and phases taken from the camera type alone."""
        camera = str(case.annotations.get("camera", ""))
        if not (m.get("has_reference") and m.get("instructed")) or not camera.startswith("yaw"):
            return {}
        out: dict[str, dict[str, Any]] = {}
        if case.annotations.get("requested_yaw_deg") is None:
            peak = float(self.params["requested_yaw_deg"])
            source = ("WRBench preset yaw_RL/yaw_LR default (DEFAULT_YAW_PEAK_DEG)" if peak == RELEASE_YAW_PEAK_DEG
                      else f"config {YAW_KEY}")
            out["requested_yaw_deg"] = {"value": peak, "source": source,
                                        "set": f"requested_yaw_deg (videos.json) or {YAW_KEY}"}
        if str(alignment.info.get("source", "")).startswith("camera type"):
            info = alignment.info
            out["phases"] = {"value": f"away from frame {info.get('a')}, returned from frame {info.get('r')} of "
                                      f"{info.get('N')}",
                             "source": "the camera type alone (a go-and-return triangle)",
                             "set": "look_away_frame and return_frame (videos.json), or target_pose_path"}
        return out

    def return_frames(self, case: Case, alignment: Alignment, n_frames: int) -> list[int] | None:
        """The returned phase of ``wrbench.phases``."""
        ph = alignment.phases.get("returned")
        return None if ph is None else [i for i in ph.indices() if i < n_frames]
