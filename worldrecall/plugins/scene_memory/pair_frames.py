"""Frames of the memory_loop suite's revisit pairs, and the pixel comparisons the suite shares.

Only the paired frames are decoded (``memory_loop.analyze_memory_rollout``): a pair whose sidecar rows map
past the video's last frame is dropped. ``resize_like`` and ``ssim_rgb`` are the released
``legacy._resize_like`` / ``legacy._ssim_rgb`` (bicubic resize of frame B to frame A; per-channel
Gaussian-window SSIM in float32, denominator floored at 1e-12, channel mean clamped to [0, 1]).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.data import Case, CaseFailure


def usable_pairs(pairs: Sequence[Mapping[str, Any]], n_video_frames: int) -> list[dict[str, Any]]:
    """The pairs whose two frames exist in the decoded video (in their given order)."""
    return [dict(p) for p in pairs
            if int(p["first_frame"]) < n_video_frames and int(p["revisit_frame"]) < n_video_frames]


def pair_frames(case: Case, pairs: Sequence[Mapping[str, Any]]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(frames A, frames B) of the pairs, RGB uint8 at the video's own size."""
    if case.video is None:
        raise CaseFailure(f"{case.case_id}: the memory_loop pair metrics need the generated video")
    a = [np.asarray(case.video.frame(int(p["first_frame"]))) for p in pairs]
    b = [np.asarray(case.video.frame(int(p["revisit_frame"]))) for p in pairs]
    return a, b


def resize_like(frame: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``frame`` resized (bicubic) to ``target``'s height and width when they differ."""
    if frame.shape[:2] == target.shape[:2]:
        return frame
    import cv2

    return cv2.resize(frame, (target.shape[1], target.shape[0]), interpolation=cv2.INTER_CUBIC)


def _blur(z: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.GaussianBlur(z, (11, 11), 1.5)


def _channel_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One channel's own SSIM terms: (x, μx, μx², σx²) in float32 (shared by every pair using the frame)."""
    x = x.astype(np.float32)
    mx = _blur(x)
    mx2 = mx * mx
    sx2 = _blur(x * x)
    sx2 -= mx2
    return x, mx, mx2, sx2


def _ssim_channel(sa: tuple[np.ndarray, ...], sb: tuple[np.ndarray, ...]) -> float:
    c1, c2 = (0.01 * 255.0) ** 2, (0.03 * 255.0) ** 2
    (x, mx, mx2, sx2), (y, my, my2, sy2) = sa, sb
    # num = (2·μxμy + C1)(2·σxy + C2), den = (μx² + μy² + C1)(σx² + σy² + C2): the same float32 operations
    # in the same order as the plain expressions, in place on fresh arrays (the inputs stay untouched)
    mxy = mx * my
    sxy = _blur(x * y)
    sxy -= mxy
    num = np.multiply(mxy, 2, out=mxy)
    num += c1
    t = np.multiply(sxy, 2, out=sxy)
    t += c2
    num *= t
    den = mx2 + my2
    den += c1
    t = sx2 + sy2
    t += c2
    den *= t
    np.maximum(den, 1e-12, out=den)
    num /= den
    return float(np.mean(num))


def rgb_stats(a: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """Per-channel SSIM terms of one frame, for :func:`ssim_rgb` (compute once for a frame in many pairs)."""
    return [_channel_stats(a[:, :, c]) for c in range(a.shape[2])]


def ssim_rgb(a: np.ndarray, b: np.ndarray, stats_a: list[tuple[np.ndarray, ...]] | None = None) -> float:
    """Mean over the RGB channels of the Gaussian-window SSIM, clamped to [0, 1]; ``stats_a``: a's
    :func:`rgb_stats` when the caller holds them."""
    sa = rgb_stats(a) if stats_a is None else stats_a
    v = float(np.mean([_ssim_channel(x, y) for x, y in zip(sa, rgb_stats(b))]))
    return 0.0 if not np.isfinite(v) else min(max(v, 0.0), 1.0)


def clamp01(x: float, *, release: bool = False) -> float:
    """[0, 1] clamp. Ours: a non-finite value gives 0. ``release``: the release's ``base.clamp01``,
    ``max(0, min(1, x))`` in Python's comparison order, so NaN and +inf give 1.0 and −inf gives 0.0
    (``official_parity``)."""
    x = float(x)
    if release:
        return max(0.0, min(1.0, x))
    return 0.0 if not np.isfinite(x) else min(max(x, 0.0), 1.0)
