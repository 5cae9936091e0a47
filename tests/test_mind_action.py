"""MIND action accuracy: Umeyama Sim(3), RPE, COLMAP images.txt and ``mind.action``, each against values
worked out by hand (release: ``src/metrics/action.py`` and ``src/utils/vipe_utils.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from worldrecall.core.data import CaseFailure
from worldrecall.formats import colmap
from worldrecall.numerics import trajectory as tj


def rz(deg: float) -> np.ndarray:
    a = math.radians(deg)
    return np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]])


def pose(rot: np.ndarray | None = None, t=(0.0, 0.0, 0.0)) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = np.eye(3) if rot is None else rot
    out[:3, 3] = t
    return out


# --- Umeyama -----------------------------------------------------------------------------------------


def test_umeyama_recovers_an_exact_similarity():
    x = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    y = 2.0 * x @ rz(90).T + np.array([1.0, 2.0, 3.0])
    sim = tj.umeyama_sim3(x, y)
    assert sim.scale == pytest.approx(2.0)
    np.testing.assert_allclose(sim.rotation, rz(90), atol=1e-12)
    np.testing.assert_allclose(sim.translation, [1.0, 2.0, 3.0], atol=1e-12)


def test_umeyama_scale_is_the_least_squares_stretch():
    # x stretched by 2 along x and kept along y: Σ y·x / Σ |x|² = (2 + 2 + 1 + 1) / 4 = 1.5, no rotation
    x = np.array([[-1, 0, 0], [1, 0, 0], [0, -1, 0], [0, 1, 0]], dtype=float)
    y = np.array([[-2, 0, 0], [2, 0, 0], [0, -1, 0], [0, 1, 0]], dtype=float)
    sim = tj.umeyama_sim3(x, y)
    assert sim.scale == pytest.approx(1.5)
    np.testing.assert_allclose(sim.rotation, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(sim.translation, 0.0, atol=1e-12)


def test_umeyama_never_returns_a_reflection():
    # the mirror image of ±e1, ±e2, ±e3: Σ = diag(-1, 1, 1) / 3, det U det V < 0 -> S = diag(1, 1, -1),
    # scale = tr(D S) / var(x) = (1/3 + 1/3 - 1/3) / 1 = 1/3, and R is a proper rotation
    x = np.vstack([np.eye(3), -np.eye(3)])
    y = x * np.array([-1.0, 1.0, 1.0])
    sim = tj.umeyama_sim3(x, y)
    assert sim.scale == pytest.approx(1.0 / 3.0)
    assert np.linalg.det(sim.rotation) == pytest.approx(1.0)


def test_umeyama_of_a_camera_that_never_moves_is_finite():
    # var(x) = 0: the 1e-12 keeps the scale finite (0) and every aligned centre lands on the target's centroid
    x = np.zeros((4, 3))
    y = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]], dtype=float)
    sim = tj.umeyama_sim3(x, y)
    assert sim.scale == 0.0
    moved = tj.apply_sim3(np.tile(np.eye(4), (4, 1, 1)), sim)
    np.testing.assert_allclose(moved[:, :3, 3], np.tile([1.5, 0, 0], (4, 1)), atol=1e-12)


def test_apply_sim3_scales_centres_not_rotations():
    sim = tj.Sim3(3.0, rz(90), np.array([0.0, 0.0, 1.0]))
    out = tj.apply_sim3(np.stack([pose(rz(30), (1.0, 0.0, 0.0))]), sim)
    np.testing.assert_allclose(out[0, :3, :3], rz(120), atol=1e-12)
    np.testing.assert_allclose(out[0, :3, 3], [0.0, 3.0, 1.0], atol=1e-12)  # 3 · Rz90 · (1,0,0) + (0,0,1)


def test_umeyama_refuses_mismatched_point_sets():
    with pytest.raises(ValueError):
        tj.umeyama_sim3(np.zeros((3, 3)), np.zeros((4, 3)))


# --- RPE -------------------------------------------------------------------------------------------------


def test_rpe_by_hand():
    ref = np.stack([pose(), pose(t=(1.0, 0.0, 0.0)), pose(t=(2.0, 0.0, 0.0))])
    # step 0: the estimate also moves 1 along x but turns 90°: E = [Rz90 | 0] -> 0, 90°
    # step 1: the estimate (now turned 90°) moves 2 along world y = 2 along its own x: E = [I | (1, 0, 0)] -> 1, 0°
    est = np.stack([pose(), pose(rz(90), (1.0, 0.0, 0.0)), pose(rz(90), (1.0, 2.0, 0.0))])
    te, re = tj.relative_pose_error(ref, est, delta=1)
    np.testing.assert_allclose(te, [0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(re, [90.0, 0.0], atol=1e-9)
    # delta 2: one step, ΔQ = [I | (2,0,0)], ΔP = [Rz90 | (1,2,0)], E = [Rz90 | (-1, 2, 0)] -> √5, 90°
    te2, re2 = tj.relative_pose_error(ref, est, delta=2)
    np.testing.assert_allclose(te2, [math.sqrt(5.0)], atol=1e-12)
    np.testing.assert_allclose(re2, [90.0], atol=1e-9)


def test_rpe_cuts_to_the_shorter_stack_and_takes_3x4():
    ref = np.tile(np.eye(4), (5, 1, 1))
    est = np.tile(np.eye(4)[:3], (3, 1, 1))
    te, re = tj.relative_pose_error(ref, est)
    assert te.shape == re.shape == (2,)
    assert tj.relative_pose_error(ref[:1], est[:1])[0].shape == (0,)
    with pytest.raises(ValueError):
        tj.relative_pose_error(ref, est, delta=0)


def test_rotation_angle_clips_rounding():
    assert tj.rotation_angle_deg(np.eye(3) * (1 + 1e-15)) == 0.0
    assert tj.rotation_angle_deg(rz(180)) == pytest.approx(180.0)


# --- COLMAP images.txt --------------------------------------------------------------------------------

IMAGES_TXT = """# Image list with two lines of data per image:
#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME
1 0.7071067811865476 0 0 0.7071067811865476 1 0 0 1 frame_2.png
10 20 0.1 0.1 POINTS
2 2 0 0 0 0 0 5 1 frame_10.png

3 1 0 0 0 0 0 0 1 frame_1.png
"""


def test_images_txt_by_hand(tmp_path):
    p = tmp_path / "images.txt"
    p.write_text(IMAGES_TXT)
    imgs = colmap.read_images_txt(p)
    # string order, as the release sorts: frame_1 < frame_10 < frame_2
    assert imgs.names == ("frame_1.png", "frame_10.png", "frame_2.png")
    np.testing.assert_allclose(imgs.c2w[0], np.eye(4), atol=1e-12)
    # quaternion (2, 0, 0, 0) is normalised to the identity; centre = -Rᵀ t = (0, 0, -5)
    np.testing.assert_allclose(imgs.c2w[1, :3, 3], [0.0, 0.0, -5.0], atol=1e-12)
    # R_cw = Rz(90), t_cw = (1, 0, 0): R_wc = Rz(-90), centre = -Rz(-90)(1, 0, 0) = (0, 1, 0)
    np.testing.assert_allclose(imgs.c2w[2, :3, :3], rz(-90), atol=1e-12)
    np.testing.assert_allclose(imgs.c2w[2, :3, 3], [0.0, 1.0, 0.0], atol=1e-12)


def test_images_txt_without_points_lines_loses_every_other_image(tmp_path):
    # the release skips the line after each image line whatever it holds
    p = tmp_path / "images.txt"
    p.write_text("".join(f"{k} 1 0 0 0 0 0 {k} 1 f{k}.png\n" for k in range(1, 5)))
    assert colmap.read_images_txt(p).names == ("f1.png", "f3.png")


def test_images_txt_short_lines_are_passed_over_and_zero_quaternion_is_identity(tmp_path):
    p = tmp_path / "images.txt"
    p.write_text("1 2 3\n1 0 0 0 0 4 0 0 1 a.png\n\n")
    imgs = colmap.read_images_txt(p)
    assert imgs.names == ("a.png",)
    np.testing.assert_allclose(imgs.c2w[0, :3, :3], np.eye(3))
    np.testing.assert_allclose(imgs.c2w[0, :3, 3], [-4.0, 0.0, 0.0])


@pytest.mark.parametrize("text, needle", [
    ("# nothing\n", "no image line"),
    ("1 1 0 0 zero 0 0 0 1 a.png\n\n", "line 1: quaternion/translation fields are not numbers"),
])
def test_bad_images_txt_is_one_line_naming_the_file(tmp_path, text, needle):
    p = tmp_path / "images.txt"
    p.write_text(text)
    with pytest.raises(CaseFailure, match=needle) as e:
        colmap.read_images_txt(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_missing_images_txt_names_the_file(tmp_path):
    with pytest.raises(CaseFailure, match="images.txt: cannot be read"):
        colmap.read_images_txt(tmp_path / "images.txt")


def test_images_txt_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    poses = []
    for k in range(12):
        q = rng.normal(size=4)
        rot = colmap.quaternion_to_rotation(*q)
        poses.append(pose(rot, rng.normal(size=3)))
    poses = np.stack(poses)
    p = tmp_path / "images.txt"
    p.write_text(colmap.images_txt_text(poses))
    back = colmap.read_images_txt(p)
    assert len(back) == 12 and back.names[0] == "frame_000000.png"
    np.testing.assert_allclose(back.c2w, poses, atol=1e-12)
