"""``dinov2_base`` (role patch_embedder): DINOv2 ViT-B/14 layer-normed patch tokens.

Parity with MemoBench's ``torch.hub`` dinov2_vitb14 ``x_norm_patchtokens``: RGB → Resize(256, bicubic,
shorter side) → CenterCrop(224) → ImageNet normalisation; tokens = ``last_hidden_state`` (the output of
the final layernorm) without the CLS (and register) tokens → ``[N, 256, 768]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.plugins.models.options import Options, check_rgb, inference
from worldrecall.plugins.models.preprocess import IMAGENET_MEAN, IMAGENET_STD, to_normalized_tensor
from worldrecall.plugins.models.weights import hf_backend_folder

NAME = "dinov2_base"
DEFAULTS: dict[str, Any] = {"resize": 256, "crop": 224, "revision": None}


class Dinov2PatchEmbedder:
    """Patch tokens of a transformers ``Dinov2Model`` (any size; the reference is ViT-B/14)."""

    def __init__(self, model: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)
        self.skip = 1 + int(getattr(model.config, "num_register_tokens", 0) or 0)

    def patch_tokens(self, frames: Sequence[np.ndarray], *, case: Any = None,
                     indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, P, D]`` float32 layer-normed patch tokens (P = 256 at crop 224, patch 14)."""
        o = self.opts
        out: list[np.ndarray] = []
        for chunk in batched(list(frames), o.batch_size):
            x = to_normalized_tensor([check_rgb(f) for f in chunk], int(o["resize"]), int(o["crop"]),
                                     IMAGENET_MEAN, IMAGENET_STD).to(o.device)
            with inference(o.device, o.dtype):
                hidden = self.model(pixel_values=x).last_hidden_state
            out.append(hidden[:, self.skip:].float().cpu().numpy())
        if not out:
            d = int(self.model.config.hidden_size)
            return np.zeros((0, 0, d), np.float32)
        return np.concatenate(out).astype(np.float32, copy=False)


def build(opts: Mapping[str, Any]) -> Dinov2PatchEmbedder:
    """Factory: load ``facebook/dinov2-base`` (or ``local_dir``) into a :class:`Dinov2PatchEmbedder`."""
    o, folder = hf_backend_folder(NAME, opts, DEFAULTS)
    from transformers import Dinov2Model

    return Dinov2PatchEmbedder(Dinov2Model.from_pretrained(folder), o)


class Dinov2ClsEmbedder:
    """Global embeddings: the layer-normed CLS token (``pooler_output``), L2-normalised — what the
    memory_loop suite's revisit fidelity compares (``consistency_backends.dinov2_image_features``)."""

    def __init__(self, model: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)

    def embed(self, frames: Sequence[np.ndarray], *, case: Any = None,
              indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, D]`` float32 unit-norm CLS embeddings."""
        o = self.opts
        out: list[np.ndarray] = []
        for chunk in batched(list(frames), o.batch_size):
            x = to_normalized_tensor([check_rgb(f) for f in chunk], int(o["resize"]), int(o["crop"]),
                                     IMAGENET_MEAN, IMAGENET_STD).to(o.device)
            with inference(o.device, o.dtype):
                cls = self.model(pixel_values=x).last_hidden_state[:, 0]
            v = cls.float().cpu().numpy().astype(np.float64)
            n = np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            out.append((v / n).astype(np.float32))
        if not out:
            return np.zeros((0, int(self.model.config.hidden_size)), np.float32)
        return np.concatenate(out)


def build_cls(opts: Mapping[str, Any]) -> Dinov2ClsEmbedder:
    """Factory: ``facebook/dinov2-base`` (or ``local_dir``) as a global :class:`Dinov2ClsEmbedder`."""
    o, folder = hf_backend_folder(NAME_CLS, opts, DEFAULTS)
    from transformers import Dinov2Model

    return Dinov2ClsEmbedder(Dinov2Model.from_pretrained(folder), o)


NAME_CLS = "dinov2_base_cls"
