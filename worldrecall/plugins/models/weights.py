"""Finding a backend's weight files locally, and fetching them when allowed.

One rule for every reference backend: a factory asks :func:`hf_dir` (Hugging Face repositories) or
:func:`weight_file` (torchvision / URL files) for a *local path*. Both look in the option ``local_dir``
first, then in the standard caches (``default_cache_dirs()``). When a file is missing they download it
unless the hub is offline (``HF_HUB_OFFLINE=1`` or ``WORLDRECALL_OFFLINE=1``), in which case they raise
:class:`BackendUnavailable` at once (no network, no retries) naming the files and the fetch command.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worldrecall.core.models import BackendUnavailable, WeightFile, default_cache_dirs
from worldrecall.plugins.models.manifest import META_PATTERNS

_TRUE = {"1", "true", "yes", "on"}
_HASH_PREFIX = re.compile(r"-([a-f0-9]{8,})\.")  # torch.hub's convention: name-<sha256 prefix>.ext


def offline() -> bool:
    """True when no download may be attempted."""
    return any(os.environ.get(k, "").strip().lower() in _TRUE
               for k in ("HF_HUB_OFFLINE", "WORLDRECALL_OFFLINE"))


def missing_message(name: str, what: str) -> str:
    """The one-line reason a backend cannot be built because weights are absent."""
    return (f"{name}: weights not available locally ({what}); run `worldrecall models fetch {name}` "
            f"with network access, or pass the option local_dir=<folder holding them>")


def is_glob(filename: str) -> bool:
    return any(c in filename for c in "*?[")


def hf_cached_dir(repo: str, revision: str | None, required: Sequence[str]) -> Path | None:
    """The snapshot folder of ``repo`` in the HF cache if every required file is in it, else None.

    Never touches the network.
    """
    from huggingface_hub import snapshot_download

    try:
        snap = Path(snapshot_download(repo, revision=revision, cache_dir=default_cache_dirs()["hf"],
                                      local_files_only=True))
    except Exception:  # LocalEntryNotFoundError and friends: not cached
        return None
    return snap if all((snap / f).exists() for f in required) else None


def hf_download(repo: str, revision: str | None, files: Sequence[str]) -> Path:
    """Download ``files`` (exact names or glob patterns) of one repository into the HF cache."""
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo, revision=revision, cache_dir=default_cache_dirs()["hf"],
                                  allow_patterns=list(files)))


def hf_dir(name: str, repo: str, *, revision: str | None = None, required: Sequence[str] = ("config.json",),
           patterns: Sequence[str] = META_PATTERNS, local_dir: str | os.PathLike | None = None) -> Path:
    """A local folder holding ``required`` files of HF repository ``repo`` (from local_dir or the cache).

    Raises :class:`BackendUnavailable` when they are missing and downloading is not allowed or fails.
    """
    if local_dir is not None:
        root = Path(local_dir).expanduser()
        missing = [f for f in required if not (root / f).exists()]
        if missing:
            raise BackendUnavailable(f"{name}: local_dir {root} lacks {', '.join(missing)}")
        return root
    snap = hf_cached_dir(repo, revision, required)
    if snap is not None:
        return snap
    what = f"{repo}@{revision or 'main'}: {', '.join(required)}"
    if offline():
        raise BackendUnavailable(missing_message(name, what))
    try:
        snap = hf_download(repo, revision, [*required, *patterns])
    except Exception as e:  # gated repo, no network, bad revision ...
        raise BackendUnavailable(f"{missing_message(name, what)}; download failed: {type(e).__name__}: {e}") from e
    if not all((snap / f).exists() for f in required):
        raise BackendUnavailable(missing_message(name, what))
    return snap


def weight_present(w: WeightFile, revision: str | None = None) -> bool:
    """Whether one weight file is in the local caches (a glob pattern: some cached file matches it; no network)."""
    if w.cache == "hf":
        if is_glob(w.filename):
            snap = hf_cached_dir(w.repo, revision or w.revision, [])
            return snap is not None and any(snap.glob(w.filename))
        return hf_cached_dir(w.repo, revision or w.revision, [w.filename]) is not None
    return cache_path(w).is_file()


def ensure_weights(name: str, files: Sequence[WeightFile], *, local_dir: str | os.PathLike | None = None,
                   revision: str | None = None) -> None:
    """Offline and some files missing from the caches: one BackendUnavailable naming all of them.

    ``revision`` (the backend option) overrides the manifest revision of the first repository listed.
    """
    if local_dir is not None or not offline():
        return  # local_dir is checked file by file; online, the resolvers download what is missing
    main = files[0].repo if files else ""
    missing = [f"{w.repo}/{w.filename}" if w.cache == "hf" else w.filename
               for w in files if not weight_present(w, revision if w.repo == main else None)]
    if missing:
        raise BackendUnavailable(missing_message(name, ", ".join(missing)))


def cache_path(w: WeightFile) -> Path:
    """Where a non-HF weight file lives in the standard caches."""
    return default_cache_dirs()[w.cache] / w.filename


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download_url_file(w: WeightFile, dst: Path) -> Path:
    """Download one URL weight file to ``dst``, checking its sha256 (full, or torch hub's name prefix)."""
    import torch.hub

    if not w.url:
        raise ValueError(f"{w.filename}: no URL to download from")
    dst.parent.mkdir(parents=True, exist_ok=True)
    m = _HASH_PREFIX.search(w.filename) if w.cache == "torch_hub" else None
    torch.hub.download_url_to_file(w.url, str(dst), hash_prefix=m.group(1) if m else None, progress=True)
    if w.sha256 and sha256_of(dst) != w.sha256:
        dst.unlink(missing_ok=True)
        raise ValueError(f"{w.filename}: sha256 mismatch after download from {w.url}")
    return dst


def weight_file(name: str, w: WeightFile, *, local_dir: str | os.PathLike | None = None) -> Path:
    """The local path of a torchvision/URL weight file (``local_dir`` may be the file or its folder)."""
    if local_dir is not None:
        root = Path(local_dir).expanduser()
        cand = root if root.is_file() else root / w.filename
        if not cand.is_file():
            raise BackendUnavailable(f"{name}: local_dir {root} lacks {w.filename}")
        return cand
    dst = cache_path(w)
    if dst.is_file():
        return dst
    what = f"{w.filename} (expected at {dst})"
    if offline():
        raise BackendUnavailable(missing_message(name, what))
    try:
        return download_url_file(w, dst)
    except Exception as e:
        raise BackendUnavailable(f"{missing_message(name, what)}; download failed: {type(e).__name__}: {e}") from e


def load_state_dict(path: Path) -> dict:
    """A tensor state dict from a ``.pth``/``.pt``/``.safetensors`` file, never unpickling code."""
    import torch

    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    sd = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    return sd


def required_hf_files(files: Sequence[WeightFile], repo: str) -> list[str]:
    """Exact (non-glob) file names a backend needs from one HF repository."""
    return [w.filename for w in files if w.cache == "hf" and w.repo == repo and not is_glob(w.filename)]


def hf_backend_folder(name: str, opts: Any, defaults: Any) -> tuple[Any, Path]:
    """The common start of every Hugging Face backend factory: parsed options and the local model folder.

    Checks the manifest's weights are present (offline: ``BackendUnavailable`` naming them and the fetch
    command), then resolves the snapshot folder (or ``local_dir``).
    """
    from worldrecall.plugins.models.manifest import entry
    from worldrecall.plugins.models.options import parse_options

    o = parse_options(name, opts, defaults)
    e = entry(name)
    ensure_weights(name, e.weights, local_dir=o.local_dir, revision=o["revision"])
    folder = hf_dir(name, e.model_id, revision=o["revision"], local_dir=o.local_dir,
                    required=required_hf_files(e.weights, e.model_id))
    return o, folder


def weights_probe(name: str, requires: Sequence[str], files: Sequence[WeightFile], model_id: str,
                  factory: Any) -> Any:
    """A :attr:`ModelSpec.probe` for a reference backend: ``None`` when its packages are importable and its
    weights are local (or may be downloaded), else the one-line reason its factory would raise — checked
    without loading anything (``worldrecall check``)."""
    import importlib.util

    def probe(opts: Any) -> str | None:
        if any(importlib.util.find_spec(m) is None for m in requires):
            try:  # a package is missing: the factory fails at its import, before any weight, in its own words
                factory(opts)
            except BackendUnavailable as e:
                return str(e)
            except Exception as e:  # noqa: BLE001  (as the run's plan would: the metric is skipped, saying why)
                return f"{name}: {type(e).__name__}: {e}"
            return None
        local_dir = (opts or {}).get("local_dir")
        if local_dir:
            root = Path(local_dir).expanduser()
            lacking = [f for f in required_hf_files(files, model_id) or ["."] if not (root / f).exists()]
            return f"{name}: local_dir {root} lacks {', '.join(lacking)}" if lacking else None
        try:
            ensure_weights(name, files, revision=(opts or {}).get("revision"))
        except BackendUnavailable as e:
            return str(e)
        return None

    return probe
