"""The release's camera-motion summary (``v3.geometry.summarize_camera_motion``, A.5 step 9): diagnostic only.

Each scored frame contributes its displacement fraction (median distance between the fitted projection and
the resized initial pixel of the holdout background inliers, over the frame diagonal). A frame *moves* when
that fraction is >= 0.01. The video is motion-valid when moving frames are >= 50 % of **all** frames — a frame
without a reliable camera is missing evidence and counts as not moving, as in the release — provided at
least 3 frames (and, optionally, a minimum share of frames) have a valid camera; otherwise undecided (None).
It never gates a score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from worldrecall.plugins.opis.records import WindowGeometry

MIN_DISPLACEMENT_FRACTION = 0.01
MIN_MOVING_FRAME_FRACTION = 0.50
MIN_GEOMETRY_FRAMES = 3


def frame_displacement(geometry: WindowGeometry | None) -> float | None:
    """A scored frame's displacement fraction (finite, >= 0), else None.

    Measurements archived before the fraction was stored only carry the boolean ``moves`` flag: it stands in
    as 1.0 (moving) / 0.0 (still), which decides the same way at the default threshold.
    """
    if geometry is None or not geometry.scored:
        return None
    v = geometry.displacement_fraction
    if v is None and geometry.moves is not None:
        v = 1.0 if geometry.moves else 0.0
    if v is None or isinstance(v, bool) or not math.isfinite(float(v)) or float(v) < 0:
        return None
    return float(v)


def summarize_camera_motion(frames: Sequence[WindowGeometry | None], *,
                            min_displacement_fraction: float = MIN_DISPLACEMENT_FRACTION,
                            min_moving_frame_fraction: float = MIN_MOVING_FRAME_FRACTION,
                            min_geometry_frames: int = MIN_GEOMETRY_FRAMES,
                            min_geometry_coverage: float | None = None) -> dict[str, Any]:
    """Motion summary over every sampled frame (``None`` = geometry not run for it), in frame order.

    Returns ``motion_valid`` (True / False / None), ``reason`` (``camera_change_detected``,
    ``insufficient_camera_change`` or ``insufficient_camera_evidence``), ``n_frames``, ``n_valid_frames``,
    ``coverage`` (valid / all frames), ``moving_frame_fraction`` (moving / **all** frames) and the per-frame
    fractions (keyed by frame position).
    """
    values = {str(k): v for k, v in ((k, frame_displacement(g)) for k, g in enumerate(frames)) if v is not None}
    n = len(frames)
    coverage = len(values) / n if n else 0.0
    moving = sum(v >= min_displacement_fraction for v in values.values())
    enough = len(values) >= min_geometry_frames and (min_geometry_coverage is None or coverage >= min_geometry_coverage)
    moving_fraction = moving / n if n else 0.0
    valid = bool(moving_fraction >= min_moving_frame_fraction) if enough else None
    reason = ("insufficient_camera_evidence" if not enough
              else "camera_change_detected" if valid else "insufficient_camera_change")
    return {"motion_valid": valid, "reason": reason, "n_frames": n, "n_valid_frames": len(values),
            "coverage": coverage, "moving_frame_fraction": moving_fraction, "frame_displacement_fraction": values,
            "min_displacement_fraction": min_displacement_fraction,
            "min_moving_frame_fraction": min_moving_frame_fraction}
