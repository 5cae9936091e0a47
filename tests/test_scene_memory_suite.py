"""The memory_loop suite beside Scene Memory F1: revisit pairs, return gate, revisit fidelity, geometric
closure, rendering recovery and half-life — hand-computed values of the released formulas."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers.scene_memory_fixtures import loop_poses, pose, room_rollout, yaw

from worldrecall.core.components import LoadRequest, MeasureContext
from worldrecall.core.models import BackendUnavailable, ModelHub
from worldrecall.core.video import VideoPool
from worldrecall.formats.mp4 import write_video
from worldrecall.plugins.scene_memory.aligners import TurnaroundAligner
from worldrecall.plugins.scene_memory.closure import (
    epipolar_error,
    pair_score,
    pose_fundamental,
    reprojection_error,
)
from worldrecall.plugins.scene_memory.half_life import HalfLifeRefused, fit_half_life
from worldrecall.plugins.scene_memory.loader import SceneMemoryLoader
from worldrecall.plugins.scene_memory.pair_frames import ssim_rgb
from worldrecall.plugins.scene_memory.rendering import colour_deltas, pair_scores
from worldrecall.plugins.scene_memory.suite import (
    MemoryGeometricClosure,
    MemoryHalfLife,
    MemoryRenderingRecovery,
    MemoryReturnGate,
    MemoryRevisitFidelity,
)
from worldrecall.plugins.scene_memory.trajectory import RevisitPair, select_diverse_pairs, turnaround_gate


def _pair(i: int, j: int, dist: float, gap: float) -> RevisitPair:
    return RevisitPair(i, j, dist, 0.0, 0.0, gap, 1.0)


# -- pairing -----------------------------------------------------------------------------------------------
def test_revisit_pair_records_by_hand():
    # dolly at 4 fps, 4 frames per action: z_j = j/16 m out to row 16 and back; E = 1 m. Row 32 returns
    # to row 0: d = 0, gap 32 rows = 8 s, excursion max_{0<m<32} d_0m = 1.0
    g = turnaround_gate(loop_poses("dolly", 4), fps=4.0)
    last = g.revisits[-1]
    assert (last.first_row, last.revisit_row) == (0, 32)
    assert last.pose_distance == 0.0 and last.gap_s == 8.0 and last.excursion == 1.0
    assert last.translation_distance == 0.0 and last.rotation_deg == 0.0
    # return row j (z = (32 − j)/16) finds its exact partner 32 − j among rows ≤ j − 4 (gap round(1·4)) once
    # j ≥ 18; the excursion in between is 1 − z = (j − 16)/16, ≥ 3·0.15 = 0.45 from j = 24 on. Outbound rows
    # are ≥ 4/16 = 0.25 > 0.15 from every allowed partner. -> 9 pairs (8, 24) … (0, 32), gaps 4.0 … 8.0 s
    first = g.revisits[0]
    assert (first.first_row, first.revisit_row, first.gap_s, first.excursion) == (8, 24, 4.0, 0.5)
    assert len(g.revisits) == g.n_pairs == 9
    assert [p.gap_s for p in g.revisits] == [4.0 + k / 2 for k in range(9)]


def test_select_diverse_pairs_by_hand():
    # gaps 1..10 s into 4 buckets over [1, 10] (span 9): bucket = min(int((gap − 1)/9 · 4), 3)
    # -> gaps 1,2,3 -> 0; 4,5 -> 1; 6,7 -> 2; 8,9,10 -> 3. Tightest pose distance per bucket wins, then the
    # shortest (gap 1) takes bucket 0 and the longest (gap 10) bucket 3 whatever their distance
    dist = [0.05, 0.01, 0.02, 0.09, 0.03, 0.04, 0.02, 0.01, 0.02, 0.10]
    pairs = [_pair(0, 10 + k, d, float(k + 1)) for k, d in enumerate(dist)]
    got = select_diverse_pairs(list(reversed(pairs)), 4)
    assert [p.gap_s for p in got] == [1.0, 5.0, 7.0, 10.0]
    assert select_diverse_pairs(pairs[:3], 4) == pairs[:3]  # few pairs: all, sorted by gap
    assert select_diverse_pairs(pairs, 0) == pairs


# -- half-life ---------------------------------------------------------------------------------------------
def test_half_life_of_a_known_decay():
    # f = 0.8·exp(−gap/5): offset 0 is on the sweep and fits exactly: τ = 5 s, half-life 5·ln 2 = 3.466 s
    gaps = np.arange(1.0, 9.0)
    fit = fit_half_life(gaps, 0.8 * np.exp(-gaps / 5.0))
    assert fit["tau_s"] == pytest.approx(5.0, rel=1e-9) and fit["half_life_s"] == pytest.approx(5 * math.log(2))
    assert fit["offset"] == 0.0 and fit["r_squared"] == pytest.approx(1.0) and fit["n_points"] == 8


def test_half_life_refusals():
    g = np.arange(1.0, 9.0)
    with pytest.raises(HalfLifeRefused, match="at least 5 pairs, got 4"):
        fit_half_life(g[:4], np.exp(-g[:4]))
    with pytest.raises(HalfLifeRefused, match="more than one time gap"):
        fit_half_life(np.ones(6), np.linspace(0.2, 0.9, 6))
    with pytest.raises(HalfLifeRefused, match="effectively flat"):
        fit_half_life(g, np.full(8, 0.5) + np.linspace(0, 0.01, 8))
    with pytest.raises(HalfLifeRefused, match="no decaying exponential"):
        fit_half_life(g, 0.1 + 0.05 * g)  # rising fidelity
    with pytest.raises(HalfLifeRefused, match="R\\^2"):  # alternating noise around a weak decay
        fit_half_life(g, 0.6 + 0.15 * np.array([1, -1] * 4) - 0.001 * g, min_r_squared=0.9)


# -- pixel formulas ----------------------------------------------------------------------------------------
def test_ssim_and_lab_by_hand():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 255, (32, 40, 3), dtype=np.uint8)
    assert ssim_rgb(a, a) == pytest.approx(1.0)
    white = np.full((8, 8, 3), 255, np.uint8)
    black = np.zeros((8, 8, 3), np.uint8)
    # OpenCV 8-bit Lab: white L = 255 (100 after ×100/255), black 0; greys have a = b = 128 -> chroma 0
    light, chroma = colour_deltas(white, black)
    assert light == pytest.approx(100.0) and chroma == pytest.approx(0.0, abs=1e-9)
    s = pair_scores({"lightness_delta": 6.0, "chroma_delta": 8.0, "gram_distance": 0.002})
    assert s["lighting"] == s["chroma"] == s["texture"] == pytest.approx(math.exp(-1)) and \
        s["score"] == pytest.approx(math.exp(-1))
    # the released fallback without texture: the mean of the two colour scores
    s = pair_scores({"lightness_delta": 0.0, "chroma_delta": 8.0, "gram_distance": None})
    assert s["texture"] is None and s["score"] == pytest.approx(0.5 * (1 + math.exp(-1)))


# -- geometric closure -------------------------------------------------------------------------------------
K = np.array([[100.0, 0, 64], [0, 100.0, 48], [0, 0, 1]])


def _project(X: np.ndarray, c2w: np.ndarray) -> np.ndarray:
    w2c = np.linalg.inv(c2w)
    x = (X @ w2c[:3, :3].T + w2c[:3, 3]) @ K.T
    return x[:, :2] / x[:, 2:3]


def test_epipolar_error_of_a_known_pair():
    # camera B one unit to the right of A, same orientation: epipolar lines are the image rows. True
    # correspondences lie on them (error 0); moving B's points 2 px down puts each 2 px off its line in
    # both views -> median error exactly 2 px -> epipolar score exp(−2/4)
    rng = np.random.default_rng(1)
    X = np.c_[rng.uniform(-1, 1, 30), rng.uniform(-1, 1, 30), rng.uniform(4, 8, 30)]
    A, B = pose(), pose(None, (1.0, 0.0, 0.0))
    pa, pb = _project(X, A), _project(X, B)
    F, base = pose_fundamental(A, B, K, K)
    assert base == pytest.approx(1.0) and epipolar_error(pa, pb, F) == pytest.approx(0.0, abs=1e-9)
    err = epipolar_error(pa, pb + np.array([0.0, 2.0]), F)
    assert err == pytest.approx(2.0)
    # exact correspondences triangulate back: reprojection error 0 in both views
    r, n_ok = reprojection_error(pa, pb, A, B, K, K)
    assert r == pytest.approx(0.0, abs=1e-6) and n_ok == 30
    m = {"n_matches": 30, "epipolar_error": err, "reprojection_error": 0.0, "n_triangulated": 30}
    assert pair_score(m) == pytest.approx(0.5 * (math.exp(-0.5) + 1.0))
    # below min_matches the pair is skipped; without a baseline only the epipolar score counts
    assert pair_score({**m, "n_matches": 11}) is None
    assert pair_score({**m, "reprojection_error": None}) == pytest.approx(math.exp(-0.5))
    # too few triangulated points: the reprojection does not count
    assert pair_score({**m, "n_triangulated": 11}) == pytest.approx(math.exp(-0.5))


def test_a_rotation_only_pair_has_no_epipolar_constraint():
    # t = 0 -> E = [0]x R = 0: every match is "on" its line, as released (score 1)
    F, base = pose_fundamental(pose(), pose(yaw(5.0)), K, K)
    assert base == 0.0 and not F.any()
    assert epipolar_error(np.array([[10.0, 20.0]]), np.array([[90.0, 5.0]]), F) == 0.0


# -- the metrics on rollouts ---------------------------------------------------------------------------------
FPS = 4.0


class _FakeTexture:
    def distance(self, a, b):
        return float(np.abs(a.astype(float) - b.astype(float)).mean()) * 1e-4


class _Hub(ModelHub):
    def __init__(self, texture=True):
        super().__init__({}, {})
        from worldrecall.plugins.models import sift_matches
        from worldrecall.plugins.models.color_histogram import build

        self.emb = build({})
        self.sift = sift_matches.build({})
        self.texture = texture

    def get(self, role):
        if role == "revisit_embedder":
            return self.emb
        if role == "local_features":
            return self.sift
        if role == "texture" and self.texture:
            return _FakeTexture()
        raise BackendUnavailable(f"no backend for {role}")


def _textured_frames(n: int, seed: int = 0) -> np.ndarray:
    import cv2

    rng = np.random.default_rng(seed)
    base = cv2.GaussianBlur(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8), (5, 5), 1.0)
    return np.stack([base] * n)


def _case(tmp_path: Path, kind: str, frames: np.ndarray | None = None):
    root = tmp_path / "scene_memory" / "m"
    _, P = room_rollout(root / "annotations_vipe" / "c_vipe_ann", kind, frames_per_action=4, fps=FPS)
    write_video(root / "c.mp4", _textured_frames(len(P)) if frames is None else frames, fps=FPS)
    (case,) = SceneMemoryLoader().load(LoadRequest(tmp_path / "scene_memory", {"m": root}, {}, VideoPool()))
    return case, TurnaroundAligner().align(case, {})


def _run(metric_cls, case, al, hub=None, **th):
    m = metric_cls(thresholds=th or None)
    meas = m.measure(case, al, MeasureContext(models=hub or _Hub()))
    meas = json.loads(json.dumps(meas))  # what the cache keeps
    return m, meas, m.score(meas, m.thresholds)


def test_suite_on_a_dolly_loop(tmp_path):
    case, al = _case(tmp_path, "dolly")
    assert len(al.info["scored_pairs"]) == 9 and al.info["gate"]
    _, _, g = _run(MemoryReturnGate, case, al)
    assert g == {"passed": 1.0, "passed_official": 1.0, "departed": 1.0, "returned": 1.0, "n_pairs": 9.0}
    # every frame is the same image: cos = 1, SSIM = 1 -> fidelity 0.7·1 + 0.3·1 = 1 on all 9 pairs
    _, meas, f = _run(MemoryRevisitFidelity, case, al)
    assert f["fidelity"] == pytest.approx(1.0) and f["n_pairs"] == 9.0
    assert [p["gap_s"] for p in meas["pairs"]] == [4.0 + k / 2 for k in range(9)]
    # identical frames: no lightness / chroma / texture change -> recovery 1
    _, _, r = _run(MemoryRenderingRecovery, case, al)
    assert r["recovery"] == pytest.approx(1.0) and r["texture_fallback"] == 0.0
    # flat fidelity cannot be fitted: not applicable
    _, _, h = _run(MemoryHalfLife, case, al)
    assert h["half_life_s"] is None and h["n_points"] == 9.0
    # geometric closure: identical frames, forward/backward baseline -> SIFT matches exist and are scored
    _, meas, c = _run(MemoryGeometricClosure, case, al)
    assert all(p["n_matches"] >= 12 for p in meas["pairs"]) and c["n_scored"] == 9.0 and c["closure"] is not None


def test_suite_is_not_applicable_without_a_return(tmp_path):
    case, al = _case(tmp_path, "static")
    assert al.info["scored_pairs"] == []
    assert _run(MemoryReturnGate, case, al)[2]["passed"] == 0.0
    for cls, key in ((MemoryRevisitFidelity, "fidelity"), (MemoryGeometricClosure, "closure"),
                     (MemoryRenderingRecovery, "recovery"), (MemoryHalfLife, "half_life_s")):
        assert _run(cls, case, al)[2][key] is None, cls


def test_rendering_without_texture_backend_skips_unless_parity(tmp_path):
    case, al = _case(tmp_path, "dolly")
    m = MemoryRenderingRecovery()
    meas = m.measure(case, al, MeasureContext(models=_Hub(texture=False)))
    assert "no backend for texture" in meas["texture_error"]
    with pytest.raises(BackendUnavailable, match="no backend for texture"):
        m.score(meas, m.thresholds)
    s = m.score(meas, {**m.thresholds, "official_parity": True})
    assert s["texture_fallback"] == 1.0 and s["texture"] is None and s["recovery"] == pytest.approx(1.0)


def test_fidelity_weights_rescore_without_measuring(tmp_path):
    # frames drift in brightness along the video: the revisit frame differs from its first frame
    fr = _textured_frames(33)
    fr = np.stack([np.clip(f.astype(int) + 3 * i, 0, 255).astype(np.uint8) for i, f in enumerate(fr)])
    case, al = _case(tmp_path, "dolly", fr)
    m, meas, s = _run(MemoryRevisitFidelity, case, al)
    per = [(p["cosine"], p["ssim"]) for p in meas["pairs"]]
    want = np.mean([min(max(0.7 * min(max((c + 1) / 2, 0), 1) + 0.3 * x, 0), 1) for c, x in per])
    assert s["fidelity"] == pytest.approx(want) and s["fidelity"] < 1.0
    s2 = m.score(meas, {**m.thresholds, "semantic_weight": 0.0, "ssim_weight": 1.0})
    assert s2["fidelity"] == pytest.approx(np.mean([x for _, x in per]))


# -- backends of the new roles -------------------------------------------------------------------------------
def test_dinov2_cls_embedder_is_the_normalised_cls_token(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from helpers import tiny_models
    from PIL import Image
    from torchvision import transforms as T
    from transformers import Dinov2Model

    from worldrecall.plugins.models import plugin

    spec = {s.name: s for s in plugin.specs()}["dinov2_base_cls"]
    assert spec.role == "revisit_embedder" and spec.kind == "reference"
    emb = spec.factory({**spec.defaults, **tiny_models.save_tiny("dinov2_base_cls", tmp_path)})
    fr = [tiny_models.textured_image(90, 160, s) for s in range(3)]
    e = emb.embed(fr)
    # the released recipe, independently: HF processor = resize 256 bicubic, crop 224, ImageNet norm;
    # pooler_output = the layer-normed CLS token, then L2-normalised
    tf = T.Compose([T.Resize(256, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224), T.ToTensor(),
                    T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    with torch.no_grad():
        ref = Dinov2Model.from_pretrained(tmp_path).eval()(pixel_values=torch.stack([tf(Image.fromarray(f))
                                                                                   for f in fr])).pooler_output
    ref = torch.nn.functional.normalize(ref, dim=-1).numpy()
    np.testing.assert_allclose(e, ref, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-6)


def test_vgg_gram_distance_by_hand():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    from worldrecall.plugins.models.options import parse_options
    from worldrecall.plugins.models.texture_gram import VGG_DEFAULTS, VggGram

    # a one-layer "VGG": a 1x1 conv averaging the three normalised channels. A constant grey v becomes the
    # constant c = mean_k((v/255 − m_k)/s_k); Gram of a 1-channel constant map = c²; distance = (c_B² − c_A²)²
    conv = torch.nn.Conv2d(3, 1, 1, bias=False)
    with torch.no_grad():
        conv.weight.fill_(1.0 / 3.0)
    vgg = VggGram(torch.nn.Sequential(conv), parse_options("vgg19_gram", {"image_size": 16, "layers": 1},
                                                            VGG_DEFAULTS))
    m, s = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])

    def c(v: int) -> float:
        return float(np.mean((v / 255.0 - m) / s))

    a, b = np.full((20, 30, 3), 100, np.uint8), np.full((20, 30, 3), 200, np.uint8)
    assert vgg.distance(a, a) == 0.0
    assert vgg.distance(a, b) == pytest.approx((c(200) ** 2 - c(100) ** 2) ** 2, rel=1e-4)
    # the release's image size: 512 on CUDA, 128 on CPU when not set
    assert VggGram(torch.nn.Sequential(conv), parse_options("vgg19_gram", {}, VGG_DEFAULTS))._size() == 128


def test_gradient_gram_is_weight_free_and_zero_for_identical_frames():
    from worldrecall.plugins.models import plugin
    from worldrecall.plugins.models.texture_gram import build_gradient

    spec = {s.name: s for s in plugin.specs()}["gradient_gram"]
    assert spec.role == "texture" and spec.kind == "classical" and "not the paper's VGG" in spec.description
    g = build_gradient({})
    a = _textured_frames(1)[0]
    assert g.distance(a, a) == 0.0 and g.distance(a, np.ascontiguousarray(a[::-1])) > 0.0
    roles = {r.name: r for r in plugin.roles()}
    assert roles["texture"].defaults == {"classical": "gradient_gram", "reference": "vgg19_gram"}
    assert roles["revisit_embedder"].defaults == {"classical": "color_histogram_revisit",
                                                  "reference": "dinov2_base_cls"}


def test_closure_and_rendering_taus_rescore_from_the_measurement(tmp_path):
    case, al = _case(tmp_path, "dolly")
    m, meas, s = _run(MemoryGeometricClosure, case, al)
    # τ → ∞ makes every pair's exp(−e/τ) = 1: closure 1 exactly, from the same measurement
    big = m.score(meas, {**m.thresholds, "epipolar_tau_px": 1e12, "reprojection_tau_px": 1e12})
    assert big["closure"] == pytest.approx(1.0) and big["n_scored"] == s["n_scored"]
    # a min_matches above every pair's count leaves nothing to score: not applicable
    most = max(p["n_matches"] for p in meas["pairs"])
    assert m.score(meas, {**m.thresholds, "min_matches": most + 1})["closure"] is None
    r, rmeas, _ = _run(MemoryRenderingRecovery, case, al)
    p0 = rmeas["pairs"][0]
    one = r.score({**rmeas, "pairs": [p0]}, {**r.thresholds, "gram_tau": 1.0})
    want = (math.exp(-p0["lightness_delta"] / 6) + math.exp(-p0["chroma_delta"] / 8)
            + math.exp(-p0["gram_distance"] / 1.0)) / 3
    assert one["recovery"] == pytest.approx(want)


def test_closure_takes_the_best_400_matches_of_its_backend():
    from worldrecall.plugins.scene_memory.closure import MAX_MATCHES, best_matches

    pa = np.arange(1000, dtype=np.float32).reshape(500, 2)
    a, b = best_matches(pa, pa + 1)
    assert MAX_MATCHES == 400 and a.shape == (400, 2) and a.dtype == np.float64
    assert a[-1].tolist() == [798.0, 799.0] and b[0].tolist() == [1.0, 2.0]  # the first 400, in order
    assert best_matches(np.zeros((0, 2)), np.zeros((0, 2)))[0].shape == (0, 2)
    with pytest.raises(ValueError, match="returned 3 and 2 points"):
        best_matches(np.zeros((3, 2)), np.zeros((2, 2)))


def test_closure_asks_the_local_features_role(tmp_path):
    # the metric declares the role (its backend's identity keys the measurement) and measures through it
    assert MemoryGeometricClosure.models == ("local_features",)
    case, al = _case(tmp_path, "dolly")

    class _NoMatches(_Hub):
        def get(self, role):
            if role == "local_features":
                class _M:
                    def match(self, pairs, *, case=None, indices=None):
                        return [(np.zeros((0, 2)), np.zeros((0, 2))) for _ in pairs]
                return _M()
            return super().get(role)

    _, meas, c = _run(MemoryGeometricClosure, case, al, hub=_NoMatches())
    assert [p["n_matches"] for p in meas["pairs"]] == [0] * 9 and c["closure"] is None and c["n_scored"] == 0.0


def _plain_ssim_rgb(a, b):
    import cv2

    vals = []
    for c in range(3):
        x, y = a[:, :, c].astype(np.float32), b[:, :, c].astype(np.float32)
        c1, c2 = (0.01 * 255.0) ** 2, (0.03 * 255.0) ** 2
        blur = lambda z: cv2.GaussianBlur(z, (11, 11), 1.5)  # noqa: E731
        mx, my = blur(x), blur(y)
        mx2, my2, mxy = mx * mx, my * my, mx * my
        sx2, sy2, sxy = blur(x * x) - mx2, blur(y * y) - my2, blur(x * y) - mxy
        num, den = (2 * mxy + c1) * (2 * sxy + c2), (mx2 + my2 + c1) * (sx2 + sy2 + c2)
        vals.append(float(np.mean(num / np.maximum(den, 1e-12))))
    v = float(np.mean(vals))
    return 0.0 if not np.isfinite(v) else min(max(v, 0.0), 1.0)


def test_ssim_rgb_equals_the_plain_expression_bit_for_bit():
    # constant 100 vs 110 per channel: σ = 0 -> (2·100·110 + C1) / (100² + 110² + C1), C1 = 6.5025
    x, y = np.full((16, 16, 3), 100, np.uint8), np.full((16, 16, 3), 110, np.uint8)
    assert ssim_rgb(x, y) == pytest.approx(22006.5025 / 22106.5025, abs=1e-6)
    rng = np.random.default_rng(2)
    for h, w in ((96, 128), (17, 23), (61, 90)):
        for _ in range(4):
            a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            for b in (rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
                      np.clip(a.astype(int) + rng.integers(-5, 6, a.shape), 0, 255).astype(np.uint8)):
                assert ssim_rgb(a, b) == _plain_ssim_rgb(a, b)


def test_half_life_reuses_revisit_fidelitys_pair_facts_of_the_same_case(tmp_path):
    # both measure the same pairs with the same embedder: one embedding pass, the same pair facts as a
    # fresh measurement; another embedder (a new hub) or another case measures again
    fr = _textured_frames(33)
    fr = np.stack([np.clip(f.astype(int) + 3 * i, 0, 255).astype(np.uint8) for i, f in enumerate(fr)])
    case, al = _case(tmp_path, "dolly", fr)

    class _Counting(_Hub):
        def __init__(self):
            super().__init__()
            self.calls, inner = [], self.emb

            class _E:
                def embed(_, frames, *, case=None, indices=None):
                    self.calls.append(len(frames))
                    return inner.embed(frames, case=case)
            self.emb = _E()

    hub = _Counting()
    _, fid, _ = _run(MemoryRevisitFidelity, case, al, hub=hub)
    _, half, _ = _run(MemoryHalfLife, case, al, hub=hub)
    assert hub.calls == [18] and half["pairs"] == fid["pairs"] and len(fid["pairs"]) == 9
    fresh = _Counting()
    _, again, _ = _run(MemoryHalfLife, case, al, hub=fresh)
    assert fresh.calls == [18] and again["pairs"] == fid["pairs"]
