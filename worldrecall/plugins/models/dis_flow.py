"""``dis_flow`` (role flow, classical): OpenCV DIS optical flow on grey frames (preset medium).

Weight-free stand-in for RAFT: dense inverse search (Kroeger et al. 2016) with OpenCV's ``MEDIUM``
preset; forward flow A→B in pixels, ``[H, W, 2]`` float32 (x, y), same convention as ``raft_large``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.plugins.models.options import Options, check_rgb, parse_options

NAME = "dis_flow"
DEFAULTS: dict[str, Any] = {"preset": "medium"}
PRESETS = {"ultrafast": 0, "fast": 1, "medium": 2}  # cv2.DISOPTICAL_FLOW_PRESET_*


class DisFlow:
    """OpenCV DIS optical flow."""

    def __init__(self, options: Options):
        preset = str(options["preset"])
        if preset not in PRESETS:
            raise ValueError(f"{NAME}: preset must be one of {sorted(PRESETS)}, got {preset!r}")
        self.opts = options
        self.preset = PRESETS[preset]
        self._dis: Any = None  # made on first use: a job that only checks the backend exists imports no OpenCV

    @property
    def dis(self) -> Any:
        if self._dis is None:
            import cv2

            self._dis = cv2.DISOpticalFlow_create(self.preset)
        return self._dis

    def flow(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]], *, case: Any = None,
             indices: Sequence[tuple[int, int]] | None = None) -> list[np.ndarray]:
        """``[H, W, 2]`` float32 forward flow per pair."""
        import cv2

        out = []
        for a, b in pairs:
            ga = cv2.cvtColor(check_rgb(a), cv2.COLOR_RGB2GRAY)
            gb = cv2.cvtColor(check_rgb(b), cv2.COLOR_RGB2GRAY)
            if ga.shape != gb.shape:
                raise ValueError(f"{NAME}: pair sizes differ {ga.shape} vs {gb.shape}")
            out.append(np.asarray(self.dis.calc(ga, gb, None), dtype=np.float32))
        return out


def build(opts: Mapping[str, Any]) -> DisFlow:
    """Factory: no weights."""
    return DisFlow(parse_options(NAME, opts, DEFAULTS))
