"""D2 visual integrity: ``min(cls_first_last_cosine, local_patch_token_low_p20)`` (the contract's candidate E).

From ``extract_d2_dinov2_local_global_candidate.py``: CLS and patch tokens (after ``1 + num_register_tokens``)
are L2-normalised in float32 (a norm <= 1e-12 divides by 1). For each adjacent pair of sampled frames the
patch cosines are clipped to [0, 1]; every patch's best match in the other frame, both ways, is pooled and
its 20th percentile (numpy ``linear``, float64) is the pair's local low. The video's local low is the 20th
percentile of the pairs' local lows; the global term is the clipped cosine of the first and last CLS tokens;
each is clipped to [0, 1] (a non-finite value reads 0). Fewer than two frames: no score.

Sampling (``time_fps_3_max24``) is :func:`sample_indices`, the release's rule (``_frame_indices_for_sampling``
in ``extract_d2_dinov2_consistency_features.py``). The full field-of-view resize-and-pad lives in the
``cls_patch_embedder`` backends; the release's v2 processor is not in the published tree, so it follows the
contract's name (docs/wrbench.md lists it as inferred).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

LOCAL_LOW_PERCENTILE = 20.0
VIDEO_LOW_PERCENTILE = 20.0
# the contract's setting (the paper's) and the release's runtime example (eval.scorers.extra_paths d2_*)
OFFICIAL_SAMPLING: dict[str, Any] = {"policy": "time_fps", "fps": 3.0, "min_frames": 4, "max_frames": 24}
EXAMPLE_CONFIG_SAMPLING: dict[str, Any] = {"policy": "time_fps", "fps": 2.0, "min_frames": 4, "max_frames": 16}


def clip01(x: float) -> float:
    """``x`` clipped to [0, 1]; a non-finite value is 0 (the release's ``_clip01``)."""
    x = float(x)
    return 0.0 if not math.isfinite(x) else min(1.0, max(0.0, x))


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """float32 rows of unit length along the last axis (a norm <= 1e-12 is left as is)."""
    a = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(a, axis=-1, keepdims=True)
    return a / np.where(n <= 1e-12, 1.0, n)


def percentile01(values: np.ndarray, q: float) -> float:
    """``clip01(np.percentile(values as float64, q))``; 0 for no values."""
    v = np.asarray(values)
    return 0.0 if v.size == 0 else clip01(float(np.percentile(v.astype(np.float64), q)))


def split_tokens(hidden: np.ndarray, num_register_tokens: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``last_hidden_state`` [B, T, D] -> (unit CLS [B, D], unit patch tokens [B, T - 1 - registers, D])."""
    h = np.asarray(hidden, dtype=np.float32)
    start = 1 + max(0, int(num_register_tokens))
    if h.ndim != 3 or h.shape[1] <= start:
        raise ValueError(f"expected hidden states [batch, tokens > {start}, dim], got {h.shape}")
    return l2_normalize(h[:, 0, :]), l2_normalize(h[:, start:, :])


def pair_local_stats(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(mean, 20th percentile) of the bidirectional best-match cosines of two unit patch sets [P, D]."""
    if a.size == 0 or b.size == 0:
        return 0.0, 0.0
    sims = np.clip(np.matmul(a.astype(np.float32), b.astype(np.float32).T), 0.0, 1.0)
    best = np.concatenate([sims.max(axis=1), sims.max(axis=0)])
    return clip01(float(np.mean(best))), percentile01(best, LOCAL_LOW_PERCENTILE)


def visual_integrity(cls_tokens: np.ndarray, patch_tokens: np.ndarray) -> dict[str, Any]:
    """``{"score", "cls_first_last", "local_low_p20", "local_mean_median", "frames", "lowest_pair"}`` of one
    video's sampled frames (CLS [F, D], patches [F, P, D]); the scores are None below two frames."""
    g, p = l2_normalize(cls_tokens), l2_normalize(patch_tokens)
    if g.ndim != 2 or p.ndim != 3 or len(g) != len(p):
        raise ValueError(f"CLS {g.shape} and patch tokens {p.shape} do not describe the same frames")
    n = int(len(g))
    if n < 2:
        return {"score": None, "cls_first_last": None, "local_low_p20": None, "local_mean_median": None,
                "frames": n, "lowest_pair": None}
    stats = [pair_local_stats(p[i], p[i + 1]) for i in range(n - 1)]
    means = np.asarray([s[0] for s in stats], dtype=np.float64)
    lows = np.asarray([s[1] for s in stats], dtype=np.float64)
    first_last = clip01(float(np.sum(g[0] * g[-1])))
    local_low = percentile01(lows, VIDEO_LOW_PERCENTILE)
    return {"score": min(clip01(first_last), clip01(local_low)), "cls_first_last": first_last,
            "local_low_p20": local_low, "local_mean_median": clip01(float(np.median(means))), "frames": n,
            "lowest_pair": int(np.argmin(lows))}


def _even_truncated(n: int, k: int) -> list[int]:
    """``k`` (at most ``n``) evenly spaced indices of ``n`` frames, both ends included, truncated toward 0 as
    ``np.linspace(..., dtype=int64)`` does (the release's ``_fixed_count_indices``)."""
    if n <= 0 or k <= 0:
        return []
    return [int(i) for i in np.floor(np.linspace(0.0, n - 1.0, min(int(k), n))).astype(np.int64)]


def _clamped_set(indices: list[int], n: int) -> list[int]:
    return sorted({max(0, min(n - 1, int(i))) for i in indices})


def sample_indices(n_frames: int, video_fps: float | None, policy: str = "time_fps", fps: float = 3.0,
                   min_frames: int = 4, max_frames: int = 24) -> list[int]:
    """Frame indices D2 embeds, as the release picks them (``_frame_indices_for_sampling`` in
    ``src/wrbench/eval/d2/extract_d2_dinov2_consistency_features.py``, imported by the D2 candidate extractor).

    Both bounds are first capped by the video's length (``min_frames`` also by ``max_frames``, and at least 1).
    ``fixed_count`` — and ``time_fps`` with an unknown or non-positive frame rate — is ``max_frames`` evenly
    spaced frames, truncated. ``time_fps``: every ``max(video_fps / fps, 1)``-th frame from 0 (each position
    rounded half to even, numpy's ``round``), plus the first and the last frame; a list shorter than
    ``min_frames`` gains the evenly spaced ``min_frames``; a list longer than ``max_frames`` keeps the entries
    at ``linspace(0, len - 1, max_frames)`` positions (truncated), and both ends are forced back in (re-thinned
    between them if that overflows).
    """
    n = int(n_frames)
    if n <= 0:
        return []
    if int(max_frames) <= 0:
        raise ValueError(f"D2 sampling: max_frames must be > 0, got {max_frames}")
    lo = max(1, min(int(min_frames), int(max_frames), n))
    hi = min(int(max_frames), n)
    if policy == "fixed_count":
        return _even_truncated(n, hi)
    if policy != "time_fps":
        raise ValueError(f"D2 sampling policy: expected 'time_fps' or 'fixed_count', got {policy!r}")
    if video_fps is None or not math.isfinite(float(video_fps)) or float(video_fps) <= 0 or fps <= 0:
        return _even_truncated(n, hi)  # the release's fallback when the decoder reports no frame rate
    step = max(float(video_fps) / float(fps), 1.0)
    grid = np.round(np.arange(0, n, step)).astype(int).tolist()
    picked = _clamped_set([0, n - 1, *grid], n)
    if len(picked) < lo:
        picked = _clamped_set([*picked, *_even_truncated(n, lo)], n)
    if len(picked) > hi:
        pos = np.floor(np.linspace(0.0, len(picked) - 1.0, hi)).astype(np.int64)
        picked = _clamped_set([picked[int(j)] for j in pos], n)
        picked = _clamped_set([0, *picked, n - 1], n)
        if len(picked) > hi:  # the ends pushed it over: keep them, thin what lies between
            inner, room = picked[1:-1], hi - 2
            if room > 0:
                keep = np.floor(np.linspace(0.0, len(inner) - 1.0, room)).astype(np.int64)
                picked = [0, *[inner[int(j)] for j in keep], n - 1]
            else:
                picked = [0, n - 1][:hi]
    return picked
