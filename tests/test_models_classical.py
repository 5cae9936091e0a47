"""Classical (weight-free) backends: real behaviour on synthetic inputs with known answers."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
from helpers.tiny_models import textured_image

from worldrecall.plugins.models import plugin
from worldrecall.plugins.models.color_histogram import color_histogram
from worldrecall.plugins.models.color_patches import patch_descriptors
from worldrecall.plugins.models.relative_pose import chain_c2w, guess_intrinsics, relative_rotation

SPECS = {s.name: s for s in plugin.specs()}


def make(name: str, **opts):
    return SPECS[name].factory({**SPECS[name].defaults, **opts})


def rot(axis: str, deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


def angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(math.acos(np.clip((np.trace(a.T @ b) - 1) / 2, -1, 1)))


# --- DIS flow ---------------------------------------------------------------------------------------------
def test_dis_flow_recovers_an_integer_shift():
    big = textured_image(200, 260, seed=3)
    dx, dy = 3, -2
    a = np.ascontiguousarray(big[20:180, 20:240])
    b = np.ascontiguousarray(big[20 - dy:180 - dy, 20 - dx:240 - dx])  # content moves by (+3, -2)
    (f,) = make("dis_flow").flow([(a, b)])
    assert f.shape == (160, 220, 2) and f.dtype == np.float32
    inner = f[20:-20, 20:-20].reshape(-1, 2)
    med = np.median(inner, axis=0)
    assert abs(med[0] - dx) < 0.2 and abs(med[1] - dy) < 0.2
    (z,) = make("dis_flow").flow([(a, a)])
    assert np.abs(z[20:-20, 20:-20]).max() < 0.05


def test_dis_flow_rejects_mismatched_pairs_and_bad_presets():
    with pytest.raises(ValueError, match="sizes differ"):
        make("dis_flow").flow([(np.zeros((8, 8, 3), np.uint8), np.zeros((8, 9, 3), np.uint8))])
    with pytest.raises(ValueError, match="preset"):
        make("dis_flow", preset="slowest")


# --- SIFT pose ----------------------------------------------------------------------------------------------
def test_sift_pose_recovers_a_pure_rotation():
    h, w = 240, 320
    k = guess_intrinsics(w, h, 60.0)
    # fx = 0.5 * 320 / tan(30 deg) = 277.128
    assert abs(k[0, 0] - 277.1281) < 1e-3 and (k[0, 2], k[1, 2]) == (160.0, 120.0)
    r = rot("y", 4.0) @ rot("x", -2.0)        # camera-0 coords -> camera-1 coords
    big = textured_image(h, w, seed=7)
    frame1 = cv2.warpPerspective(big, k @ r @ np.linalg.inv(k), (w, h), flags=cv2.INTER_LINEAR,
                                 borderMode=cv2.BORDER_REFLECT)
    pose = make("sift_pose")
    c2w = pose.poses([big, frame1])
    assert c2w.shape == (2, 4, 4)
    np.testing.assert_allclose(c2w[0], np.eye(4))
    assert angle_deg(c2w[1][:3, :3], r.T) < 0.2          # c2w_1 = R^T
    assert pose.trace.pairs[0].method == "homography"


BOXES = (((8, 6, 0.2), (0, 0, 9)), ((1.2, 1.2, 1.2), (-1.5, 0.5, 3.5)), ((1, 1.5, 1), (1.3, -0.4, 3)),
         ((1.5, 0.8, 1), (0.2, 1.2, 6)), ((8, 0.2, 12), (0, 1.8, 5)), ((0.6, 0.6, 0.6), (-0.3, -0.8, 4.5)))


def _render(o3d, k: np.ndarray, c2w: np.ndarray, w: int, h: int, seed: int) -> np.ndarray:
    """Raycast boxes at 3-9 m; colour = a smooth random sum of sines of the 3D hit point (a solid texture)."""
    scene = o3d.t.geometry.RaycastingScene()
    for size, centre in BOXES:
        box = o3d.geometry.TriangleMesh.create_box(*size)
        box.translate(np.array(centre) - np.array(size) / 2)
        scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(box))
    rays = scene.create_rays_pinhole(o3d.core.Tensor(k), o3d.core.Tensor(np.linalg.inv(c2w)), w, h)
    t = scene.cast_rays(rays)["t_hit"].numpy()
    r = rays.numpy()
    pts = r[..., :3] + r[..., 3:] * np.where(np.isfinite(t), t, 0)[..., None]
    rng = np.random.default_rng(seed)
    freq, phase = rng.normal(size=(3, 12, 3)) * 8.0, rng.uniform(0, 2 * np.pi, (3, 12))
    col = np.stack([np.sin(pts @ freq[c].T + phase[c]).sum(-1) for c in range(3)], axis=-1)
    img = np.clip(128 + 128 * col / np.sqrt(12), 0, 255).astype(np.uint8)
    img[~np.isfinite(t)] = 0
    return img


@pytest.mark.parametrize("seed,ry,rx,t", [(0, 5.0, 1.5, (0.4, -0.1, 0.2)), (1, -8.0, 2.0, (-0.5, 0.1, 0.3)),
                                           (2, 3.0, -3.0, (0.2, 0.3, -0.3))])
def test_sift_pose_recovers_rotation_with_translation_on_a_raycast_scene(seed, ry, rx, t):
    o3d = pytest.importorskip("open3d")
    w, h = 320, 240
    k = guess_intrinsics(w, h, 60.0)
    c2w1 = np.eye(4)
    c2w1[:3, :3] = rot("y", ry) @ rot("x", rx)
    c2w1[:3, 3] = t
    a, b = _render(o3d, k, np.eye(4), w, h, seed), _render(o3d, k, c2w1, w, h, seed)
    pose = make("sift_pose")
    est = pose.poses([a, b])
    assert pose.trace.pairs[0].method == "essential" and pose.trace.pairs[0].inliers >= 50
    assert angle_deg(est[1][:3, :3], c2w1[:3, :3]) < 0.5   # of a 5-9 degree rotation with 0.3-0.5 m travel


def test_relative_rotation_falls_back_to_identity_without_matches():
    res = relative_rotation(np.zeros((3, 2)), np.zeros((3, 2)), guess_intrinsics(64, 48))
    assert res.method == "failed" and np.array_equal(res.rotation, np.eye(3))
    with pytest.raises(ValueError, match="method"):
        relative_rotation(np.zeros((9, 2)), np.zeros((9, 2)), np.eye(3), method="magic")


def test_chain_c2w_composes_transposed_relative_rotations():
    r1, r2 = rot("y", 10.0), rot("y", 15.0)
    c2w = chain_c2w([r1, r2])
    # camera 2 is 25 degrees around y from camera 0: c2w_2 = R1^T R2^T = Ry(-25)
    np.testing.assert_allclose(c2w[2][:3, :3], rot("y", -25.0), atol=1e-12)


# --- colour histogram -----------------------------------------------------------------------------------
def test_color_histogram_by_hand():
    img = np.array([[[0, 0, 0], [31, 0, 0], [32, 0, 0], [255, 255, 255]]], np.uint8)
    # R levels 0, 31, 32, 255 -> bins 0, 0, 1, 7; G and B levels 0, 0, 0, 255 -> bins 0, 0, 0, 7
    raw = np.zeros(24)
    raw[[0, 1, 7]] = [2, 1, 1]
    raw[[8, 15]] = [3, 1]
    raw[[16, 23]] = [3, 1]
    expected = raw / math.sqrt(4 + 1 + 1 + 9 + 1 + 9 + 1)  # |raw| = sqrt(26)
    np.testing.assert_allclose(color_histogram(img), expected, atol=1e-7)
    out = make("color_histogram").embed([img, img])
    assert out.shape == (2, 24) and out.dtype == np.float32


# --- colour patch embedder ------------------------------------------------------------------------------
def test_color_patch_tokens_of_a_flat_grey_frame_by_hand():
    tok = patch_descriptors(np.full((300, 400, 3), 128, np.uint8))
    assert tok.shape == (256, 27) and tok.dtype == np.float32
    # sRGB 128/255 -> linear ((0.50196 + 0.055) / 1.055)^2.4 = 0.21586 -> L = 116 * 0.21586^(1/3) - 16 = 53.59
    # mean Lab (53.59, 0, 0) -> ((53.59 - 50) / 25, 0, 0) = (0.1436, 0, 0); flat sub-cells -> 12 zeros;
    # no gradient -> uniform orientation fractions -> 8 zeros; std 0 -> 0.3 * (0 - c) / c = -0.3 (x3);
    # log1p(0) = 0 -> 0.3 * (0 - 2) / 1.5 = -0.4
    expected = np.array([0.1436, 0, 0] + [0] * 12 + [0] * 8 + [-0.3, -0.3, -0.3, -0.4])
    np.testing.assert_allclose(tok, np.broadcast_to(expected, (256, 27)), atol=2e-3)


def test_color_patch_tokens_are_positional_like_dinov2():
    img = np.zeros((256, 256, 3), np.uint8)
    img[:, :128] = (200, 30, 30)   # left half red, right half blue: crop 16..240 puts the edge at patch col 8
    img[:, 128:] = (30, 30, 200)
    tok = make("color_patch_embedder").patch_tokens([img])[0].reshape(16, 16, 27)
    assert tok[5, 0, 1] > 1.0 and tok[5, 15, 2] < -1.0          # a* red > 0 on the left, b* blue < 0 on the right
    np.testing.assert_allclose(tok[:, :7], np.broadcast_to(tok[0, 0], (16, 7, 27)), atol=1e-5)

    def sims(x, y):
        a = x / np.linalg.norm(x, axis=-1, keepdims=True)
        b = y / np.linalg.norm(y, axis=-1, keepdims=True)
        return np.clip((a * b).sum(-1), 0, 1)

    scene = textured_image(300, 400, seed=1)
    moved = np.roll(scene, 40, axis=1)
    brighter = np.clip(scene.astype(int) + 6, 0, 255).astype(np.uint8)
    other = textured_image(300, 400, seed=9)
    emb = make("color_patch_embedder").patch_tokens([scene, scene, moved, brighter, other])
    same, shift, light, unrelated = (sims(emb[0], emb[i]) for i in (1, 2, 3, 4))
    assert np.allclose(same, 1.0, atol=1e-6)
    assert light.mean() > 0.95                       # small global change: patches keep their tokens
    assert shift.mean() < 0.5 and unrelated.mean() < 0.5  # moved / different content: they do not


def test_classical_backends_have_no_weights():
    for n in ("dis_flow", "sift_pose", "color_histogram", "color_patch_embedder"):
        assert SPECS[n].kind == "classical" and SPECS[n].weights == []


# --- SIFT local features (geometric closure's matches) ---------------------------------------------------
def _released_sift_matches(a: np.ndarray, b: np.ndarray, ratio: float = 0.75) -> tuple[np.ndarray, np.ndarray]:
    """The closure's matching as it was written before it became a role: a straightforward reference."""
    sift = cv2.SIFT_create()
    ka, da = sift.detectAndCompute(cv2.cvtColor(a, cv2.COLOR_RGB2GRAY), None)
    kb, db = sift.detectAndCompute(cv2.cvtColor(b, cv2.COLOR_RGB2GRAY), None)
    if da is None or db is None or len(ka) < 2 or len(kb) < 2:
        return np.zeros((0, 2)), np.zeros((0, 2))
    kept = sorted(((m.distance, m.queryIdx, m.trainIdx) for m, n in
                   (p for p in cv2.BFMatcher(cv2.NORM_L2).knnMatch(da, db, k=2) if len(p) == 2)
                   if m.distance < ratio * n.distance), key=lambda x: x[0])
    return (np.array([ka[q].pt for _, q, _ in kept], np.float64).reshape(-1, 2),
            np.array([kb[t].pt for _, _, t in kept], np.float64).reshape(-1, 2))


def test_sift_backend_reproduces_the_released_matching_exactly():
    # several pairs through one backend object: the same points, in the same order, bit for bit
    rng = np.random.default_rng(3)
    pairs = []
    for seed in range(4):
        a = textured_image(120, 160, seed=seed)
        dy, dx = (int(v) for v in rng.integers(-6, 7, 2))
        pairs.append((a, np.roll(a, (dy, dx), axis=(0, 1))))
    pairs.append((textured_image(120, 160, seed=7), textured_image(120, 160, seed=8)))
    out = make("sift").match(pairs)
    assert len(out) == len(pairs)
    for (a, b), (pa, pb) in zip(pairs, out):
        ra, rb = _released_sift_matches(a, b)
        assert pa.dtype == np.float64 and np.array_equal(pa, ra) and np.array_equal(pb, rb)


def test_sift_backend_on_a_known_shift_and_on_flat_frames():
    # frame B is frame A moved 5 px right and 3 px down: matched points differ by (5, 3) px
    a = textured_image(160, 200, seed=1)
    b = np.zeros_like(a)
    b[3:, 5:] = a[:-3, :-5]
    ((pa, pb),) = make("sift").match([(a, b)])
    assert len(pa) >= 12
    inner = (pa[:, 0] > 16) & (pa[:, 1] > 16) & (pa[:, 0] < 180) & (pa[:, 1] < 140)  # away from the cut border
    assert np.median(np.abs(pb[inner] - pa[inner] - [5.0, 3.0])) < 0.05
    # a flat frame has no keypoints: no matches, shape [0, 2] each
    flat = np.full((64, 64, 3), 128, np.uint8)
    ((fa, fb),) = make("sift").match([(flat, a[:64, :64])])
    assert fa.shape == (0, 2) and fb.shape == (0, 2)


def test_sift_backend_rejects_bad_input():
    with pytest.raises(ValueError, match="expected an RGB"):
        make("sift").match([(np.zeros((8, 8), np.uint8), np.zeros((8, 8, 3), np.uint8))])
    with pytest.raises(ValueError, match="ratio must be in"):
        make("sift", ratio=1.5)
    with pytest.raises(ValueError, match="unknown option"):
        make("sift", nfeatures=10)
