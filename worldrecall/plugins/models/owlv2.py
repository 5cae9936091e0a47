"""``owlv2`` (role segmenter): OWLv2 open-vocabulary detection, the fallback when SAM-3 is unavailable.

``google/owlv2-base-patch16-ensemble`` scores every image patch's box against the text query; each kept
box becomes a filled rectangular mask at the frame's native size, with score = sigmoid(logit). The
processor pads frames to a square on the right/bottom, so normalised boxes are scaled by the longer side
and clipped to the frame. OWLv2 has thousands of box queries, so candidates are limited by
``threshold`` and ``max_candidates`` (SAM-3 keeps everything above 0).
"""

from __future__ import annotations

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

NAME = "owlv2"
DEFAULTS: dict[str, Any] = {"threshold": 0.05, "max_candidates": 50, "revision": None}


def box_mask(box: tuple[float, float, float, float], h: int, w: int) -> np.ndarray:
    """bool ``[h, w]`` mask of the pixels whose centres lie inside the xyxy box."""
    x0, y0, x1, y1 = box
    cols = (np.arange(w) + 0.5)
    rows = (np.arange(h) + 0.5)
    return ((rows >= y0) & (rows <= y1))[:, None] & ((cols >= x0) & (cols <= x1))[None, :]


def boxes_to_detections(logits: Any, boxes_cxcywh: Any, size_hw: tuple[int, int], *, threshold: float,
                        max_candidates: int | None) -> list[Detection]:
    """One image's OWLv2 outputs (``[Q, 1]`` logits, ``[Q, 4]`` normalised cxcywh on the padded square)."""
    import torch

    scores = logits.float().max(dim=-1).values.sigmoid()
    keep = torch.nonzero(scores > threshold).flatten()
    keep = keep[torch.argsort(scores[keep], descending=True)]
    if max_candidates is not None:
        keep = keep[: int(max_candidates)]
    h, w = size_hw
    side = float(max(h, w))
    dets: list[Detection] = []
    for q in keep.tolist():
        cx, cy, bw, bh = (float(v) * side for v in boxes_cxcywh[q])
        x0, y0 = max(0.0, cx - bw / 2), max(0.0, cy - bh / 2)
        x1, y1 = min(float(w), cx + bw / 2), min(float(h), cy + bh / 2)
        if x1 <= x0 or y1 <= y0:
            continue  # box entirely in the padding
        mask = box_mask((x0, y0, x1, y1), h, w)
        if mask.any():
            dets.append(Detection(mask=mask, score=float(scores[q]), box=(x0, y0, x1, y1)))
    return dets


class Owlv2Segmenter:
    """Text-queried boxes as box masks."""

    def __init__(self, model: Any, processor: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)
        self.processor = processor

    def segment(self, frames: Sequence[np.ndarray], text: str, *, case: Any = None,
                indices: Sequence[int] | None = None) -> list[list[Detection]]:
        """Candidates above ``threshold`` per frame (at most ``max_candidates``), best first."""
        o = self.opts
        out: list[list[Detection]] = []
        for chunk in batched(list(frames), o.batch_size):
            h, w = same_size(chunk, "owlv2 batch")
            max_len = int(getattr(self.model.config.text_config, "max_position_embeddings", 16))
            inputs = self.processor(text=[[text]] * len(chunk), images=[check_rgb(f) for f in chunk],
                                    return_tensors="pt", padding="max_length", max_length=max_len,
                                    truncation=True)
            inputs = {k: v.to(o.device) for k, v in inputs.items() if hasattr(v, "to")}
            with inference(o.device, o.dtype):
                res = self.model(**inputs)
            for i in range(len(chunk)):
                out.append(boxes_to_detections(res.logits[i], res.pred_boxes[i].float().cpu(), (h, w),
                                               threshold=float(o["threshold"]),
                                               max_candidates=o["max_candidates"]))
        return out


def build(opts: Mapping[str, Any]) -> Owlv2Segmenter:
    """Factory: processor + ``Owlv2ForObjectDetection`` from the HF cache (or ``local_dir``)."""
    o, folder = hf_backend_folder(NAME, opts, DEFAULTS)
    from transformers import Owlv2ForObjectDetection, Owlv2Processor

    return Owlv2Segmenter(Owlv2ForObjectDetection.from_pretrained(folder), Owlv2Processor.from_pretrained(folder), o)
