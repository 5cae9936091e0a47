"""OPIS frame sampling (spec A.3, errata 9) and the ``opis.windows`` aligner.

Timestamps are the decoded frames' presentation times relative to the first frame (the release reads
ffprobe's ``best_effort_timestamp_time``; we read the same per-frame times with PyAV), so a variable-frame-
rate video picks the frames it really shows at each time. ``timestamps: fps`` (or a frame folder, or a
container without timestamps) uses ``i / fps`` instead.

``sampling: stride`` (the release's default): frames with timestamp < 1 s are dropped (the first second is a
near-copy of the input image), with a 1e-9 tolerance so a frame at exactly 1 s survives float rounding;
every 8th remaining frame is kept, starting at the first kept one; at most 64 windows. 241 frames at
24 fps -> 28 windows, 161 at 16 fps -> 19. ``sampling: fps`` is the release's alternative fixed-rate sampler
(``timestamp_sample_indices``, :func:`fixed_fps_indices`): one frame nearest to each tick ``1 s + k / sample_fps``.
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
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


@lru_cache(maxsize=256)
def _decoded_times(path: str, mtime_ns: int, size: int) -> tuple[float, ...]:
    import av

    times: list[float] = []
    with av.open(path) as container:
        stream = container.streams.video[0]
        # one decoder thread, as a worker runs (the same frames; FFmpeg's automatic threads cost more than they
        # give on two cores shared by two workers: ~3x the wall time here)
        stream.thread_count = 1
        for f in container.decode(stream):
            if f.time is not None:
                times.append(float(f.time))
    return tuple(times)


def decoded_timestamps(path: Path | str) -> list[float] | None:
    """Per decoded frame, its presentation time in seconds minus the first frame's, floored at 0.

    None when the file is a frame folder, cannot be read, or carries no timestamps (the caller then uses
    ``i / fps``). Memoised per file (path, mtime, size).
    """
    p = Path(path)
    if not p.is_file():
        return None
    try:
        st = p.stat()
        times = _decoded_times(str(p), st.st_mtime_ns, st.st_size)
    except Exception:  # PyAV raises many error types; all mean "no timeline", the fps fallback applies
        return None
    if not times:
        return None
    start = times[0]
    return [max(0.0, t - start) for t in times]


def fixed_fps_indices(timestamps: Sequence[float], target_fps: float, *, start_time: float = 0.0,
                      max_frames: int | None = None) -> list[int]:
    """The release's fixed-rate sampler: for each tick ``start_time + k / target_fps`` up to the last
    timestamp (``floor((t_last - start) * fps + 1e-9) + 1`` ticks), the nearest frame at or after the first
    frame with ``t >= start_time`` (ties: the earlier frame); a frame picked twice in a row counts once;
    at most ``max_frames`` (<= 0: none)."""
    if target_fps <= 0 or not math.isfinite(target_fps):
        raise CaseFailure(f"opis.windows sample_fps {target_fps!r}: must be a positive number")
    if start_time < 0:
        raise CaseFailure(f"opis.windows skip_s {start_time!r}: must be >= 0")
    if max_frames is not None and max_frames <= 0:
        return []
    ts = [float(t) for t in timestamps]
    if not ts or start_time > ts[-1] + 1e-9:
        return []
    step = 1.0 / float(target_fps)
    ticks = int(math.floor((ts[-1] - start_time) / step + 1e-9)) + 1
    first = bisect_left(ts, start_time)
    out: list[int] = []
    for k in range(ticks):
        target = start_time + k * step
        right = bisect_left(ts, target)
        near = [i for i in (right - 1, right) if first <= i < len(ts)]
        if not near:
            break
        pick = min(near, key=lambda i: (abs(ts[i] - target), i))
        if not out or out[-1] != pick:
            out.append(pick)
        if max_frames is not None and len(out) >= max_frames:
            break
    return out


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
    imports: ClassVar[tuple[str, ...]] = ("av",)  # the decoded frame times of an mp4
    defaults: ClassVar[dict[str, Any]] = {
        "skip_s": SKIP_S,
        "stride": STRIDE,
        "max_windows": MAX_WINDOWS,
        "tolerance": TOLERANCE,
        "default_fps": 16.0,   # when neither the container nor conditions.json states a frame rate
        "timestamps": "decoded",  # decoded frame times (release) | fps: i / fps
        "sampling": "stride",     # stride (release default) | fps: the release's fixed-rate sampler
        "sample_fps": 2.0,        # ticks per second of sampling: fps
    }
    # the shortest video with a frame at 1 s at the default 16 fps (frame 16); faster videos need more
    min_frames: ClassVar[int] = 17

    def align(self, case: Case, params: Mapping[str, Any]) -> Alignment:
        """Windows of the generated video, or of a precomputed ``video_observation.json`` when there is no video."""
        p = merge_typed(self.defaults, params, f"aligner {self.name}")
        if p["timestamps"] not in ("decoded", "fps"):
            raise CaseFailure(f"aligner {self.name}: timestamps {p['timestamps']!r} not in ('decoded', 'fps')")
        if p["sampling"] not in ("stride", "fps"):
            raise CaseFailure(f"aligner {self.name}: sampling {p['sampling']!r} not in ('stride', 'fps')")
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
        times = frame_timestamps(n, fps)
        ts_src = "fps"
        if p["timestamps"] == "decoded":
            decoded = decoded_timestamps(case.video.path)
            if decoded:
                # the decoder may report a different count than the frame reader: keep the shared prefix,
                # frames past the decoded timeline keep i / fps spacing after its last time
                m = min(n, len(decoded))
                times = decoded[:m] + [decoded[m - 1] + (i - m + 1) / float(fps) for i in range(m, n)]
                ts_src = "decoded"
        if p["sampling"] == "fps":
            cap = p["max_windows"] if p["max_windows"] > 0 else None
            picked = fixed_fps_indices(times, float(p["sample_fps"]), start_time=p["skip_s"], max_frames=cap)
            picked = [i for i in picked if times[i] >= p["skip_s"] - p["tolerance"]]
            s = Sampling(picked, [float(times[i]) for i in picked], len(picked), False)
        else:
            s = sample_windows(times, skip_s=p["skip_s"], stride=p["stride"],
                               max_windows=p["max_windows"], tolerance=p["tolerance"])
        if not s.indices:
            raise CaseFailure(f"{case.video.path}: {n} frames at {fps:g} fps leave no frame at or after "
                              f"{p['skip_s']:g} s")
        if s.truncated:
            log.info("%s: %d windows truncated to the first %d", case.key, s.available, p["max_windows"])
        info = {"source": "video", "fps": float(fps), "fps_source": src, "num_frames": int(n),
                "timestamps_source": ts_src, "sampling": p["sampling"],
                "frame_indices": s.indices, "timestamps": s.timestamps, "windows_available": s.available,
                "truncated": s.truncated, "max_windows": p["max_windows"]}
        return Alignment({"windows": Phase("windows", s.indices[0], s.indices[-1])}, info)
