"""What a measurement receives, as identities: the backends of its model hub and the judges of its judge hub.

A measurement's key folds in the identity of every backend and judge the call is handed (its metric's roles,
optional roles and judges), read from the hub objects themselves, never from a list kept beside the call:

- a backend: its name, role, kind and model id, the digest of its factory's code along its class hierarchy,
  its options (those in the key: :mod:`.classified`), the content digest of every file or
  folder a path option names (``local_dir`` …), its weight files (a pinned sha256, else the content digest of
  the file in the local cache, else ``missing``), the versions of the libraries its code imports, and its
  state: ``available``, or ``unavailable: …`` when a package it requires does not import — so installing it
  later is a new key;
- a judge: the same for its factory (its prompt building and answer parsing are that code), options and
  checkpoint (a ``model_path`` folder by content).

Identities are computed once per hub (per run), lazily, on first use; file digests go through
:mod:`worldrecall.core.digests`, which trusts a file's state safely, so a multi-GB checkpoint is hashed once.
:meth:`~worldrecall.engine.stages.pipeline.CasePipeline.keyed` returns everything a measurement key is made
of, as the JSON the key hashes (what ``cache explain`` prints).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from collections.abc import Mapping
from typing import Any

from worldrecall.core.components import PathParam
from worldrecall.core.digests import file_digest
from worldrecall.core.judges import JudgeHub
from worldrecall.core.models import ModelHub, ModelSpec, WeightFile, default_cache_dirs
from worldrecall.engine.cache.classified import OPTIONS_OUT_OF_KEY
from worldrecall.engine.cache.keys import (
    callable_code_digest,
    callable_modules,
    imported_libraries,
    inputs_digest,
    key_of,
)

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _state(requires: tuple[str, ...]) -> str:
    """``available``, or which required packages do not import (checked without importing them)."""
    missing = []
    for name in requires:
        module = name.replace("-", ".") if "-" in name else name  # google-genai -> google.genai
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a blocked entry (``sys.modules[name] = None``) or a missing parent
            found = False
        if not found:
            missing.append(name)
    return f"unavailable: {', '.join(missing)} not importable" if missing else "available"


def _options(defaults: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[dict[str, Any], list[list[str]]]:
    """(the options in the key, the content digests of the files and folders its path options name)."""
    merged = {**defaults, **options}
    paths = [k for k, v in defaults.items() if isinstance(v, PathParam)]
    files = inputs_digest(str(merged[k]) for k in paths if merged.get(k))
    return {k: v for k, v in merged.items() if k not in OPTIONS_OUT_OF_KEY}, files


def _cached_weight(w: WeightFile, revision: str) -> list[str]:
    """[file, digest] of one weight file as the local caches hold it (``missing`` when they do not)."""
    dirs = default_cache_dirs()
    if w.sha256:
        return [w.filename, f"sha256:{w.sha256}"]  # pinned: the loader checks the bytes against it
    if w.cache != "hf":
        path = dirs[w.cache] / w.filename
        return [w.filename, file_digest(path) if path.is_file() else "missing"]
    repo = dirs["hf"] / f"models--{w.repo.replace('/', '--')}"
    rev = revision or w.revision or "main"
    if not _COMMIT.match(rev):
        try:
            rev = (repo / "refs" / rev).read_text().strip()
        except OSError:
            return [f"{w.repo}/{w.filename}", "missing"]
    snap = repo / "snapshots" / rev
    found = sorted(snap.glob(w.filename)) if snap.is_dir() else []
    return [f"{w.repo}/{w.filename}@{rev}",
            ",".join(file_digest(p) for p in found if p.is_file()) or "missing"]


def backend_identity(hub: ModelHub, role: str) -> dict[str, Any]:
    """The identity of the backend ``hub`` serves for ``role`` (memoised on the hub: once per run)."""
    spec = hub.spec_for(role)  # BackendUnavailable for a role without a backend: the caller's skip
    memo = hub.__dict__.setdefault("_identities", {})
    if spec.name not in memo:
        memo[spec.name] = _backend_identity(spec, hub.options.get(spec.name, {}))
    return memo[spec.name]


def _backend_identity(spec: ModelSpec, options: Mapping[str, Any]) -> dict[str, Any]:
    opts, files = _options(spec.defaults, options)
    local = bool(opts.get("local_dir"))  # weights come from local_dir (hashed above), not the caches
    revision = str(opts.get("revision") or "")
    return {"name": spec.name, "role": spec.role, "kind": spec.kind, "model_id": spec.model_id or spec.name,
            "revision": spec.revision, "code": callable_code_digest(spec.factory),
            "libraries": imported_libraries(*callable_modules(spec.factory)), "options": opts, "files": files,
            "weights": [] if local else [_cached_weight(w, revision) for w in spec.weights],
            "state": _state(tuple(spec.requires))}


def judge_identity(judges: JudgeHub | None, name: str) -> dict[str, Any]:
    """The identity of the judge ``judges`` builds under ``name`` (memoised on the hub: once per run)."""
    if judges is None:
        return {"name": name, "state": "no judge hub"}
    memo = judges.__dict__.setdefault("_identities", {})
    if name not in memo:
        spec = judges.specs.get(name)
        if spec is None:
            memo[name] = {"name": name, "state": "unknown judge"}
        else:
            opts, files = _options(spec.defaults, judges.options.get(name, {}))
            memo[name] = {"name": name, "code": callable_code_digest(spec.factory),
                          "libraries": imported_libraries(*callable_modules(spec.factory)), "options": opts,
                          "files": files, "state": _state(tuple(spec.requires))}
    return memo[name]


def received_identity(metric: Any, hub: ModelHub, judges: JudgeHub | None) -> dict[str, Any]:
    """The identities of what a metric's measure is handed: its roles' backends (an optional role without one:
    ``""``), and its judges."""
    return {"models": {r: backend_identity(hub, r) for r in metric.models},
            "optional_models": {r: backend_identity(hub, r) if hub.selection.get(r) else ""
                                for r in metric.optional_models},
            "judges": {j: judge_identity(judges, j) for j in metric.judge_names()}}


class IdentifiedModelHub(ModelHub):
    """A :class:`ModelHub` that reports the identity of each backend it serves and, given a store, keeps each
    model or classical backend's outputs there (:class:`CachedOutputs`)."""

    store: Any = None

    def identity(self, role: str) -> dict[str, Any]:
        """See :func:`backend_identity`."""
        return backend_identity(self, role)

    def get(self, role: str) -> Any:
        """The backend of ``role`` (built once), its outputs cached by what it is given."""
        backend = super().get(role)
        spec = self.spec_for(role)
        if self.store is None or spec.kind == "sidecar":
            return backend
        wrapped = self.__dict__.setdefault("_cached", {})
        if spec.name not in wrapped:
            wrapped[spec.name] = CachedOutputs(backend, backend_identity(self, role), self.store)
        return wrapped[spec.name]


class IdentifiedJudgeHub(JudgeHub):
    """A :class:`JudgeHub` that reports the identity of each judge it builds."""

    def identity(self, name: str) -> dict[str, Any]:
        """See :func:`judge_identity`."""
        return judge_identity(self, name)



# -- a backend's outputs, cached by what it is given ---------------------------------------------------------

class _Unkeyable(Exception):
    """An argument or a result the output cache cannot key or keep: the call runs through."""


def _feed(h: Any, value: Any) -> None:
    """Hash one argument by content (arrays by dtype, shape and bytes); anything else is :class:`_Unkeyable`."""
    import numpy as np

    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        h.update(f"a{a.dtype.str}{a.shape}".encode())
        h.update(a.data if a.size else b"")
    elif isinstance(value, (list, tuple)):
        h.update(f"l{len(value)}".encode())
        for v in value:
            _feed(h, v)
    elif isinstance(value, Mapping):
        h.update(f"d{len(value)}".encode())
        for k in sorted(value, key=str):
            h.update(f"{k!s}\0".encode())
            _feed(h, value[k])
    elif value is None or isinstance(value, (bool, int, float, str, range)):
        h.update(f"s{type(value).__name__}{value!r}\0".encode())
    else:
        raise _Unkeyable(type(value).__name__)


def _encode(result: Any) -> dict[str, Any]:
    """A result as arrays (one array, or a tuple / list of them) for the store; else :class:`_Unkeyable`."""
    import numpy as np

    if isinstance(result, np.ndarray) and result.dtype != object:
        return {"shape": "array", "0": result}
    if isinstance(result, (tuple, list)) and all(isinstance(a, np.ndarray) and a.dtype != object for a in result):
        return {"shape": type(result).__name__, "n": len(result), **{str(i): a for i, a in enumerate(result)}}
    raise _Unkeyable(type(result).__name__)


def _decode(entry: Mapping[str, Any]) -> Any:
    if entry["shape"] == "array":
        return entry["0"]
    items = [entry[str(i)] for i in range(int(entry["n"]))]
    return tuple(items) if entry["shape"] == "tuple" else items


# a weight-free backend's output above this size (per call) is recomputed rather than kept: DIS flow fields of
# one 72-frame 320x240 video are 44 MB, 780 MB over the default run, for a computation of about a second
DENSE_BYTES = 256 * 1024


def _nbytes(entry: Mapping[str, Any]) -> int:
    return sum(int(getattr(v, "nbytes", 0)) for v in entry.values())


class CachedOutputs:
    """A backend whose role methods' outputs are kept in the store under its identity, the method and the
    content of what it is given (frames, indices, options): a per-video output (poses, embeddings, flow, depth)
    is computed once whatever alignment, manifest field or threshold asked for it. ``case`` is not part of the
    key: a model or classical backend reads only the frames it is handed (sidecar backends, which read the case's
    files, are not wrapped). Results other than arrays run through uncached, and so do a weight-free backend's
    dense outputs (over :data:`DENSE_BYTES` a call: cheaper to compute again than to keep)."""

    def __init__(self, inner: Any, identity: Mapping[str, Any], store: Any):
        self._inner, self._identity, self._store = inner, dict(identity), store

    def __getattr__(self, attr: str) -> Any:
        val = getattr(self._inner, attr)
        if attr.startswith("_") or not callable(val):
            return val

        def call(*args: Any, **kwargs: Any) -> Any:
            h = hashlib.sha256()
            try:
                _feed(h, [list(args), {k: v for k, v in kwargs.items() if k != "case"}])
            except _Unkeyable:
                return val(*args, **kwargs)
            key = key_of(self._identity, h.hexdigest(), {"method": attr})
            got = self._store.get_arrays("backend_outputs", key)
            if got is not None:
                return _decode(got)
            result = val(*args, **kwargs)
            try:
                entry = _encode(result)
            except _Unkeyable:
                return result
            if self._identity.get("kind") != "reference" and _nbytes(entry) > DENSE_BYTES:
                return result  # a weight-free backend's dense output (DIS flow fields): cheaper to recompute than keep
            return _decode(self._store.put_arrays("backend_outputs", key, entry))

        return call

    @property
    def inner(self) -> Any:
        return getattr(self._inner, "inner", self._inner)
