"""Perception backends: specs, the role interfaces metrics program against, and the lazy model hub.

A *role* is what a metric needs (``flow``, ``patch_embedder``, ``depth`` …); a *backend* is a registered
:class:`ModelSpec` that fills a role. Three kinds exist: ``reference`` (the papers' models, real weights),
``classical`` (weight-free algorithms) and ``sidecar`` (read what the dataset ships). Config picks one
backend per role; every score records which one produced it.

Every role method takes frames as uint8 RGB ``[H, W, 3]`` arrays plus keyword-only ``case`` and
``indices`` (generated-frame indices), so sidecar backends can read the case's files instead of pixels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Role:
    """A model role: what a metric asks the hub for (``flow``, ``depth``, ``opis_matcher`` …).

    Roles are open: any plugin may declare one through ``register_models`` (``register(Role(...))``) and
    any plugin may register a backend for it. ``defaults`` names the backend used for each backend set
    (``classical`` / ``reference``) when the config does not name one for this role.
    """

    name: str
    description: str = ""
    defaults: Mapping[str, str] = field(default_factory=dict)


KINDS = ("reference", "classical", "sidecar")


@dataclass(frozen=True)
class WeightFile:
    """One file a reference backend needs, and where it comes from."""

    repo: str                   # HF repo id, or "torchvision", or a URL host
    filename: str               # path inside the repo / file name in the cache
    revision: str | None = None
    sha256: str | None = None
    size_mb: float | None = None
    url: str | None = None      # direct URL for non-HF files
    cache: str = "hf"           # hf | torch_hub | url


@dataclass
class ModelSpec:
    """A perception backend registered through ``register_models``."""

    name: str
    role: str
    kind: str
    factory: Callable[[Mapping[str, Any]], Any]   # options -> model object implementing the role
    description: str = ""
    model_id: str = ""          # e.g. "facebook/dinov2-base"; part of every cache key
    revision: str = ""
    weights: list[WeightFile] = field(default_factory=list)
    licence: str = ""
    requires: tuple[str, ...] = ()   # importable modules (e.g. "lpips", "pyiqa")
    defaults: dict[str, Any] = field(default_factory=dict)
    extra: str | None = None    # pip extra that provides ``requires``
    # optional cheap check of one case (file existence, not decoding): None when the backend can serve it,
    # else a one-line reason. When it fails for EVERY case of a benchmark, the engine says so once, before
    # evaluating, and skips the metrics that need it instead of failing every case.
    preflight: Callable[[Any], str | None] | None = None
    fix: str = ""               # what to do when preflight fails everywhere (e.g. "use models=reference")
    # optional cheap check of the options (packages importable, weights on disk), without building: None when
    # the factory could build it, else the one-line reason it would raise. `worldrecall check` reads it
    # instead of loading the weights; a spec without one is built there as in a run.
    probe: Callable[[Mapping[str, Any]], str | None] | None = None

    def identity(self) -> dict[str, str]:
        return {"name": self.name, "model_id": self.model_id or self.name, "revision": self.revision}


class BackendUnavailable(Exception):
    """A backend that cannot be built here: missing weights (offline) or a missing optional package.

    The metric that needed it is *skipped* with this message; it is never swapped for another backend.
    """


# --- role interfaces (structural; backends need not inherit) ---------------------------------------


@dataclass
class Detection:
    """One text-prompted instance: a mask at the frame's native size and a confidence."""

    mask: np.ndarray  # bool [H, W]
    score: float
    box: tuple[float, float, float, float] | None = None  # xyxy pixels


class ModelHub:
    """Builds each configured backend once per run, on first use."""

    def __init__(self, specs: Mapping[str, ModelSpec], selection: Mapping[str, str],
                 options: Mapping[str, Mapping[str, Any]] | None = None, device: str = "cpu",
                 roles: Mapping[str, Role] | None = None, backend_set: str = ""):
        self.specs = dict(specs)
        self.backend_set = backend_set
        # role -> spec name: what the config names, else the role's declared default for this backend set
        self.selection = {r.name: r.defaults[backend_set] for r in (roles or {}).values()
                          if r.defaults.get(backend_set)}
        self.explicit = set(selection)  # roles the config names (a backend set's default may give way; these not)
        for role, name in selection.items():  # an explicit null leaves the role without a backend
            if name:
                self.selection[role] = name
            else:
                self.selection.pop(role, None)
        self.options = {k: dict(v) for k, v in (options or {}).items()}
        self.device = device
        self._built: dict[str, Any] = {}
        self._errors: dict[str, str] = {}
        self.forward_seconds: dict[str, float] = {}  # time spent inside backends, by spec name
        # `worldrecall check`: a backend whose spec has a probe is probed, never built (no weights loaded)
        self.probe_only = False

    def spec_for(self, role: str) -> ModelSpec:
        name = self.selection.get(role)
        if not name:
            in_set = f"the {self.backend_set} backend set has none; " if self.backend_set else ""
            raise BackendUnavailable(f"no backend selected for role {role!r} ({in_set}set models.{role}=<name>, "
                                     f"see `worldrecall models list`)")
        spec = self.specs.get(name)
        if spec is None:
            raise BackendUnavailable(f"unknown backend {name!r} for role {role!r} (see `worldrecall models list`)")
        if spec.role != role:
            raise BackendUnavailable(f"backend {name!r} fills role {spec.role!r}, not {role!r}")
        return spec

    def get(self, role: str) -> Any:
        spec = self.spec_for(role)
        if spec.name in self._errors:
            raise BackendUnavailable(self._errors[spec.name])
        if spec.name not in self._built:
            opts = {**spec.defaults, "device": self.device, **self.options.get(spec.name, {})}
            if self.probe_only and spec.probe is not None:
                reason = spec.probe(opts)
                if reason:
                    self._errors[spec.name] = reason
                    raise BackendUnavailable(reason)
                return Probed(spec.name)  # not kept: a later get() outside probe mode builds it
            try:
                self._built[spec.name] = _Timed(spec.factory(opts), spec.name, self.forward_seconds)
            except BackendUnavailable as e:
                self._errors[spec.name] = str(e)
                raise
        return self._built[spec.name]

    def backend_names(self, roles: Sequence[str]) -> dict[str, str]:
        return {r: self.selection.get(r, "") for r in roles}

    def identities(self, roles: Sequence[str]) -> dict[str, dict[str, str]]:
        return {r: self.spec_for(r).identity() for r in roles}


@dataclass(frozen=True)
class Probed:
    """What :meth:`ModelHub.get` returns in probe mode for a backend its probe found buildable (never called)."""

    name: str


class _Timed:
    """Proxy that adds the wall time of every public method call to ``forward_seconds``."""

    def __init__(self, inner: Any, name: str, sink: dict[str, float]):
        self._inner, self._name, self._sink = inner, name, sink

    def __getattr__(self, attr: str) -> Any:
        val = getattr(self._inner, attr)
        if attr.startswith("_") or not callable(val):
            return val

        def call(*a: Any, **k: Any) -> Any:
            import time

            t0 = time.perf_counter()
            try:
                return val(*a, **k)
            finally:
                self._sink[self._name] = self._sink.get(self._name, 0.0) + time.perf_counter() - t0

        return call

    @property
    def inner(self) -> Any:
        return self._inner


def default_cache_dirs() -> dict[str, Path]:
    """Where prefetched weights live: the standard Hugging Face and torch hub caches."""
    import os

    hf = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", Path.home() / ".cache/huggingface")) / "hub")
    torch_home = Path(os.environ.get("TORCH_HOME", Path.home() / ".cache/torch"))
    return {"hf": hf, "torch_hub": torch_home / "hub" / "checkpoints", "url": torch_home / "hub" / "worldrecall"}
