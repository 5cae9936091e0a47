"""``sift`` (role local_features, classical): SIFT keypoints matched with Lowe's ratio test, best first.

What ``memory_loop.geometric_closure_for_pair`` runs on each revisit pair: OpenCV SIFT (default
parameters) on the grey frames, brute-force L2 2-NN matching, a match kept when its distance is below
``ratio`` (0.75) times the second-best's, the kept matches sorted by distance (ties keep query order).
The metric cuts the list to the first N it uses. Weight-free, and the released algorithm itself, so it is
the default in both backend sets; a learned extractor/matcher can fill the role instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.plugins.models.options import Options, check_rgb, parse_options

NAME = "sift"
DEFAULTS: dict[str, Any] = {"ratio": 0.75}


class SiftMatches:
    """The local_features role with OpenCV SIFT + brute-force ratio-test matching."""

    def __init__(self, options: Options):
        ratio = float(options["ratio"])
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"{NAME}: ratio must be in (0, 1], got {ratio}")
        self.opts, self.ratio = options, ratio
        self._cv: tuple[Any, Any] | None = None  # made on first use: checking the backend exists imports no OpenCV

    def _tools(self) -> tuple[Any, Any]:
        """SIFT (detectAndCompute keeps no state between images) and the brute-force L2 matcher."""
        if self._cv is None:
            import cv2

            self._cv = (cv2.SIFT_create(), cv2.BFMatcher(cv2.NORM_L2))
        return self._cv

    def _features(self, frame: np.ndarray) -> tuple[Any, np.ndarray | None]:
        import cv2

        return self._tools()[0].detectAndCompute(cv2.cvtColor(check_rgb(frame), cv2.COLOR_RGB2GRAY), None)

    def _match_one(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ka, da = self._features(a)
        kb, db = self._features(b)
        empty = np.zeros((0, 2), np.float64)
        if da is None or db is None or len(ka) < 2 or len(kb) < 2:
            return empty, empty.copy()
        found: list[tuple[float, int, int]] = []
        for m in self._tools()[1].knnMatch(da, db, k=2):
            if len(m) < 2:
                continue
            best, second = m
            if best.distance < self.ratio * second.distance:
                found.append((best.distance, best.queryIdx, best.trainIdx))
        if not found:
            return empty, empty.copy()
        found.sort(key=lambda x: x[0])  # stable: equal distances keep query order
        pa = np.asarray([ka[q].pt for _, q, _ in found], dtype=np.float64)
        pb = np.asarray([kb[t].pt for _, _, t in found], dtype=np.float64)
        return pa, pb

    def match(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]], *, case: Any = None,
              indices: Sequence[tuple[int, int]] | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per pair ``(pa, pb)``: matched pixel positions ``[n, 2]`` float64 in each frame, best first."""
        return [self._match_one(a, b) for a, b in pairs]


def build(opts: Mapping[str, Any]) -> SiftMatches:
    """Factory: no weights."""
    return SiftMatches(parse_options(NAME, opts, DEFAULTS))
