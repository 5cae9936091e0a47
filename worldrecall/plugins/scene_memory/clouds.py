"""Point-cloud reconstruction of one trajectory segment from sidecar depth and poses (spec B.6).

Up to ``frames_per_segment`` evenly spaced rows per segment, up to ``points_per_frame`` evenly spaced valid
pixels per row (row-major), back-projected with *integer* pixel coordinates (no +0.5 centre shift) and
moved to world coordinates with that row's camera-to-world pose. Everything is deterministic (linspace),
no RNG.
"""

from __future__ import annotations

import numpy as np

from worldrecall.formats.vipe import Sidecar


def segment_rows(a: int, b: int, frames_per_segment: int = 8) -> np.ndarray:
    """Rows used for segment [a, b): round(linspace(0, b−a−1, min(k, b−a))) + a, de-duplicated, sorted."""
    n = b - a
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.round(np.linspace(0, n - 1, min(frames_per_segment, n))).astype(np.int64) + a
    return np.unique(idx)


def frame_points(depth: np.ndarray, valid: np.ndarray | None, K: np.ndarray, c2w: np.ndarray,
                 points_per_frame: int = 4096) -> np.ndarray:
    """World points [n,3] float64 of one depth map (valid = mask & finite & depth > 0)."""
    z = np.asarray(depth, dtype=np.float64)
    ok = np.isfinite(z) & (z > 0)
    if valid is not None:
        ok &= np.asarray(valid, dtype=bool)
    flat = np.flatnonzero(ok.ravel())  # row-major order
    if flat.size > points_per_frame:
        flat = flat[np.round(np.linspace(0, flat.size - 1, points_per_frame)).astype(np.int64)]
    v, u = np.divmod(flat, z.shape[1])  # v = row, u = column (integer pixel coordinates)
    zz = z.ravel()[flat]
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    cam = np.stack([(u - cx) * zz / fx, (v - cy) * zz / fy, zz], axis=1)
    return cam @ np.asarray(c2w[:3, :3], dtype=np.float64).T + np.asarray(c2w[:3, 3], dtype=np.float64)


def segment_cloud(sc: Sidecar, a: int, b: int, *, frames_per_segment: int = 8,
                  points_per_frame: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cloud of rows [a, b) of a sidecar: (points [n,3] float32, rows used, points per row)."""
    rows = segment_rows(a, b, frames_per_segment)
    if sc.depth is None:
        raise ValueError("segment_cloud needs a sidecar read with depth")
    parts, counts = [], []
    for r in rows:
        p = frame_points(sc.depth[r], None if sc.valid is None else sc.valid[r], sc.intrinsics[r],
                         sc.poses_c2w[r], points_per_frame)
        parts.append(p)
        counts.append(len(p))
    pts = np.concatenate(parts, axis=0) if parts else np.zeros((0, 3))
    return pts.astype(np.float32), rows, np.asarray(counts, dtype=np.int64)
