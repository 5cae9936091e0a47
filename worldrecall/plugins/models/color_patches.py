"""``color_patch_embedder`` (role patch_embedder, classical): hand-made DINOv2-shaped patch tokens.

Same geometry as ``dinov2_base`` (shorter side 256 bicubic, centre crop 224, 16×16 grid of 14×14
patches → ``[N, 256, D]``), so positional patch comparisons behave alike: a patch keeps its token while
its content stays put and loses it when the content moves or changes. Each token (D = 27) describes a
patch by

* its mean CIE-Lab colour (3), centred on L = 50 and divided by 25,
* the mean Lab of its 2×2 sub-cells minus the patch mean (12), divided by 5 — the colour layout,
* an 8-bin unsigned gradient-orientation histogram of L, magnitude-weighted, as fractions minus 1/8,
  times 4 (8),
* its Lab standard deviations (3) and log mean gradient magnitude (1), centred on typical values and
  down-weighted (×0.3) because they are alike for most textured patches.

The constants are fixed (not per image), chosen so that on textured images unrelated patches have a
mean cosine near 0.2–0.3 (top-40 % mean near 0.5) while identical patches have cosine 1, roughly like
layer-normed DINOv2 tokens. Small brightness changes and pixel noise keep cosines near 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.plugins.models.options import Options, check_rgb, parse_options
from worldrecall.plugins.models.preprocess import resize_center_crop

NAME = "color_patch_embedder"
DEFAULTS: dict[str, Any] = {"resize": 256, "crop": 224, "patch": 14, "orientation_bins": 8}
SUB = 2              # sub-cells per patch side
W_STATS = 0.3        # weight of the std / gradient-energy features


def token_dim(orientation_bins: int = 8) -> int:
    """Token length: 3 mean + 3·SUB² layout + bins + 3 std + 1 gradient."""
    return 3 + 3 * SUB * SUB + orientation_bins + 4


def patch_descriptors(frame: np.ndarray, *, resize: int = 256, crop: int = 224, patch: int = 14,
                      orientation_bins: int = 8) -> np.ndarray:
    """``[(crop/patch)², token_dim]`` float32 tokens of one uint8 RGB frame (row-major patch order)."""
    import cv2

    if crop % patch or patch % SUB:
        raise ValueError(f"{NAME}: crop {crop} must be a multiple of patch {patch}, and patch of {SUB}")
    img = resize_center_crop(check_rgb(frame), resize, crop).astype(np.float32) / 255.0
    lab = cv2.cvtColor(img, cv2.COLOR_RGB2Lab)  # L in [0, 100], a/b roughly [-128, 127]
    g = crop // patch

    def grid(x: np.ndarray, cell: int) -> np.ndarray:  # [crop, crop, ...] -> [(crop/cell)², cell², ...]
        n = crop // cell
        x = x.reshape(n, cell, n, cell, *x.shape[2:]).swapaxes(1, 2)
        return x.reshape(n * n, cell * cell, *x.shape[4:])

    cells = grid(lab, patch)                                        # [P, p², 3]
    mean, std = cells.mean(axis=1), cells.std(axis=1)
    s = patch // SUB
    sub = grid(lab, s).mean(axis=1).reshape(g, SUB, g, SUB, 3).transpose(0, 2, 1, 3, 4)
    layout = sub.reshape(g * g, SUB * SUB, 3) - mean[:, None, :]   # [P, SUB², 3]
    lum = np.ascontiguousarray(lab[..., 0])
    gx = cv2.Sobel(lum, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(lum, cv2.CV_32F, 0, 1, ksize=3)
    mag = np.hypot(gx, gy)
    ang = np.mod(np.arctan2(gy, gx), np.pi)                         # unsigned orientation in [0, pi)
    b = np.minimum((ang / np.pi * orientation_bins).astype(np.int64), orientation_bins - 1)
    hist = grid(np.eye(orientation_bins, dtype=np.float32)[b] * mag[..., None], patch).sum(axis=1)
    total = hist.sum(axis=1, keepdims=True)
    frac = np.where(total > 1e-6, hist / np.maximum(total, 1e-6), 1.0 / orientation_bins)
    grad = np.log1p(grid(mag, patch).mean(axis=1))                  # [P]
    tokens = np.concatenate([
        (mean - np.array([50.0, 0.0, 0.0])) / 25.0,
        layout.reshape(g * g, -1) / 5.0,
        (frac - 1.0 / orientation_bins) * 4.0,
        W_STATS * (std - np.array([8.0, 3.0, 3.0])) / np.array([8.0, 3.0, 3.0]),
        W_STATS * ((grad - 2.0) / 1.5)[:, None],
    ], axis=1)
    return tokens.astype(np.float32)


class ColorPatchEmbedder:
    """The patch_embedder role with :func:`patch_descriptors`."""

    def __init__(self, options: Options):
        self.opts = options

    def patch_tokens(self, frames: Sequence[np.ndarray], *, case: Any = None,
                     indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, 256, 27]`` float32 tokens (with the default geometry)."""
        o = self.opts
        kw = {k: int(o[k]) for k in ("resize", "crop", "patch", "orientation_bins")}
        if not frames:
            p = (kw["crop"] // kw["patch"]) ** 2
            return np.zeros((0, p, token_dim(kw["orientation_bins"])), np.float32)
        return np.stack([patch_descriptors(f, **kw) for f in frames])


def build(opts: Mapping[str, Any]) -> ColorPatchEmbedder:
    """Factory: no weights."""
    return ColorPatchEmbedder(parse_options(NAME, opts, DEFAULTS))
