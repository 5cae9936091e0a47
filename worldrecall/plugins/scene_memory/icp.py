"""Bounded, trimmed point-to-point ICP without scale (spec B.7 step 3), on scipy's exact cKDTree.

Each iteration matches every moving point to its nearest target point, keeps the ⌈trim·n⌉ (≥ 3) closest
pairs, solves the best rigid transform on them (Kabsch/SVD of the *centred* covariance, reflection
fixed) and composes it into the running total. The result is only accepted when the total stays small —
‖t‖ ≤ ratio × target bbox diagonal (floored at 1e-8, errata 2) and angle(R) ≤ max_rotation_deg —
otherwise the caller keeps the unaligned cloud.

Two implementations of the same procedure:

* :func:`trimmed_icp_release` follows the released code step for step (``long_horizon_diagnostics.
  trimmed_icp_align``): float64 arithmetic, neighbour search on float32-rounded points, the kept pairs
  chosen by ``np.argpartition`` (ties at the cut resolve as the partition resolves them) over the full
  cloud in input order. Used by official-parity scoring, where every bit matters.
* :func:`trimmed_icp` (default scoring) is the same algorithm on de-duplicated clouds with multiplicity
  weights, pruned searches and a stable trim cut: about 2–3x faster, identical up to tie-breaking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # scipy is imported where a kernel runs: a rerun that only re-scores never loads it
    from scipy.spatial import cKDTree


def kd_tree(points: np.ndarray, **options: object) -> cKDTree:
    """scipy's exact ``cKDTree`` of ``points``; scipy is imported here, where a kernel first runs, so a job that
    only re-scores cached measurements never loads it."""
    from scipy.spatial import cKDTree

    return cKDTree(points, **options)


class ICPError(ValueError):
    """ICP cannot run (fewer than 3 points in a cloud)."""


@dataclass
class ICPResult:
    """Total rigid motion found by :func:`trimmed_icp` and whether it passed the sanity bounds."""

    R: np.ndarray            # [3,3] total rotation (source -> target)
    t: np.ndarray            # [3] total translation
    iterations: int
    error: float             # mean kept NN distance of the last iteration (before its update)
    translation: float       # ‖t‖
    rotation_deg: float      # angle(R)
    translation_bound: float
    accepted: bool


def kabsch(src: np.ndarray, dst: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rigid (R, t) minimising Σ w‖R·src + t − dst‖² (centred SVD; flip the last singular vector if det < 0).

    ``weights`` (default all 1) count repeated points, so a de-duplicated cloud gives the same answer.
    The covariance is built from centred copies: the uncentred shortcut ΣsdᵀW − W·m_s m_dᵀ cancels
    catastrophically far from the origin (the release centres, and accepts alignments it would reject).
    """
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    if weights is None:
        ms, md = src.mean(axis=0), dst.mean(axis=0)
        H = (src - ms).T @ (dst - md)
    else:
        w = np.asarray(weights, dtype=np.float64)
        W = float(w.sum())
        ms, md = (w @ src) / W, (w @ dst) / W
        H = ((src - ms) * w[:, None]).T @ (dst - md)
    U, _, Vt = np.linalg.svd(H)
    R = Vt.T @ U.T
    if np.linalg.det(R) < 0:
        Vt[-1] *= -1.0
        R = Vt.T @ U.T
    return R, md - R @ ms


def nn_distances(tree: cKDTree, target: np.ndarray, query: np.ndarray, dtype: type = np.float64,
                 upper_bound: float = math.inf) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest neighbours of ``query`` in ``tree``; ``dtype=np.float32`` rounds the distances to float32.

    The released code takes scipy's float64 distance between float32 points and casts it to float32
    (not a float32 recomputation, which can differ in the last bit). Neighbours farther than
    ``upper_bound`` are not searched for: their distance is inf (index = len(target)).
    """
    d, idx = tree.query(query, k=1, workers=1, distance_upper_bound=upper_bound)
    if dtype is np.float32:
        d = d.astype(np.float32)
    return d, idx


def spatial_order(points: np.ndarray) -> np.ndarray:
    """A permutation putting points in kd-tree leaf order: queries in this order hit the cache far better."""
    if len(points) < 2:
        return np.arange(len(points))
    return kd_tree(points, leafsize=32).indices.astype(np.int64)


def _trim(d: np.ndarray, keep_n: int, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """The keep_n smallest distances: (rows, per-row kept multiplicity or None when every weight is 1)."""
    n = len(d)
    if weights is None:
        return (np.argpartition(d, keep_n - 1)[:keep_n] if keep_n < n else np.arange(n)), None
    order = np.argsort(d, kind="stable")
    cw = np.cumsum(weights[order])
    cut = int(np.searchsorted(cw, keep_n))  # first position where the running count reaches keep_n
    rows = order[: cut + 1]
    kw = weights[rows].astype(np.float64)
    kw[-1] -= float(cw[cut] - keep_n)  # only part of a repeated boundary point is kept
    return rows, kw


def trimmed_icp(source: np.ndarray, target: np.ndarray, *, tree: cKDTree | None = None,
                weights: np.ndarray | None = None, max_iterations: int = 20, trim: float = 0.8,
                tolerance: float = 1e-5, max_translation_ratio: float = 0.10, max_rotation_deg: float = 10.0,
                dtype: type = np.float64, target_count: int | None = None) -> ICPResult:
    """Align ``source`` [n,3] onto ``target`` [m,3]; ``tree`` may be a prebuilt cKDTree of ``target``.

    ``weights`` [n] are integer multiplicities of the source rows (a de-duplicated cloud); the result is
    the one of the expanded cloud. The target may be de-duplicated freely (nearest distances do not
    change); ``target_count`` is then its size with repeats (fewer than 3 *distinct* points still run).
    """
    w = None if weights is None else np.asarray(weights, dtype=np.int64)
    n = len(source) if w is None else int(w.sum())
    n_target = len(target) if target_count is None else int(target_count)
    if n < 3 or n_target < 3:  # counted with repeats: the release checks the full clouds
        raise ICPError(f"trimmed ICP needs at least 3 points per cloud (got {n} and {n_target})")
    trim = min(max(float(trim), 0.1), 1.0)
    tgt = np.asarray(target, dtype=dtype)
    cur = np.asarray(source, dtype=dtype).copy()
    tree = tree if tree is not None else kd_tree(tgt, leafsize=32)
    keep_n = max(3, min(n, math.ceil(trim * n)))
    R_tot, t_tot = np.eye(3), np.zeros(3)
    err_prev, err, it = math.inf, math.inf, 0
    search = math.inf
    center = cur.mean(axis=0, dtype=np.float64)
    radius = float(np.sqrt(np.einsum("ij,ij->i", cur - center, cur - center, dtype=np.float64).max()))
    for it in range(1, max(int(max_iterations), 1) + 1):
        # Pruned search (about 25 % fewer tree visits): after a move of at most Δ, the keep_n points kept
        # last time are within kth_prev + Δ of their old partner, so at least keep_n points have a
        # neighbour within that bound. Farther points come back as inf. Whenever ≥ keep_n distances are
        # finite, the keep_n smallest of them are the keep_n smallest overall, so trimming stays exact;
        # otherwise (never expected) search again without the bound.
        d, idx = nn_distances(tree, tgt, cur, dtype, upper_bound=search)
        if search < math.inf:
            fin = np.isfinite(d)
            if (int(fin.sum()) if w is None else int(w[fin].sum())) < keep_n:
                d, idx = nn_distances(tree, tgt, cur, dtype)
        rows, kw = _trim(d, keep_n, w)
        err = float(np.mean(d[rows], dtype=np.float64)) if kw is None else float(kw @ d[rows]) / keep_n
        R, t = kabsch(cur[rows], tgt[idx[rows]], kw)
        cur = (cur @ R.T.astype(dtype) + t.astype(dtype)).astype(dtype, copy=False)
        # largest point move of this rigid step, bounded without touching the points: a point at
        # distance ≤ radius from the (co-moving) centroid moves ≤ ‖R − I‖·radius + centroid shift
        new_center = R @ center + t
        ang = math.acos(min(1.0, max(-1.0, (float(np.trace(R)) - 1.0) / 2.0)))
        step = 2.0 * math.sin(ang / 2.0) * radius + float(np.linalg.norm(new_center - center))
        center = new_center
        search = (float(d[rows].max()) + step) * (1.0 + 1e-6) + 1e-9 * (radius + 1.0)
        R_tot, t_tot = R @ R_tot, R @ t_tot + t
        if abs(err_prev - err) <= tolerance:
            break
        err_prev = err
    lo, hi = tgt.min(axis=0).astype(np.float64), tgt.max(axis=0).astype(np.float64)
    bound = max(max_translation_ratio * float(np.linalg.norm(hi - lo)), 1e-8)
    tn = float(np.linalg.norm(t_tot))
    ang = float(np.degrees(np.arccos(np.clip((np.trace(R_tot) - 1.0) / 2.0, -1.0, 1.0))))
    return ICPResult(R_tot, t_tot, it, err, tn, ang, bound, bool(tn <= bound and ang <= max_rotation_deg))


def trimmed_icp_release(source: np.ndarray, target: np.ndarray, *, max_iterations: int = 20, trim: float = 0.8,
                        tolerance: float = 1e-5, max_translation_ratio: float = 0.10,
                        max_rotation_deg: float = 10.0) -> tuple[ICPResult, np.ndarray]:
    """The released trimmed ICP, operation for operation: (result, aligned source as float32).

    ``source`` and ``target`` are float32 clouds (finite rows). The moving cloud is carried in float64;
    each iteration searches neighbours for its float32 rounding in a kd-tree of the float32 target, keeps
    ``np.argpartition``'s first ⌈trim·n⌉ (≥ 3) rows, solves Kabsch on the float64 points and moves the
    float64 cloud. The aligned cloud returned is that iterated cloud rounded to float32 when accepted,
    else the input.
    """
    src32 = np.asarray(source, dtype=np.float32)
    tgt32 = np.asarray(target, dtype=np.float32)
    if len(src32) < 3 or len(tgt32) < 3:
        raise ICPError(f"trimmed ICP needs at least 3 points per cloud (got {len(src32)} and {len(tgt32)})")
    moving = src32.astype(np.float64)
    fixed = tgt32.astype(np.float64)
    tree = kd_tree(tgt32)  # the release builds this tree every iteration: same data, same tree
    keep_fraction = min(max(float(trim), 0.1), 1.0)
    R_tot, t_tot = np.eye(3), np.zeros(3)
    err_prev, err, it = math.inf, math.inf, 0
    for it in range(1, max(int(max_iterations), 1) + 1):
        d, idx = tree.query(moving.astype(np.float32), k=1)
        d = d.astype(np.float64)
        keep_n = max(3, math.ceil(len(d) * keep_fraction))
        keep = np.argpartition(d, keep_n - 1)[:keep_n]
        R, t = kabsch(moving[keep], fixed[idx[keep]])
        moving = (R @ moving.T).T + t
        t_tot = R @ t_tot + t
        R_tot = R @ R_tot
        err = float(np.mean(d[keep]))
        if abs(err_prev - err) <= float(tolerance):
            break
        err_prev = err
    diag = float(np.linalg.norm(np.ptp(fixed, axis=0)))
    bound = max(diag * float(max_translation_ratio), 1e-8)
    tn = float(np.linalg.norm(t_tot))
    ang = math.degrees(math.acos(float(np.clip((np.trace(R_tot) - 1.0) * 0.5, -1.0, 1.0))))
    ok = bool(tn <= bound and ang <= float(max_rotation_deg))
    res = ICPResult(R_tot, t_tot, it, err, tn, ang, bound, ok)
    return res, (moving.astype(np.float32) if ok else src32)
