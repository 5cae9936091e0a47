"""OPIS frame sampling (spec A.3, errata 9) and the ``opis.windows`` aligner.

Frames with timestamp < 1 s are dropped (the first second is a near-copy of the input image), with a
1e-9 tolerance so a frame at exactly 1 s survives float rounding; every 8th remaining frame is kept,
starting at the first kept one; at most 64 windows. 241 frames at 24 fps -> 28 windows, 161 at 16 fps -> 19.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from worldrecall.core.components import Aligner, merge_typed
from worldrecall.core.data import Alignment, Case, CaseFailure, Phase

log = logging.getLogger(__name__)

SKIP_S = 1.0
STRIDE = 8
MAX_WINDOWS = 64
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Sampling:
    """Sampled frames of one video: indices, their timestamps, and whether the cap truncated them."""

    indices: list[int]
    timestamps: list[float]
    available: int          # windows before the cap
    truncated: bool


def frame_timestamps(n_frames: int, fps: float) -> list[float]:
    """Constant-rate timestamps ``i / fps`` of ``n_frames`` frames."""
    if fps <= 0 or not math.isfinite(fps):
        raise CaseFailure(f"fps {fps!r}: must be a positive number")
    return [i / float(fps) for i in range(int(n_frames))]


def sample_windows(timestamps: Sequence[float], *, skip_s: float = SKIP_S, stride: int = STRIDE,
                   max_windows: int = MAX_WINDOWS, tolerance: float = TOLERANCE) -> Sampling:
    """A.3: drop frames with ``t < skip_s - tolerance``, keep every ``stride``-th, cap at ``max_windows``.

    ``max_windows <= 0`` means no cap.
    """
    if stride < 1:
        raise CaseFailure(f"opis.windows stride {stride}: must be >= 1")
    kept = [i for i, t in enumerate(timestamps) if float(t) >= skip_s - tolerance]
    picked = kept[::stride]
    available = len(picked)
    truncated = max_windows > 0 and available > max_windows
    if truncated:
        picked = picked[:max_windows]
    return Sampling(picked, [float(timestamps[i]) for i in picked], available, truncated)


class WindowsAligner(Aligner):
    """``opis.windows``: the sampled windows (A.3) of the generated video, recorded in the alignment info."""

    name = "opis.windows"
    description = "OPIS frame sampling: skip the first 1 s (1e-9 tolerance), stride 8, at most 64 windows"
    defaults: ClassVar[dict[str, Any]] = {
        "skip_s": SKIP_S,
        "stride": STRIDE,
        "max_windows": MAX_WINDOWS,
        "tolerance": TOLERANCE,
        "default_fps": 16.0,   # when neither the container nor conditions.json states a frame rate
    }
    # the shortest video with a frame at 1 s at the default 16 fps (frame 16); faster videos need more
    min_frames: ClassVar[int] = 17

    def align(self, case: Case, params: Mapping[str, Any]) -> Alignment:
        """Windows of the generated video, or of a precomputed ``video_observation.json`` when there is no video."""
        p = merge_typed(self.defaults, params, f"aligner {self.name}")
        if case.video is None:
            if "video_observation" in case.sidecars:
                return Alignment({}, {"source": "video_observation", "frame_indices": [], "timestamps": [],
                                      "truncated": False})
            raise CaseFailure(f"{case.case_id}: no generated video and no video_observation.json")
        fps, src = None, "default"
        try:
            fps = case.video.fps
            src = "video" if fps else src
        except (OSError, ValueError, RuntimeError):  # an unreadable container: fall back below
            fps = None
        if not fps and isinstance(case.annotations.get("fps"), (int, float)) and case.annotations["fps"] > 0:
            fps, src = float(case.annotations["fps"]), "conditions"
        if not fps:
            fps = p["default_fps"]
        n = case.video.num_frames
        s = sample_windows(frame_timestamps(n, fps), skip_s=p["skip_s"], stride=p["stride"],
                           max_windows=p["max_windows"], tolerance=p["tolerance"])
        if not s.indices:
            raise CaseFailure(f"{case.video.path}: {n} frames at {fps:g} fps leave no frame at or after "
                              f"{p['skip_s']:g} s")
        if s.truncated:
            log.info("%s: %d windows truncated to the first %d", case.key, s.available, p["max_windows"])
        info = {"source": "video", "fps": float(fps), "fps_source": src, "num_frames": int(n),
                "frame_indices": s.indices, "timestamps": s.timestamps, "windows_available": s.available,
                "truncated": s.truncated, "max_windows": p["max_windows"]}
        return Alignment({"windows": Phase("windows", s.indices[0], s.indices[-1])}, info)
