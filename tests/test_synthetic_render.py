"""Synthetic-suite building blocks: camera programs, exact depth, instance ids, annotations, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest

from worldrecall.plugins.synthetic.annotate import exit_reenter, visibility
from worldrecall.plugins.synthetic.files import npz_bytes
from worldrecall.plugins.synthetic.memobench_layout import phase_mapping
from worldrecall.plugins.synthetic.programs import (
    PROGRAMS,
    c2w_from,
    make_program,
    rotation_angle_deg,
)
from worldrecall.plugins.synthetic.render import intrinsics, scale_intrinsics


# -- camera programs ----------------------------------------------------------------------------------
def test_c2w_uses_opencv_axes():
    m = c2w_from(np.array([1.0, 1.2, -2.0]), 0.0, 0.0)
    assert np.allclose(m[:3, 2], [0, 0, 1])  # looks along +Z
    assert np.allclose(m[:3, 1], [0, -1, 0])  # image down = world down (Y up)
    assert np.allclose(np.cross(m[:3, 0], m[:3, 1]), m[:3, 2])  # right x down = forward
    up = c2w_from(np.zeros(3), 30.0, 40.0)
    assert np.isclose(np.linalg.det(up[:3, :3]), 1.0)
    assert math.isclose(math.degrees(math.asin(up[1, 2])), 40.0)  # pitch = elevation of the optical axis


@pytest.mark.parametrize("name", PROGRAMS)
def test_programs_have_twelve_slots_and_close_their_loop(name):
    p = make_program(name, np.random.default_rng(3), 89.0)
    assert len(p.tokens) == 12
    start, end = p.pose(0.0), p.pose(89.0)
    if name == "u_turn":
        assert abs(rotation_angle_deg(start, end) - 180.0) < 1e-6  # 5 x 36 degrees
    else:
        assert rotation_angle_deg(start, end) < 1e-6
        assert np.allclose(start[:3, 3], end[:3, 3], atol=1e-9)
    away = max(rotation_angle_deg(start, p.pose(t)) for t in np.linspace(0, 89, 90))
    expected = {"pan": 108.0, "tilt": 84.0, "u_turn": 180.0, "dolly": 0.0, "double_yaw": 100.0}[name]
    assert abs(away - expected) < 1e-6
    assert np.allclose(p.frozen().poses(np.linspace(0, 89, 7)), start)


def test_u_turn_arc_has_the_closed_form_radius():
    p = make_program("u_turn", np.random.default_rng(0), 120.0)
    # 5 slots x 0.5 m while turning 180 degrees: a half circle of radius 2.5 / pi, sideways shift 2 r
    a = p.pose(4 * 10.0)[:3, 3]
    b = p.pose(9 * 10.0)[:3, 3]
    assert math.isclose(np.linalg.norm(a - b), 2 * 2.5 / math.pi, rel_tol=1e-9)


def test_wrong_trajectory_scales_turns():
    p = make_program("pan", np.random.default_rng(1), 89.0)
    w = p.wrong(0.5)

    def turn(q):
        return max(rotation_angle_deg(q.pose(0), q.pose(t)) for t in np.linspace(0, 89, 90))

    assert math.isclose(turn(w), 54.0, abs_tol=1e-6)  # 3 x 36 x 0.5
    d = make_program("dolly", np.random.default_rng(1), 89.0)
    assert math.isclose(turn(d.wrong(1.6)), 40.0, abs_tol=1e-6)  # a straight dolly veers 4 x 10 degrees


# -- intrinsics and phase mapping -----------------------------------------------------------------------
def test_intrinsics_and_scaling():
    K = intrinsics(320, 240)
    assert math.isclose(K[0, 0], 160 / math.tan(math.radians(30)))  # 60 degree horizontal FOV
    assert (K[0, 2], K[1, 2]) == (159.5, 119.5)
    Kd = scale_intrinsics(K, (320, 240), (64, 48))
    # pixel centre u=2 of the video maps to depth pixel 0: (2 + 0.5) / 5 - 0.5 = 0
    assert math.isclose((2 - K[0, 2]) / K[0, 0], (0 - Kd[0, 2]) / Kd[0, 0])
    assert (Kd[0, 2], Kd[1, 2]) == (31.5, 23.5)


def test_phase_mapping_matches_memobench():
    # spec examples: (100, 200, G=300, N=81) -> (27, 54); N=129 -> (43, 86); (150, 250, 300, 81) -> (40, 68)
    assert phase_mapping(100, 200, 300, 81) == (27, 54)
    assert phase_mapping(100, 200, 300, 129) == (43, 86)
    assert phase_mapping(150, 250, 300, 81) == (40, 68)


# -- annotations --------------------------------------------------------------------------------------
def test_exit_reenter_from_hand_made_masks():
    ids = np.zeros((8, 6, 6), np.uint8)
    ids[0, 2:4, 2:4] = 1  # fully in view
    ids[1, 2:4, 0:2] = 1  # touching the left border: present, not full
    # frames 2, 3, 4: gone
    ids[5, 0:2, 3:5] = 1  # back, touching the top border
    ids[6, 1:3, 3:5] = 1  # fully back
    ids[7, 1:3, 3:5] = 1
    vis = visibility(ids)
    assert vis.present.tolist() == [True, True, False, False, False, True, True, True]
    assert vis.full.tolist() == [True, False, False, False, False, False, True, True]
    ann = exit_reenter(vis)
    assert (ann.exits, ann.back, ann.re_enter) == (2, 5, 6) and ann.complete
    assert not exit_reenter(visibility(ids[:4])).complete


# -- rendering (needs open3d) -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def empty_room():
    pytest.importorskip("open3d")
    from worldrecall.plugins.synthetic.render import Renderer, detail_texture
    from worldrecall.plugins.synthetic.scene import Prop, RoomLayout, TargetSpec

    target = TargetSpec("cube", "striped", 0.0)
    r = Renderer(160, 120, (32, 24), target, detail_texture(0))
    r.add_layout("empty", RoomLayout("Gallery", []), np.zeros((6, 2)))
    crate = Prop("crate", "brown", -1.5, 4.0, (0.6, 0.6, 0.6), 0.0, 2)
    r.add_layout("crate", RoomLayout("Gallery", [crate]), np.zeros((7, 2)))
    return r


def test_depth_is_exact_z_on_known_planes(empty_room):
    r = empty_room
    pose = c2w_from(np.array([0.0, 1.5, 0.0]), 0.0, 0.0)  # 1.5 m up, facing the +Z wall at z = 7
    _rgb, ids, z = r.composite("empty", pose, None)
    K = r.K["full"]
    v, _u = np.mgrid[0:120, 0:160].astype(np.float64)
    # floor pixels (below the horizon): the ray (x, y, 1) hits y_world = 0 at z = 1.5 / y_cam
    y_cam = (v - K[1, 2]) / K[1, 1]
    floor_z = np.where(y_cam > 0, 1.5 / np.maximum(y_cam, 1e-12), np.inf)
    expected = np.minimum(7.0, floor_z)  # the far wall is a fronto-parallel plane at z = 7
    ceiling_z = np.where(y_cam < 0, -1.5 / np.minimum(y_cam, -1e-12), np.inf)  # ceiling 1.5 m above
    expected = np.minimum(expected, ceiling_z)
    assert np.allclose(z, expected, rtol=1e-5)
    assert z[60, 80] == pytest.approx(7.0, rel=1e-6)
    assert (ids == 0).all()
    # the depth sidecar is the exact subsample at the scaled intrinsics; back-projected it lies on the planes
    d = r.depth("empty", pose, None)
    assert d.shape == (24, 32) and np.array_equal(d, z[2::5, 2::5])
    Kd = r.K["depth"]
    vd, _ud = np.mgrid[0:24, 0:32].astype(np.float64)
    Y = (vd - Kd[1, 2]) * d / Kd[1, 1]
    wall = np.isclose(d, 7.0)
    assert wall.sum() > 50
    assert np.allclose(1.5 - Y[(d < 6.9) & (vd > Kd[1, 2])], 0.0, atol=1e-5)  # floor points at world y = 0


def test_instance_ids_and_target_compositing(empty_room):
    from worldrecall.plugins.synthetic.render import TargetLook

    r = empty_room
    pose = c2w_from(np.array([0.0, 1.5, 0.0]), 0.0, -20.0)
    look = TargetLook((0.0, 0.275, 3.0), 1.0, (0.9, 0.1, 0.1))
    rgb, ids, z = r.composite("crate", pose, look)
    # the cube's centre projects to the pixel the camera model predicts, and that pixel is id 1
    pc = pose[:3, :3].T @ (np.array([0.0, 0.275, 3.0]) - pose[:3, 3])
    K = r.K["full"]
    u, v = K[0, 0] * pc[0] / pc[2] + K[0, 2], K[1, 1] * pc[1] / pc[2] + K[1, 2]
    assert ids[round(v), round(u)] == 1
    # the front face of the axis-aligned cube is the plane z_world = 3 - 0.275
    front = (ids == 1) & (np.abs(z - (3 - 0.275) / math.cos(math.radians(20))) < 0.3)
    assert front.any()
    assert 2 in np.unique(ids)  # the crate keeps its instance id
    assert set(np.unique(ids)) == {0, 1, 2}
    # pixel count without occluders equals what was composited (nothing in front of the cube)
    assert r.visible_target_pixels(look, pose) == int((ids == 1).sum())
    red = rgb[ids == 1].astype(int)
    assert (red[:, 0] > red[:, 2]).mean() > 0.4  # primary colour on the unstriped parts


def test_exact_hits_by_hand():
    """Triangle 0 in the plane z = 2 (normal +z by its winding), triangle 1 in z = 3. A ray from (0.25, 0.25, 0)
    along +z crosses both: the closest is triangle 0 at t = 2, whichever order they are listed in; along
    (0, 0, 0.5) it is t = 4. A crossing parallel to the plane, and a ray with no crossing, are misses."""
    from worldrecall.plugins.synthetic.render import INVALID_ID, _Scene, exact_hits

    tri = np.array([[[0.0, 0.0, 2.0], [1.0, 0.0, 2.0], [0.0, 1.0, 2.0]],
                    [[0.0, 0.0, 3.0], [0.0, 1.0, 3.0], [1.0, 0.0, 3.0]]], np.float32)
    scene = _Scene(None, [tri])
    rays = np.array([[0.25, 0.25, 0, 0, 0, 1], [0.25, 0.25, 0, 0, 0, 0.5], [0.25, 0.25, 0, 1, 0, 0],
                     [5, 5, 0, 0, 0, 1]], np.float32)
    ray_ids, gid, pid = [0, 0, 1, 2], [0, 0, 0, 0], [1, 0, 0, 0]
    out = exact_hits(scene, rays, ray_ids, gid, pid)
    assert out["t_hit"].tolist() == [2.0, 4.0, np.inf, np.inf]
    assert out["geometry_ids"].tolist() == [0, 0, INVALID_ID, INVALID_ID]
    assert out["primitive_normals"][0].tolist() == [0.0, 0.0, 1.0]
    again = exact_hits(scene, rays, ray_ids[::-1], gid[::-1], pid[::-1])
    assert all(np.array_equal(out[k], again[k]) for k in out)


class _Reordered:
    """Embree's crossings listed in reverse order and its distances moved by a few ulps, as another
    instruction set's kernels (another traversal order, another reciprocal) might give them."""

    def __init__(self, raycaster):
        self._r = raycaster

    def list_intersections(self, rays, nthreads=0):
        import open3d as o3d

        ans = self._r.list_intersections(rays, nthreads=nthreads)
        out = {k: o3d.core.Tensor.from_numpy(ans[k].numpy()[::-1].copy())
               for k in ("ray_ids", "geometry_ids", "primitive_ids")}
        out["t_hit"] = o3d.core.Tensor.from_numpy((ans["t_hit"].numpy()[::-1] * np.float32(1 + 4e-7)).copy())
        return out


def test_frames_do_not_depend_on_embree_distances_or_normals(empty_room):
    """The suite's pixels and depths come from the triangles Embree lists, never from its floating-point answer
    or its order (which differ between CPUs): reordering and blurring them changes no byte of a frame."""
    from worldrecall.plugins.synthetic.render import Renderer, TargetLook, detail_texture
    from worldrecall.plugins.synthetic.scene import Prop, RoomLayout, TargetSpec

    pose = c2w_from(np.array([0.2, 1.4, 0.5]), 0.0, -17.0)
    look = TargetLook((0.1, 0.4, 3.0), 1.1, (0.9, 0.1, 0.1))
    frames = []
    for blur in (False, True):
        r = Renderer(160, 120, (32, 24), TargetSpec("ball", "checkered", 0.3), detail_texture(0))
        r.add_layout("crate", RoomLayout("Gallery", [Prop("crate", "brown", -1.5, 4.0, (0.6, 0.6, 0.6), 0.3, 2)]),
                     np.zeros((7, 2)))
        if blur:
            r._target_scene.raycaster = _Reordered(r._target_scene.raycaster)
            r._static["crate"][0].raycaster = _Reordered(r._static["crate"][0].raycaster)
        frames.append(r.composite("crate", pose, look))
    for a, b in zip(*frames):
        assert a.tobytes() == b.tobytes()
    assert (frames[0][1] == 1).sum() > 100  # the target is in view, its sphere's faces shaded


def test_texture_upsampling_is_opencvs_cubic_spelt_out():
    """``upsample_cubic`` is INTER_CUBIC's mapping and weights (a = -0.75, replicated borders) in ordered float64:
    within float32 rounding of ``cv2.resize`` on a random grid."""
    import cv2

    from worldrecall.plugins.synthetic.render import upsample_cubic

    g = np.random.default_rng(1).random((24, 24)).astype(np.float32)
    ours = upsample_cubic(g, 512)
    assert ours.dtype == np.float32 and ours.shape == (512, 512)
    assert np.abs(ours - cv2.resize(g, (512, 512), interpolation=cv2.INTER_CUBIC)).max() < 1e-6


# -- determinism --------------------------------------------------------------------------------------
def test_npz_bytes_are_reproducible():
    a = np.arange(60, dtype=np.uint8).reshape(3, 4, 5)
    assert npz_bytes({"ids": a}) == npz_bytes({"ids": a})
    import io

    with np.load(io.BytesIO(npz_bytes({"ids": a})), allow_pickle=False) as z:
        assert np.array_equal(z["ids"], a)


def test_same_seed_same_case(tmp_path):
    pytest.importorskip("open3d")
    pytest.importorskip("av")
    from worldrecall.plugins.synthetic.build import suite_params
    from worldrecall.plugins.synthetic.case import build_case

    params = suite_params(7, 1, 64, 48, 16, 12)
    a = build_case(str(tmp_path / "a"), 0, params)
    b = build_case(str(tmp_path / "b"), 0, params)
    assert a == b
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        if rel.suffix in (".jpg", ".npy", ".npz", ".json", ".csv", ".mp4", ".png", ".txt"):
            assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    other = build_case(str(tmp_path / "c"), 0, suite_params(8, 1, 64, 48, 16, 12))
    assert other["target"] != a["target"] or other["prompt"] != a["prompt"]
