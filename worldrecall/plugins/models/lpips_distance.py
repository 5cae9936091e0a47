"""``lpips_alex`` / ``lpips_vgg`` (role perceptual): LPIPS v0.1 through the ``lpips`` package.

MemoBench: ``lpips.LPIPS(net="alex")``, RGB scaled to [-1, 1], native resolution, batches of 16. The
linear calibration heads ship inside the lpips wheel. The AlexNet/VGG16 trunk is built *random* here
(``pnet_rand=True``, so lpips never downloads) and then loaded from the torchvision checkpoint we resolve
ourselves (TORCH_HOME or ``local_dir``) with ``weights_only=True``; option ``pnet_rand: true`` keeps the
random trunk (tests only).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.core.models import BackendUnavailable
from worldrecall.plugins.models.manifest import entry
from worldrecall.plugins.models.options import (
    Options,
    check_rgb,
    inference,
    parse_options,
    same_size,
)
from worldrecall.plugins.models.weights import ensure_weights, load_state_dict, weight_file

DEFAULTS: dict[str, Any] = {"pnet_rand": False, "batch_size": 16}
NETS = {"lpips_alex": "alex", "lpips_vgg": "vgg"}
_SLICE_KEY = re.compile(r"^slice\d+\.(\d+)\.(.+)$")


def load_trunk(net: Any, state_dict: Mapping[str, Any]) -> None:
    """Copy torchvision ``features.N.*`` weights into lpips' ``sliceK.N.*`` trunk modules (strict)."""
    own = net.state_dict()
    mapped = {}
    for key in own:
        m = _SLICE_KEY.match(key)
        src = f"features.{m.group(1)}.{m.group(2)}" if m else key
        if src not in state_dict:
            raise KeyError(f"trunk checkpoint lacks {src}")
        mapped[key] = state_dict[src]
    net.load_state_dict(mapped, strict=True)


class LpipsDistance:
    """LPIPS distance between paired frames."""

    def __init__(self, model: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)

    def distance(self, a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> np.ndarray:
        """``[N]`` float32 LPIPS distances (pairs must share a size)."""
        import torch

        if len(a) != len(b):
            raise ValueError(f"lpips: {len(a)} frames vs {len(b)} frames")
        o = self.opts
        out: list[np.ndarray] = []
        for pairs in batched(list(zip(a, b)), o.batch_size):
            same_size([f for p in pairs for f in p], "lpips pair")

            def prep(frames: Sequence[np.ndarray]) -> Any:
                x = torch.from_numpy(np.stack([check_rgb(f) for f in frames])).permute(0, 3, 1, 2).float()
                return (x / 127.5 - 1.0).to(o.device)  # lpips.im2tensor: [0, 255] -> [-1, 1]

            with inference(o.device, o.dtype):
                d = self.model(prep([p[0] for p in pairs]), prep([p[1] for p in pairs]))
            out.append(d.float().reshape(len(pairs)).cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)


def build(name: str, opts: Mapping[str, Any]) -> LpipsDistance:
    """Factory for ``lpips_alex`` / ``lpips_vgg``."""
    o = parse_options(name, opts, DEFAULTS)
    if importlib.util.find_spec("lpips") is None:
        raise BackendUnavailable(f"{name}: the optional package lpips is not installed "
                                 "(pip install 'worldrecall[lpips]')")
    path = None
    if not o["pnet_rand"]:
        ensure_weights(name, entry(name).weights, local_dir=o.local_dir)
        path = weight_file(name, entry(name).weights[0], local_dir=o.local_dir)
    import lpips

    model = lpips.LPIPS(net=NETS[name], pretrained=True, pnet_rand=True, verbose=False)
    if path is not None:
        load_trunk(model.net, load_state_dict(path))
    return LpipsDistance(model, o)


def build_alex(opts: Mapping[str, Any]) -> LpipsDistance:
    """Factory: ``lpips_alex``."""
    return build("lpips_alex", opts)


def build_vgg(opts: Mapping[str, Any]) -> LpipsDistance:
    """Factory: ``lpips_vgg``."""
    return build("lpips_vgg", opts)
