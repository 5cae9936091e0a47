"""``worldrecall models list`` / ``models fetch``: what each backend needs, what is here, and prefetching.

Weights go to the standard caches (``default_cache_dirs()``): Hugging Face repositories into the HF hub
cache (``snapshot_download`` with the manifest revision), torchvision files into
``$TORCH_HOME/hub/checkpoints`` (sha256-prefix check, as torch.hub does) and other URL files into
``$TORCH_HOME/hub/worldrecall`` (full sha256 check where the manifest has one). Factories find them there
without any network access.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from worldrecall.core.models import ModelSpec, WeightFile
from worldrecall.plugins.models.manifest import META_PATTERNS
from worldrecall.plugins.models.weights import (
    cache_path,
    download_url_file,
    hf_cached_dir,
    hf_download,
    offline,
    weight_present,
)


def _hf_groups(weights: Iterable[WeightFile]) -> dict[tuple[str, str | None], list[str]]:
    groups: dict[tuple[str, str | None], list[str]] = {}
    for w in weights:
        if w.cache == "hf":
            groups.setdefault((w.repo, w.revision), []).append(w.filename)
    return groups


WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt")  # what a checkpoint file is named


def undeclared(spec: ModelSpec) -> bool:
    """A reference backend that lists no weight files: ``from_pretrained`` resolves them from its model id."""
    return not spec.weights and spec.kind == "reference"


def undeclared_on_disk(spec: ModelSpec) -> list[Path]:
    """The checkpoint files of an undeclared backend's model id in the HF cache (empty: nothing on disk)."""
    snap = hf_cached_dir(spec.model_id, spec.revision or None, []) if "/" in spec.model_id else None
    return sorted({p for g in WEIGHT_GLOBS for p in snap.rglob(g)}) if snap is not None else []


def spec_present(spec: ModelSpec) -> bool:
    """Whether a backend's weights are on disk: every declared file cached; for a reference backend that
    declares none, a checkpoint of its model id in the HF cache. True only for weight-free backends
    without checking anything."""
    if undeclared(spec):
        return bool(undeclared_on_disk(spec))
    return all(weight_present(w) for w in spec.weights)


def _size_mb(spec: ModelSpec) -> float | None:
    """Declared sizes (approximate), the bytes on disk for an undeclared backend, 0 when weight-free."""
    if undeclared(spec):
        found = undeclared_on_disk(spec)
        return round(sum(p.stat().st_size for p in found) / 1e6, 1) if found else None
    sizes = [w.size_mb for w in spec.weights if w.size_mb is not None]
    return round(sum(sizes), 1) if sizes else (0.0 if not spec.weights else None)


def list_models(specs: Mapping[str, ModelSpec] | Iterable[ModelSpec]) -> list[dict[str, Any]]:
    """One row per backend: name, role, kind, model_id, revision, licence, size (MB), present locally."""
    items = specs.values() if isinstance(specs, Mapping) else specs
    rows = []
    for s in sorted(items, key=lambda s: (s.role, s.kind, s.name)):
        files = [f"{w.repo}/{w.filename}" for w in s.weights]
        if undeclared(s):
            files = [str(p) for p in undeclared_on_disk(s)] or [f"{s.model_id} (resolved by from_pretrained)"]
        rows.append({
            "name": s.name, "role": s.role, "kind": s.kind, "model_id": s.model_id,
            "revision": s.revision or ("main" if any(w.cache == "hf" for w in s.weights) or undeclared(s) else ""),
            "licence": s.licence,
            "size_mb": _size_mb(s),
            "present": spec_present(s),
            "files": files,
            "requires": list(s.requires), "extra": s.extra or "",
        })
    return rows


def fetch(names: Iterable[str] | None, specs: Mapping[str, ModelSpec], *, force: bool = False,
          report: Callable[[str], None] | None = None) -> list[str]:
    """Download the weights of the named backends (all with weights when ``names`` is None).

    Each file's outcome is passed to ``report`` (default: print to stderr). Returns the failures, one
    line each (empty = everything is in the caches), so ``worldrecall models fetch`` can exit non-zero.
    Unknown names and an offline hub are failures too; an offline hub is never contacted.
    """
    say = report or (lambda line: print(line, file=sys.stderr))
    failures: list[str] = []
    chosen: list[ModelSpec] = []
    for n in (sorted(s.name for s in specs.values() if s.weights) if names is None else names):
        if n in specs:
            chosen.append(specs[n])
        else:
            failures.append(f"{n}: unknown backend (known: {', '.join(sorted(specs))})")
    for s in chosen:
        if undeclared(s):
            say(f"{s.name}: present" if spec_present(s) else
                f"{s.name}: its weights are not listed here; the backend downloads {s.model_id} itself on first "
                "use (online), after which `worldrecall models list` shows it present")
            continue
        if not s.weights:
            say(f"{s.name}: no weights needed ({s.kind})")
            continue
        if not force and spec_present(s):
            say(f"{s.name}: present")
            continue
        if offline():
            failures.append(f"{s.name}: weights missing and the hub is offline (HF_HUB_OFFLINE / "
                            "WORLDRECALL_OFFLINE is set); unset it to fetch")
            continue
        for (repo, rev), files in _hf_groups(s.weights).items():
            try:
                snap = hf_download(repo, rev, [*files, *META_PATTERNS])
                say(f"{s.name}: {repo}@{rev or 'main'} -> {snap}")
            except Exception as e:  # gated repo, network, bad revision: report and go on
                failures.append(f"{s.name}: {repo}@{rev or 'main'}: {type(e).__name__}: {e}")
        for w in s.weights:
            if w.cache == "hf":
                continue
            dst = cache_path(w)
            if dst.is_file() and not force:
                say(f"{s.name}: {w.filename} present at {dst}")
                continue
            try:
                download_url_file(w, dst)
                say(f"{s.name}: {w.filename} -> {dst}")
            except Exception as e:
                failures.append(f"{s.name}: {w.url}: {type(e).__name__}: {e}")
    for f in failures:
        say(f"FAILED {f}")
    return failures
