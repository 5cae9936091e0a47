"""Rendering recovery of one revisit pair (``memory_loop.rendering_recovery_for_pair``).

Frame B is resized (bicubic) to frame A. Lightness: |mean L*_A − mean L*_B| with OpenCV's 8-bit CIELAB
(L scaled ×100/255); chroma: ‖(mean a*, mean b*)_A − (…)_B‖ with a*, b* offset by 128. Scores exp(−Δ/τ)
(τ floored at 1e-6), texture exp(−gram/τ_g) (τ_g floored at 1e-9); the pair's score is the mean of the
three, or — the release's fallback when no texture model is available — of the two colour scores.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from worldrecall.plugins.scene_memory.pair_frames import clamp01


def lab_means(frame: np.ndarray) -> tuple[float, float, float]:
    """Means of OpenCV's 8-bit L*, a*, b* over ``frame`` (RGB uint8).

    Exact integer channel sums over the pixel count: what the float64 mean of the integer channel gives,
    to the bit (its partial sums are integers below 2**53), without a float64 copy of the image.
    """
    import cv2

    lab = cv2.cvtColor(frame, cv2.COLOR_RGB2LAB)
    n = lab.shape[0] * lab.shape[1]
    if n == 0:
        return math.nan, math.nan, math.nan
    s = cv2.sumElems(lab)
    return s[0] / n, s[1] / n, s[2] / n


def colour_deltas(frame_a: np.ndarray, frame_b_aligned: np.ndarray,
                  means_a: tuple[float, float, float] | None = None) -> tuple[float, float]:
    """(lightness delta, chroma delta) of frame A and frame B (already resized to A); ``means_a``: A's
    :func:`lab_means` when the caller holds them (a frame in several pairs)."""
    la = lab_means(frame_a) if means_a is None else means_a
    lb = lab_means(frame_b_aligned)
    light = abs(float(la[0] - lb[0]) * 100.0 / 255.0)
    ca = np.asarray([la[1], la[2]]) - 128.0
    cb = np.asarray([lb[1], lb[2]]) - 128.0
    return light, float(np.linalg.norm(ca - cb))


def pair_scores(m: dict[str, Any], *, lightness_tau: float = 6.0, chroma_tau: float = 8.0,
                gram_tau: float = 0.002, release_clamp: bool = False) -> dict[str, float | None]:
    """Scores of one measured pair (``lightness_delta``, ``chroma_delta``, ``gram_distance`` or None: the
    colour-only mean of that pair); ``release_clamp``: the release's clamp (:func:`pair_frames.clamp01`)."""
    ls = math.exp(-float(m["lightness_delta"]) / max(float(lightness_tau), 1e-6))
    cs = math.exp(-float(m["chroma_delta"]) / max(float(chroma_tau), 1e-6))
    g = m.get("gram_distance")
    ts = None if g is None else math.exp(-float(g) / max(float(gram_tau), 1e-9))
    score = (ls + cs + ts) / 3.0 if ts is not None else 0.5 * (ls + cs)

    def c(x: float) -> float:
        return clamp01(x, release=release_clamp)

    return {"lighting": c(ls), "chroma": c(cs), "texture": None if ts is None else c(ts), "score": c(score)}
