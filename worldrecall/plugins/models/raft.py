"""``raft_large`` (role flow): torchvision RAFT-Large, ``Raft_Large_Weights.C_T_SKHT_V2``.

MemoBench feeds RAFT RGB in **[0, 1]** (the weights' own preset, which maps to [-1, 1], is not applied);
that quirk is the default (``input_range: unit``), the preset is the switch ``input_range:
weights_transform``. Both frames are padded right/bottom with replicate padding to multiples of 8, the
last of ``num_flow_updates`` (12) refinements is used, and the flow is cropped back to H×W.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.plugins.models.manifest import entry
from worldrecall.plugins.models.options import (
    Options,
    check_rgb,
    inference,
    parse_options,
    same_size,
)
from worldrecall.plugins.models.weights import ensure_weights, load_state_dict, weight_file

NAME = "raft_large"
DEFAULTS: dict[str, Any] = {"input_range": "unit", "num_flow_updates": 12}
INPUT_RANGES = ("unit", "weights_transform")


def pad_to_multiple(x: Any, multiple: int = 8) -> Any:
    """Replicate-pad a ``[B, C, H, W]`` tensor on the right/bottom to multiples of ``multiple``."""
    import torch.nn.functional as F

    h, w = x.shape[-2:]
    ph, pw = (-h) % multiple, (-w) % multiple
    return F.pad(x, (0, pw, 0, ph), mode="replicate") if (ph or pw) else x


class RaftFlow:
    """Forward flow A→B with a torchvision RAFT module."""

    def __init__(self, model: Any, options: Options):
        if options["input_range"] not in INPUT_RANGES:
            raise ValueError(f"{options.name}: input_range must be one of {INPUT_RANGES}")
        self.opts = options
        self.model = model.eval().to(options.device)

    def _to_input(self, frames: Sequence[np.ndarray]) -> Any:
        import torch

        x = torch.from_numpy(np.stack([check_rgb(f) for f in frames])).permute(0, 3, 1, 2).float() / 255.0
        if self.opts["input_range"] == "weights_transform":
            x = x * 2.0 - 1.0  # the C_T_SKHT_V2 preset: Normalize(mean=0.5, std=0.5)
        return pad_to_multiple(x).to(self.opts.device)

    def flow(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]], *, case: Any = None,
             indices: Sequence[tuple[int, int]] | None = None) -> list[np.ndarray]:
        """``[H, W, 2]`` float32 flow (x, y) in pixels per pair."""
        o = self.opts
        out: list[np.ndarray] = []
        for chunk in batched(list(pairs), o.batch_size):
            h, w = same_size([f for p in chunk for f in p], "raft_large pair")
            a = self._to_input([p[0] for p in chunk])
            b = self._to_input([p[1] for p in chunk])
            with inference(o.device, o.dtype):
                flows = self.model(a, b, num_flow_updates=int(o["num_flow_updates"]))
            last = flows[-1][:, :, :h, :w].float().permute(0, 2, 3, 1).cpu().numpy()
            out.extend(np.ascontiguousarray(f, dtype=np.float32) for f in last)
        return out


def build(opts: Mapping[str, Any]) -> RaftFlow:
    """Factory: torchvision ``raft_large`` with the C_T_SKHT_V2 state dict (TORCH_HOME or ``local_dir``)."""
    o = parse_options(NAME, opts, DEFAULTS)
    ensure_weights(NAME, entry(NAME).weights, local_dir=o.local_dir)
    path = weight_file(NAME, entry(NAME).weights[0], local_dir=o.local_dir)
    from torchvision.models.optical_flow import raft_large

    model = raft_large(weights=None, progress=False)
    model.load_state_dict(load_state_dict(path))
    return RaftFlow(model, o)
