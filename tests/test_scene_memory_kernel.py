"""Scene-Memory-F1 scoring kernel (spec B.7): appendix fixtures 1–3 and hand-computed tiny clouds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.scene_memory_fixtures import room_cloud

from worldrecall.plugins.scene_memory.f1 import NotApplicable, score_point_clouds, voxel_downsample
from worldrecall.plugins.scene_memory.icp import kabsch, trimmed_icp
from worldrecall.plugins.scene_memory.trajectory import rotation_angle_deg


def _blob(n: int = 3000, seed: int = 0) -> np.ndarray:
    """Random points filling a box (fine for threshold arithmetic; too uniform for ICP)."""
    rng = np.random.default_rng(seed)
    return rng.random((n, 3)) * np.array([4.0, 2.0, 1.0])


_scene = room_cloud  # shared with the mutation tests (tests/helpers/scene_memory_fixtures.py)


def _diag(p: np.ndarray) -> float:
    return float(np.linalg.norm(p.max(0) - p.min(0)))


# -- appendix fixture 1 ------------------------------------------------------------------------------
@pytest.mark.parametrize("alignment", ["none", "trimmed_icp"])
def test_identical_clouds_score_one(alignment):
    O = _blob()
    r = score_point_clouds(O, O.copy(), alignment=alignment)
    assert (r.retention, r.precision, r.f1, r.hallucination) == (1.0, 1.0, 1.0, 0.0)
    if alignment == "trimmed_icp":
        assert r.icp_accepted and r.icp.translation < 1e-9


# -- appendix fixture 2 ------------------------------------------------------------------------------
def test_small_shift_is_recovered_by_icp():
    O = _scene()
    D = _diag(O)
    shift = 0.05 * D * np.array([1.0, 0.5, -0.3]) / np.linalg.norm([1.0, 0.5, -0.3])
    V = O + shift
    r = score_point_clouds(O, V)
    assert r.icp_accepted and r.alignment == "trimmed_icp"
    np.testing.assert_allclose(r.icp.t, -shift, atol=1e-6)  # exact copy: ICP lands on it
    assert r.f1 == 1.0
    # without alignment the same shift is scored as forgetting (0.05·D ≫ τ = 0.02·D)
    assert score_point_clouds(O, V, alignment="none").f1 < 0.5
    # a fresh sampling of the same surfaces, shifted: accepted, F1 ≈ 1
    r2 = score_point_clouds(O, _scene(seed=1) + shift)
    assert r2.icp_accepted and r2.f1 > 0.95


def test_large_shift_is_rejected_and_scores_low():
    O = _scene()
    D = _diag(O)
    V = O + 0.2 * D * np.array([1.0, 0.0, 0.0])
    r = score_point_clouds(O, V)
    # ICP moves by more than 10 % of O's bbox diagonal -> rejected -> identity (V unchanged)
    assert r.icp_accepted is False and r.alignment == "none"
    assert r.icp.translation > r.icp.translation_bound
    assert r.f1 < 0.8
    np.testing.assert_allclose(score_point_clouds(O, V, alignment="none").f1, r.f1)


def test_rotation_bound():
    O = _scene()
    c = O.mean(0)
    a = math.radians(15.0)
    R = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
    V = (O - c) @ R.T + c
    r = score_point_clouds(O, V)
    assert r.icp.rotation_deg > 10.0 and r.icp_accepted is False
    r2 = score_point_clouds(O, V, icp_max_rotation_deg=30.0, icp_max_translation_ratio=1.0)
    assert r2.icp_accepted and r2.f1 > 0.95 and r2.f1 > r.f1


# -- appendix fixture 3 ------------------------------------------------------------------------------
def test_half_far_points_are_hallucinated():
    O = _blob(1000)
    far = _blob(1000, seed=5) + np.array([50.0, 0.0, 0.0])
    V = np.concatenate([O, far])
    r = score_point_clouds(O, V, alignment="none")
    # every O point has its copy in V -> R = 1; the 1000 far points of 2000 are ≥ τ from O -> H = 0.5
    # P = 0.5, F1 = 2·0.5·1 / 1.5 = 2/3
    assert r.retention == 1.0 and r.hallucination == 0.5 and r.precision == 0.5
    assert r.f1 == pytest.approx(2.0 / 3.0, abs=1e-12)


# -- hand-computed tiny clouds ----------------------------------------------------------------------
def test_tiny_clouds_by_hand():
    O = np.array([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0]])
    V = np.array([[0.0, 0.0, 0.1], [5.0, 0.0, 0.0], [10.0, 0.0, 0.3]])
    r = score_point_clouds(O, V, alignment="none")
    # union bbox: x 0..10, y 0, z 0..0.3 -> D = sqrt(100 + 0.09) = 10.004499; τ = 0.02·D = 0.2000900
    assert r.diagonal == pytest.approx(math.sqrt(100.09))
    assert r.tau == pytest.approx(0.02 * math.sqrt(100.09))
    # d_O = [0.1, 0.3] -> retained [yes, no] -> R = 1/2
    # d_V = [0.1, 5.0, 0.3] -> hallucinated [no, yes, yes] -> H = 2/3, P = 1/3
    # F1 = 2·(1/3)·(1/2) / (1/3 + 1/2) = (1/3) / (5/6) = 0.4
    assert r.retention == 0.5
    assert r.hallucination == pytest.approx(2 / 3) and r.precision == pytest.approx(1 / 3)
    assert r.f1 == pytest.approx(0.4)
    assert (r.n_obs, r.n_rev) == (2, 3)


def test_absolute_threshold_and_strictness():
    O = np.array([[0.0, 0.0, 0.0]])
    V = np.array([[0.5, 0.0, 0.0]])
    strict = score_point_clouds(O, V, alignment="none", distance_threshold=0.5)
    # d = 0.5 = τ: strict -> not retained (0.5 < 0.5 false), hallucinated (0.5 ≥ 0.5) -> R = 0, P = 0, F1 = 0
    assert (strict.retention, strict.precision, strict.f1, strict.tau) == (0.0, 0.0, 0.0, 0.5)
    loose = score_point_clouds(O, V, alignment="none", distance_threshold=0.5, strict=False)
    assert (loose.retention, loose.precision, loose.f1) == (1.0, 1.0, 1.0)


def test_tau_floors():
    p = np.array([[1.0, 2.0, 3.0]])
    # one identical point: D = 0 -> τ = max(0.02·0, 1e-6) = 1e-6
    assert score_point_clouds(p, p, alignment="none").tau == 1e-6
    # an explicit τ of 0 is floored at 1e-8
    assert score_point_clouds(p, p, alignment="none", distance_threshold=0.0).tau == 1e-8


def test_voxel_downsample_by_hand():
    p = np.array([[0.1, 0.1, 0.1], [0.3, 0.3, 0.3], [1.5, 0.2, 0.2], [-0.5, 0.0, 0.0]])
    got = voxel_downsample(p, 1.0)
    # voxels floor(p/1): (0,0,0) x2 -> mean (0.2,0.2,0.2); (1,0,0) -> itself; (-1,0,0) -> itself;
    # lexicographic voxel order: (-1,0,0), (0,0,0), (1,0,0)
    np.testing.assert_allclose(got, [[-0.5, 0, 0], [0.2, 0.2, 0.2], [1.5, 0.2, 0.2]])
    assert voxel_downsample(p, 0.0) is p


def test_nonfinite_rows_dropped_and_empty_is_not_applicable():
    O = np.array([[0.0, 0.0, 0.0], [np.nan, 0, 0], [1.0, 0, 0]])
    r = score_point_clouds(O, O, alignment="none")
    assert r.n_obs == 2 and r.f1 == 1.0
    with pytest.raises(NotApplicable, match="empty point cloud"):
        score_point_clouds(O, np.full((3, 3), np.inf), alignment="none")
    with pytest.raises(NotApplicable, match="at least 3 points"):
        score_point_clouds(O[:1], O[:1])


def test_centroid_alignment_only_without_icp():
    O = _blob(500)
    V = O + np.array([3.0, 0.0, 0.0])
    assert score_point_clouds(O, V, alignment="none", centroid_align=True).f1 == pytest.approx(1.0)
    assert score_point_clouds(O, V, alignment="none", centroid_align=False).f1 < 0.5


def test_float32_parity_mode_flips_a_boundary_point():
    O = np.array([[0.0, 0.0, 0.0]])
    V = np.array([[0.1 - 1e-10, 0.0, 0.0]])
    # float64: d = 0.0999999999 < τ = 0.1 -> retained; float32: d rounds to float32(0.1) = τ -> not (strict)
    assert score_point_clouds(O, V, alignment="none", distance_threshold=0.1).retention == 1.0
    assert score_point_clouds(O, V, alignment="none", distance_threshold=0.1, float32=True).retention == 0.0


def test_per_point_flags_in_input_order():
    O = np.array([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0]])
    V = np.array([[0.0, 0.0, 0.1], [5.0, 0.0, 0.0], [10.0, 0.0, 0.3]])
    r = score_point_clouds(O, V, alignment="none", keep_points=True)
    assert r.retained.tolist() == [True, False] and r.hallucinated.tolist() == [False, True, True]
    np.testing.assert_array_equal(r.rev, V)


# -- ICP building blocks ----------------------------------------------------------------------------
def test_kabsch_recovers_a_known_motion():
    rng = np.random.default_rng(3)
    src = rng.normal(size=(50, 3))
    a = math.radians(7.0)
    R = np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])
    t = np.array([0.3, -0.2, 1.0])
    Rg, tg = kabsch(src, src @ R.T + t)
    np.testing.assert_allclose(Rg, R, atol=1e-12)
    np.testing.assert_allclose(tg, t, atol=1e-12)
    assert rotation_angle_deg(Rg) == pytest.approx(7.0)
    # a reflection-only fit is turned into a proper rotation
    Rm, _ = kabsch(src, src * np.array([1.0, 1.0, -1.0]))
    assert np.linalg.det(Rm) == pytest.approx(1.0)


def test_trimmed_icp_ignores_outliers_and_stops_early():
    O = _scene(2000)
    V = np.concatenate([O[:1800] + 0.05, O[:200] + 40.0])  # 10 % far outliers, trim keeps 80 %
    r = trimmed_icp(V, O)
    np.testing.assert_allclose(r.t, [-0.05] * 3, atol=1e-6)
    assert r.accepted and r.iterations < 20
    # the translation bound uses O's own bbox: 0.10 × diag(O), floored at 1e-8
    assert r.translation_bound == pytest.approx(0.10 * _diag(O))


def _reference_kernel(O: np.ndarray, V: np.ndarray, ratio: float = 0.02) -> tuple[float, np.ndarray, np.ndarray]:
    """B.7 with brute-force nearest neighbours and none of the kernel's speed tricks -> (F1, R_tot, t_tot)."""
    def nn(q, t):
        d2 = ((q[:, None, :] - t[None, :, :]) ** 2).sum(-1)
        i = d2.argmin(1)
        return np.sqrt(d2[np.arange(len(q)), i]), i

    cur, k = V.copy(), math.ceil(0.8 * len(V))
    R_tot, t_tot, prev = np.eye(3), np.zeros(3), math.inf
    for _ in range(20):
        d, i = nn(cur, O)
        keep = np.argsort(d, kind="stable")[:k]
        err = d[keep].mean()
        R, t = kabsch(cur[keep], O[i[keep]])
        cur = cur @ R.T + t
        R_tot, t_tot = R @ R_tot, R @ t_tot + t
        if abs(prev - err) <= 1e-5:
            break
        prev = err
    ok = np.linalg.norm(t_tot) <= 0.1 * _diag(O) and rotation_angle_deg(R_tot) <= 10.0
    Va = V @ R_tot.T + t_tot if ok else V
    tau = ratio * _diag(np.concatenate([O, Va]))
    R_ = float((nn(O, Va)[0] < tau).mean())
    P_ = 1.0 - float((nn(Va, O)[0] >= tau).mean())
    return 2 * P_ * R_ / (P_ + R_), R_tot, t_tot


@pytest.mark.parametrize("seed,repeats", [(0, False), (1, False), (2, False), (3, True)])
def test_kernel_equals_brute_force_reference(seed, repeats):
    # fresh samplings of the same surfaces, a small rigid motion, noise and 15 % outliers: the kd-tree
    # kernel with its pruned searches (and de-duplication of repeated points) must give exactly what
    # plain brute force gives
    rng = np.random.default_rng(seed)
    O = _scene(600, seed=seed)
    a = math.radians(3.0)
    R = np.array([[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]])
    V = _scene(600, seed=seed + 10) @ R.T + np.array([0.1, -0.05, 0.08])
    V[:90] = rng.random((90, 3)) * 6 - 1
    V += rng.normal(scale=0.005, size=V.shape)
    if repeats:  # a static stretch of camera: the same depth pixels seen again and again
        O = np.concatenate([O, O[:300], O[:300]])
        V = np.concatenate([V, np.repeat(V[100:250], 3, axis=0)])
    f1_ref, R_ref, t_ref = _reference_kernel(O, V)
    got = score_point_clouds(O, V)
    np.testing.assert_allclose(got.icp.R, R_ref, atol=1e-9)
    np.testing.assert_allclose(got.icp.t, t_ref, atol=1e-9)
    assert got.f1 == pytest.approx(f1_ref, abs=1e-12)


# -- released precision and ICP procedure (issue 17) ------------------------------------------------------
def test_parity_distances_are_float64_distances_rounded_to_float32():
    # ‖q‖ = 0.830683070135… in float64 -> float32 0.83068305254; a float32 recomputation gives the next
    # float32 up, 0.83068311214. With τ = that upper value the released rule keeps the point (d < τ).
    q = np.array([[0.7963242530822754, 0.23064221441745758, 0.05202130228281021]], np.float32)
    O = np.zeros((1, 3), np.float32)
    r = score_point_clouds(O, q, alignment="none", distance_threshold=0.8306831121444702, float32=True)
    assert r.retention == 1.0 and r.hallucination == 0.0 and r.f1 == 1.0


def test_parity_icp_far_from_the_origin_is_accepted():
    # a copy shifted by ≈ 4 % of the diagonal, far from the origin: the centred covariance finds the shift
    # (the uncentred shortcut ΣsdᵀW − W·m_s m_dᵀ cancels there and rejected it: F1 0.24)
    shift = np.array([0.2, -0.1, 0.15])
    # float64, 10 km out: found to the last few bits
    O = _scene() + 1.0e4
    r = score_point_clouds(O, O + shift, float32=False, keep_points=True)
    assert r.icp_accepted and r.alignment == "trimmed_icp" and r.f1 == 1.0
    assert np.abs(r.rev - O).max() < 1e-6
    # the release's float32 clouds, 1 km out (float32 spacing there: 6e-5). Farther out the spacing (1e-3
    # at 10 km) ties many nearest distances, and which tied rows np.argpartition keeps is unspecified (it
    # changes with numpy's SIMD path): the fitted rotation, and the acceptance, then depend on the CPU
    O = _scene() + 1.0e3
    r = score_point_clouds(O, O + shift, float32=True, keep_points=True)
    assert r.icp_accepted and r.alignment == "trimmed_icp" and r.f1 == 1.0
    # the aligned copy lands on the observation (t itself absorbs R's tiny error × 1000 units)
    assert np.abs(r.rev - O).max() < 2e-3


def test_kabsch_centres_before_the_covariance():
    # 100 points of spread 1 at 1e8 from the origin, rotated by 5° about z: recovered exactly
    rng = np.random.default_rng(4)
    src = rng.normal(size=(100, 3)) + 1e8
    a = math.radians(5.0)
    R = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
    c = src.mean(axis=0)
    dst = (src - c) @ R.T + c
    Rg, _ = kabsch(src, dst)
    assert rotation_angle_deg(Rg) == pytest.approx(5.0, abs=1e-6)


@pytest.mark.parametrize("f32", [False, True])
def test_fewer_than_three_distinct_points_are_scored(f32):
    # 5 copies of one point against 4 copies of it: the release runs ICP (zero covariance -> R = I,
    # t = 0, accepted) and scores F1 = 1 — no de-duplication before the ≥ 3 check
    O = np.tile([[1.0, 2.0, 3.0]], (5, 1))
    r = score_point_clouds(O, O[:4].copy(), float32=f32)
    assert r.icp_accepted and (r.f1, r.n_obs, r.n_rev) == (1.0, 5, 4)
    # shifted by 1 mm: the bound is max(0.10 × diag(O) = 0, 1e-8) -> rejected; D = 0.001, τ = max(2e-5,
    # 1e-6) = 2e-5 (float32: 1.001 − 1 = 0.00100005) < 1 mm -> nothing retained, all hallucinated: F1 = 0
    r = score_point_clouds(O, O[:4] + np.array([0.001, 0.0, 0.0]), float32=f32)
    assert r.icp_accepted is False and r.alignment == "none"
    assert r.tau == pytest.approx(2e-5, rel=1e-4) and (r.retention, r.hallucination, r.f1) == (0.0, 1.0, 0.0)
    with pytest.raises(NotApplicable, match="at least 3 points"):
        score_point_clouds(O[:2], O[:2], float32=f32)


def test_parity_trim_keeps_the_rows_argpartition_keeps():
    # one iteration on 5 points with distances 0.1, 0.2, 0.2, 0.3, 0.2 to their partners: ⌈0.8·5⌉ = 4 rows
    # are kept, and which two of the three tied 0.2 rows survive is np.argpartition's choice
    from worldrecall.plugins.scene_memory.icp import trimmed_icp_release

    O = np.array([[0, 0, 0], [10, 0, 0], [0, 10, 0], [0, 0, 10], [10, 10, 10]], np.float32)
    off = np.array([[0.1, 0, 0], [0, 0.2, 0], [0, 0, 0.2], [0.3, 0, 0], [0, -0.2, 0]], np.float32)
    V = O + off
    d = np.linalg.norm(off.astype(np.float64), axis=1)
    keep = np.argpartition(d, 3)[:4]
    R_want, t_want = kabsch(V[keep].astype(np.float64), O[keep].astype(np.float64))
    res, moved = trimmed_icp_release(V, O, max_iterations=1)
    np.testing.assert_array_equal(res.R, R_want)
    np.testing.assert_array_equal(res.t, t_want)
    assert moved.dtype == np.float32 and res.iterations == 1


@pytest.mark.parametrize("alignment", ["centroid", "identity", "None"])
def test_other_alignments_fall_back_to_centroid_or_none(alignment):
    O = _blob(500)
    V = O + np.array([3.0, 0.0, 0.0])
    for f32 in (False, True):
        on = score_point_clouds(O, V, alignment=alignment, centroid_align=True, float32=f32)
        assert on.alignment == "centroid" and on.f1 == pytest.approx(1.0) and on.icp is None
        off = score_point_clouds(O, V, alignment=alignment, centroid_align=False, float32=f32)
        assert off.alignment == "none" and off.f1 < 0.5
