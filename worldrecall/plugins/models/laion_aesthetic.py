"""``laion_aesthetic`` (role aesthetic): CLIP ViT-L/14 embedding → LAION improved-aesthetic-predictor head.

The head is LAION's linear-MSE MLP (``sac+logos+ava1-l14-linearMSE.pth``): Linear 768→1024, Dropout 0.2,
Linear 1024→128, Dropout 0.2, Linear 128→64, Dropout 0.1, Linear 64→16, Linear 16→1, no activations.
Input: the L2-normalised float image embedding (open_clip preprocessing, see ``clip_embedder``).
Per-frame scores are roughly 0-10.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.plugins.models.clip_embedder import ClipImageEncoder, load_clip_vision
from worldrecall.plugins.models.manifest import LAION_HEAD_FILE, entry
from worldrecall.plugins.models.options import parse_options
from worldrecall.plugins.models.weights import ensure_weights, load_state_dict, weight_file

NAME = "laion_aesthetic"
DEFAULTS: dict[str, Any] = {"revision": None}
CLIP_REPO = "openai/clip-vit-large-patch14"


def make_head(dim: int = 768) -> Any:
    """LAION's MLP as a ``torch.nn.Module`` whose parameter names match the checkpoint (``layers.N.*``)."""
    from torch import nn

    class AestheticHead(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.Sequential(
                nn.Linear(dim, 1024), nn.Dropout(0.2), nn.Linear(1024, 128), nn.Dropout(0.2),
                nn.Linear(128, 64), nn.Dropout(0.1), nn.Linear(64, 16), nn.Linear(16, 1))

        def forward(self, x: Any) -> Any:
            return self.layers(x)

    return AestheticHead()


def remap_head_keys(sd: Mapping[str, Any]) -> dict[str, Any]:
    """Accept the checkpoint's ``layers.N.*`` keys, and the same keys without the prefix."""
    out = {}
    for k, v in sd.items():
        out[k if k.startswith("layers.") else f"layers.{k}"] = v
    return out


class LaionAesthetic:
    """Aesthetic score per frame."""

    def __init__(self, encoder: ClipImageEncoder, head: Any):
        self.encoder = encoder
        self.head = head.eval().to(encoder.opts.device)

    def score_frames(self, frames: Sequence[np.ndarray], *, case: Any = None,
                     indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N]`` float32 LAION aesthetic scores (≈ 0-10)."""
        import torch

        emb = self.encoder.encode(frames)
        if len(emb) == 0:
            return np.zeros(0, np.float32)
        with torch.inference_mode():
            x = torch.from_numpy(emb).to(self.encoder.opts.device)
            return self.head(x).float().reshape(-1).cpu().numpy().astype(np.float32)


def build(opts: Mapping[str, Any]) -> LaionAesthetic:
    """Factory: CLIP ViT-L/14 vision tower + the LAION head file (cache, URL or ``local_dir``)."""
    o = parse_options(NAME, opts, DEFAULTS)
    e = entry(NAME)
    ensure_weights(NAME, e.weights, local_dir=o.local_dir, revision=o["revision"])
    head_file = next(w for w in e.weights if w.filename == LAION_HEAD_FILE)
    head_path = weight_file(NAME, head_file, local_dir=o.local_dir)
    vision = load_clip_vision(NAME, CLIP_REPO, o, e.weights)
    head = make_head(int(vision.config.projection_dim))
    head.load_state_dict(remap_head_keys(load_state_dict(head_path)))
    return LaionAesthetic(ClipImageEncoder(vision, o), head)
