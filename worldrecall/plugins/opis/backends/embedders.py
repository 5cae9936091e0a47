"""``opis_embedder`` backends: the official weight-free colour histogram and DINOv3 ViT-S/16 (paper).

* ``opis_colorhist`` (classical, label ``colorhist``): the OPIS quick-start recipe — crop resized to 64x64
  (PIL bilinear), 8 bins per RGB channel over [0, 255], counts concatenated, L2-normalised (24 dims).
* ``opis_dinov3_vits16`` (reference, label ``dinov3_vits16``): ``facebook/dinov3-vits16-pretrain-lvd1689m``
  through ``AutoImageProcessor`` (224 px) + ``AutoModel``; the pooled CLS feature, L2-normalised (O-A7).

Identity numbers are only comparable within one backend; the metric refuses an inventory whose
``embedding_backend`` differs from the configured one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.plugins.opis.backends import hf

HIST_BINS = 8
HIST_SIZE = 64
DINOV3_ID = "facebook/dinov3-vits16-pretrain-lvd1689m"
DINOV3_DEFAULTS: dict[str, Any] = {"model_id": DINOV3_ID, "image_size": 224}


def colour_histogram(crop: np.ndarray, bins: int = HIST_BINS, size: int = HIST_SIZE) -> np.ndarray:
    """8-bin-per-channel RGB histogram of ``crop`` resized to 64x64; concatenated, L2-normalised."""
    from PIL import Image

    arr = np.asarray(Image.fromarray(np.ascontiguousarray(crop, dtype=np.uint8)).convert("RGB").resize((size, size)),
                     dtype=np.float32)
    feats = np.concatenate([np.histogram(arr[..., c], bins=bins, range=(0.0, 255.0))[0] for c in range(3)])
    vec = feats.astype(np.float64)
    n = float(np.linalg.norm(vec))
    return vec / n if n > 0 else vec


class ColourHistogramEmbedder:
    """The official default crop embedding (weight-free)."""

    backend = "colorhist"

    def __init__(self, opts: Mapping[str, Any]):
        self.bins = int(opts.get("bins", HIST_BINS))

    def embed(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """``[N, 3*bins]`` L2-normalised histograms."""
        if not len(crops):
            return np.zeros((0, 3 * self.bins))
        return np.stack([colour_histogram(c, self.bins) for c in crops])


class Dinov3Embedder:
    """DINOv3 ViT-S/16 pooled CLS embeddings of crops (224 px), L2-normalised."""

    backend = "dinov3_vits16"

    def __init__(self, model: Any, processor: Any, opts: Mapping[str, Any]):
        self.opts = opts
        self.device = hf.device(opts)
        self.model = model.eval().to(self.device)
        self.processor = processor

    def embed(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """``[N, hidden]`` float64, unit norm."""
        import torch

        out = []
        bs = max(1, int(self.opts.get("batch_size") or 8))
        for i in range(0, len(crops), bs):
            chunk = [np.ascontiguousarray(c, dtype=np.uint8) for c in crops[i:i + bs]]
            inputs = self.processor(images=chunk, return_tensors="pt")
            with torch.inference_mode():
                res = self.model(pixel_values=inputs["pixel_values"].to(self.device))
            feat = res.pooler_output if getattr(res, "pooler_output", None) is not None else res.last_hidden_state[:, 0]
            out.append(feat.float().cpu().numpy().astype(np.float64))
        if not out:
            return np.zeros((0, 0))
        emb = np.concatenate(out)
        norm = np.linalg.norm(emb, axis=1, keepdims=True)
        return np.divide(emb, norm, out=np.zeros_like(emb), where=norm > 0)


def build_colorhist(opts: Mapping[str, Any]) -> ColourHistogramEmbedder:
    """Factory: ``opis_colorhist``."""
    return ColourHistogramEmbedder(opts)


def build_dinov3(opts: Mapping[str, Any]) -> Dinov3Embedder:
    """Factory: ``opis_dinov3_vits16`` (``AutoModel`` resolves ``DINOv3ViTModel`` from the config)."""
    o = hf.options("opis_dinov3_vits16", opts, DINOV3_DEFAULTS)
    from transformers import AutoImageProcessor, AutoModel

    side = int(o["image_size"])
    processor = hf.load("opis_dinov3_vits16", AutoImageProcessor, o,
                        size={"height": side, "width": side})
    return Dinov3Embedder(hf.load("opis_dinov3_vits16", AutoModel, o), processor, o)
