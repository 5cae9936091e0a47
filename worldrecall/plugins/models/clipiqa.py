"""``clipiqa_plus`` (role iqa): CLIP-IQA+ through pyiqa (optional ``iqa`` extra; PolyForm-Noncommercial).

MemoBench calls ``pyiqa.create_metric("clipiqa+")`` on RGB float frames in [0, 1] at native resolution
(CLIP RN50 with learned prompts, no resize, positional embedding disabled) and clips each value to
[0, 1]. We build the same pyiqa metric, but resolve both weight files ourselves so nothing is fetched
behind our back and nothing is unpickled: the RN50 checkpoint path is handed to pyiqa's own CLIP loader
(``backbone=<path>``; a TorchScript archive or a state dict), and the learned prompt context is loaded
with ``torch.load(weights_only=True)`` instead of pyiqa's ``weights_only=False``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.core.models import BackendUnavailable
from worldrecall.plugins.models.manifest import CLIP_RN50_FILE, CLIPIQA_PROMPTS_FILE, entry
from worldrecall.plugins.models.options import (
    Options,
    check_rgb,
    inference,
    parse_options,
    same_size,
)
from worldrecall.plugins.models.weights import ensure_weights, weight_file

NAME = "clipiqa_plus"
DEFAULTS: dict[str, Any] = {}


class ClipIqaPlus:
    """Per-frame CLIP-IQA+ quality in [0, 1]."""

    def __init__(self, metric: Any, options: Options):
        self.opts = options
        self.metric = metric.eval().to(options.device)

    def score_frames(self, frames: Sequence[np.ndarray], *, case: Any = None,
                     indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N]`` float32 scores clipped to [0, 1]."""
        import torch

        o = self.opts
        out: list[np.ndarray] = []
        for chunk in batched(list(frames), o.batch_size):
            same_size(chunk, "clipiqa_plus batch")
            x = torch.from_numpy(np.stack([check_rgb(f) for f in chunk])).permute(0, 3, 1, 2).float() / 255.0
            with inference(o.device, o.dtype):
                y = self.metric(x.to(o.device))
            out.append(y.float().reshape(len(chunk), -1)[:, 0].cpu().numpy())
        if not out:
            return np.zeros(0, np.float32)
        return np.clip(np.concatenate(out), 0.0, 1.0).astype(np.float32)


def build(opts: Mapping[str, Any]) -> ClipIqaPlus:
    """Factory: pyiqa's ``clipiqa+`` with locally resolved RN50 weights and learned prompts."""
    o = parse_options(NAME, opts, DEFAULTS)
    if importlib.util.find_spec("pyiqa") is None:
        raise BackendUnavailable(f"{NAME}: the optional package pyiqa is not installed "
                                 "(pip install 'worldrecall[iqa]' and `pip install --no-deps pyiqa==0.1.16`)")
    ensure_weights(NAME, entry(NAME).weights, local_dir=o.local_dir)
    files = {w.filename: w for w in entry(NAME).weights}
    rn50 = weight_file(NAME, files[CLIP_RN50_FILE], local_dir=o.local_dir)
    prompts = weight_file(NAME, files[CLIPIQA_PROMPTS_FILE], local_dir=o.local_dir)
    import torch

    try:
        import pyiqa
    except Exception as e:  # e.g. openai-clip missing or broken (pkg_resources)
        raise BackendUnavailable(f"{NAME}: pyiqa failed to import: {type(e).__name__}: {e}") from e
    metric = pyiqa.create_metric("clipiqa+", device="cpu", as_loss=False, pretrained=False, backbone=str(rn50))
    arch = metric.net
    ctx = torch.load(str(prompts), map_location="cpu", weights_only=True)
    if isinstance(ctx, dict):  # tolerate {"ctx": tensor} / {"params": {...}} layouts
        ctx = ctx.get("ctx", ctx.get("params", {}).get("prompt_learner.ctx"))
    if not torch.is_tensor(ctx) or tuple(ctx.shape) != tuple(arch.prompt_learner.ctx.shape):
        raise BackendUnavailable(f"{NAME}: {prompts.name} does not hold a prompt context of shape "
                                 f"{tuple(arch.prompt_learner.ctx.shape)}")
    arch.prompt_learner.ctx.data = ctx.to(arch.prompt_learner.ctx.dtype)
    return ClipIqaPlus(metric, o)
