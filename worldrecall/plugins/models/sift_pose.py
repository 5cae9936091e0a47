"""``sift_pose`` (role pose, classical): SIFT matches + ratio test → relative rotations → chained c2w.

Weight-free. Consecutive frames are matched (OpenCV SIFT on grey frames, brute-force L2 k=2 matching,
Lowe's ratio test), each pair's rotation comes from ``relative_pose`` (rotation homography / essential
matrix with intrinsics guessed from the frame size), and the rotations are chained from frame 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.plugins.models.options import Options, check_rgb, parse_options
from worldrecall.plugins.models.relative_pose import (
    PoseTrace,
    ReportsQuality,
    chain_c2w,
    guess_intrinsics,
    relative_rotation,
)

NAME = "sift_pose"
DEFAULTS: dict[str, Any] = {"fov_deg": 60.0, "ratio": 0.75, "nfeatures": 4000, "ransac_px": 1.0,
                            "method": "auto", "min_matches": 8}


class SiftPose(ReportsQuality):
    """Camera-to-world rotations of a frame sequence from SIFT matches."""

    def __init__(self, options: Options):
        import cv2

        self.opts = options
        self.sift = cv2.SIFT_create(nfeatures=int(options["nfeatures"]))
        self.matcher = cv2.BFMatcher(cv2.NORM_L2)
        self.trace = PoseTrace()

    def _features(self, frame: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        import cv2

        grey = cv2.cvtColor(check_rgb(frame), cv2.COLOR_RGB2GRAY)
        kps, desc = self.sift.detectAndCompute(grey, None)
        return np.array([k.pt for k in kps], dtype=np.float64).reshape(-1, 2), desc

    def match(self, f0: tuple[np.ndarray, Any], f1: tuple[np.ndarray, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Matched pixel coordinates ``([M, 2], [M, 2])`` passing the ratio test."""
        (k0, d0), (k1, d1) = f0, f1
        if d0 is None or d1 is None or len(d0) < 2 or len(d1) < 2:
            return np.zeros((0, 2)), np.zeros((0, 2))
        good = [m for m, n in (p for p in self.matcher.knnMatch(d0, d1, k=2) if len(p) == 2)
                if m.distance < float(self.opts["ratio"]) * n.distance]
        return (k0[[m.queryIdx for m in good]].reshape(-1, 2), k1[[m.trainIdx for m in good]].reshape(-1, 2))

    def poses(self, frames: Sequence[np.ndarray], *, case: Any = None,
              indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, 4, 4]`` c2w (OpenCV axes), frame 0 = identity, zero translations."""
        o = self.opts
        self.trace = PoseTrace()
        if len(frames) == 0:
            return np.zeros((0, 4, 4))
        h, w = np.asarray(frames[0]).shape[:2]
        k = guess_intrinsics(w, h, float(o["fov_deg"]))
        prev = self._features(frames[0])
        rels = []
        for f in frames[1:]:  # one frame's features in memory at a time
            cur = self._features(f)
            p0, p1 = self.match(prev, cur)
            res = relative_rotation(p0, p1, k, method=str(o["method"]), ransac_px=float(o["ransac_px"]),
                                    min_matches=int(o["min_matches"]))
            self.trace.pairs.append(res)
            rels.append(res.rotation)
            prev = cur
        return chain_c2w(rels)


def build(opts: Mapping[str, Any]) -> SiftPose:
    """Factory: no weights."""
    return SiftPose(parse_options(NAME, opts, DEFAULTS))
