"""Geometric closure of one revisit pair (``memory_loop.geometric_closure_for_pair``).

The matches come from the ``local_features`` role (default backend ``sift``: SIFT keypoints of both
frames (grey), brute-force L2 2-NN matching with Lowe's ratio 0.75, sorted by distance), cut to 400.
The fundamental matrix comes from the two *estimated* poses, not from the matches: relative pose
A→B = inv(T_B)·T_A, E = [t]×R, F = K_B⁻ᵀ E K_A⁻¹. Per match the distances of each point to the other's
epipolar line (the shared residual |x_Bᵀ F x_A| over the line normals, each floored at 1e-9), their mean; the pair's epipolar error is the median. With a baseline ‖t‖ > 1e-6 the
matches are triangulated (``cv2.triangulatePoints`` with P = K·inv(T)[:3]) and the median reprojection
error of each view, averaged, is the reprojection error — when at least ``min_matches`` points have
|w| > 1e-9 (points behind a camera are projected with z floored at 1e-9, as released).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from worldrecall.plugins.scene_memory.pair_frames import clamp01

MAX_MATCHES = 400  # the release keeps the best 400 ratio-test matches


def best_matches(pa: np.ndarray, pb: np.ndarray, max_matches: int = MAX_MATCHES) -> tuple[np.ndarray, np.ndarray]:
    """The first ``max_matches`` of a ``local_features`` backend's matches (best first), as float64 ``[n, 2]``."""
    pa = np.asarray(pa, dtype=np.float64).reshape(-1, 2)
    pb = np.asarray(pb, dtype=np.float64).reshape(-1, 2)
    if len(pa) != len(pb):
        raise ValueError(f"local_features backend returned {len(pa)} and {len(pb)} points for one pair")
    return pa[: int(max_matches)], pb[: int(max_matches)]


def skew(v: np.ndarray) -> np.ndarray:
    """[v]× of a 3-vector."""
    x, y, z = (float(c) for c in v)
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def pose_fundamental(pose_a: np.ndarray, pose_b: np.ndarray, K_a: np.ndarray, K_b: np.ndarray
                     ) -> tuple[np.ndarray, float]:
    """(F mapping points of A to epipolar lines of B, baseline ‖t_AB‖) from camera-to-world poses."""
    rel = np.linalg.inv(pose_b) @ pose_a
    R, t = rel[:3, :3], rel[:3, 3]
    F = np.linalg.inv(K_b).T @ (skew(t) @ R) @ np.linalg.inv(K_a)
    return F, float(np.linalg.norm(t))


def epipolar_error(pa: np.ndarray, pb: np.ndarray, F: np.ndarray) -> float:
    """Median over matches of the mean point-to-epipolar-line distance in the two views (pixels)."""
    ha = np.hstack([pa, np.ones((len(pa), 1))])
    hb = np.hstack([pb, np.ones((len(pb), 1))])
    lb = ha @ F.T   # lines in B
    la = hb @ F     # lines in A
    num = np.abs(np.sum(hb * lb, axis=1))
    db = num / np.maximum(np.linalg.norm(lb[:, :2], axis=1), 1e-9)
    da = num / np.maximum(np.linalg.norm(la[:, :2], axis=1), 1e-9)
    return float(np.median(0.5 * (da + db)))


def reprojection_error(pa: np.ndarray, pb: np.ndarray, pose_a: np.ndarray, pose_b: np.ndarray,
                       K_a: np.ndarray, K_b: np.ndarray) -> tuple[float | None, int]:
    """(mean of the two views' median reprojection errors or None, points with |w| > 1e-9)."""
    import cv2

    Pa = K_a @ np.linalg.inv(pose_a)[:3, :4]
    Pb = K_b @ np.linalg.inv(pose_b)[:3, :4]
    X = cv2.triangulatePoints(Pa, Pb, pa.T, pb.T)
    w = X[3]
    ok = np.abs(w) > 1e-9
    n_ok = int(np.count_nonzero(ok))
    if n_ok == 0:
        return None, 0
    pts = (X[:3, ok] / w[ok]).T
    errs = []
    for P, obs in ((Pa, pa[ok]), (Pb, pb[ok])):
        proj = np.hstack([pts, np.ones((len(pts), 1))]) @ P.T
        proj[np.abs(proj[:, 2]) <= 1e-9, 2] = 1e-9
        errs.append(float(np.median(np.linalg.norm(proj[:, :2] / proj[:, 2:3] - obs, axis=1))))
    return float(np.mean(errs)), n_ok


def measure_pair(matches: tuple[np.ndarray, np.ndarray], pose_a: np.ndarray, pose_b: np.ndarray,
                 K_a: np.ndarray, K_b: np.ndarray) -> dict[str, Any]:
    """Threshold-free facts of one pair from its matches (the ``local_features`` role's, best first):
    matches used, baseline, epipolar and reprojection errors (pixels).

    Computed for any number of matches, so ``min_matches`` re-scores from the cache: the score skips a
    pair below it (as released) and counts the reprojection only with that many usable points.
    """
    pa, pb = best_matches(*matches)
    out: dict[str, Any] = {"n_matches": len(pa), "baseline": None, "epipolar_error": None,
                           "reprojection_error": None, "n_triangulated": 0}
    if len(pa) == 0:
        return out
    F, base = pose_fundamental(pose_a, pose_b, K_a, K_b)
    out.update(baseline=base, epipolar_error=epipolar_error(pa, pb, F))
    if base > 1e-6:
        err, n_ok = reprojection_error(pa, pb, pose_a, pose_b, K_a, K_b)
        out.update(reprojection_error=err, n_triangulated=n_ok)
    return out


def pair_score(m: dict[str, Any], *, min_matches: int = 12, epipolar_tau: float = 4.0,
               reprojection_tau: float = 8.0, release_clamp: bool = False) -> float | None:
    """exp(−e/τ_e), averaged with exp(−r/τ_r) when the reprojection counts; None for a skipped pair.
    Clamped to [0, 1] (``release_clamp``: the release's clamp, NaN -> 1; ours: NaN -> 0)."""
    if m.get("epipolar_error") is None or int(m["n_matches"]) < int(min_matches):
        return None
    ep = float(np.exp(-float(m["epipolar_error"]) / max(float(epipolar_tau), 1e-6)))
    r = m.get("reprojection_error")
    if r is None or int(m.get("n_triangulated", 0)) < int(min_matches):
        s = ep
    else:
        s = 0.5 * (ep + float(np.exp(-float(r) / max(float(reprojection_tau), 1e-6))))
    return clamp01(s, release=release_clamp)
