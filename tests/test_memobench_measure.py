"""Measure + score of every MemoBench metric on a tiny panning clip, with small real role implementations.

The clip pans right over a textured wall (the red target leaves the view) and back. Roles compute from
pixels: DIS optical flow, blurred-intensity depth, per-cell colour tokens, a red-colour segmenter,
phase-correlation yaw for poses, colour histograms. Generations: ``oracle`` (the GT frames), ``frozen``
(frame 0 repeated), ``shuffled`` (GT frames in random order), ``forgetful`` (target painted out in R).
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest

from worldrecall.engine.cache import Store
from worldrecall.core.components import LoadRequest, MeasureContext
from worldrecall.core.data import Case, CaseFailure
from worldrecall.core.models import Detection, ModelHub, ModelSpec
from worldrecall.core.video import VideoPool
from worldrecall.plugins.memobench.aligner import PhaseAligner
from worldrecall.plugins.memobench.camera_controllability import CameraControllability
from worldrecall.plugins.memobench.camera_gate import CameraGate
from worldrecall.plugins.memobench.geo3d import Geo3D, depth_cosine, depth_embedding
from worldrecall.plugins.memobench.gt_revisit_sim import GTRevisitSim
from worldrecall.plugins.memobench.image_reward import ImageRewardScore
from worldrecall.plugins.memobench.loader import MemoBenchLoader
from worldrecall.plugins.memobench.motion_smoothness import MotionSmoothness, warp_error
from worldrecall.plugins.memobench.obj_identity import ObjIdentity
from worldrecall.plugins.memobench.ors import ORS
from worldrecall.plugins.memobench.pixel_fidelity import PixelFidelity
from worldrecall.plugins.memobench.visual_quality import VisualQuality

W, H, N, PAN = 64, 48, 24, 48
DEG_PER_PX = 1.5
TARGET = (slice(16, 32), slice(8, 24))        # rows, texture columns of the red target
RED = (230, 30, 30)
PROMPT = "First person view of a wall, the camera sees a red box(subject) standing still, turns away and back."


def _texture(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = cv2.GaussianBlur(rng.uniform(0, 255, (H, W + PAN)).astype(np.float32), (0, 0), 2.0)
    noise = cv2.normalize(noise, None, 40, 200, cv2.NORM_MINMAX)
    return np.stack([noise * 0.3 + 20, noise, noise * 0.8], axis=-1).astype(np.uint8)   # never red


def pan_offsets() -> list[int]:
    return [round(PAN * math.sin(math.pi * i / (N - 1))) for i in range(N)]


def gt_frames(with_target: bool = True) -> list[np.ndarray]:
    tex = _texture()
    if with_target:
        tex[TARGET] = RED
    return [tex[:, x:x + W].copy() for x in pan_offsets()]


def _ry(deg: float) -> np.ndarray:
    a = math.radians(deg)
    m = np.eye(4)
    m[:3, :3] = [[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]]
    return m


def _write_frames(folder: Path, frames: list[np.ndarray]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(frames):
        cv2.imwrite(str(folder / f"{i:05d}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))


# -- small roles that compute from pixels ---------------------------------------------------------

class DISFlow:
    def flow(self, pairs, *, case=None, indices=None):
        dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
        return [dis.calc(cv2.cvtColor(a, cv2.COLOR_RGB2GRAY), cv2.cvtColor(b, cv2.COLOR_RGB2GRAY), None)
                for a, b in pairs]


class BlurDepth:
    def depth(self, frames, *, case=None, indices=None):
        return [cv2.GaussianBlur(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY).astype(np.float32), (5, 5), 0) + 1.0
                for f in frames]


class CellTokens:
    def patch_tokens(self, frames, *, case=None, indices=None):
        out = []
        for f in frames:
            cells = f.reshape(4, H // 4, 4, W // 4, 3).transpose(0, 2, 1, 3, 4).reshape(16, -1, 3).astype(np.float32)
            out.append(np.concatenate([cells.mean(1) - 120, cells.std(1)], axis=1))
        return np.stack(out)


class RedSegmenter:
    def segment(self, frames, text, *, case=None, indices=None):
        out = []
        for f in frames:
            mask = (f[..., 0] > 150) & (f[..., 1] < 100) & (f[..., 2] < 100)
            dets = [Detection(np.ones(f.shape[:2], bool), 0.3)]        # a whole-frame candidate (out of band)
            if mask.any():
                dets.append(Detection(mask, float(f[..., 0][mask].mean() / 255)))
            out.append(dets)
        return out


class Brightness:
    def score_frames(self, frames, *, case=None, indices=None):
        return np.array([f.mean() / 25.5 for f in frames])


class Sharpness:
    def score_frames(self, frames, *, case=None, indices=None):
        return np.array([1 - math.exp(-cv2.Laplacian(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY), cv2.CV_32F).var() / 500)
                         for f in frames])


class AbsDiff:
    def distance(self, a, b):
        return np.array([np.abs(x.astype(float) - y.astype(float)).mean() / 255 for x, y in zip(a, b)])


class MeanReward:
    def reward(self, prompt, frames):
        return np.array([(f.mean() / 255 - 0.5) * 4 for f in frames])


class Histogram:
    def embed(self, frames, *, case=None, indices=None):
        return np.stack([np.concatenate([np.histogram(f[..., c], 8, (0, 256))[0] for c in range(3)]).astype(np.float32)
                         for f in frames])


class PhaseCorrYaw:
    """Yaw from accumulated frame-to-frame horizontal image shifts (phase correlation visual odometry)."""

    def poses(self, frames, *, case=None, indices=None):
        grays = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY).astype(np.float32) for f in frames]
        x, out = 0.0, [_ry(0.0)]
        for g0, g1 in zip(grays, grays[1:]):
            (dx, _), _ = cv2.phaseCorrelate(g0, g1)
            x -= dx                      # the image moves left when the camera pans right
            out.append(_ry(x * DEG_PER_PX))
        return np.stack(out)


ROLES = {"flow": DISFlow, "depth": BlurDepth, "patch_embedder": CellTokens, "segmenter": RedSegmenter,
         "aesthetic": Brightness, "iqa": Sharpness, "perceptual": AbsDiff, "text_image_reward": MeanReward,
         "image_embedder": Histogram, "pose": PhaseCorrYaw}


def hub(without: tuple[str, ...] = ()) -> ModelHub:
    specs = {f"test_{r}": ModelSpec(f"test_{r}", r, "classical", factory=lambda opts, c=c: c())
             for r, c in ROLES.items()}
    return ModelHub(specs, {r: f"test_{r}" for r in ROLES if r not in without})


# -- the fake release with one clip ---------------------------------------------------------------

@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, Case]:
    root = tmp_path_factory.mktemp("memobench-measure")
    data = root / "data"
    clip = data / "Synthetic_processed" / "Wall" / "Wall_001"
    frames = gt_frames()
    _write_frames(clip / "RGB1", frames)
    (clip / "1").mkdir()
    np.save(clip / "1" / "intrinsics.npy", np.tile([50.0, 50.0, 32.0, 24.0], (N, 1)))
    np.save(clip / "1" / "poses.npy", np.stack([_ry(x * DEG_PER_PX) for x in pan_offsets()]))
    # target hidden for i = 4 … 19 (offset >= 24): D from h_gt = 4 to r_gt = 20
    pd.DataFrame([{"video_folder": "Wall_001", "exits": 4, "re-enter": 20, "frame_num": N, "skip": "no",
                   "prompt": PROMPT}]).to_csv(data / "Synthetic_processed" / "Synthetic_ExitReenter.csv", index=False)
    (data / "sam3_metadata").mkdir()
    pd.DataFrame([{"scene": "Wall", "video_id": 1, "subject": "red box", "exr_path": "x", "prompt": PROMPT}]
                 ).to_csv(data / "sam3_metadata" / "synthetic_metadata.csv", index=False)
    rng = np.random.default_rng(1)
    forgetful = frames[:20] + gt_frames(with_target=False)[20:]
    gens = {"oracle": frames, "frozen": [frames[0]] * N,
            "shuffled": [frames[i] for i in rng.permutation(N)], "forgetful": forgetful}
    for name, fr in gens.items():
        _write_frames(root / "output" / name / "Synthetic" / "Wall_001" / "frames", fr)
    req = LoadRequest(data_root=data, generations={m: root / "output" / m for m in gens},
                      options={"splits": ["synthetic"]}, pool=VideoPool())
    return {c.model: c for c in MemoBenchLoader().load(req)}


def run(metric_cls, case: Case, ctx_hub: ModelHub | None = None, params: dict | None = None, **thresholds):
    metric = metric_cls(params=params, thresholds=thresholds)
    alignment = PhaseAligner().align(case, {})
    m = metric.measure(case, alignment, MeasureContext(models=ctx_hub or hub(), batch_size=4))
    return metric.score(m, metric.thresholds)


def test_alignment_of_the_clip(cases):
    al = PhaseAligner().align(cases["oracle"], {})
    assert (al.info["h"], al.info["r"], al.info["G"], al.info["N"]) == (4, 20, 24, 24)


def test_warp_error_properties():
    f = gt_frames()
    zero = np.zeros((H, W, 2), np.float32)
    assert warp_error(f[0], f[0], zero) < 1e-6                       # ≈ 5e-9, not exactly 0
    with pytest.raises(CaseFailure):
        warp_error(f[0], f[1], np.zeros((H, W + 1, 2), np.float32))


@pytest.mark.parametrize("fx", [-3.0, 3.0])
def test_warp_samples_the_earlier_frame_at_p_plus_flow(fx):
    # B(x) = A(x + 3) (the camera panned right). The official warp compares A(clamp(x + F)) with B(x):
    # with the true forward flow F = -3 that is A(x - 3) vs A(x + 3) (the §3.2 quirk), with F = +3 it matches
    tex = _texture(3)
    a, b = tex[:, 10:10 + W], tex[:, 13:13 + W]
    flow = np.zeros((H, W, 2), np.float32)
    flow[..., 0] = fx
    cols = np.clip(np.arange(W) + int(fx), 0, W - 1)     # integer flow: bilinear sampling hits pixels exactly
    expected = np.abs(a[:, cols].astype(float) - b.astype(float)).mean() / 255
    assert warp_error(a, b, flow) == pytest.approx(expected, abs=1e-6)


def test_motion_smoothness_static_above_shuffled(cases):
    # official step 4: V samples 0, 4 and R sample 20 are both short (< 3) -> both phases 0.0
    official = run(MotionSmoothness, cases["oracle"])
    assert (official["V_score"], official["R_score"], official["score"]) == (0.0, 0.0, 0.0)
    # step 1: V = 0 … 4, R = 20 … 23, every pair measured; a static clip warps perfectly (error ≈ 5e-9)
    static = run(MotionSmoothness, cases["frozen"], params={"sample_step": 1})
    shuffled = run(MotionSmoothness, cases["shuffled"], params={"sample_step": 1})
    assert static["score"] == 100.0 and static["TemporalScore"] == 1.0
    assert 0 < shuffled["score"] < 100.0


def test_obj_identity_frozen_is_perfect(cases):
    assert run(ObjIdentity, cases["frozen"])["score"] == 100.0
    assert run(ObjIdentity, cases["shuffled"])["score"] < 100.0


def test_geo3d_static_and_constant(cases, tmp_path):
    assert run(Geo3D, cases["frozen"])["score"] == 100.0
    assert 0 < run(Geo3D, cases["oracle"])["score"] <= 100.0
    flat = np.full((6, 8), 3.0, np.float32)   # errata 4: a constant depth map has cosine 0
    assert depth_cosine(depth_embedding(flat), depth_embedding(flat + np.arange(8, dtype=np.float32))) == 0.0


def test_ors_oracle_and_forgetful(cases):
    v = run(ORS, cases["oracle"])
    # every R frame (20 … 23) shows part of the pure-red target: confidence 230/255 each, whole-frame candidate
    # (coverage 1.0) out of band -> ORS = 1 * 0.90196 -> 0.902
    assert (v["score"], v["detection_rate"], v["n_r_frames"]) == (0.902, 1.0, 4.0)
    assert run(ORS, cases["forgetful"])["score"] == 0.0


def test_pixel_fidelity_oracle_and_optional_lpips(cases):
    v = run(PixelFidelity, cases["oracle"])
    assert (v["ALL_PSNR"], v["ALL_LPIPS"], v["V_PSNR"], v["R_PSNR"]) == (99.0, 0.0, 99.0, 99.0)
    assert v["ALL_SSIM"] == pytest.approx(1.0, abs=1e-4)
    no_lpips = run(PixelFidelity, cases["frozen"], hub(without=("perceptual",)))
    assert no_lpips["ALL_LPIPS"] is None and no_lpips["ALL_PSNR"] is not None and no_lpips["ALL_PSNR"] < 99.0


def test_pixel_fidelity_gt_index_out_of_range_fails_the_case(cases):
    case = cases["oracle"]
    al = PhaseAligner().align(case, {})
    al.info["r_gt"] = N          # R's GT range becomes (24, 23): frame 24 does not exist
    with pytest.raises(CaseFailure, match="out of range"):
        PixelFidelity().measure(case, al, MeasureContext(models=hub()))


def test_camera_controllability_and_gate(cases):
    oracle, frozen = run(CameraControllability, cases["oracle"]), run(CameraControllability, cases["frozen"])
    assert oracle["score"] > 0.8 and oracle["TotalGT_RotDeg"] == 0.0      # pan and return: the 10° floor
    assert frozen["score"] == 0.0                                          # ATE of a 72° pan vs 10°
    g_oracle, g_frozen = run(CameraGate, cases["oracle"]), run(CameraGate, cases["frozen"])
    # the phase-correlation yaw of the pan against the GT poses.npy (the same pan): departs 72° of 72°, back in R
    assert g_oracle["passed"] == 1.0 and g_oracle["ref_rotation_deg"] == pytest.approx(72.0, abs=4.0)
    assert g_oracle["gen_rotation_deg"] == pytest.approx(g_oracle["ref_rotation_deg"], abs=4.0)
    assert g_oracle["absence_fraction"] == 1.0                             # target absent in D frames 5 … 19
    # the frozen camera fails on the camera alone (its target is still in view: absence 0 is only a diagnostic)
    assert g_frozen["passed"] == 0.0 and g_frozen["absence_fraction"] == 0.0 and g_frozen["gen_rotation_deg"] < 1


def test_camera_gate_without_segmenter(cases):
    v = run(CameraGate, cases["oracle"], hub(without=("segmenter",)))
    assert v["passed"] == 1.0 and v["absence_fraction"] is None


def test_visual_quality_and_image_reward_wiring(cases):
    f = gt_frames()
    v = run(VisualQuality, cases["oracle"])
    # frames 0, 4, …, 20; aesthetic = brightness / 25.5
    assert v["AestheticScore"] == round(float(np.mean([f[i].mean() / 25.5 for i in range(0, N, 4)])), 4)
    r = run(ImageRewardScore, cases["oracle"])
    raw = [(f[i].mean() / 255 - 0.5) * 4 for i in (0, 5, 11, 17, 23)]   # int(i*23/4)
    assert r["score"] == round(float(np.mean([1 / (1 + math.exp(-x)) for x in raw])), 4)


def test_gt_revisit_sim_oracle(cases):
    assert run(GTRevisitSim, cases["oracle"])["score"] == 1.0
    assert run(GTRevisitSim, cases["forgetful"])["score"] < 1.0


@pytest.mark.parametrize("cls", [MotionSmoothness, ObjIdentity, Geo3D, ORS, PixelFidelity, CameraControllability,
                                 ImageRewardScore, GTRevisitSim, CameraGate, VisualQuality])
def test_measurement_survives_the_cache(cls, cases, tmp_path):
    case = cases["oracle"]
    metric = cls()
    al = PhaseAligner().align(case, {})
    fresh = metric.measure(case, al, MeasureContext(models=hub(), batch_size=4))
    Store(tmp_path).put_arrays("measurements", "kk", fresh)
    again = Store(tmp_path).get_arrays("measurements", "kk")
    assert again is not None
    assert metric.score(again, metric.thresholds) == metric.score(fresh, metric.thresholds)


def test_pixel_fidelity_reuses_a_gt_frames_terms_across_the_models_of_a_clip(cases, monkeypatch):
    """One metric instance measuring every model of the clip (as a worker does) blurs each resampled GT
    frame once, and gives bit for bit what a fresh instance per case gives; a bounded memo that keeps
    nothing gives the same too."""
    from worldrecall.plugins.memobench import pixel_fidelity as pf

    def measure(metric, case):
        alignment = PhaseAligner().align(case, {})
        return metric.measure(case, alignment, MeasureContext(models=hub(), batch_size=4))

    order = ["oracle", "frozen", "shuffled", "forgetful"]
    calls = []
    real = pf.gray_stats
    monkeypatch.setattr(pf, "gray_stats", lambda frame: calls.append(1) or real(frame))
    fresh = {m: measure(PixelFidelity(), cases[m]) for m in order}
    n_fresh, calls[:] = len(calls), []
    shared = PixelFidelity()
    reused = {m: measure(shared, cases[m]) for m in order}
    n_gt = len(shared._gt_stats.kept)  # the clip's resampled GT frames (the same for every model)
    assert n_gt > 0 and len(calls) == n_fresh - (len(order) - 1) * n_gt  # each blurred once, not per model
    monkeypatch.setattr(pf, "GT_STATS_BYTES", 0)  # keeps nothing: every case computes its own
    none_kept = PixelFidelity()
    bounded = {m: measure(none_kept, cases[m]) for m in order}
    assert not none_kept._gt_stats.kept
    for m in order:
        for got in (reused[m], bounded[m]):
            assert got.keys() == fresh[m].keys()
            for k, v in fresh[m].items():
                assert np.array_equal(got[k], v, equal_nan=True) if isinstance(v, np.ndarray) else got[k] == v
