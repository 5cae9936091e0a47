"""Revisit structure (B.4), experimental gate (B.5), turning points (O-B3) and action splits (B.5)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.scene_memory_fixtures import loop_poses, pose, yaw

from worldrecall.core.data import CaseFailure
from worldrecall.plugins.scene_memory.actions import (
    action_split_row,
    expand_program,
    loop_name_of,
    normalise_program,
    read_program,
    segments,
)
from worldrecall.plugins.scene_memory.trajectory import (
    experimental_return_gate,
    pose_distance_matrix,
    turnaround_gate,
    turning_points,
)


def test_pose_distance_by_hand():
    P = np.stack([pose(), pose(yaw(90.0), (2.0, 0.0, 0.0)), pose(None, (1.0, 0.0, 0.0))])
    d, E = pose_distance_matrix(P)
    # E = max ‖t_i − t_0‖ = 2; d_01 = 2/2 + 90/180 = 1.5; d_02 = 1/2 + 0 = 0.5; d_12 = 1/2 + 90/180 = 1.0
    assert E == 2.0
    np.testing.assert_allclose(d, [[0, 1.5, 0.5], [1.5, 0, 1.0], [0.5, 1.0, 0]], atol=1e-12)
    # rotation weight w = 2 doubles the angle term; a rotation-only trajectory drops the translation term
    d2, _ = pose_distance_matrix(P, rotation_weight=2.0)
    assert d2[0, 1] == pytest.approx(2.0)
    Prot = np.stack([pose(), pose(yaw(45.0)), pose(yaw(180.0))])
    d3, E3 = pose_distance_matrix(Prot)
    assert E3 == 0.0 and d3[0].tolist() == pytest.approx([0.0, 0.25, 1.0])


def test_dolly_loop_gate_passes_by_hand():
    # push_in ×4 then pull_out ×4, 4 frames per action: z_i = 0.0625·i up to row 16, then back -> 33 rows
    P = loop_poses("dolly", 4)
    g = turnaround_gate(P, fps=4.0)
    # E = 1 (row 16), d_0j = z_j -> k* = 16 (end of the 4th step), D = 1 ≥ 3·0.15 -> departed
    assert (g.n_rows, g.k_star, g.extent, g.departure, g.departed) == (33, 16, 1.0, 1.0, True)
    # gap = round(1 s · 4 fps) = 4 rows. For j ≥ 18 the outbound twin row 32−j is a perfect match (d = 0);
    # the excursion from it, z_16 − z_(32−j) = 1 − 0.0625·(32−j), reaches 0.45 only for j ≥ 24 -> 9 pairs
    # (rows 24..32). j = 17 matches row 13 at d = 0.125 but its excursion is 0.1875 < 0.45.
    assert g.gap_rows == 4 and g.n_pairs == 9
    assert g.pairs[0] == (8, 24) and g.pairs[-1] == (0, 32)
    assert g.returned and g.gate_official and g.gate and g.split_ok


def test_static_camera_fails_the_gate():
    g = turnaround_gate(loop_poses("static", 4), fps=4.0)
    assert g.departed is False and g.gate is False and g.gate_official is False
    assert g.k_star == 0 and g.split_ok is False  # observation leg would be empty


def test_one_way_trajectory_departs_but_does_not_return():
    P = loop_poses("dolly", 4)[:17]
    g = turnaround_gate(P, fps=4.0)
    assert g.departed and not g.returned and not g.gate


def test_jitter_passes_official_gate_but_not_the_floor():
    # errata 6: ≈1 cm / 1° noise is scale-free "departed and returned" in the official code
    P = loop_poses("jitter", 4, jitter=(0.01, 1.0))
    g = turnaround_gate(P, fps=4.0)
    assert g.gate_official is True
    assert g.floor_passed is False and g.gate is False
    assert turnaround_gate(P, fps=4.0, absolute_floor=False).gate is True
    # a real dolly clears the floor (1 m ≥ 0.05 m)
    assert turnaround_gate(loop_poses("dolly", 4), fps=4.0).floor_passed


def test_short_trajectories():
    with pytest.raises(ValueError, match="at least 2 poses, got 1"):  # the release raises: an error
        turnaround_gate(loop_poses("dolly", 1)[:1], fps=16.0)
    g2 = turnaround_gate(loop_poses("dolly", 1)[:2], fps=16.0)  # k* = 1 -> observation leg has 1 row
    assert g2.k_star == 1 and not g2.split_ok


def test_min_gap_uses_python_rounding():
    P = loop_poses("dolly", 4)
    assert turnaround_gate(P, fps=2.5).gap_rows == 2  # round(2.5) = 2 (half to even)
    assert turnaround_gate(P, fps=0.2).gap_rows == 1  # max(round(0.2), 1)


def test_turning_points():
    assert turning_points(loop_poses("yaw180", 4), fps=4.0) == [24]
    # double yaw: out, back, out, back -> two turns; the official split only sees the first (B.10)
    P = loop_poses("double_yaw", 4)
    assert turning_points(P, fps=4.0) == [24, 72]
    assert turnaround_gate(P, fps=4.0).k_star == 24
    assert turning_points(loop_poses("static", 4), fps=4.0) == []


def test_experimental_return_gate_by_hand():
    P = loop_poses("dolly", 4)  # 33 rows, max translation 1.0 at row 16, back to 0 at row 32
    rg = experimental_return_gate(P)
    # departed: 1.0 ≥ 0.10. Window starts at floor(33·0.85) = 28; row 32 has ratio 0 and 0° -> passes
    assert rg.departed and rg.returned and rg.gate and rg.return_row == 32 and rg.return_ratio == 0.0
    one_way = experimental_return_gate(P[:17])
    # rows 14..16 (floor(17·0.85) = 14): best ratio = z_14 / 1 = 0.875 > 0.12 -> no return
    assert one_way.departed and not one_way.returned and one_way.return_row == 14
    assert one_way.return_ratio == pytest.approx(0.875)
    assert not experimental_return_gate(loop_poses("static", 4)).departed


# -- action programs ----------------------------------------------------------------------------------
def test_action_split_by_hand():
    prog = normalise_program({"actions": ["push_in"] * 4 + ["pull_out"] * 4, "frames_per_action": 4}, "a.json")
    seq = expand_program(prog, 33)  # 32 frames of actions, padded with the last one to 33
    assert len(seq) == 33 and seq[-1] == ("pull_out",)
    assert segments(seq) == [(0, 16), (16, 33)]
    # t = 16; row = round(16·(33 − 1)/33) = round(15.515) = 16
    assert action_split_row(seq, 33) == (16, 16)
    # sparse sidecar with 17 rows: round(16·16/33) = round(7.758) = 8
    assert action_split_row(seq, 17) == (16, 8)


def test_action_split_edge_cases():
    # single segment: t = max(len // 2, 1) (errata 4); 10 frames, 5 rows -> round(5·4/10) = 2
    assert action_split_row([("fixed",)] * 10, 5) == (5, 2)
    # first segment of 1 frame of 100, 10 rows: round(1·9/100) = 0 -> clamped to 1
    assert action_split_row([("a",)] + [("b",)] * 99, 10) == (1, 1)
    # half-to-even rounding: t = 1, 4 frames, 11 rows -> round(1·10/4) = round(2.5) = 2
    assert action_split_row([("a",), ("b",), ("b",), ("b",)], 11) == (1, 2)
    with pytest.raises(CaseFailure):
        action_split_row([], 5)


def test_action_formats(tmp_path):
    # keyboard/mouse rows (per frame): held keys and mouse directions form the action-part set
    p = normalise_program({"keyboard_condition": [[1, 0], [1, 0], [0, 1]],
                           "mouse_condition": [[0.0, 0.0], [0.5, 0.0], [0.5, 0.0]]}, "k.json")
    assert p["frame_actions"] == [["key0"], ["key0", "mouse0+"], ["key1", "mouse0+"]]
    # frame_actions with "+" combined tokens
    p2 = normalise_program({"frame_actions": ["pan_right+push_in", ["push_in", "pan_right"], "fixed"]}, "f.json")
    assert p2["frame_actions"][0] == p2["frame_actions"][1] == ["pan_right", "push_in"]
    # loop fallback; without frames_per_action tokens spread evenly: frame i takes token floor(i·2/5)
    # -> 0, 0, 0, 1, 1 for 2 tokens over 5 frames
    p3 = normalise_program({"loop": "yaw_loop_180"}, "l.json")
    assert len(p3["actions"]) == 12 and p3["frames_per_action"] is None
    assert [s[0] for s in expand_program({"actions": [["a"], ["b"]], "frames_per_action": None}, 5)] == \
        ["a", "a", "a", "b", "b"]
    bad = tmp_path / "x_actions.json"
    bad.write_text(json.dumps({"frames_per_action": 3}))
    with pytest.raises(CaseFailure, match="x_actions.json: no actions"):
        read_program(bad)
    bad.write_text("{")
    with pytest.raises(CaseFailure, match="x_actions.json: unreadable"):
        read_program(bad)
    with pytest.raises(CaseFailure, match="frames_per_action must be a positive integer"):
        normalise_program({"actions": ["a"], "frames_per_action": 0}, "z.json")


def test_loop_names():
    assert loop_name_of("dolly_loop_003") == "dolly_loop"
    assert loop_name_of("double_yaw_loop-7") == "double_yaw_loop"
    assert loop_name_of("yaw_loop_360_01") == "yaw_loop_360"
    assert loop_name_of("kitchen_01") is None


def test_departure_and_excursion_factors_are_separate_knobs():
    # dolly, 4 frames per action at 4 fps: d_0j = z_j / 1 m peaks at 1.0; excursions reach 1.0 too
    P = loop_poses("dolly", 4)
    base = turnaround_gate(P, fps=4.0)
    assert base.departed and base.n_pairs > 0
    # departure needs 1.0 ≥ 7 × 0.15 = 1.05: fails, while pairs (excursion ≥ 3 × 0.15) still form
    g = turnaround_gate(P, fps=4.0, departure_factor=7.0)
    assert not g.departed and g.n_pairs == base.n_pairs and not g.gate_official
    # excursion needs ≥ 7 × 0.15 = 1.05 > every excursion: no pair, departure untouched
    g = turnaround_gate(P, fps=4.0, excursion_factor=7.0)
    assert g.departed and g.n_pairs == 0 and not g.returned


def test_fps_is_floored_before_the_gap():
    # fps 0 -> max(0, 1e-6): gap = max(round(1e-6), 1) = 1 row (no division by zero, no error)
    assert turnaround_gate(loop_poses("dolly", 4), fps=0.0).gap_rows == 1


def test_empty_excursion_counts_as_zero():
    # two rows only, gap 1: pair (0, 1) has no row between them -> excursion 0 < 0.45 -> no pair
    P = np.stack([pose(), pose(None, (0.0, 0.0, 0.01))])
    assert turnaround_gate(P, fps=1.0, revisit_radius=2.0, excursion_factor=3.0).n_pairs == 0
    # a zero excursion requirement lets the same pair count (0 ≥ 0)
    assert turnaround_gate(P, fps=1.0, revisit_radius=2.0, excursion_factor=0.0).pairs == [(0, 1)]
