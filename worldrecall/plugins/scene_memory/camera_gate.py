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

import math
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import Value
from worldrecall.core.data import Alignment, Case
from worldrecall.gates import camera as gate
from worldrecall.plugins.scene_memory.actions import expand_program


class SceneCameraGate(gate.CameraGateMetric):
    """``passed`` (0/1; None = no action program) against the instructed camera path."""

    name: ClassVar[str] = "scene_memory.camera_gate"
    benchmark: ClassVar[str] = "scene_memory"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ("The generated camera executes the action program (departs as it does, ends at "
                                  "its pose); n/a without actions")
    values: ClassVar[dict[str, Value]] = gate.gate_values()
    params: ClassVar[dict[str, Any]] = {"max_side": 640, **gate.INSTRUCTION_PARAMS}

    def reference(self, case: Case, alignment: Alignment, n_frames: int) -> tuple[np.ndarray | None, str]:
        program = case.annotations.get("actions")
        if not program:
            reason = case.annotations.get("actions_error") or "no action program (<case>_actions.json)"
            return None, str(reason)
        per_frame = expand_program(program, n_frames)
        k = program.get("frames_per_action") if isinstance(program, dict) else None
        n_steps = len(program.get("actions") or []) if isinstance(program, dict) else 0
        if not (isinstance(k, int) and k > 0):
            k = math.ceil(n_frames / n_steps) if n_steps else 1  # per-frame actions: one step per frame
        try:
            ref = gate.instructed_trajectory([list(p) for p in per_frame],
                                             float(self.params["instruction_deg_per_step"]) / k,
                                             float(self.params["instruction_units_per_step"]) / k)
        except ValueError as e:
            return None, f"{case.annotations.get('actions_file', 'actions')}: {e}"
        return ref, f"instructed path ({n_steps or len(per_frame)} steps)"
