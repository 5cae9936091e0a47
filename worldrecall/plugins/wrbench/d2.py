"""D2 visual integrity: ``min(cls_first_last_cosine, local_patch_token_low_p20)`` (the contract's candidate E).

From ``extract_d2_dinov2_local_global_candidate.py``: CLS and patch tokens (after ``1 + num_register_tokens``)
are L2-normalised in float32 (a norm <= 1e-12 divides by 1). For each adjacent pair of sampled frames the
patch cosines are clipped to [0, 1]; every patch's best match in the other frame, both ways, is pooled and
its 20th percentile (numpy ``linear``, float64) is the pair's local low. The video's local low is the 20th
percentile of the pairs' local lows; the global term is the clipped cosine of the first and last CLS tokens;
each is clipped to [0, 1] (a non-finite value reads 0). Fewer than two frames: no score.

Sampling (``time_fps_3_max24``) and the full field-of-view resize-and-pad live in :func:`sample_indices` and
the ``cls_patch_embedder`` backends. The release ships neither function's source (``d2_base._sample_frames``
and the v2 processor are imported from files not in the published tree), so both follow the contract's names;
docs/wrbench.md lists them as inferred.
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


def sample_indices(n_frames: int, video_fps: float, policy: str = "time_fps", fps: float = 3.0, min_frames: int = 4,
                   max_frames: int = 24) -> list[int]:
    """Frame indices D2 embeds.

    ``time_fps``: one frame every ``1 / fps`` s from t = 0 while t is inside the video (index
    ``round(t × video_fps)``, duplicates dropped); more than ``max_frames`` are thinned to ``max_frames`` evenly
    (``linspace`` over the list, rounded), fewer than ``min_frames`` replaced by ``min_frames`` evenly spaced
    frames of the video (all of them when it is shorter). ``fixed_count``: ``max_frames`` evenly spaced frames.
    """
    n = int(n_frames)
    if n <= 0:
        return []
    if min_frames <= 0 or max_frames <= 0 or min_frames > max_frames:
        raise ValueError(f"D2 sampling: need 0 < min_frames <= max_frames, got {min_frames}, {max_frames}")

    def even(k: int) -> list[int]:
        return sorted({int(i) for i in np.linspace(0, n - 1, min(k, n)).round().astype(int)})

    if policy == "fixed_count":
        return even(max_frames)
    if policy != "time_fps":
        raise ValueError(f"D2 sampling policy: expected 'time_fps' or 'fixed_count', got {policy!r}")
    if not (video_fps > 0 and fps > 0):
        raise ValueError(f"D2 sampling: video fps {video_fps} and sample fps {fps} must be positive")
    duration = n / float(video_fps)
    picked: list[int] = []
    k = 0
    while k / fps < duration:
        i = min(int(round(k / fps * video_fps)), n - 1)
        if not picked or picked[-1] != i:
            picked.append(i)
        k += 1
    if len(picked) > max_frames:
        picked = [picked[int(j)] for j in np.linspace(0, len(picked) - 1, max_frames).round().astype(int)]
    elif len(picked) < min_frames:
        picked = even(min_frames)
    return picked
