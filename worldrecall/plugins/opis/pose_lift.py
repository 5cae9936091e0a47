"""Pose-landmark edge lengths for the dynamic Structure track (spec A.11.2, measure side).

Keypoints (17, from the ``pose_landmarks`` role) are lifted to 3-D with the image's single-image geometry
when: confidence >= 0.5; inside the target box; the pixel is valid (and inside the instance mask when one
is known); >= 75 % of its 3x3 neighbourhood is valid; the neighbourhood's depth spread
(max - min) / median <= 0.1. An edge's length is the 3-D distance between its two lifted endpoints (NaN
otherwise). The score side (``structure.pose_value``) compares reference and current lengths.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from worldrecall.plugins.opis.geometry import MonoGeometry

KEYPOINT_CONFIDENCE_MIN = 0.5
NEIGHBOURHOOD_VALID_MIN = 0.75
DEPTH_SPREAD_MAX = 0.1

#: COCO-17: both upper/lower arms, both upper/lower legs, shoulder-shoulder, hip-hip (10 edges).
HUMAN_EDGES: dict[str, tuple[int, int]] = {
    "l_upper_arm": (5, 7), "l_forearm": (7, 9), "r_upper_arm": (6, 8), "r_forearm": (8, 10),
    "l_thigh": (11, 13), "l_shin": (13, 15), "r_thigh": (12, 14), "r_shin": (14, 16),
    "shoulders": (5, 6), "hips": (11, 12),
}
#: AP-10K-17: front/back, left/right, upper/lower limb segments (8 edges; neck-tail deliberately excluded).
ANIMAL_EDGES: dict[str, tuple[int, int]] = {
    "lf_upper": (5, 6), "lf_lower": (6, 7), "rf_upper": (8, 9), "rf_lower": (9, 10),
    "lb_upper": (11, 12), "lb_lower": (12, 13), "rb_upper": (14, 15), "rb_lower": (15, 16),
}
TEMPLATES = {"human": HUMAN_EDGES, "animal": ANIMAL_EDGES}


def lift_keypoints(xy: np.ndarray, conf: np.ndarray, geometry: MonoGeometry, bbox: Sequence[float],
                   mask: np.ndarray | None = None) -> np.ndarray:
    """[K, 3] camera-frame points of the keypoints that pass every lifting test (NaN rows otherwise)."""
    xy = np.asarray(xy, np.float64).reshape(-1, 2)
    conf = np.asarray(conf, np.float64).reshape(-1)
    W, H = geometry.size
    valid = np.asarray(geometry.valid, bool)
    depth = np.asarray(geometry.depth, np.float64)
    out = np.full((len(xy), 3), np.nan)
    for k, ((x, y), c) in enumerate(zip(xy, conf)):
        if not (np.isfinite(x) and np.isfinite(y) and c >= KEYPOINT_CONFIDENCE_MIN):
            continue
        if not (bbox[0] <= x <= bbox[2] and bbox[1] <= y <= bbox[3]):
            continue
        xi, yi = round(x), round(y)
        if not (0 <= xi < W and 0 <= yi < H) or not valid[yi, xi]:
            continue
        if mask is not None and not bool(mask[yi, xi]):
            continue
        ys, xs = np.mgrid[yi - 1:yi + 2, xi - 1:xi + 2]
        inside = (xs >= 0) & (xs < W) & (ys >= 0) & (ys < H)
        nb_valid = np.zeros(9, bool)
        nb_valid[inside.ravel()] = valid[ys[inside], xs[inside]]
        if nb_valid.mean() < NEIGHBOURHOOD_VALID_MIN:
            continue
        d = depth[ys[inside], xs[inside]][valid[ys[inside], xs[inside]]]
        med = float(np.median(d))
        if med <= 0 or (float(d.max()) - float(d.min())) / med > DEPTH_SPREAD_MAX:
            continue
        out[k] = geometry.points_at(np.array([[xi, yi]], np.float64))[0]
    return out


def edge_lengths(points: np.ndarray, template: str) -> np.ndarray:
    """[E] 3-D lengths of the template's edges (NaN where an endpoint was not lifted)."""
    edges = TEMPLATES[template]
    p = np.asarray(points, np.float64)
    out = np.full(len(edges), np.nan)
    for e, (a, b) in enumerate(edges.values()):
        if a < len(p) and b < len(p) and np.isfinite(p[a]).all() and np.isfinite(p[b]).all():
            out[e] = float(np.linalg.norm(p[a] - p[b]))
    return out
