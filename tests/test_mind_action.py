"""MIND action accuracy: Umeyama Sim(3), RPE, COLMAP images.txt and ``mind.action``, each against values
worked out by hand (release: ``src/metrics/action.py`` and ``src/utils/vipe_utils.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from worldrecall.core.components import MeasureContext
from worldrecall.core.data import Alignment, Case, CaseFailure, CaseSkip
from worldrecall.core.models import ModelHub, ModelSpec
from worldrecall.core.video import Video
from worldrecall.formats import colmap
from worldrecall.formats.mp4 import write_video
from worldrecall.numerics import trajectory as tj
from worldrecall.plugins.mind.action import MindAction, action_group
from worldrecall.plugins.models import sidecar as sidecar_backend


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


# --- mind.action on hand-made clips ------------------------------------------------------------------

GT_LINE = np.stack([pose(t=(float(i), 0.0, 0.0)) for i in range(10)])  # GT camera: 1 unit along x per frame
# the generated camera: twice as far per frame (Sim(3) scale 1/2), turned 90° about z at frame 5 only
GEN = np.stack([pose(rz(90) if i == 5 else None, (2.0 * i, 0.0, 0.0)) for i in range(10)])
LABELS = ["forward"] * 4 + ["look_left"] * 2 + ["forward+look_right"] * 4
# by hand, 9 steps (δ = 1): step 4 (4 -> 5) E = [Rz90 | 0] -> 0, 90°; step 5 (5 -> 6) E = [Rz-90 | (-1, -1, 0)]
# -> √2, 90°; every other step 0, 0°
TE = [0, 0, 0, 0, 0, math.sqrt(2), 0, 0, 0]
RE = [0, 0, 0, 0, 90, 90, 0, 0, 0]


def _sidecar(d, c2w):
    d.mkdir(parents=True)
    np.save(d / "poses_c2w.npy", np.asarray(c2w, dtype=np.float64))
    np.save(d / "intrinsics.npy", np.tile(np.array([[20.0, 0, 16], [0, 20.0, 12], [0, 0, 1]]), (len(c2w), 1, 1)))


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """A generated clip of 10 frames with its ViPE sidecar and a GT clip of 12 frames (mark_time 2)."""
    root = tmp_path_factory.mktemp("mind-action")
    frames = np.random.default_rng(0).integers(0, 255, (12, 24, 32, 3), dtype=np.uint8)
    gen_dir, gt_dir = root / "gen" / "data-1", root / "gt" / "data-1"
    write_video(gen_dir / "video.mp4", frames[:10], 24.0)
    write_video(gt_dir / "video.mp4", frames, 24.0)
    _sidecar(gen_dir / "video_vipe_ann", GEN)
    (gt_dir / "images.txt").write_text(colmap.images_txt_text(GT_LINE))
    _sidecar(gt_dir / "video_vipe_ann", np.concatenate([np.tile(np.eye(4), (2, 1, 1)), GT_LINE]))
    return root


def make_case(root, *, images=True, gt_vipe=True, labels=LABELS, **ann):
    gen_dir, gt_dir = root / "gen" / "data-1", root / "gt" / "data-1"
    sidecars = {"vipe": gen_dir / "video_vipe_ann", "action_json": gt_dir / "action.json"}
    if images:
        sidecars["gt_images_txt"] = gt_dir / "images.txt"
    if gt_vipe:
        sidecars["gt_vipe"] = gt_dir / "video_vipe_ann"
    annotations = {"mark_time": 2, "total_time": 12, "actions": list(labels), "action_max_frames": 97, **ann}
    return Case("mind", "1st_data/mem_test/data-1", "m", Video(gen_dir / "video.mp4"),
                reference=Video(gt_dir / "video.mp4"), strata={"perspective": "1st_data", "test_type": "mem_test"},
                annotations=annotations, sidecars=sidecars)


def ctx():
    spec = ModelSpec("sidecar_pose", "pose", "sidecar", factory=sidecar_backend.build_pose)
    return MeasureContext(models=ModelHub({"sidecar_pose": spec}, {"pose": "sidecar_pose"}))


def run(case, params=None, thresholds=None):
    metric = MindAction({"max_frames": 10, **(params or {})}, thresholds)
    m = metric.measure(case, Alignment(), ctx())
    return metric, m, metric.score(m, metric.thresholds)


def test_action_rpe_by_hand(clip):
    metric, m, s = run(make_case(clip))
    np.testing.assert_allclose(m["trans_err"], TE, atol=1e-9)
    np.testing.assert_allclose(m["rot_err"], RE, atol=1e-6)
    assert m["sim3_scale"] == pytest.approx(0.5)
    assert m["row_info"]["gt_camera"] == "images.txt (10 images)"
    assert s["count"] == 9
    assert s["rpe_trans_mean"] == pytest.approx(math.sqrt(2) / 9)
    assert s["rpe_trans_median"] == pytest.approx(0.0, abs=1e-9)
    assert s["rpe_rot_mean_deg"] == pytest.approx(20.0)
    assert s["rpe_rot_median_deg"] == pytest.approx(0.0)
    # official groups: the release's buckets know no look_* label, so steps 4-8 are all "other"
    assert s["translation_count"] == 4 and s["translation_rpe_rot_mean_deg"] == pytest.approx(0.0)
    assert s["rotation_count"] is None and s["rotation_rpe_trans_mean"] is None
    assert s["other_count"] == 5
    assert s["other_rpe_trans_mean"] == pytest.approx(math.sqrt(2) / 5)
    assert s["other_rpe_rot_mean_deg"] == pytest.approx(36.0)
    per = metric.row_info(m)["per_action"]
    assert sorted(per) == ["forward", "forward+look_right", "look_left"]
    assert per["look_left"]["count"] == 2 and per["look_left"]["rpe_rot_mean_deg"] == pytest.approx(90.0)
    assert per["forward+look_right"]["count"] == 3  # the 10th label has no step


def test_look_as_rotation_moves_pure_look_labels(clip):
    _, _, s = run(make_case(clip), thresholds={"groups": "look_as_rotation"})
    assert s["rotation_count"] == 2
    assert s["rotation_rpe_trans_median"] == pytest.approx(math.sqrt(2) / 2)  # median of 0 and √2
    assert s["rotation_rpe_rot_mean_deg"] == pytest.approx(90.0)
    assert s["other_count"] == 3 and s["other_rpe_rot_mean_deg"] == pytest.approx(0.0)
    assert action_group("look_up") == "other" and action_group("look_up", "look_as_rotation") == "rotation"
    assert action_group("cam_left") == "rotation" and action_group("W") == "translation"


def test_filter_then_min_valid_steps_skips(clip):
    metric, m, _ = run(make_case(clip))
    # rotation limit 89°: steps 4 and 5 go, 7 are left, fewer than 8 -> no value (the release returns None)
    with pytest.raises(CaseSkip, match="7 of 9 RPE steps left"):
        metric.score(m, {**metric.thresholds, "max_rot_deg": 89.0})
    # min_valid_steps 7: scored on the 7 kept steps, all exact
    s = metric.score(m, {**metric.thresholds, "max_rot_deg": 89.0, "min_valid_steps": 7})
    assert s["count"] == 7 and s["rpe_trans_mean"] == pytest.approx(0.0, abs=1e-9)
    assert s["rpe_rot_mean_deg"] == pytest.approx(0.0, abs=1e-6)
    # translation limit 1: step 5 (√2) goes, 8 left -> scored; a limit <= 0 is no test
    s = metric.score(m, {**metric.thresholds, "max_trans": 1.0})
    assert s["count"] == 8 and s["rpe_rot_mean_deg"] == pytest.approx(90.0 / 8)
    assert metric.score(m, {**metric.thresholds, "max_rot_deg": 0.0, "max_trans": 0.0})["count"] == 9


def test_steps_follow_the_shortest_of_labels_and_poses(clip):
    _, m, s = run(make_case(clip, labels=LABELS[:8]))  # 8 labels -> 8 steps (poses 0..8)
    assert m["n_steps"] == 8 and s["count"] == 8
    with pytest.raises(CaseSkip, match=r"not enough steps to compare: min\(labels 0, GT poses 10 − δ"):
        run(make_case(clip, labels=[]))


def test_gt_camera_falls_back_to_the_gt_sidecar(clip):
    # no images.txt: the pose role on GT frames 2..11 with the GT's own ViPE sidecar gives the same numbers
    _, m, s = run(make_case(clip, images=False))
    assert m["row_info"]["gt_camera"] == "pose role on GT frames 2–11"
    assert s["rpe_trans_mean"] == pytest.approx(math.sqrt(2) / 9)
    # an images.txt shorter than max_frames is not used (the release runs ViPE again): max_frames 11 wants 11
    _, m, _ = run(make_case(clip), params={"max_frames": 11})
    assert m["row_info"]["gt_camera"].startswith("pose role") and "fewer than 11" in m["row_info"]["notes"][0]
    # ... unless gt_images_min: available, where the 10 GT frames after mark_time are all there are
    _, m, _ = run(make_case(clip), params={"max_frames": 11, "gt_images_min": "available"})
    assert m["row_info"]["gt_camera"] == "images.txt (10 images)"


def test_no_gt_camera_for_a_sidecar_backend_is_a_skip_naming_the_fix(clip):
    with pytest.raises(CaseSkip, match=r"no GT camera for the sidecar_pose backend \(no ViPE sidecar of the GT "
                                       r"video\): put the GT's COLMAP images.txt"):
        run(make_case(clip, images=False, gt_vipe=False))
    # a sidecar backend that reads another file (WRBench's pose stacks): its own preflight says what is missing
    from worldrecall.plugins.models import pose_npy

    spec = ModelSpec("poses_npy", "pose", "sidecar", factory=pose_npy.build, preflight=pose_npy.preflight)
    metric = MindAction({"max_frames": 10})
    with pytest.raises(CaseSkip, match="no GT camera for the poses_npy backend .*no pose_path"):
        metric.gt_poses(make_case(clip, images=False), MeasureContext(models=ModelHub({"poses_npy": spec},
                                                                                      {"pose": "poses_npy"})), 2)


def test_mirror_missing_gt_and_bad_labels(clip):
    with pytest.raises(CaseSkip, match="mirror test"):
        run(make_case(clip, mirror=True))
    with pytest.raises(CaseSkip, match="GT clip folder missing"):
        run(make_case(clip, gt_missing="x: GT clip folder missing (the release does not score this clip)"))
    with pytest.raises(CaseFailure, match="action.json: data\\[3\\].ws"):
        run(make_case(clip, actions_error="action.json: data[3].ws must be an integer action code (got 'x')"))
    assert not MindAction().needs_models(make_case(clip, mirror=True))


def test_frozen_generated_camera_scores_the_gt_motion(clip):
    # a camera that never moves: scale 0, every aligned step is the identity, so each error is the GT's own step
    gen_dir = clip / "frozen"
    _sidecar(gen_dir / "video_vipe_ann", np.tile(np.eye(4), (10, 1, 1)))
    case = make_case(clip)
    case.sidecars["vipe"] = gen_dir / "video_vipe_ann"
    _, m, s = run(case)
    assert m["sim3_scale"] == 0.0
    assert s["rpe_trans_mean"] == pytest.approx(1.0) and s["rpe_rot_mean_deg"] == 0.0


def test_config_typos_end_the_run():
    from worldrecall.core.components import ConfigTypeError

    with pytest.raises(ConfigTypeError, match="groups"):
        MindAction(thresholds={"groups": "offical"})
    with pytest.raises(ConfigTypeError, match="gt_images_min"):
        MindAction({"gt_images_min": "all"})


def test_hostile_images_txt_is_a_case_failure_or_a_reading(tmp_path):
    """Random bytes and random token lines: the reader returns poses or raises one CaseFailure line, nothing else."""
    rng = np.random.default_rng(7)
    tokens = ["1", "0", "-0", "nan", "inf", "1e999", "x", "#", "", "frame.png", "\x00", "é", "0.5", "-3"]
    p = tmp_path / "images.txt"
    for k in range(200):
        if k % 2:
            p.write_bytes(rng.integers(0, 256, int(rng.integers(0, 400)), dtype=np.uint8).tobytes())
        else:
            lines = [" ".join(rng.choice(tokens, int(rng.integers(0, 13)))) for _ in range(int(rng.integers(0, 8)))]
            p.write_text("\n".join(lines))
        try:
            imgs = colmap.read_images_txt(p)
        except CaseFailure as e:
            assert "\n" not in str(e) and str(p) in str(e)
        else:
            assert imgs.c2w.shape == (len(imgs), 4, 4)
