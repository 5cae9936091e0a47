"""Revisit structure (B.4), experimental gate (B.5), turning points (O-B3) and action splits (B.5)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.scene_memory_fixtures import loop_poses, pose, yaw

from worldrecall.core.data import CaseFailure
from worldrecall.plugins.scene_memory.actions import (
    CAMERA_TOKEN_ACTIONS,
    action_split_row,
    expand_program,
    keyboard_mouse_parts,
    label_parts,
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
    # departed: 1.0 ≥ 0.10. Tail: ⌈33·0.15⌉ = 5 rows from 28; row 32 has ratio 0 and 0° -> passes
    assert rg.departed and rg.returned and rg.gate and rg.return_row == 32 and rg.return_ratio == 0.0
    assert rg.tail_start == 28
    one_way = experimental_return_gate(P[:17])
    # tail ⌈17·0.15⌉ = 3 rows from 14: best ratio = z_14 / 1 = 0.875 > 0.12 -> no return
    assert one_way.departed and not one_way.returned and one_way.return_row == 14
    assert one_way.return_ratio == pytest.approx(0.875)
    assert not experimental_return_gate(loop_poses("static", 4)).departed
    # 3 poses, tail fraction 1: the tail would start at 0 but never takes row 0 -> starts at 1
    three = np.stack([pose(), pose(None, (0.0, 0.0, 1.0)), pose(None, (0.0, 0.0, 0.05))])
    g = experimental_return_gate(three, return_window=1.0)
    assert g.tail_start == 1 and g.return_row == 2 and g.return_ratio == pytest.approx(0.05) and g.gate
    # tail fraction clamped to [0, 1]: 5.0 behaves as 1.0, −1 as 0 (then the last row alone)
    assert experimental_return_gate(three, return_window=5.0).tail_start == 1
    assert experimental_return_gate(P, return_window=-1.0).tail_start == 32
    # the optional absolute cap: return translation 0.05 > 0.01 -> not returned
    assert not experimental_return_gate(three, return_window=1.0, max_return_translation=0.01).returned
    # t / max(t_max, 1e-8): a static camera gives ratio 0, not a division by zero
    assert experimental_return_gate(loop_poses("static", 4)).return_ratio == 0.0
    with pytest.raises(ValueError, match="at least three"):
        experimental_return_gate(three[:2])
    bad = three.copy()
    bad[1, 0, 3] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        experimental_return_gate(bad)


# -- action programs ----------------------------------------------------------------------------------
def test_release_label_parsing():
    # camera tokens: push_in, pull_out, tilt_*, pedestal_* hold no alias -> no-ops; pan_left/pan_right
    # contain the alias "left"/"right" as a substring -> the move parts left/right
    for tok in ("push_in", "pull_out", "tilt_up", "tilt_down", "pedestal_up", "pedestal_down", "fixed", "idle"):
        assert label_parts(tok) == [], tok
    assert label_parts("pan_left") == ["left"] and label_parts("pan_right") == ["right"]
    # aliases, longest first, then whole words (single letters only as words)
    assert label_parts("W") == ["forward"] and label_parts("look-left") == ["camera_l"]
    # "+" becomes "_" before matching, so "yaw+" only matches the alias "yaw-" (-> "yaw_"): camera_l, as
    # the release parses it (likewise "pitch+" -> camera_down)
    assert label_parts("Move Forward + yaw+") == ["camera_l", "forward"]
    assert label_parts("pitch+") == ["camera_down"]
    assert label_parts("back_left_camera_l") == ["back", "camera_l", "left"]
    assert label_parts("swim") == []  # "s" is not a word here, "w" neither
    # the release's loop fallback maps itinerary tokens first: pan_right -> back_right_camera_r
    assert label_parts(CAMERA_TOKEN_ACTIONS["pan_right"]) == ["back", "camera_r", "right"]


def test_action_split_by_hand():
    # push_in/pull_out are both no-ops: one segment, t = max(33 // 2, 1) = 16, row = round(16·32/33) = 16
    prog = normalise_program({"actions": ["push_in"] * 4 + ["pull_out"] * 4, "frames_per_action": 4}, "a.json")
    seq = expand_program(prog, 33)  # 32 frames of actions, padded with the last one to 33
    assert len(seq) == 33 and seq[-1] == () and segments(seq) == [(0, 33)]
    assert action_split_row(seq, 33) == (16, 16)
    # a yaw loop: pan_right (right) then pan_left (left): t = 6·4 = 24 of 48, 17 rows: round(24·16/48) = 8
    yaw = normalise_program({"actions": ["pan_right"] * 6 + ["pan_left"] * 6, "frames_per_action": 4}, "y.json")
    seq = expand_program(yaw, 48)
    assert segments(seq) == [(0, 24), (24, 48)] and action_split_row(seq, 17) == (24, 8)


def test_action_split_edge_cases():
    # single segment: t = max(len // 2, 1) (errata 4); 10 frames, 5 rows -> round(5·4/10) = 2
    assert action_split_row([("fixed",)] * 10, 5) == (5, 2)
    # first segment of 1 frame of 100, 10 rows: round(1·9/100) = 0 -> clamped to 1
    assert action_split_row([("a",)] + [("b",)] * 99, 10) == (1, 1)
    # half-to-even rounding: t = 1, 4 frames, 11 rows -> round(1·10/4) = round(2.5) = 2
    assert action_split_row([("a",), ("b",), ("b",), ("b",)], 11) == (1, 2)
    # frame count 0: no actions, t = 1, row = round(1·4/max(0, 1)) = 4, clamped to N − 1 = 4
    assert expand_program({"actions": [["a"]], "frames_per_action": None}, 0) == []
    assert action_split_row([], 5) == (1, 4)


def test_action_formats(tmp_path):
    # keyboard rows (W, S, A, D columns) and mouse rows (pitch, yaw); a missing row is a no-op
    p = normalise_program({"keyboard_condition": [[1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1]],
                           "mouse_condition": [[0.0, 0.0], [0.5, 0.0]]}, "k.json")
    assert expand_program(p, 4) == [("forward",), ("camera_up", "forward"), ("right",), ()]
    # mouse motion counts above 1e-6 only (float32), negative = down / left
    assert keyboard_mouse_parts(None, np.array([1e-6, -2e-6], np.float32)) == ["camera_l"]
    # seven-column rows when none of the first four keys is held: columns 3..6 = camera_l, camera_r, left, right
    assert keyboard_mouse_parts(np.array([0, 0, 0, 0, 1, 0, 1], np.float32), None) == ["camera_r", "right"]
    # frame_actions: dicts read through move / view / action; strings through the alias table
    p2 = normalise_program({"frame_actions": [{"move": "forward", "view": "look_left"}, {"action": "w+d"},
                                              "fixed"]}, "f.json")
    assert expand_program(p2, 4) == [("camera_l", "forward"), ("forward", "right"), (), ()]
    # actions without frames_per_action: ceil(frames / #actions) frames each -> ceil(5 / 2) = 3
    p3 = normalise_program({"actions": ["w", "s"]}, "a.json")
    assert p3["frames_per_action"] is None
    assert expand_program(p3, 5) == [("forward",)] * 3 + [("back",)] * 2
    # a named loop without actions (ours): its itinerary through the release's camera-token table
    p4 = normalise_program({"loop": "yaw_loop_180"}, "l.json")
    assert len(p4["actions"]) == 12 and p4["actions"][0] == ["back", "camera_r", "right"]
    bad = tmp_path / "x_actions.json"
    bad.write_text(json.dumps({"frames_per_action": 3}))
    with pytest.raises(CaseFailure, match="x_actions.json: no actions"):
        read_program(bad)
    bad.write_text("{")
    with pytest.raises(CaseFailure, match="x_actions.json: unreadable"):
        read_program(bad)
    # frames_per_action 0 is the release's "unset" (ceil fallback)
    assert normalise_program({"actions": ["a"], "frames_per_action": 0}, "z.json")["frames_per_action"] is None


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
