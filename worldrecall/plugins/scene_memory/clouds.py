"""Point-cloud reconstruction of one trajectory segment from depth and poses (spec B.6).

Up to ``frames_per_segment`` evenly spaced rows per segment, up to ``points_per_frame`` evenly spaced valid
pixels per row (row-major), back-projected with *integer* pixel coordinates (no +0.5 centre shift) and
moved to world coordinates with that row's camera-to-world pose. Everything is deterministic (linspace),
no RNG.

Arithmetic as released (``long_horizon_diagnostics._frame_depth_points``): camera coordinates in float32
(f floored at 1e-8), rotated and shifted in the pose's own dtype (float64 poses for ``memory_scene_f1``,
float32 for the experimental ``scene_f1``), rounded to float32. Rows beyond the depth or mask stack are
skipped, as the release skips them (a sidecar with fewer depth rows than poses scores what it has).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from worldrecall.formats.vipe import Sidecar


def segment_rows(a: int, b: int, frames_per_segment: int = 8) -> np.ndarray:
    """Rows used for segment [a, b): round(linspace(0, b−a−1, min(k, b−a))) + a, de-duplicated, sorted."""
    n = b - a
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.round(np.linspace(0, n - 1, min(max(int(frames_per_segment), 1), n))).astype(np.int64) + a
    return np.unique(idx)


def frame_points(depth: np.ndarray, valid: np.ndarray | None, K: np.ndarray, c2w: np.ndarray,
                 points_per_frame: int = 4096, *, release: bool = False) -> np.ndarray:
    """World points [n,3] of one depth map (valid = mask & finite & depth > 0).

    ``release=False``: float64 throughout (exact geometry, for checks); ``release=True``: the released
    arithmetic (float32 camera points, the pose's dtype for the motion, float32 result).
    """
    z = np.asarray(depth)
    ok = np.isfinite(z) & (z > 0)
    if valid is not None:
        ok &= np.asarray(valid, dtype=bool)
    flat = np.flatnonzero(ok.ravel())  # row-major order
    if flat.size > points_per_frame:
        flat = flat[np.round(np.linspace(0, flat.size - 1, points_per_frame)).astype(np.int64)]
    v, u = np.divmod(flat, z.shape[1])  # v = row, u = column (integer pixel coordinates)
    fx, fy, cx, cy = (float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2]))
    if release:
        if flat.size == 0:
            return np.zeros((0, 3), dtype=np.float32)
        zz = z.ravel()[flat].astype(np.float32)
        x = (u.astype(np.float32) - cx) * zz / max(fx, 1e-8)
        y = (v.astype(np.float32) - cy) * zz / max(fy, 1e-8)
        cam = np.stack([x, y, zz], axis=1).astype(np.float32)
        P = np.asarray(c2w)
        return ((P[:3, :3] @ cam.T).T + P[:3, 3]).astype(np.float32)
    zz = z.ravel()[flat].astype(np.float64)
    cam = np.stack([(u - cx) * zz / fx, (v - cy) * zz / fy, zz], axis=1)
    return cam @ np.asarray(c2w[:3, :3], dtype=np.float64).T + np.asarray(c2w[:3, 3], dtype=np.float64)


def stack_cloud(depth: Any, valid: Any, intrinsics: np.ndarray, poses_c2w: np.ndarray, a: int, b: int, *,
                frames_per_segment: int = 8, points_per_frame: int = 4096
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cloud of rows [a, b) of depth/mask stacks (released arithmetic): (points [n,3] float32, rows used,
    points per row). Rows past the end of ``depth`` or ``valid`` are skipped; row i uses intrinsics
    ``min(i, len − 1)``."""
    rows = [int(r) for r in segment_rows(a, b, frames_per_segment)
            if r < len(depth) and (valid is None or r < len(valid))]
    parts, counts = [], []
    for r in rows:
        K = intrinsics[min(r, len(intrinsics) - 1)]
        p = frame_points(np.asarray(depth[r]), None if valid is None else np.asarray(valid[r]), K,
                         poses_c2w[r], points_per_frame, release=True)
        parts.append(p)
        counts.append(len(p))
    pts = np.concatenate(parts, axis=0) if parts else np.zeros((0, 3), dtype=np.float32)
    return pts.astype(np.float32, copy=False), np.asarray(rows, dtype=np.int64), np.asarray(counts, dtype=np.int64)


def segment_cloud(sc: Sidecar, a: int, b: int, *, frames_per_segment: int = 8,
                  points_per_frame: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cloud of rows [a, b) of a sidecar read with depth: see :func:`stack_cloud`."""
    if sc.depth is None:
        raise ValueError("segment_cloud needs a sidecar read with depth")
    return stack_cloud(sc.depth, sc.valid, sc.intrinsics, sc.poses_c2w, a, b,
                       frames_per_segment=frames_per_segment, points_per_frame=points_per_frame)
