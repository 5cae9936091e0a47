"""``poses_npy`` (role pose, sidecar): c2w poses from one ``.npy`` stack per video, e.g. the WRBench release's
pose cache (``<cache>/pose/<video_id>/poses.npy`` from VGGT-Omega, OpenCV c2w). The loader attaches the file
as the case's ``poses_npy`` sidecar; one row per generated frame is required.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure
from worldrecall.formats.arrays import load_npy
from worldrecall.plugins.models.options import Options, parse_options

NAME = "poses_npy"
KEY = "poses_npy"


def preflight(case: Any) -> str | None:
    """None when the case names a pose stack, else why not."""
    return None if KEY in (getattr(case, "sidecars", None) or {}) else \
        f"{getattr(case, 'case_id', '?')}: no pose_path (.npy c2w stack) for backend {NAME}"


class NpyPoses:
    """The case's ``poses_npy`` stack, rows picked by generated-frame index."""

    def __init__(self, options: Options):
        self.opts = options

    def poses(self, frames: Sequence[np.ndarray], *, case: Any = None,
              indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, 4, 4]`` float64 c2w rows of the requested frames."""
        path = Path((getattr(case, "sidecars", None) or {}).get(KEY) or "")
        if not str(path) or not path.is_file():
            raise CaseFailure(preflight(case) or f"{path}: pose stack missing")
        arr = np.asarray(load_npy(path), dtype=np.float64)
        if arr.ndim != 3 or arr.shape[1:] not in ((4, 4), (3, 4)):
            raise CaseFailure(f"{path}: expected a [N, 4, 4] or [N, 3, 4] c2w stack, got {arr.shape}")
        video = getattr(case, "video", None)
        if video is not None and len(arr) != int(video.num_frames):   # a stack of another video, or cut
            raise CaseFailure(f"{path}: {len(arr)} poses for a video of {video.num_frames} frames (one per frame)")
        if not np.all(np.isfinite(arr)):
            raise CaseFailure(f"{path}: pose {int(np.flatnonzero(~np.isfinite(arr).all(axis=(1, 2)))[0])} "
                              "is not finite")
        if arr.shape[1] == 4 and not np.allclose(arr[:, 3, :], [0.0, 0.0, 0.0, 1.0], atol=1e-6):
            raise CaseFailure(f"{path}: a pose's bottom row is not [0, 0, 0, 1]")
        idx = list(range(len(frames))) if indices is None else [int(i) for i in indices]
        if idx and max(idx) >= len(arr):
            raise CaseFailure(f"{path}: {len(arr)} poses but frame {max(idx)} was asked for")
        out = np.tile(np.eye(4), (len(idx), 1, 1))
        out[:, :arr.shape[1], :] = arr[idx]
        return out


def build(opts: Mapping[str, Any]) -> NpyPoses:
    """Factory: no weights."""
    return NpyPoses(parse_options(NAME, opts, {}))
