"""Image preprocessing shared by the backends: the torchvision ``Resize(short) + CenterCrop(crop)`` recipe.

DINOv2 (official hub transform), open_clip's CLIP transforms and ImageReward's BLIP transform all resize
the shorter side with PIL bicubic, centre-crop and normalise. This module reproduces torchvision's PIL
path exactly (same output size rule, same crop rounding) with PIL alone, so the classical
``color_patch_embedder`` can share the geometry without importing torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def resized_size(h: int, w: int, short: int) -> tuple[int, int]:
    """(new_h, new_w) of torchvision ``Resize(short)``: shorter side = short, longer side truncated."""
    if w <= h:
        return int(short * h / w), short
    return short, int(short * w / h)


def crop_box(h: int, w: int, crop: int) -> tuple[int, int]:
    """(top, left) of torchvision ``CenterCrop(crop)`` (Python round of the half margins)."""
    return round((h - crop) / 2.0), round((w - crop) / 2.0)


def resize_center_crop(frame: np.ndarray, short: int, crop: int,
                       resample: int = Image.BICUBIC) -> np.ndarray:
    """uint8 ``[crop, crop, 3]``: shorter side to ``short`` (PIL, antialiased), then the centre crop."""
    h, w = frame.shape[:2]
    nh, nw = resized_size(h, w, short)
    img = Image.fromarray(np.ascontiguousarray(frame))
    if (nh, nw) != (h, w):
        img = img.resize((nw, nh), resample)
    top, left = crop_box(nh, nw, crop)
    if top < 0 or left < 0:
        raise ValueError(f"resize_center_crop: resized image {nw}x{nh} is smaller than the crop {crop}")
    return np.asarray(img.crop((left, top, left + crop, top + crop)))


def to_normalized_tensor(frames: Sequence[np.ndarray], short: int, crop: int,
                         mean: Sequence[float], std: Sequence[float]):
    """``[B, 3, crop, crop]`` float32 tensor: resize + centre crop, ``ToTensor`` (÷255), normalise."""
    import torch

    arr = np.stack([resize_center_crop(f, short, crop) for f in frames]).astype(np.float32) / 255.0
    x = torch.from_numpy(arr).permute(0, 3, 1, 2)
    m = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1)
    return (x - m) / s
