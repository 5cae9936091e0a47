"""``sam3`` (role segmenter): SAM-3 text-prompted instances (transformers ``Sam3Model`` + ``Sam3Processor``).

As MemoBench's ORS uses it: score = sigmoid(query logit) × sigmoid(presence logit); every query with
score > ``threshold`` (0.0) is a candidate; masks are the mask *logits* upsampled bilinearly to the
frame's native size, then sigmoid > ``mask_threshold`` (0.5). (transformers' own post-processing
upsamples probabilities instead of logits, which moves mask borders; we do it the official way.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.core.models import Detection
from worldrecall.plugins.models.options import (
    Options,
    check_rgb,
    inference,
    same_size,
)
from worldrecall.plugins.models.weights import hf_backend_folder

NAME = "sam3"
DEFAULTS: dict[str, Any] = {"threshold": 0.0, "mask_threshold": 0.5, "max_candidates": None,
                            "mask_chunk": 32, "revision": None}


def logits_to_detections(pred_logits: Any, presence_logits: Any, pred_masks: Any, pred_boxes: Any,
                         size_hw: tuple[int, int], *, threshold: float = 0.0, mask_threshold: float = 0.5,
                         max_candidates: int | None = None, chunk: int = 32) -> list[Detection]:
    """One image's SAM-3 outputs (``[Q]``, ``[1]`` or None, ``[Q, h, w]``, ``[Q, 4]`` xyxy in 0-1) → detections."""
    import torch
    import torch.nn.functional as F

    scores = pred_logits.float().sigmoid()
    if presence_logits is not None:
        scores = scores * presence_logits.float().sigmoid().reshape(-1)[:1]
    keep = torch.nonzero(scores > threshold).flatten()
    keep = keep[torch.argsort(scores[keep], descending=True)]
    if max_candidates is not None:
        keep = keep[: int(max_candidates)]
    h, w = size_hw
    # sigmoid(x) > p  <=>  x > logit(p): threshold the upsampled logits directly
    p = float(mask_threshold)
    cut = math.inf if p >= 1 else (-math.inf if p <= 0 else math.log(p / (1 - p)))
    scale = torch.tensor([w, h, w, h], dtype=torch.float32)
    dets: list[Detection] = []
    for part in torch.split(keep, max(1, int(chunk))):
        if part.numel() == 0:
            continue
        up = F.interpolate(pred_masks[part].float().unsqueeze(0), size=(h, w), mode="bilinear",
                           align_corners=False)[0]
        masks = (up > cut).cpu().numpy()
        boxes = (pred_boxes[part].float().cpu() * scale).numpy()
        for j, q in enumerate(part.tolist()):
            dets.append(Detection(mask=masks[j], score=float(scores[q]), box=tuple(float(v) for v in boxes[j])))
    return dets


class Sam3Segmenter:
    """Text-prompted candidate instances per frame."""

    def __init__(self, model: Any, processor: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)
        self.processor = processor

    def segment(self, frames: Sequence[np.ndarray], text: str, *, case: Any = None,
                indices: Sequence[int] | None = None) -> list[list[Detection]]:
        """All candidates (score > threshold) per frame, masks at the frame's native size."""
        import torch

        o = self.opts
        out: list[list[Detection]] = []
        for chunk in batched(list(frames), o.batch_size):
            h, w = same_size(chunk, "sam3 batch")
            inputs = self.processor(images=[check_rgb(f) for f in chunk], text=[text] * len(chunk),
                                    return_tensors="pt")
            with inference(o.device, o.dtype):
                res = self.model(pixel_values=inputs["pixel_values"].to(o.device),
                                 input_ids=inputs["input_ids"].to(o.device),
                                 attention_mask=inputs["attention_mask"].to(o.device))
            presence = getattr(res, "presence_logits", None)
            with torch.inference_mode():  # post-processing in float32, outside autocast
                for i in range(len(chunk)):
                    out.append(logits_to_detections(
                        res.pred_logits[i], None if presence is None else presence[i], res.pred_masks[i],
                        res.pred_boxes[i], (h, w), threshold=float(o["threshold"]),
                        mask_threshold=float(o["mask_threshold"]), max_candidates=o["max_candidates"],
                        chunk=int(o["mask_chunk"])))
        return out


def build(opts: Mapping[str, Any]) -> Sam3Segmenter:
    """Factory: ``facebook/sam3`` (gated: accept its terms, then fetch) or ``local_dir``."""
    o, folder = hf_backend_folder(NAME, opts, DEFAULTS)
    from transformers import Sam3Model, Sam3Processor

    return Sam3Segmenter(Sam3Model.from_pretrained(folder), Sam3Processor.from_pretrained(folder), o)
