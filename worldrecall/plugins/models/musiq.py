"""``musiq_spaq`` (role imaging_quality): MUSIQ with the SPAQ checkpoint through pyiqa's architecture.

MIND (``src/process.py``, ``src/metrics/visual_quality.py``) builds ``pyiqa.archs.musiq_arch.MUSIQ`` with
``pretrained_model_path=musiq_spaq_ckpt-358bb6af.pth`` (one output, the MOS on SPAQ's 0-100 scale) and calls it
on [0, 1] RGB frames at their own size (the arch maps them to [-1, 1] and cuts its multi-scale patches).
Here the same class is built without weights and the checkpoint is loaded by us with
``torch.load(weights_only=True)`` (pyiqa itself unpickles with ``weights_only=False``), ``module.`` prefixes
removed as pyiqa's ``clean_state_dict`` does; the encoder's width, MLP width and depth are read off the
checkpoint (SPAQ's: pyiqa's defaults), so a smaller MUSIQ of the same class loads the same way. Output: the raw
per-frame MOS (MIND divides by 100).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.core.models import BackendUnavailable
from worldrecall.plugins.models.manifest import MUSIQ_SPAQ_FILE, entry
from worldrecall.plugins.models.options import Options, check_rgb, inference, parse_options, same_size
from worldrecall.plugins.models.weights import ensure_weights, load_state_dict, weight_file

NAME = "musiq_spaq"
DEFAULTS: dict[str, Any] = {}
_BLOCK = re.compile(r"^transformer_encoder\.transformer\.encoderblock_(\d+)\.")


def musiq_class() -> Any:
    """pyiqa's MUSIQ architecture class (BackendUnavailable when pyiqa is absent or fails to import)."""
    if importlib.util.find_spec("pyiqa") is None:
        raise BackendUnavailable(f"{NAME}: the optional package pyiqa is not installed "
                                 "(pip install 'worldrecall[iqa]' and `pip install --no-deps pyiqa==0.1.16`)")
    try:
        from pyiqa.archs.musiq_arch import MUSIQ
    except Exception as e:  # e.g. a broken optional dependency of pyiqa
        raise BackendUnavailable(f"{NAME}: pyiqa failed to import: {type(e).__name__}: {e}") from e
    return MUSIQ


def clean_keys(sd: Mapping[str, Any]) -> dict[str, Any]:
    """Drop a leading ``module.`` (DataParallel) from every key, as pyiqa's ``clean_state_dict``."""
    return {k.removeprefix("module."): v for k, v in sd.items()}


class MusiqQuality:
    """Per-frame MUSIQ MOS (SPAQ: about 0-100)."""

    def __init__(self, net: Any, options: Options):
        self.opts = options
        self.net = net.eval().to(options.device)

    def score_frames(self, frames: Sequence[np.ndarray], *, case: Any = None,
                     indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N]`` float32 raw MOS values."""
        import torch

        o = self.opts
        out: list[np.ndarray] = []
        for chunk in batched(list(frames), o.batch_size):
            same_size(chunk, "musiq batch")
            x = torch.from_numpy(np.stack([check_rgb(f) for f in chunk])).permute(0, 3, 1, 2).float() / 255.0
            with inference(o.device, o.dtype):
                y = self.net(x.to(o.device))
            out.append(y.float().reshape(len(chunk), -1)[:, 0].cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)


def arch_of(state_dict: Mapping[str, Any]) -> dict[str, int]:
    """The encoder's width, MLP width and depth read off a checkpoint (the SPAQ one: 384, 1152, 14 — pyiqa's
    defaults); the head count (6) cannot be read off the weights and stays pyiqa's."""
    try:
        sd = clean_keys(state_dict)
        depth = 1 + max(int(m.group(1)) for k in sd if (m := _BLOCK.match(k)))
        return {"hidden_size": int(sd["embedding.weight"].shape[0]), "num_layers": depth,
                "mlp_dim": int(sd["transformer_encoder.transformer.encoderblock_0.mlp.fc1.weight"].shape[0])}
    except (KeyError, ValueError, AttributeError, IndexError) as e:
        why = f"{type(e).__name__}: {e}"
        raise BackendUnavailable(f"{NAME}: the checkpoint does not hold a MUSIQ network ({why})") from e


def build_net(state_dict: Mapping[str, Any] | None = None, **arch: Any) -> Any:
    """pyiqa's MUSIQ with one output (``pretrained=False``: nothing is fetched), then ``state_dict`` (strict)."""
    net = musiq_class()(num_class=1, pretrained=False, **arch)
    if state_dict is not None:
        net.load_state_dict(clean_keys(state_dict), strict=True)
    return net


def build(opts: Mapping[str, Any]) -> MusiqQuality:
    """Factory: the SPAQ checkpoint from the cache, its URL or ``local_dir``."""
    o = parse_options(NAME, opts, DEFAULTS)
    musiq_class()
    files = entry(NAME).weights
    ensure_weights(NAME, files, local_dir=o.local_dir)
    path = weight_file(NAME, next(w for w in files if w.filename == MUSIQ_SPAQ_FILE), local_dir=o.local_dir)
    sd = load_state_dict(path)
    if isinstance(sd, dict) and isinstance(sd.get("params"), dict):
        sd = sd["params"]
    return MusiqQuality(build_net(sd, **arch_of(sd)), o)
