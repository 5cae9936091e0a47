"""``dinov3_vitb16`` (role patch_tokens): DINOv3 ViT-B/16 patch tokens as the MIND release extracts them.

MIND (``src/utils/dino_utils.py``) loads ``AutoModel`` + ``AutoImageProcessor`` from the DINOv3 ViT-B/16 folder
and calls the processor on frames that are already float on [0, 1] (``processor(images=frames)``): the
processor resizes to 224 × 224 and then *rescales by 1/255 again* before the ImageNet normalisation, so the
network sees almost constant images. ``input_range: unit`` (default) reproduces that call exactly (frames on
[0, 1]); ``byte`` hands the processor 0-255 frames, which it rescales once, as it expects. Tokens:
``last_hidden_state`` without the CLS and register tokens (``[:, 1 + num_register_tokens:]``, i.e. ``[:, 5:]``
for ViT-B/16) → ``[N, 196, 768]``, not normalised (the metric normalises). The weights are gated on the hub
(accept the licence first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.plugins.models.options import Options, check_rgb, inference
from worldrecall.plugins.models.weights import hf_backend_folder

NAME = "dinov3_vitb16"
INPUT_RANGES = ("unit", "byte")
DEFAULTS: dict[str, Any] = {"input_range": "unit", "revision": None}


class Dinov3PatchTokens:
    """Final-layernorm patch tokens of a transformers DINOv3 ViT through its own image processor."""

    def __init__(self, model: Any, processor: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)
        self.processor = processor
        self.skip = 1 + int(getattr(model.config, "num_register_tokens", 0) or 0)
        if options["input_range"] not in INPUT_RANGES:
            raise ValueError(f"{options.name}: input_range must be one of {INPUT_RANGES}")

    def patch_tokens(self, frames: Sequence[np.ndarray], *, case: Any = None,
                     indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, P, D]`` float32 patch tokens (P = 196 at 224 × 224, patch 16)."""
        import torch

        o = self.opts
        scale = 255.0 if o["input_range"] == "unit" else 1.0
        out: list[np.ndarray] = []
        for chunk in batched(list(frames), o.batch_size):
            # the release hands the processor [0, 1] float frames [B, 3, H, W] ("unit")
            x = torch.from_numpy(np.stack([check_rgb(f) for f in chunk])).permute(0, 3, 1, 2).float() / scale
            pixels = self.processor(images=x, return_tensors="pt")["pixel_values"].to(o.device)
            with inference(o.device, o.dtype):
                hidden = self.model(pixel_values=pixels).last_hidden_state
            out.append(hidden[:, self.skip:].float().cpu().numpy())
        if not out:
            return np.zeros((0, 0, int(self.model.config.hidden_size)), np.float32)
        return np.concatenate(out).astype(np.float32, copy=False)


def build(opts: Mapping[str, Any]) -> Dinov3PatchTokens:
    """Factory: ``facebook/dinov3-vitb16-pretrain-lvd1689m`` (or ``local_dir``): model and image processor."""
    o, folder = hf_backend_folder(NAME, opts, DEFAULTS)
    from transformers import AutoImageProcessor, AutoModel

    return Dinov3PatchTokens(AutoModel.from_pretrained(folder), AutoImageProcessor.from_pretrained(folder), o)
