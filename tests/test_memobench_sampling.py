"""MemoBench phase mapping, per-metric frame sampling and rounding: hand-computed expectations."""

from __future__ import annotations

import pytest

from worldrecall.core.data import Case
from worldrecall.plugins.memobench import rounding, sampling
from worldrecall.plugins.memobench.aligner import PhaseAligner

# -- phase mapping (§2.1, errata 1) --------------------------------------------------------------

@pytest.mark.parametrize("h_gt,r_gt,g,n,expected", [
    (100, 200, 300, 81, (27, 54)),    # 100/300*81 = 27.0, 200/300*81 = 54.0
    (100, 200, 300, 129, (43, 86)),   # 43.0, 86.0
    (150, 250, 300, 81, (40, 68)),    # 40.5 -> 40 (half to even), 67.5 -> 68
    (0, 1, 300, 81, (2, 4)),          # h clamped up to 2, r to h + 2
    (300, 300, 300, 81, (77, 80)),    # h = min(81, N-4 = 77), r = min(81, N-1 = 80)
    (2, 3, 10, 5, (2, 4)),            # N = 5: h = max(2, min(1, 1)) = 2, r = max(4, min(2, 4)) = 4
    (2, 3, 10, 4, (2, 4)),            # N = 4: r = 4 >= N (official: frames past the end are clamped)
])
def test_phase_bounds_official_examples(h_gt, r_gt, g, n, expected):
    assert sampling.phase_bounds(h_gt, r_gt, g, n) == expected


def test_errata1_divide_first():
    # 54 / 196 * 49 = 13.499999999999998 -> 13 (exact arithmetic 54*49/196 = 13.5 would round to 14)
    assert sampling.map_boundary(54, 196, 49) == 13
    assert round(54 * 49 / 196) == 14  # the operation order a port must not use


def test_phase_ranges_share_boundaries():
    assert sampling.phase_ranges(27, 54, 81) == {"V": (0, 27), "D": (27, 54), "R": (54, 80), "ALL": (0, 80)}


def test_aligner_info_and_phases(tmp_path):
    class _V:  # stand-in for a decoded video: the aligner only reads num_frames
        num_frames = 81

    case = Case("memobench", "Barnyard_001", "m", _V(),
                annotations={"h_gt": 150, "r_gt": 250, "G": 300, "G_source": "rgb_files", "G_ors": 296})
    al = PhaseAligner().align(case, {})
    assert (al.phases["V"].start, al.phases["V"].end) == (0, 40)
    assert (al.phases["D"].start, al.phases["D"].end) == (40, 68)
    assert (al.phases["R"].start, al.phases["R"].end) == (68, 80)
    assert len(al.phases["ALL"]) == 81
    # ORS's own G: 150/296*81 = 41.047 -> 41, 250/296*81 = 68.412 -> 68
    assert {k: al.info[k] for k in ("G", "h_gt", "r_gt", "h", "r", "N", "h_ors", "r_ors")} == {
        "G": 300, "h_gt": 150, "r_gt": 250, "h": 40, "r": 68, "N": 81, "h_ors": 41, "r_ors": 68}


def test_aligner_rejects_missing_annotations():
    from worldrecall.core.data import CaseFailure

    with pytest.raises(CaseFailure, match="h_gt"):
        PhaseAligner().align(Case("memobench", "x", "m", None, annotations={}), {})


# -- per-metric sampling (§2.3) -----------------------------------------------------------------

def test_motion_indices_step4():
    idx = sampling.motion_phase_indices(27, 54, 81, 4)
    assert idx["V"] == [0, 4, 8, 12, 16, 20, 24]
    assert idx["R"] == [54, 58, 62, 66, 70, 74, 78]
    # R is not scored at all when N - 1 - r < 2
    assert sampling.motion_phase_indices(27, 79, 81, 4)["R"] is None


def test_visual_quality_indices():
    assert sampling.visual_quality_indices(10, 4) == [0, 4, 8]
    assert sampling.visual_quality_indices(9, 4) == [0, 4, 8]


def test_identity_indices_spec_example():
    # N = 81, r = 54: 54 + int(i * 26 / 8) -> 0, 3, 6, 9, 13, 16, 19, 22, 26
    assert sampling.identity_indices(54, 81) == [54, 57, 60, 63, 67, 70, 73, 76, 80]


def test_identity_indices_clamped_when_r_past_end():
    # r = 4 >= N = 4: start clamps to N-1 = 3, a one-frame range -> [3]
    assert sampling.identity_indices(4, 4) == [3]


def test_geo_phase_indices():
    assert sampling.geo_phase_indices(0, 27, 81) == [0, 13, 27]     # int(27/2) = 13
    assert sampling.geo_phase_indices(54, 80, 81) == [54, 67, 80]   # 54 + int(26/2)
    assert sampling.geo_phase_indices(80, 80, 81) == []             # one frame -> no pairs (scores 0)
    assert sampling.geo_phase_indices(79, 80, 81) == [79, 79, 80]   # two frames: int(1/2) = 0


def test_image_reward_indices():
    assert sampling.image_reward_indices(81) == [0, 20, 40, 60, 80]
    assert sampling.image_reward_indices(50) == [0, 12, 24, 36, 49]   # 12.25, 24.5, 36.75 truncated


def test_ors_indices():
    assert sampling.ors_indices(78, 81) == [78, 79, 80]
    assert sampling.ors_indices(81, 81) == []


def test_resample_gt_indices_half_even():
    # 0 + i*10/4 = 0, 2.5 -> 2, 5, 7.5 -> 8, 10
    assert sampling.resample_gt_indices(0, 10, 5) == [0, 2, 5, 8, 10]
    assert sampling.resample_gt_indices(7, 7, 3) == [7, 7, 7]
    assert sampling.resample_gt_indices(3, 9, 1) == [3]
    assert sampling.resample_gt_indices(3, 9, 0) == []


def test_pixel_phase_indices():
    out = sampling.pixel_phase_indices(h=2, r=4, n=7, h_gt=3, r_gt=6, gt_frames=9)
    assert out["V"] == ([0, 1, 2], [0, 2, 3])           # 0, 1.5 -> 2, 3
    assert out["D"] == ([2, 3, 4], [3, 4, 6])           # 3, 4.5 -> 4, 6
    assert out["R"] == ([4, 5, 6], [6, 7, 8])
    assert out["ALL"] == ([0, 1, 2, 3, 4, 5, 6], [0, 1, 3, 4, 5, 7, 8])  # i*8/6
    assert "R" not in sampling.pixel_phase_indices(2, 7, 7, 3, 6, 9)  # empty R phase is skipped


def test_pose_resample_indices():
    assert sampling.pose_resample_indices(5, 3) == [0, 2, 4]
    assert sampling.pose_resample_indices(4, 3) == [0, 2, 3]     # 1.5 -> 2
    assert sampling.pose_resample_indices(6, 3) == [0, 2, 5]     # 2.5 -> 2
    assert sampling.pose_resample_indices(3, 3) == [0, 1, 2]
    with pytest.raises(ZeroDivisionError):
        sampling.pose_resample_indices(5, 1)


def test_revisit_pairs():
    # GT int(200 + k*99/2) = 200, 249, 299; gen int(54 + k*26/2) = 54, 67, 80
    assert sampling.revisit_pairs(200, 300, 54, 81) == [(200, 54), (249, 67), (299, 80)]


# -- rounding ----------------------------------------------------------------------------------

def test_round_py_is_python_round():
    assert rounding.round_py(2.5, 0) == 2.0 and rounding.round_py(3.5, 0) == 4.0   # half to even
    assert rounding.round_py(2.675, 2) == 2.67   # 2.675 is 2.67499999… in binary
    assert rounding.round_py(None) is None and rounding.round_py(float("nan")) is None


def test_round_np_is_pandas_round():
    import pandas as pd

    # 0.075 * 100 = 7.5 exactly in float64 -> rint -> 8; Python's round looks at 0.07499999…
    assert rounding.round_np(0.075, 2) == 0.08 == pd.Series([0.075]).round(2)[0]
    assert rounding.round_py(0.075, 2) == 0.07


def test_pct():
    assert rounding.pct(0.12345) == 12.3          # 12.345000000000001 -> 12.3
    assert rounding.pct(5.25, 0, 10) == 52.5      # 5.25 / 10 * 100
    assert rounding.pct(1.2) == 100.0 and rounding.pct(-0.1) == 0.0   # clipped
    assert rounding.pct_of("AestheticScore", 6.4321) == 64.3


def test_mix_uses_exact_point3():
    assert rounding.complement(0.7) == 0.3
    assert rounding.mix(80.0, 50.0, 0.7) == 71.0           # 56 + 15
    assert rounding.mix(45.3, 12.1, 0.7) == 35.34          # 31.709999… + 3.63
    assert rounding.mix(45.3, None, 0.7) is None           # NaN min -> NaN, as the official pandas sum
