"""``depth_anything_v2_small`` (role depth): Depth-Anything-V2-Small, relative inverse depth.

``AutoImageProcessor`` + ``AutoModelForDepthEstimation`` from ``depth-anything/Depth-Anything-V2-Small-hf``.
The processor's own config decides the resolution (518 target, keep aspect ratio, multiple of 14,
bicubic, ImageNet mean/std); ``predicted_depth`` is returned at that processor resolution, as MemoBench
uses it. MemoBench ran transformers 4.x, whose default for this processor was the PIL implementation;
``image_backend: pil`` keeps that, ``torchvision`` selects the faster tensor implementation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.plugins.models.options import (
    Options,
    check_rgb,
    inference,
    same_size,
)
from worldrecall.plugins.models.weights import hf_backend_folder

NAME = "depth_anything_v2_small"
DEFAULTS: dict[str, Any] = {"image_backend": "pil", "revision": None}


class DepthAnythingDepth:
    """Relative inverse depth maps from a transformers depth-estimation model and its processor."""

    def __init__(self, model: Any, processor: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)
        self.processor = processor

    def depth(self, frames: Sequence[np.ndarray], *, case: Any = None,
              indices: Sequence[int] | None = None) -> list[np.ndarray]:
        """One float32 ``[h, w]`` map per frame at the processor's resolution."""
        o = self.opts
        out: list[np.ndarray] = []
        for chunk in batched(list(frames), o.batch_size):
            same_size(chunk, "depth_anything_v2_small batch")
            inputs = self.processor(images=[check_rgb(f) for f in chunk], return_tensors="pt")
            with inference(o.device, o.dtype):
                pred = self.model(pixel_values=inputs["pixel_values"].to(o.device)).predicted_depth
            out.extend(np.ascontiguousarray(d, dtype=np.float32) for d in pred.float().cpu().numpy())
        return out


def build(opts: Mapping[str, Any]) -> DepthAnythingDepth:
    """Factory: processor + model from the HF cache (or ``local_dir``)."""
    o, folder = hf_backend_folder(NAME, opts, DEFAULTS)
    from transformers import AutoImageProcessor, AutoModelForDepthEstimation

    processor = AutoImageProcessor.from_pretrained(folder, backend=str(o["image_backend"]))
    return DepthAnythingDepth(AutoModelForDepthEstimation.from_pretrained(folder), processor, o)
