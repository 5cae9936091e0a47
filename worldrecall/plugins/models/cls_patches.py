"""Role ``cls_patch_embedder``: a global (CLS) embedding and patch tokens per frame, over the full field of view.

WRBench's D2 (``full_fov_resize_pad_no_center_crop``) embeds the whole frame: the longer side is resized to
``size`` (PIL bicubic, aspect kept) and the shorter side padded, centred, to ``size`` — nothing is cropped.
The pad is the normalisation mean (zero after normalising), so padded patches carry no image content.

* ``dinov2_base_fullfov`` (reference): transformers ``Dinov2Model``; CLS = ``last_hidden_state[:, 0]``,
  patches = ``last_hidden_state[:, 1 + registers:]`` (the release's token split), ``[N, 256, 768]`` at 224.
* ``color_cls_patch_embedder`` (classical, the default): the ``color_patch_embedder`` tokens of the same
  padded canvas; its "CLS" is the mean of the frame's non-padded patch tokens. Different numbers, labelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from worldrecall.core.components import batched
from worldrecall.plugins.models.color_patches import patch_descriptors
from worldrecall.plugins.models.options import Options, check_rgb, inference, parse_options
from worldrecall.plugins.models.preprocess import IMAGENET_MEAN, IMAGENET_STD
from worldrecall.plugins.models.weights import hf_backend_folder

NAME_DINO = "dinov2_base_fullfov"
NAME_COLOR = "color_cls_patch_embedder"
DINO_DEFAULTS: dict[str, Any] = {"size": 224, "revision": None}
COLOR_DEFAULTS: dict[str, Any] = {"size": 224, "patch": 14, "orientation_bins": 8}


def resize_pad_geometry(h: int, w: int, size: int) -> tuple[int, int, int, int]:
    """(new_h, new_w, top, left): longer side to ``size`` (the shorter rounded, at least 1), centred on a
    ``size`` x ``size`` canvas (the odd pixel of the margin goes to the bottom / right)."""
    s = float(size) / max(h, w)
    nh, nw = max(1, min(size, round(h * s))), max(1, min(size, round(w * s)))
    return nh, nw, (size - nh) // 2, (size - nw) // 2


def resize_pad(frame: np.ndarray, size: int, fill: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(float32 [size, size, 3] in 0-1 with ``fill`` as the pad, bool [size, size] image mask)."""
    f = check_rgb(frame)
    h, w = f.shape[:2]
    nh, nw, top, left = resize_pad_geometry(h, w, size)
    img = Image.fromarray(np.ascontiguousarray(f))
    if (nh, nw) != (h, w):
        img = img.resize((nw, nh), Image.BICUBIC)
    canvas = np.empty((size, size, 3), np.float32)
    canvas[:] = np.asarray(fill, np.float32)
    canvas[top:top + nh, left:left + nw] = np.asarray(img, np.float32) / 255.0
    mask = np.zeros((size, size), bool)
    mask[top:top + nh, left:left + nw] = True
    return canvas, mask


class Dinov2FullFov:
    """CLS and patch tokens of a transformers ``Dinov2Model`` on resize-and-pad frames."""

    def __init__(self, model: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)
        self.registers = int(getattr(model.config, "num_register_tokens", 0) or 0)

    def cls_and_patches(self, frames: Sequence[np.ndarray], *, case: Any = None,
                        indices: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(CLS [N, D], patch tokens [N, P, D]) float32, not normalised (D2 normalises)."""
        import torch

        o, size = self.opts, int(self.opts["size"])
        mean, std = np.asarray(IMAGENET_MEAN, np.float32), np.asarray(IMAGENET_STD, np.float32)
        cls, patches = [], []
        for chunk in batched(list(frames), o.batch_size):
            arr = np.stack([(resize_pad(f, size, IMAGENET_MEAN)[0] - mean) / std for f in chunk])
            x = torch.from_numpy(arr).permute(0, 3, 1, 2).to(o.device)
            with inference(o.device, o.dtype):
                hidden = self.model(pixel_values=x).last_hidden_state.float().cpu().numpy()
            cls.append(hidden[:, 0])
            patches.append(hidden[:, 1 + self.registers:])
        d = int(self.model.config.hidden_size)
        if not cls:
            return np.zeros((0, d), np.float32), np.zeros((0, 0, d), np.float32)
        return np.concatenate(cls).astype(np.float32), np.concatenate(patches).astype(np.float32)


class ColorClsPatches:
    """Classical stand-in: colour/gradient patch descriptors of the padded canvas; CLS = mean image token."""

    def __init__(self, options: Options):
        self.opts = options

    def cls_and_patches(self, frames: Sequence[np.ndarray], *, case: Any = None,
                        indices: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(CLS [N, D], patch tokens [N, P, D]) float32 (D = 27 with the defaults)."""
        size, patch = int(self.opts["size"]), int(self.opts["patch"])
        cls, patches = [], []
        for f in frames:
            canvas, mask = resize_pad(f, size, (0.5, 0.5, 0.5))
            img = np.clip(np.round(canvas * 255.0), 0, 255).astype(np.uint8)
            tok = patch_descriptors(img, resize=size, crop=size, patch=patch,
                                    orientation_bins=int(self.opts["orientation_bins"]))
            g = size // patch
            inside = mask.reshape(g, patch, g, patch).mean(axis=(1, 3)).reshape(-1) >= 0.5
            cls.append(tok[inside].mean(axis=0) if inside.any() else tok.mean(axis=0))
            patches.append(tok)
        if not cls:
            return np.zeros((0, 0), np.float32), np.zeros((0, 0, 0), np.float32)
        return np.stack(cls).astype(np.float32), np.stack(patches).astype(np.float32)


def build_dino(opts: Mapping[str, Any]) -> Dinov2FullFov:
    """Factory: ``facebook/dinov2-base`` (or ``local_dir``) on full-FoV resize-and-pad frames."""
    o, folder = hf_backend_folder(NAME_DINO, opts, DINO_DEFAULTS)
    from transformers import Dinov2Model

    return Dinov2FullFov(Dinov2Model.from_pretrained(folder), o)


def build_color(opts: Mapping[str, Any]) -> ColorClsPatches:
    """Factory: no weights."""
    return ColorClsPatches(parse_options(NAME_COLOR, opts, COLOR_DEFAULTS))
