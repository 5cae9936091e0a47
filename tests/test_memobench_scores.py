"""Score stage of every MemoBench metric: pure functions of a measurement, hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from worldrecall.plugins.memobench.camera_controllability import CameraControllability
from worldrecall.plugins.memobench.geo3d import Geo3D
from worldrecall.plugins.memobench.gt_revisit_sim import GTRevisitSim
from worldrecall.plugins.memobench.image_reward import ImageRewardScore, reward_prompt
from worldrecall.plugins.memobench.motion_smoothness import MotionSmoothness
from worldrecall.plugins.memobench.obj_identity import ObjIdentity
from worldrecall.plugins.memobench.ors import ORS
from worldrecall.plugins.memobench.pixel_fidelity import PixelFidelity, psnr, ssim
from worldrecall.plugins.memobench.visual_quality import VisualQuality


def _score(cls, m, **overrides):
    metric = cls(thresholds=overrides)
    return metric.score(m, metric.thresholds)


# -- motion smoothness --------------------------------------------------------------------------

def _motion(v_idx, v_err, r_idx, r_err, v_scored=True, r_scored=True):
    return {"V_scored": v_scored, "V_indices": np.array(v_idx), "V_errors": np.array(v_err, dtype=float),
            "R_scored": r_scored, "R_indices": np.array(r_idx), "R_errors": np.array(r_err, dtype=float)}


def test_motion_smoothness_formula():
    m = _motion([0, 4, 8], [0.03, 0.06], [54, 58, 62, 66], [0.15, 0.15, 0.15])
    v = _score(MotionSmoothness, m)
    # V: exp(-0.045/0.15) = exp(-0.3) = 0.7408182; R: exp(-1) = 0.3678794; mean 0.5543488 -> 0.5543
    assert v["V_score"] == pytest.approx(math.exp(-0.3)) and v["R_score"] == pytest.approx(math.exp(-1))
    assert v["TemporalScore"] == 0.5543 and v["TemporalScore_pct"] == 55.4 and v["score"] == 55.4
    assert v["score_raw"] == pytest.approx(55.43488, abs=1e-4)


def test_motion_smoothness_tau_is_a_threshold():
    m = _motion([0, 4, 8], [0.03, 0.06], [54, 58, 62, 66], [0.15, 0.15, 0.15])
    # tau 0.3: exp(-0.15) = 0.8607080, exp(-0.5) = 0.6065307 -> mean 0.7336193 -> 73.36 -> 73.4
    assert _score(MotionSmoothness, m, tau=0.3)["score"] == 73.4


def test_motion_smoothness_short_phase_scores_zero_or_is_skipped():
    m = _motion([0, 4], [0.0], [54, 58, 62, 66], [0.15, 0.15, 0.15])
    # official: V has 2 < 3 samples -> 0.0; T = (0 + 0.3678794) / 2 = 0.1839397 -> 0.1839 -> 18.4
    official = _score(MotionSmoothness, m)
    assert official["V_score"] == 0.0 and official["score"] == 18.4
    # switch: the short phase is skipped -> T = 0.3678794 -> 0.3679 -> 36.8
    skipped = _score(MotionSmoothness, m, short_phase_zero=False)
    assert skipped["V_score"] is None and skipped["score"] == 36.8


def test_motion_smoothness_unscored_phase_and_no_phase():
    m = _motion([0, 4, 8], [0.03, 0.06], [], [], r_scored=False)
    assert _score(MotionSmoothness, m)["TemporalScore"] == 0.7408   # V alone: exp(-0.3)
    m = _motion([0, 4], [0.1], [78], [], r_scored=True)
    # both short -> both 0.0 -> T = 0
    assert _score(MotionSmoothness, m)["score"] == 0.0


# -- visual quality -----------------------------------------------------------------------------

def test_visual_quality_formula():
    m = {"aesthetic": np.array([5.0, 6.0, 5.5]), "iqa": np.array([0.5, 1.2, 0.3])}
    v = _score(VisualQuality, m)
    # aesthetic mean 5.5 -> 55.0 %; IQA clipped per frame [0.5, 1.0, 0.3] -> 0.6 -> 60.0 %; (55 + 60) / 2
    assert (v["AestheticScore"], v["ImageQuality"]) == (5.5, 0.6)
    assert (v["AestheticScore_pct"], v["ImageQuality_pct"], v["score"]) == (55.0, 60.0, 57.5)


def test_visual_quality_empty_is_zero():
    v = _score(VisualQuality, {"aesthetic": np.zeros(0), "iqa": np.zeros(0)})
    assert (v["AestheticScore"], v["ImageQuality"], v["score"]) == (0.0, 0.0, 0.0)


# -- object identity ----------------------------------------------------------------------------

def _sims():
    row0 = [1.0, 0.9, 0.8, 0.7, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]
    row1 = [0.9, 0.8, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0, 0.0]
    return {"sorted_sims": np.array([row0, row1], dtype=np.float32)}


def test_obj_identity_formula():
    v = _score(ObjIdentity, _sims())
    # k = max(1, int(10*0.4)) = 4; row means 0.85 and 0.7 -> Mean 0.775; Min = min(0.7, 0.5) = 0.5
    assert (v["ObjIdentityMean"], v["ObjIdentityMin"]) == (0.775, 0.5)
    # 0.7 * 77.5 + 0.3 * 50.0 = 54.25 + 15 = 69.25
    assert (v["ObjIdentityMean_pct"], v["ObjIdentityMin_pct"], v["score"]) == (77.5, 50.0, 69.25)


def test_obj_identity_thresholds():
    # top 20 %: k = 2 -> means 0.95, 0.85 -> 0.9; mins 0.9, 0.8 -> 0.8; alpha 0.5: 45 + 40 = 85
    v = _score(ObjIdentity, _sims(), top_fraction=0.2, alpha=0.5)
    assert (v["ObjIdentityMean"], v["ObjIdentityMin"], v["score"]) == (0.9, 0.8, 85.0)


def test_obj_identity_top_k_of_256_patches_is_102():
    sims = np.zeros((1, 256), dtype=np.float32)
    sims[0, :102] = 1.0   # only the kept 102 patches are 1 -> Mean = Min = 1
    assert _score(ObjIdentity, {"sorted_sims": sims})["ObjIdentityMin"] == 1.0
    sims[0, :101] = 1.0
    sims[0, 101] = 0.5    # the 102nd patch is the smallest kept one
    assert _score(ObjIdentity, {"sorted_sims": sims})["ObjIdentityMin"] == 0.5


def test_obj_identity_no_frames_is_one():
    v = _score(ObjIdentity, {"sorted_sims": np.zeros((0, 256), dtype=np.float32)})
    assert (v["ObjIdentityMean"], v["ObjIdentityMin"], v["score"]) == (1.0, 1.0, 100.0)


# -- geometry -----------------------------------------------------------------------------------

def test_geo3d_formula():
    m = {"V_cos": np.array([0.9, 0.8]), "R_cos": np.array([1.0, 0.6])}
    v = _score(Geo3D, m)
    # V mean 0.85 min 0.8, R mean 0.8 min 0.6; Mean = (0.85 + 0.8) / 2 = 0.825, Min 0.6
    assert (v["GeoConsistencyMean"], v["GeoConsistencyMin"]) == (0.825, 0.6)
    assert v["score"] == 75.75     # 0.7 * 82.5 + 0.3 * 60 = 57.75 + 18


def test_geo3d_one_frame_phase_scores_zero():
    v = _score(Geo3D, {"V_cos": np.array([0.9, 0.8]), "R_cos": np.zeros(0)})
    # R spans one frame -> (0, 0); Mean = 0.85 / 2 = 0.425, Min = 0 -> 0.7 * 42.5 = 29.75
    assert (v["GeoConsistencyMean"], v["GeoConsistencyMin"], v["score"]) == (0.425, 0.0, 29.75)


def test_geo3d_rounds_phase_means_before_combining():
    # V mean 0.12344 -> 0.1234 first; R mean 0.0001 -> (0.1234 + 0.0001) / 2 = 0.06175 -> round 4
    v = _score(Geo3D, {"V_cos": np.array([0.12344, 0.12344]), "R_cos": np.array([0.0001, 0.0001])})
    assert v["GeoConsistencyMean"] == round((0.1234 + 0.0001) / 2, 4)


# -- ORS ----------------------------------------------------------------------------------------

def _ors_measurement():
    # frame 0: in-band 0.9 (+ a 0.0001-coverage 0.95 below area_min); frame 1: only 0.60 coverage (fallback
    # band); frame 2: 0.80 coverage (no band); frame 3: nothing
    return {"n_r": 4, "cand_frame": np.array([0, 0, 1, 2]), "cand_coverage": np.array([0.10, 0.0001, 0.60, 0.80]),
            "cand_score": np.array([0.9, 0.95, 0.8, 0.7])}


def test_ors_formula():
    v = _score(ORS, _ors_measurement())
    # n_d = 2 of n_R = 4; mean confidence (0.9 + 0.8) / 2 = 0.85; ORS = 0.5 * 0.85 = 0.425
    assert (v["score"], v["detection_rate"], v["mean_confidence"]) == (0.425, 0.5, 0.85)
    assert (v["n_r_frames"], v["n_detected"]) == (4.0, 2.0)


def test_ors_area_band_is_a_threshold():
    v = _score(ORS, _ors_measurement(), area_max_fallback=0.5)
    # frame 1 no longer detected: 1/4 * 0.9 = 0.225
    assert v["score"] == 0.225


def test_ors_bands_are_chosen_per_frame():
    from worldrecall.plugins.memobench.ors import frame_confidences

    # frame 0: an in-band 0.5 beats a fallback-band 0.9 (the fallback band is looked at only when the first is
    # empty); frame 1: fallback only, best of 0.3 / 0.6; frame 2: its 0.1 is below min_score 0.2,
    # so only the 0.4 counts; a candidate on frame 5 (past n_r = 3) is never looked at
    frames = np.array([0, 0, 1, 1, 2, 2, 5])
    cov = np.array([0.10, 0.60, 0.55, 0.58, 0.10, 0.10, 0.10])
    score = np.array([0.5, 0.9, 0.3, 0.6, 0.1, 0.4, 1.0])
    conf = frame_confidences(frames, cov, score, 3, 0.001, 0.5, 0.7, 0.2)
    assert conf == [0.5, 0.6, 0.4]
    # no fallback band: frame 1 is not detected
    assert frame_confidences(frames, cov, score, 3, 0.001, 0.5, 0.5, 0.2) == [0.5, None, 0.4]


def test_ors_zero_cases():
    empty = {"n_r": 0, "cand_frame": np.zeros(0, int), "cand_coverage": np.zeros(0), "cand_score": np.zeros(0)}
    assert _score(ORS, empty)["score"] == 0.0
    none = {"n_r": 3, "cand_frame": np.array([0]), "cand_coverage": np.array([0.9]), "cand_score": np.array([0.9])}
    assert _score(ORS, none)["score"] == 0.0 and _score(ORS, none)["mean_confidence"] == 0.0
    zero_score = {"n_r": 1, "cand_frame": np.array([0]), "cand_coverage": np.array([0.1]), "cand_score": np.array([0.0])}
    # official comparison is inclusive: a 0.0-score in-band candidate is detected with confidence 0.0
    v = _score(ORS, zero_score)
    assert (v["n_detected"], v["detection_rate"], v["mean_confidence"], v["score"]) == (1.0, 1.0, 0.0, 0.0)


# -- pixel fidelity -----------------------------------------------------------------------------

def test_psnr_and_ssim_hand_values():
    a, b = np.zeros((8, 8, 3), np.uint8), np.full((8, 8, 3), 10, np.uint8)
    assert psnr(a, b) == pytest.approx(10 * math.log10(255 ** 2 / 100))   # MSE 100 -> 28.1308
    assert psnr(a, a) == 99.0
    # constant images 100 vs 110: sigma = 0 -> (2*100*110 + C1) / (100² + 110² + C1), C1 = 6.5025
    x, y = np.full((16, 16, 3), 100, np.uint8), np.full((16, 16, 3), 110, np.uint8)
    assert ssim(x, y) == pytest.approx(22006.5025 / 22106.5025, abs=1e-6)


def test_pixel_fidelity_score_keys_and_optional_lpips():
    m = {"V_PSNR": np.array([30.0, 32.0]), "V_SSIM": np.array([0.5, 0.7]), "V_LPIPS": np.array([np.nan, np.nan]),
         "ALL_PSNR": np.array([20.0, 21.0, 22.0]), "ALL_SSIM": np.array([0.1, 0.2, 0.3]),
         "ALL_LPIPS": np.array([0.2, 0.4, 0.3])}
    v = _score(PixelFidelity, m)
    assert (v["V_PSNR"], v["V_SSIM"], v["V_LPIPS"]) == (31.0, 0.6, None)
    assert (v["ALL_PSNR"], v["ALL_LPIPS"]) == (21.0, 0.3)
    assert v["R_PSNR"] is None and v["D_SSIM"] is None    # phases not measured
    assert v["ALL_SSIM_raw"] == pytest.approx(0.2)


# -- camera controllability ---------------------------------------------------------------------

def _ry(deg):
    a = math.radians(deg)
    return np.array([[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]])


def _rots(degs):
    return np.stack([_ry(d) for d in degs])


def _cam(gt, est, **thr):
    return _score(CameraControllability, {"R_gt": _rots(gt), "R_est": _rots(est)}, **thr)


def test_camera_controllability_formula():
    v = _cam([0, 10, 20, 30], [0, 10, 20, 20])
    # errors 0, 0, 0, 10 -> ATE = sqrt(100/4) = 5; net GT rotation 30; 1 - 5/30 = 0.8333
    assert v["score"] == 0.8333 and v["pct"] == 83.3
    assert (v["ATE_RotDeg"], v["TotalGT_RotDeg"]) == (5.0, 30.0)
    assert v["MeanRotErrorDeg"] == 3.333    # relative errors 0, 0, 10


def test_camera_controllability_ten_degree_floor():
    # pan and return: net GT rotation 0 < 10 -> denominator 10; errors 0, 2, 4, 0 -> ATE = sqrt(5)
    v = _cam([0, 2, 4, 0], [0, 0, 0, 0])
    assert v["score"] == 0.7764     # 1 - 2.2360680/10
    assert _cam([0, 2, 4, 0], [0, 0, 0, 0], min_rotation_deg=5.0)["score"] == 0.5528   # 1 - 2.236068/5


def test_camera_controllability_first_frame_alignment():
    q = np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]], dtype=float)   # a global 90° offset of the estimate
    m = {"R_gt": _rots([0, 10, 20, 30]), "R_est": np.stack([q @ r for r in _rots([0, 10, 20, 30])])}
    assert _score(CameraControllability, m)["score"] == 1.0


def test_camera_controllability_floor_at_zero_and_none():
    assert _cam([0, 0, 0], [0, 30, 60])["score"] == 0.0   # ATE sqrt(1500) = 38.7 > 10
    assert _cam([0, 10, 20], [0])["score"] is None        # fewer than 2 estimated poses
    assert _score(CameraControllability, {"R_gt": np.zeros((0, 3, 3)), "R_est": _rots([0, 1])})["score"] is None


def test_camera_controllability_errata_fewer_estimates():
    # 2 estimates vs 4 GT rows: n = 2, net rotation to GT row n-1 = 1 (10°, not 30°)
    v = _cam([0, 10, 20, 30], [0, 5])
    assert v["TotalGT_RotDeg"] == 10.0
    assert v["score"] == 0.6464     # ATE = sqrt(25/2) = 3.5355 -> 1 - 0.35355


# -- image reward / GT revisit ------------------------------------------------------------------

def test_image_reward_sigmoid_mean():
    v = _score(ImageRewardScore, {"raw": np.array([1.0, -1.0, np.nan, 2.0, 0.0])})
    # sigmoids 0.7310586, 0.2689414, (failed frame skipped), 0.8807971, 0.5 -> 2.3807971 / 4 = 0.5951993
    assert v["score"] == 0.5952 and v["pct"] == 59.5
    assert _score(ImageRewardScore, {"raw": np.zeros(0)})["score"] is None


def test_image_reward_prompt_source():
    from worldrecall.core.data import Case

    syn = Case("memobench", "a", "m", None, prompt="meta", annotations={"sheet_prompt": "nan"})
    real = Case("memobench", "001", "m", None, prompt="meta real", annotations={"sheet_prompt": None})
    assert reward_prompt(syn, "sheet") == "nan"          # an empty xlsx cell is scored as "nan" (official)
    assert reward_prompt(real, "sheet") is None          # official: no prompt for real clips
    assert reward_prompt(real, "case") == "meta real"


def test_gt_revisit_sim():
    v = _score(GTRevisitSim, {"cos": np.array([0.8, 1.1, -0.2])})
    assert v["score"] == pytest.approx(0.6) and v["pct"] == 60.0   # clipped 0.8, 1.0, 0.0




def _plain_psnr(a, b):
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 99.0 if mse < 1e-10 else float(10 * np.log10(255.0 ** 2 / mse))


def _plain_ssim(a, b):
    import cv2

    x = cv2.cvtColor(a, cv2.COLOR_RGB2GRAY).astype(np.float32)
    y = cv2.cvtColor(b, cv2.COLOR_RGB2GRAY).astype(np.float32)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    blur = lambda z: cv2.GaussianBlur(z, (11, 11), 1.5)  # noqa: E731
    mx, my = blur(x), blur(y)
    mx2, my2, mxy = mx * mx, my * my, mx * my
    sx2, sy2, sxy = blur(x * x) - mx2, blur(y * y) - my2, blur(x * y) - mxy
    return float((((2 * mxy + c1) * (2 * sxy + c2)) / ((mx2 + my2 + c1) * (sx2 + sy2 + c2) + 1e-8)).mean())


def test_psnr_and_ssim_equal_the_plain_float_expressions_bit_for_bit():
    # psnr sums integer squared differences; ssim computes in place: both must give the plain formulas'
    # exact floats (random, textured and near-identical frames, odd sizes)
    rng = np.random.default_rng(5)
    for h, w in ((240, 320), (17, 23), (97, 131), (1, 1)):
        for _ in range(4):
            a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            for b in (rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
                      np.clip(a.astype(int) + rng.integers(-3, 4, a.shape), 0, 255).astype(np.uint8), a.copy()):
                assert psnr(a, b) == _plain_psnr(a, b)
                assert ssim(a, b) == _plain_ssim(a, b)
    # the largest squared difference (255**2 fills uint16) on every pixel of a 1080p frame, and one pixel off
    black, white = np.zeros((1080, 1920, 3), np.uint8), np.full((1080, 1920, 3), 255, np.uint8)
    nearly = white.copy()
    nearly[0, 0, 0] = 254
    assert psnr(black, white) == _plain_psnr(black, white) == 0.0
    assert psnr(black, nearly) == _plain_psnr(black, nearly) > 0.0
    # other dtypes / shapes keep the float64 path
    f = rng.random((4, 4, 3)) * 255
    assert psnr(f, f + 1.0) == _plain_psnr(f, f + 1.0) == pytest.approx(10 * math.log10(255 ** 2))
