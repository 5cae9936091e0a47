"""The few lines every Hugging Face backend of the OPIS plugin starts with: options, device, offline load."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from worldrecall.core.data import one_line
from worldrecall.core.models import BackendUnavailable

COMMON: dict[str, Any] = {"model_id": "", "revision": None, "local_dir": None, "local_files_only": None,
                          "device": "cpu", "batch_size": 8}


def options(name: str, given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` + ``COMMON`` merged with ``given``; unknown keys are refused (one line naming them)."""
    base = {**COMMON, **defaults}
    unknown = sorted(set(given) - set(base))
    if unknown:
        raise ValueError(f"{name}: unknown option(s) {', '.join(unknown)} (known: {', '.join(sorted(base))})")
    return {**base, **dict(given)}


def offline(opts: Mapping[str, Any]) -> bool:
    """``local_files_only``: the option when set, else true when ``HF_HUB_OFFLINE`` is set."""
    if opts.get("local_files_only") is not None:
        return bool(opts["local_files_only"])
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def load(name: str, cls: Any, opts: Mapping[str, Any], **kwargs: Any) -> Any:
    """``cls.from_pretrained`` from ``local_dir`` or the hub id at the pinned revision; BackendUnavailable if absent."""
    try:
        import transformers  # noqa: F401  (missing package -> unavailable, not a crash)
    except ImportError as e:
        raise BackendUnavailable(f"{name}: needs transformers ({one_line(e)})") from None
    source = opts.get("local_dir") or opts["model_id"]
    try:
        return cls.from_pretrained(str(source), revision=opts.get("revision") or None,
                                   local_files_only=offline(opts), **kwargs)
    except (OSError, ValueError) as e:
        raise BackendUnavailable(f"{name}: cannot load {source} ({one_line(e, 200)}); "
                                 "download the weights or pass local_dir") from None


def device(opts: Mapping[str, Any]) -> str:
    """The torch device string (``cuda`` falls back to ``cpu`` when no GPU is visible)."""
    import torch

    d = str(opts.get("device") or "cpu")
    return d if not d.startswith("cuda") or torch.cuda.is_available() else "cpu"
