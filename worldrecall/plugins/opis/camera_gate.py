"""``opis.camera_gate``: did the generated camera execute the camera motion the case asked for?

OPIS scores objects against the input frame's inventory; a camera that never moves keeps every object in
view and scores well without remembering anything. The gate (:mod:`worldrecall.gates.camera`) compares
the ``pose`` role's trajectory of the generated video with the case's ``conditions.json``: its
``camera_poses_c2w`` trajectory where it ships one, else its ``camera_path`` tokens (``frames_per_action``
each) integrated with nominal step sizes. A case whose conditions carry no camera instruction is *not
applicable* ("no camera instruction"), never passed. The return frames are the last ``return_tail`` of
the video (OPIS has no return phase).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.formats.safe_json import read_json
from worldrecall.gates import camera as gate


def read_conditions(case: Case) -> dict[str, Any]:
    """The case's ``conditions.json`` as a dict ({} when the case has none)."""
    p = case.sidecars.get("conditions")
    if p is None:
        return {}
    doc = read_json(Path(p))  # unreadable, not UTF-8, not JSON or too deep: a CaseFailure naming the file
    return doc if isinstance(doc, dict) else {}


class OpisCameraGate(gate.CameraGateMetric):
    """``passed`` (0/1; None = no camera instruction) against the conditions' trajectory or camera path."""

    name: ClassVar[str] = "opis.camera_gate"
    benchmark: ClassVar[str] = "opis"
    version: ClassVar[str] = "2"  # 2: batched angles (last-digit changes in diagnostics)
    description: ClassVar[str] = ("The generated camera executes the conditions' camera path (departs as it does, "
                                  "ends at its pose); n/a without a camera instruction")
    values: ClassVar[dict[str, Value]] = gate.gate_values()
    params: ClassVar[dict[str, Any]] = {"max_side": 640, **gate.INSTRUCTION_PARAMS}

    def reference(self, case: Case, alignment: Alignment, n_frames: int) -> tuple[np.ndarray | None, str]:
        cond = read_conditions(case)
        where = f"{case.sidecars.get('conditions', 'conditions.json')}"
        poses = cond.get("camera_poses_c2w")
        if poses is not None:
            arr = np.asarray(poses, dtype=np.float64) if isinstance(poses, list) else np.zeros(0)
            if arr.ndim != 3 or arr.shape[1:] not in ((4, 4), (3, 4)) or not np.isfinite(arr).all():
                raise CaseFailure(f"{where}: camera_poses_c2w must be finite [N, 4, 4] poses")
            if len(arr) != n_frames:
                raise CaseFailure(f"{where}: camera_poses_c2w has {len(arr)} poses, the video {n_frames} frames")
            return arr, "conditions trajectory"
        path = cond.get("camera_path")
        if isinstance(path, list) and path:
            fpa = cond.get("frames_per_action")
            ref, label = gate.instruction_reference(path, n_frames, fpa if isinstance(fpa, int) else None,
                                                    self.params)
            return ref, (label if ref is not None else f"{where}: {label}")
        return None, "no camera instruction in conditions.json"
