"""``scene_memory.camera_gate``: did the rollout's camera execute its action program?

Scene Memory F1 has its own return gate (the official one: the trajectory's turnaround comes back near the
start), which stays the protocol's gate. This one is the camera gate every benchmark shares
(:mod:`worldrecall.gates.camera`): the ``pose`` role's trajectory of the generated video against the
case's action program (``<case>_actions.json``) integrated with nominal step sizes — departure in the motion
the program makes, return over the last ``return_tail`` of the video to the program's end pose. A case
without an action program is *not applicable*. Both gates are reported side by side; where they disagree the
ranked view counts it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MissingInput, Value
from worldrecall.core.data import Alignment, Case
from worldrecall.formats.safe_json import read_json
from worldrecall.gates import camera as gate


class SceneCameraGate(gate.CameraGateMetric):
    """``passed`` (0/1; None = no action program) against the instructed camera path."""

    name: ClassVar[str] = "scene_memory.camera_gate"
    benchmark: ClassVar[str] = "scene_memory"
    version: ClassVar[str] = "2"  # 2: batched angles (last-digit changes in diagnostics)
    description: ClassVar[str] = ("The generated camera executes the action program (departs as it does, ends at "
                                  "its pose); n/a without actions")
    values: ClassVar[dict[str, Value]] = gate.gate_values()
    params: ClassVar[dict[str, Any]] = {"max_side": 640, **gate.INSTRUCTION_PARAMS}

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        """The action program the gate compares the camera with: without one the gate is not measured (skipped,
        naming the file), never failed."""
        if case.sidecars.get("actions") is not None:
            return []
        where = f"{case.case_id}_actions.json"
        if case.video is not None:
            where = str(Path(case.video.path).parent / where)
        return [MissingInput("action program", where,
                             'write the camera instructions the model was given, e.g. {"actions": ["turn_left", '
                             '"turn_right"], "frames_per_action": 16} (docs/real_outputs.md)', kind="file")]

    def reference(self, case: Case, alignment: Alignment, n_frames: int) -> tuple[np.ndarray | None, str]:
        """The action file's camera tokens (``actions`` + ``frames_per_action``) as an instructed path. The
        experimental split's parse of the same file follows the release's alias table, which is about segment
        boundaries, not camera motion; the gate reads the instruction words themselves."""
        path = case.sidecars.get("actions")
        if path is None:
            return None, str(case.annotations.get("actions_error") or "no action program (<case>_actions.json)")
        raw = read_json(Path(path))  # a CaseFailure naming the file when it cannot be read or parsed
        tokens = raw.get("actions") if isinstance(raw, dict) else raw
        if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
            return None, f"{Path(path).name}: no camera instruction words (only per-frame controls)"
        fpa = raw.get("frames_per_action") if isinstance(raw, dict) else None
        fpa = fpa if isinstance(fpa, int) and not isinstance(fpa, bool) and fpa > 0 else None
        ref, label = gate.instruction_reference(tokens, n_frames, fpa, self.params)
        return ref, (label if ref is not None else f"{Path(path).name}: {label}")
