"""CLIP image embeddings with open_clip's preprocessing, and the ``clip_vit_b32`` image_embedder.

open_clip's eval transform for the OpenAI checkpoints: Resize(224, bicubic, shorter side) → CenterCrop(224)
→ OpenAI mean/std. The embedding is transformers ``CLIPVisionModelWithProjection.image_embeds``
(= visual projection of the post-layernormed CLS token, as open_clip's ``encode_image``), cast to float
and L2-normalised. ``laion_aesthetic`` reuses :class:`ClipImageEncoder` with ViT-L/14.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.plugins.models.manifest import entry
from worldrecall.plugins.models.options import Options, check_rgb, inference, parse_options
from worldrecall.plugins.models.preprocess import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, to_normalized_tensor
from worldrecall.plugins.models.weights import ensure_weights, hf_dir, required_hf_files

NAME = "clip_vit_b32"
DEFAULTS: dict[str, Any] = {"revision": None}


class ClipImageEncoder:
    """L2-normalised CLIP image embeddings ``[N, D]`` float32."""

    def __init__(self, model: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)
        self.size = int(model.config.image_size)

    def encode(self, frames: Sequence[np.ndarray]) -> np.ndarray:
        o = self.opts
        out: list[np.ndarray] = []
        for chunk in batched(list(frames), o.batch_size):
            x = to_normalized_tensor([check_rgb(f) for f in chunk], self.size, self.size,
                                     OPENAI_CLIP_MEAN, OPENAI_CLIP_STD).to(o.device)
            with inference(o.device, o.dtype):
                emb = self.model(pixel_values=x).image_embeds.float()
            emb = emb / emb.norm(dim=-1, keepdim=True)
            out.append(emb.cpu().numpy())
        if not out:
            return np.zeros((0, int(self.model.config.projection_dim)), np.float32)
        return np.concatenate(out).astype(np.float32, copy=False)


class ClipImageEmbedder:
    """The image_embedder role on top of :class:`ClipImageEncoder`."""

    def __init__(self, encoder: ClipImageEncoder):
        self.encoder = encoder

    def embed(self, frames: Sequence[np.ndarray], *, case: Any = None,
              indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, D]`` float32 unit-norm embeddings."""
        return self.encoder.encode(frames)


def load_clip_vision(name: str, repo: str, o: Options, files: Any) -> Any:
    """``CLIPVisionModelWithProjection`` from the HF cache (or ``local_dir``); text weights are ignored."""
    folder = hf_dir(name, repo, revision=o["revision"], local_dir=o.local_dir,
                    required=required_hf_files(files, repo))
    from transformers import CLIPVisionModelWithProjection

    return CLIPVisionModelWithProjection.from_pretrained(folder)


def build(opts: Mapping[str, Any]) -> ClipImageEmbedder:
    """Factory: ``openai/clip-vit-base-patch32`` image embedder."""
    o = parse_options(NAME, opts, DEFAULTS)
    e = entry(NAME)
    ensure_weights(NAME, e.weights, local_dir=o.local_dir, revision=o["revision"])
    return ClipImageEmbedder(ClipImageEncoder(load_clip_vision(NAME, e.model_id, o, e.weights), o))
