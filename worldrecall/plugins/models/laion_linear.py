"""``laion_linear`` (role linear_aesthetic): CLIP ViT-L/14 features → LAION's linear aesthetic head, as MIND.

MIND (``src/metrics/visual_quality.py``, ``src/utils/utils.py``) scores each [0, 1] frame with OpenAI CLIP
ViT-L/14 ``encode_image`` after its own transform — Resize(224, bicubic, shorter side, ``antialias=False``),
CenterCrop(224), OpenAI mean/std (no clamp) — L2-normalises the float features and applies
``torch.nn.Linear(768, 1)`` loaded from LAION's ``sa_0_4_vit_l_14_linear.pth`` (the first aesthetic predictor,
not the MLP of ``laion_aesthetic``). The vision tower here is transformers' ``CLIPVisionModelWithProjection``
(``image_embeds`` = the projected post-layernorm CLS token, CLIP's ``encode_image``) in float32; the release
runs CLIP in float16 on CUDA (``dtype: float16`` autocasts on CUDA). Output: the raw per-frame score (about
0-10; MIND divides by 10).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.plugins.models.clip_embedder import load_clip_vision
from worldrecall.plugins.models.manifest import LAION_LINEAR_FILE, entry
from worldrecall.plugins.models.options import Options, check_rgb, inference, parse_options, same_size
from worldrecall.plugins.models.preprocess import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from worldrecall.plugins.models.weights import ensure_weights, load_state_dict, weight_file

NAME = "laion_linear"
DEFAULTS: dict[str, Any] = {"revision": None}
CLIP_REPO = "openai/clip-vit-large-patch14"
SIZE = 224


def mind_clip_transform(x: Any, size: int = SIZE) -> Any:
    """MIND's ``clip_transform_Image``: [B, 3, H, W] on [0, 1] -> shorter side ``size`` (bicubic, no antialias,
    the longer side ``int(size · long / short)`` as torchvision), centre crop, OpenAI normalisation."""
    import torch
    import torch.nn.functional as F

    h, w = int(x.shape[2]), int(x.shape[3])
    if h <= w:
        nh, nw = size, int(size * w / h)
    else:
        nh, nw = int(size * h / w), size
    if (nh, nw) != (h, w):
        x = F.interpolate(x, size=(nh, nw), mode="bicubic", align_corners=False, antialias=False)
    top, left = round((nh - size) / 2.0), round((nw - size) / 2.0)
    x = x[:, :, top:top + size, left:left + size]
    mean = torch.tensor(OPENAI_CLIP_MEAN, dtype=x.dtype).reshape(1, 3, 1, 1)
    std = torch.tensor(OPENAI_CLIP_STD, dtype=x.dtype).reshape(1, 3, 1, 1)
    return (x - mean) / std


class LaionLinearAesthetic:
    """Per-frame LAION linear aesthetic score on CLIP ViT-L/14 features."""

    def __init__(self, vision: Any, head: Any, options: Options):
        self.opts = options
        self.vision = vision.eval().to(options.device)
        self.head = head.eval().to(options.device)

    def score_frames(self, frames: Sequence[np.ndarray], *, case: Any = None,
                     indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N]`` float32 raw scores (about 0-10)."""
        import torch

        o = self.opts
        out: list[np.ndarray] = []
        for chunk in batched(list(frames), o.batch_size):
            same_size(chunk, "laion_linear batch")
            x = torch.from_numpy(np.stack([check_rgb(f) for f in chunk])).permute(0, 3, 1, 2).float() / 255.0
            with inference(o.device, o.dtype):
                feats = self.vision(pixel_values=mind_clip_transform(x).to(o.device)).image_embeds.float()
                feats = torch.nn.functional.normalize(feats, dim=-1, p=2)
                s = self.head(feats).squeeze(dim=-1)
            out.append(s.float().cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)


def make_head(dim: int = 768, state_dict: Mapping[str, Any] | None = None) -> Any:
    """``torch.nn.Linear(dim, 1)``, loaded strictly from ``state_dict`` (keys ``weight``, ``bias``) when given."""
    from torch import nn

    head = nn.Linear(dim, 1)
    if state_dict is not None:
        head.load_state_dict(dict(state_dict), strict=True)
    return head


def build(opts: Mapping[str, Any]) -> LaionLinearAesthetic:
    """Factory: CLIP ViT-L/14 vision tower (HF cache or ``local_dir``) + the LAION linear head file."""
    o = parse_options(NAME, opts, DEFAULTS)
    e = entry(NAME)
    ensure_weights(NAME, e.weights, local_dir=o.local_dir, revision=o["revision"])
    head_path = weight_file(NAME, next(w for w in e.weights if w.filename == LAION_LINEAR_FILE),
                            local_dir=o.local_dir)
    vision = load_clip_vision(NAME, CLIP_REPO, o, e.weights)
    head = make_head(int(vision.config.projection_dim), load_state_dict(head_path))
    return LaionLinearAesthetic(vision, head, o)
