"""The camera gate tests the camera and nothing else: hand-computed departures, returns and verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from worldrecall.core.data import CaseSkip
from worldrecall.gates import camera as gate
from worldrecall.plugins.memobench.camera_gate import CameraGate


def yaw_path(degrees: list[float], z: list[float] | None = None) -> np.ndarray:
    """c2w poses turned right by each angle (about the camera's down axis), optionally moved along +z."""
    out = np.tile(np.eye(4), (len(degrees), 1, 1))
    for i, d in enumerate(degrees):
        a = math.radians(d)
        out[i, :3, :3] = [[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]]
        if z is not None:
            out[i, 2, 3] = z[i]
    return out


PAN = [0, 10, 20, 30, 40, 30, 20, 10, 0]


def test_half_a_pan_is_not_a_departure():
    # reference turns 40°: departure needs 0.6 x 40 = 24°; the generated camera turns 20°
    res = gate.evaluate(yaw_path([a / 2 for a in PAN]), yaw_path(PAN), [6, 7, 8], {})
    assert res.passed is False
    assert res.values["ref_rotation_deg"] == pytest.approx(40.0)
    assert res.values["gen_rotation_deg"] == pytest.approx(20.0)
    # return: median of |10-20|, |5-10|, |0-0| = 5°, tolerance max(0.25 x 40, 10) = 10° -> the return holds
    assert res.values["return_rotation_error_deg"] == pytest.approx(5.0)
    assert res.values["return_rotation_tol_deg"] == pytest.approx(10.0)
    assert res.verdict.startswith("FAIL (departure (rotation)): departed 20° of the reference's 40° (needs ≥ 24°)")
    assert "at the return the camera is 5° from the reference pose (tolerance 10°)" in res.verdict
    # at a departure fraction of one half, 20° of 40° is enough
    assert gate.evaluate(yaw_path([a / 2 for a in PAN]), yaw_path(PAN), [6, 7, 8], {"depart_fraction": 0.5}).passed


def test_return_is_to_the_reference_pose_not_to_frame_zero():
    u_turn = [0, 45, 90, 135, 180, 180]
    ref = yaw_path(u_turn)
    assert gate.evaluate(ref.copy(), ref, gate.tail_frames(6, 0.1), {}).passed is True
    # back to the first view: the camera turned 90° of 180° (needs 108°) and ends 180° from the reference
    back = gate.evaluate(yaw_path([0, 45, 90, 45, 0, 0]), ref, gate.tail_frames(6, 0.1), {})
    assert back.passed is False
    assert back.values["return_rotation_error_deg"] == pytest.approx(180.0)
    assert back.values["return_rotation_tol_deg"] == pytest.approx(45.0)  # 0.25 x 180
    assert "departure (rotation)" in back.verdict and "return (rotation)" in back.verdict


def test_frozen_camera_fails_and_a_still_reference_is_not_applicable():
    frozen = gate.evaluate(yaw_path([0] * 9), yaw_path(PAN), [6, 7, 8], {})
    assert frozen.passed is False and frozen.values["gen_rotation_deg"] == 0.0
    still = gate.evaluate(yaw_path(PAN), yaw_path([0] * 9), [6, 7, 8], {})
    assert still.passed is None and still.as_values()["passed"] is None
    assert still.verdict == "n/a: the reference camera does not move (turns 0°, moves 0.00)"


def test_dolly_is_tested_in_translation_up_to_scale():
    z = [0, 1, 2, 3, 2, 1, 0]
    ref = yaw_path([0] * 7, z)
    half = yaw_path([0] * 7, [v / 2 for v in z])  # a monocular estimate at half the scale
    fit = gate.evaluate(half, ref, [6], {})
    assert fit.passed is True and fit.values["translation_scale"] == pytest.approx(2.0)
    assert fit.values["tests_rotation"] == 0.0 and fit.values["tests_translation"] == 1.0
    as_is = gate.evaluate(half, ref, [6], {"translation_scale": "as_is"})
    assert as_is.passed is False and as_is.values["gen_translation"] == pytest.approx(1.5)  # needs 1.8
    # a camera that never moves cannot be scaled into a departure
    still = gate.evaluate(yaw_path([0] * 7), ref, [6], {})
    assert still.passed is False and still.values["translation_scale"] == 0.0
    # pushed in and stayed: departs, but is 3 units from where the reference came back to
    stay = gate.evaluate(yaw_path([0] * 7, [0, 1, 2, 3, 3, 3, 3]), ref, [6], {"translation_scale": "as_is"})
    assert stay.passed is False and stay.values["return_translation_error"] == pytest.approx(3.0)


def test_instructed_path_integrates_tokens_between_frames():
    toks = gate.expand_tokens(["pan_right", "pan_left"], 5, 2)
    assert toks == [["pan_right"], ["pan_right"], ["pan_left"], ["pan_left"], ["pan_left"]]
    ref = gate.instructed_trajectory(toks, 10.0, 1.0)
    yaw = [math.degrees(math.atan2(p[0, 2], p[2, 2])) for p in ref]
    assert yaw == pytest.approx([0, 10, 20, 10, 0])  # frame i's token moves i -> i+1; the last one never acts
    pushed = gate.instructed_trajectory(gate.expand_tokens(["push_in+tilt_up"], 2), 90.0, 2.0)
    assert pushed[1, :3, 3] == pytest.approx([0, 0, 2.0])  # the move is along the start's forward axis
    assert pushed[1, :3, 2] == pytest.approx([0, -1, 0], abs=1e-12)  # tilted up: forward points to -y (up)
    with pytest.raises(ValueError, match="unknown camera instruction 'spin'"):
        gate.instructed_trajectory([["fixed"], ["spin"], ["fixed"]], 1.0, 1.0)
    ref, label = gate.instruction_reference([], 10, None, gate.INSTRUCTION_PARAMS)
    assert ref is None and label == "no camera instruction"


def test_instructed_translation_return_only_when_the_path_closes():
    open_path = gate.instructed_trajectory(gate.expand_tokens(["push_in"] * 4 + ["fixed"], 5, 1), 36.0, 1.0)
    arc = yaw_path([0] * 5, [0, 1.5, 3.0, 4.5, 4.5])
    arc[-1, 0, 3] = 2.0  # the real camera also drifted sideways; the instruction does not say how far it ends
    res = gate.evaluate(arc, open_path, [4], {}, instructed=True)
    assert res.passed is True and res.values["return_translation_error"] is None
    assert "position at the return not tested" in res.verdict
    assert gate.evaluate(arc, open_path, [4], {}, instructed=False).passed is False


def _memobench_measurement(gen: np.ndarray, ref: np.ndarray, absence: bool) -> dict:
    return {"gen_c2w": gen[:, :3, :4], "ref_c2w": ref[:, :3, :4], "has_reference": True, "reference": "GT trajectory",
            "instructed": False, "return_frames": np.array([6, 7, 8]), "return_from_phase": True,
            "absence_measured": absence, "absence_n": 4, "cand_frame": np.zeros(0, int),
            "cand_coverage": np.zeros(0), "cand_score": np.zeros(0)}


def test_target_absence_never_passes_the_gate():
    m = CameraGate()
    frozen = _memobench_measurement(yaw_path([0] * 9), yaw_path(PAN), absence=True)
    v = m.score(frozen, m.thresholds)
    assert v["absence_fraction"] == 1.0   # the target is gone in every D frame (what forgetting looks like)
    assert v["passed"] == 0.0             # … and the camera never moved: fail
    assert m.verdict(frozen, m.thresholds).startswith("FAIL (departure (rotation)): departed 0°")
    ok = _memobench_measurement(yaw_path(PAN), yaw_path(PAN), absence=False)
    assert m.score(ok, m.thresholds)["passed"] == 1.0 and m.score(ok, m.thresholds)["absence_fraction"] is None
    assert m.verdict(ok, m.thresholds).endswith("(vs the GT trajectory)")
    none = {**ok, "has_reference": False, "reference": "no GT trajectory for this clip"}
    with pytest.raises(CaseSkip, match="^camera gate not measured: no GT trajectory for this clip$"):
        m.score(none, m.thresholds)  # nothing to test: a skip saying why, never an ok row without a value
    assert m.verdict(none, m.thresholds) == "n/a: no GT trajectory for this clip"


def test_a_misspelled_translation_scale_is_a_config_error_not_a_failure_per_case():
    from worldrecall.core.components import ConfigTypeError

    with pytest.raises(ConfigTypeError, match=r"memobench.camera_gate.thresholds.translation_scale: expected "
                                              r"'fit' or 'as_is', got 'fitt'"):
        CameraGate(thresholds={"translation_scale": "fitt"})


def test_batched_angles_equal_the_single_rotation_formula():
    a, b = yaw_path([0, 30, 90, 180])[:, :3, :3], yaw_path([10, 30, 0, 0])[:, :3, :3]
    assert gate.angles_deg(a, b) == pytest.approx([10.0, 0.0, 90.0, 180.0], abs=1e-6)


def test_opis_reference_from_conditions(tmp_path):
    import json

    from worldrecall.core.data import Alignment, Case, CaseFailure
    from worldrecall.plugins.opis.camera_gate import OpisCameraGate

    g, al = OpisCameraGate(), Alignment()
    case = Case("opis", "c", "m", None)
    assert g.reference(case, al, 4) == (None, "no camera instruction in conditions.json")
    cond = tmp_path / "conditions.json"
    case.sidecars["conditions"] = cond
    cond.write_text(json.dumps({"camera_path": ["pan_right", "pan_left"], "frames_per_action": 2}))
    ref, label = g.reference(case, al, 4)
    # 36° per step over 2 frames: frames 0..3 at yaw 0, 18, 36, 18 (frame i's token moves i -> i + 1)
    yaw = [math.degrees(math.atan2(p[0, 2], p[2, 2])) for p in ref]
    assert label == "instructed path (2 steps)" and yaw == pytest.approx([0, 18, 36, 18])
    cond.write_text(json.dumps({"camera_poses_c2w": yaw_path([0, 10, 20]).tolist()}))
    with pytest.raises(CaseFailure, match="camera_poses_c2w has 3 poses, the video 4 frames"):
        g.reference(case, al, 4)
    cond.write_text(json.dumps({"camera_path": ["orbit_left"]}))
    ref, label = g.reference(case, al, 4)
    assert ref is None and "unknown camera instruction 'orbit_left'" in label
