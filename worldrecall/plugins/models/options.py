"""Options every factory accepts, and the inference context (no-grad, optional autocast) they run in.

Common options: ``device`` ("cpu", "cuda", "cuda:1", "auto"), ``dtype`` ("float32" | "bfloat16" |
"float16"; autocast on CUDA only, ignored on the CPU), ``batch_size`` (frames per forward; memory is
bounded by the batch, not the video length) and ``local_dir`` (a folder or file to load weights from
instead of the hub/cache). Backend-specific options are the keys of the spec's ``defaults``; an unknown
key is a configuration error (a typo would otherwise be silently ignored).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

COMMON: dict[str, Any] = {"device": "cpu", "dtype": "float32", "batch_size": 8, "local_dir": None}
DTYPES = ("float32", "bfloat16", "float16")

T = TypeVar("T")


@dataclass
class Options:
    """Parsed factory options: the common ones as attributes, the backend's own in ``extra``."""

    name: str
    device: str = "cpu"
    dtype: str = "float32"
    batch_size: int = 8
    local_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.extra[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.extra.get(key, default)


def parse_options(name: str, opts: Mapping[str, Any] | None, defaults: Mapping[str, Any] | None = None) -> Options:
    """Merge ``opts`` over the common and backend defaults; reject unknown keys and bad values."""
    defaults = dict(defaults or {})
    merged = {**COMMON, **defaults, **dict(opts or {})}
    unknown = sorted(set(merged) - set(COMMON) - set(defaults))
    if unknown:
        raise ValueError(f"{name}: unknown option(s) {unknown}; known: {sorted(set(COMMON) | set(defaults))}")
    dtype = str(merged["dtype"])
    if dtype not in DTYPES:
        raise ValueError(f"{name}: dtype must be one of {DTYPES}, got {dtype!r}")
    batch = int(merged["batch_size"])
    if batch < 1:
        raise ValueError(f"{name}: batch_size must be >= 1, got {batch}")
    device = str(merged["device"] or "cpu")
    if device == "auto":
        device = _auto_device()
    local_dir = merged["local_dir"]
    return Options(name=name, device=device, dtype=dtype, batch_size=batch,
                   local_dir=str(local_dir) if local_dir not in (None, "") else None,
                   extra={k: v for k, v in merged.items() if k not in COMMON})


def _auto_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def inference(device: str, dtype: str = "float32") -> Iterator[None]:
    """``torch.inference_mode`` plus bf16/fp16 autocast when running on CUDA (float32 elsewhere)."""
    import torch

    with torch.inference_mode():
        if str(device).startswith("cuda") and dtype != "float32":
            with torch.autocast("cuda", dtype=getattr(torch, dtype)):
                yield
        else:
            yield




def check_rgb(frame: np.ndarray, what: str = "frame") -> np.ndarray:
    """A frame as a C-contiguous uint8 ``[H, W, 3]`` RGB array (ValueError otherwise)."""
    a = np.asarray(frame)
    if a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"{what}: expected an RGB [H, W, 3] array, got shape {a.shape}")
    if a.dtype != np.uint8:
        raise ValueError(f"{what}: expected uint8 RGB, got {a.dtype}")
    return np.ascontiguousarray(a)


def same_size(frames: Sequence[np.ndarray], what: str = "frames") -> tuple[int, int]:
    """The common (H, W) of a batch; ValueError when sizes differ."""
    sizes = {tuple(np.asarray(f).shape[:2]) for f in frames}
    if len(sizes) != 1:
        raise ValueError(f"{what}: all frames must have one size, got {sorted(sizes)}")
    return sizes.pop()  # type: ignore[return-value]
