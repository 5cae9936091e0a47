"""``color_histogram`` (role image_embedder, classical): per-channel colour histograms.

Weight-free stand-in for CLIP image embeddings: 8-bin histograms of R, G and B (bins of 32 levels),
concatenated (24 values) and L2-normalised, so the cosine of two embeddings compares colour
distributions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.plugins.models.options import Options, check_rgb, parse_options

NAME = "color_histogram"
DEFAULTS: dict[str, Any] = {"bins": 8}


def color_histogram(frame: np.ndarray, bins: int = 8) -> np.ndarray:
    """``[3·bins]`` float32 unit-norm concatenation of the R, G, B histograms of a uint8 frame."""
    f = check_rgb(frame)
    idx = (f.astype(np.int64) * bins) >> 8          # 0..bins-1 (256 levels split evenly)
    hist = np.concatenate([np.bincount(idx[..., c].ravel(), minlength=bins) for c in range(3)]).astype(np.float64)
    n = np.linalg.norm(hist)
    return (hist / n if n > 0 else hist).astype(np.float32)


class ColorHistogram:
    """The image_embedder role with colour histograms."""

    def __init__(self, options: Options):
        self.opts = options

    def embed(self, frames: Sequence[np.ndarray], *, case: Any = None,
              indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, 3·bins]`` float32 unit-norm embeddings."""
        bins = int(self.opts["bins"])
        if not frames:
            return np.zeros((0, 3 * bins), np.float32)
        return np.stack([color_histogram(f, bins) for f in frames])


def build(opts: Mapping[str, Any]) -> ColorHistogram:
    """Factory: no weights."""
    return ColorHistogram(parse_options(NAME, opts, DEFAULTS))
