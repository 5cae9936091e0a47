"""From point matches between consecutive frames to chained camera-to-world rotations.

Shared by the matching-based pose backends (``sift_pose``, ``superpoint_lightglue``). Intrinsics are
guessed from the frame size (fx = fy = 0.5·W / tan(fov/2), principal point at the centre; fov 60° by
default). Each consecutive pair gives a relative rotation R (camera-i coordinates → camera-(i+1)
coordinates) from the essential matrix (RANSAC + cheirality, ``cv2.recoverPose``). The essential matrix
is degenerate when the camera only rotates, which is the common case for panning videos, so in ``auto``
mode a homography is fitted too: when it explains (almost) as many matches as the essential matrix and
K⁻¹HK is (up to scale) a rotation, that rotation is used. Both fits use OpenCV's MAGSAC++ (USAC).
Translations are not recoverable at a meaningful scale and stay zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

METHODS = ("auto", "essential", "homography")


def guess_intrinsics(w: int, h: int, fov_deg: float = 60.0) -> np.ndarray:
    """3×3 pinhole K with horizontal field of view ``fov_deg`` and the principal point at the centre."""
    f = 0.5 * w / math.tan(math.radians(fov_deg) / 2.0)
    return np.array([[f, 0.0, w / 2.0], [0.0, f, h / 2.0], [0.0, 0.0, 1.0]])


def nearest_rotation(m: np.ndarray) -> np.ndarray:
    """The rotation closest (Frobenius) to ``m`` (sign of ``m`` ignored)."""
    u, _, vt = np.linalg.svd(m)
    r = u @ vt
    if np.linalg.det(r) < 0:
        r = u @ np.diag([1.0, 1.0, -1.0]) @ vt
    return r


@dataclass
class PairResult:
    """One consecutive pair: the relative rotation and how it was obtained."""

    rotation: np.ndarray
    method: str                  # homography | essential | failed
    matches: int
    inliers: int
    residual_px: float = math.nan  # median over the inliers: homography transfer error or Sampson distance (px)


def rotation_from_homography(h: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, float]:
    """R ≈ K⁻¹HK projected onto SO(3), and how rotation-like it was (σ_min/σ_max of K⁻¹HK, 1 = exact)."""
    m = np.linalg.inv(k) @ h @ k
    s = np.linalg.svd(m, compute_uv=False)
    if np.linalg.det(m) < 0:
        m = -m
    return nearest_rotation(m), float(s[-1] / max(s[0], 1e-12))


def relative_rotation(pts0: np.ndarray, pts1: np.ndarray, k: np.ndarray, *, method: str = "auto",
                      ransac_px: float = 1.0, min_matches: int = 8, homography_share: float = 0.95,
                      rotation_likeness: float = 0.95) -> PairResult:
    """Rotation taking camera-0 coordinates to camera-1 coordinates from matched pixels ``[M, 2]``.

    ``auto``: the rotation homography wins when it explains at least ``homography_share`` of the essential
    matrix's inliers and K⁻¹HK is rotation-like (σ_min/σ_max ≥ ``rotation_likeness``); otherwise the
    essential matrix (RANSAC, then cheirality via ``recoverPose``) is used.
    """
    import cv2

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    n = len(pts0)
    if n < min_matches:
        return PairResult(np.eye(3), "failed", n, 0)
    p0 = np.ascontiguousarray(pts0, dtype=np.float64).reshape(-1, 1, 2)
    p1 = np.ascontiguousarray(pts1, dtype=np.float64).reshape(-1, 1, 2)
    by_h = by_e = None
    likeness = 0.0
    if method in ("auto", "homography"):
        h, mask = cv2.findHomography(p0, p1, cv2.USAC_MAGSAC, ransac_px)
        if h is not None:
            rot, likeness = rotation_from_homography(h, k)
            inl = _inliers(mask, n)
            by_h = PairResult(rot, "homography", n, int(inl.sum()), _transfer_px(h, pts0[inl], pts1[inl]))
    if method in ("auto", "essential"):
        e, mask = cv2.findEssentialMat(p0, p1, k, method=cv2.USAC_MAGSAC, prob=0.999, threshold=ransac_px)
        if e is not None and e.shape[0] >= 3:
            inl, r, _, pose_mask = cv2.recoverPose(e[:3], p0, p1, k, mask=mask)
            if inl >= min_matches:
                keep = _inliers(pose_mask, n)
                by_e = PairResult(np.asarray(r, dtype=np.float64), "essential", n, int(inl),
                                  _sampson_px(e[:3], k, pts0[keep], pts1[keep]))
    if method == "homography" or by_e is None:
        return by_h if by_h is not None else PairResult(np.eye(3), "failed", n, 0)
    if method == "auto" and by_h is not None and likeness >= rotation_likeness \
            and by_h.inliers >= homography_share * by_e.inliers:
        return by_h
    return by_e


def _inliers(mask: np.ndarray | None, n: int) -> np.ndarray:
    """A RANSAC mask as ``[n]`` booleans (all False when OpenCV gives none)."""
    return np.zeros(n, dtype=bool) if mask is None else np.asarray(mask).reshape(-1)[:n].astype(bool)


def _transfer_px(h: np.ndarray, p0: np.ndarray, p1: np.ndarray) -> float:
    """Median distance (px) of ``p1`` from ``h``·``p0`` (NaN without points)."""
    if not len(p0):
        return math.nan
    q = np.c_[np.asarray(p0, dtype=np.float64), np.ones(len(p0))] @ np.asarray(h, dtype=np.float64).T
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.linalg.norm(q[:, :2] / q[:, 2:3] - np.asarray(p1, dtype=np.float64), axis=1)
    return float(np.nanmedian(d)) if np.isfinite(d).any() else math.nan


def _sampson_px(e: np.ndarray, k: np.ndarray, p0: np.ndarray, p1: np.ndarray) -> float:
    """Median Sampson distance (px) of the matches under the essential matrix ``e`` (F = K⁻ᵀ E K⁻¹)."""
    if not len(p0):
        return math.nan
    ki = np.linalg.inv(k)
    f = ki.T @ np.asarray(e, dtype=np.float64) @ ki
    x0 = np.c_[np.asarray(p0, dtype=np.float64), np.ones(len(p0))]
    x1 = np.c_[np.asarray(p1, dtype=np.float64), np.ones(len(p1))]
    fx0, ftx1 = x0 @ f.T, x1 @ f
    num = np.einsum("ij,ij->i", x1, fx0) ** 2
    den = fx0[:, 0] ** 2 + fx0[:, 1] ** 2 + ftx1[:, 0] ** 2 + ftx1[:, 1] ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.sqrt(num / den)
    return float(np.nanmedian(d)) if np.isfinite(d).any() else math.nan


def chain_c2w(rotations: Sequence[np.ndarray]) -> np.ndarray:
    """``[N+1, 4, 4]`` c2w from N relative rotations (frame 0 = identity; c2w_{i+1} = c2w_i · R_iᵀ)."""
    out = [np.eye(4)]
    for r in rotations:
        nxt = np.eye(4)
        nxt[:3, :3] = out[-1][:3, :3] @ np.asarray(r).T
        out.append(nxt)
    return np.stack(out)


# what ``poses_and_quality`` reports beside the poses, in this order (NaN where not measured)
QUALITY_FIELDS = ("pairs", "failed_pairs", "matches_min", "matches_median", "inliers_min", "inliers_median",
                  "inlier_ratio_min", "inlier_ratio_median", "residual_px_median", "residual_px_max")


def quality_vector(quality: Mapping[str, float | None]) -> np.ndarray:
    """:meth:`PoseTrace.quality` as a float vector in :data:`QUALITY_FIELDS` order (None / absent: NaN)."""
    return np.asarray([np.nan if quality.get(k) is None else float(quality[k]) for k in QUALITY_FIELDS])


class ReportsQuality:
    """For a pose backend whose ``poses`` fills ``self.trace`` (:class:`PoseTrace`): ``poses_and_quality``, the
    poses and that very estimate's quality in one call (what the camera gate reads)."""

    quality_fields = QUALITY_FIELDS

    def poses_and_quality(self, frames: Sequence[np.ndarray], *, case: Any = None,
                          indices: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``poses`` and its quality over the frame pairs (a vector in ``quality_fields`` order: matches, inliers,
        inlier ratio, residual, failed pairs)."""
        poses = self.poses(frames, case=case, indices=indices)  # type: ignore[attr-defined]
        return poses, quality_vector(self.trace.quality())  # type: ignore[attr-defined]


@dataclass
class PoseTrace:
    """Diagnostics of the last ``poses`` call (how each pair was solved)."""

    pairs: list[PairResult] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.pairs:
            out[p.method] = out.get(p.method, 0) + 1
        return out

    def quality(self) -> dict[str, float | None]:
        """How far to trust the chained poses, over consecutive frame pairs: matches and inliers (min, median),
        inlier ratio (min, median), residual in px (median, max of the pairs' medians), failed pairs. A single
        bad pair (few inliers) corrupts every pose after it."""
        if not self.pairs:
            return {}
        m = np.asarray([p.matches for p in self.pairs], dtype=float)
        i = np.asarray([p.inliers if p.method != "failed" else 0 for p in self.pairs], dtype=float)
        ratio = np.divide(i, m, out=np.zeros_like(i), where=m > 0)
        res = np.asarray([p.residual_px for p in self.pairs], dtype=float)
        ok = np.isfinite(res)

        def f(x: float) -> float:
            return round(float(x), 4)

        return {"pairs": float(len(m)), "failed_pairs": float(sum(p.method == "failed" for p in self.pairs)),
                "matches_min": f(m.min()), "matches_median": f(np.median(m)), "inliers_min": f(i.min()),
                "inliers_median": f(np.median(i)), "inlier_ratio_min": f(ratio.min()),
                "inlier_ratio_median": f(np.median(ratio)),
                "residual_px_median": f(np.median(res[ok])) if ok.any() else None,
                "residual_px_max": f(res[ok].max()) if ok.any() else None}
