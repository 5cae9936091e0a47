"""Content-addressed measurement cache: npz (allow_pickle=False) with an embedded digest, atomic writes.

Key = hash of (metric name + version, case fingerprint — video/reference/sidecar bytes, annotations, text —,
alignment, measurement params, model ids and revisions). Each entry is one ``.npz`` file holding the
measurement's arrays, its JSON-able values under ``__meta__`` and a sha256 over both under
``__digest__``. A file that fails to load or whose digest does not match is reported and recomputed.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.atomic import atomic_write, atomic_write_text

log = logging.getLogger(__name__)

_READ_WHOLE = 1 << 20  # bytes
_META = "__meta__"
_DIGEST = "__digest__"


def cache_key(parts: Mapping[str, Any]) -> str:
    """Stable sha256 of a JSON-able mapping."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


# a plain dtype's .str -> str(dtype), which costs ~7 us: an OPIS entry has 165 arrays of a few dtypes
_DTYPE_TEXT: dict[str, bytes] = {}


def _digest(arrays: Mapping[str, np.ndarray], meta_bytes: bytes) -> str:
    h = hashlib.sha256(meta_bytes)
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(k.encode())
        dt = a.dtype
        plain = dt.names is None and dt.subdtype is None and dt.metadata is None  # then .str says it all
        text = _DTYPE_TEXT.get(dt.str) if plain else None
        if text is None:
            text = str(dt).encode()
            if plain:
                _DTYPE_TEXT[dt.str] = text
        h.update(text)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def split_measurement(m: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Arrays go to the npz; everything else must be JSON-able and goes to ``__meta__``."""
    arrays, meta = {}, {}
    for k, v in m.items():
        if k in (_META, _DIGEST):
            raise ValueError(f"measurement key {k!r} is reserved")
        if isinstance(v, np.ndarray):
            if v.dtype == object:
                raise TypeError(f"measurement {k!r}: object arrays are not cacheable (no pickle)")
            arrays[k] = v
        else:
            meta[k] = v
    return arrays, meta


class MeasurementCache:
    """Get-or-compute store for measurements, safe under concurrent writers and kill -9."""

    def __init__(self, root: Path | str, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled
        self.hits = 0
        self.misses = 0
        self.corrupt = 0

    def path_for(self, metric: str, key: str) -> Path:
        return self.root / metric / key[:2] / f"{key}.npz"

    def load(self, metric: str, key: str) -> dict[str, Any] | None:
        p = self.path_for(metric, key)
        try:
            size = p.stat().st_size
        except OSError:  # not computed yet
            return None
        try:
            # a small entry is read at once (zipfile's seek-and-read per member costs more than the bytes)
            data = self._arrays(p, size)
            meta_bytes = data.pop(_META).tobytes()
            digest = bytes(data.pop(_DIGEST).tobytes()).decode()
            if digest != _digest(data, meta_bytes):
                raise ValueError("digest mismatch")
            meta = json.loads(meta_bytes)
        except Exception as e:  # corrupt zip, missing keys, tampered bytes: all mean "recompute"
            self.corrupt += 1
            log.warning("cache entry %s is corrupt or tampered (%s); recomputing", p, e)
            try:
                p.unlink()
            except OSError:
                pass
            return None
        return {**meta, **data}

    def _arrays(self, p: Path, size: int) -> dict[str, np.ndarray]:
        """Every array of the entry file ``p`` (``size`` bytes), as ``np.load(allow_pickle=False)`` reads it."""
        with np.load(io.BytesIO(p.read_bytes()) if size <= _READ_WHOLE else p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    def store(self, metric: str, key: str, measurement: Mapping[str, Any]) -> None:
        arrays, meta = split_measurement(measurement)
        meta_bytes = json.dumps(meta, sort_keys=True, allow_nan=True).encode()
        payload = dict(arrays)
        payload[_META] = np.frombuffer(meta_bytes, dtype=np.uint8)
        payload[_DIGEST] = np.frombuffer(_digest(arrays, meta_bytes).encode(), dtype=np.uint8)
        # atomic publish: readers see the old entry or the whole new one. No fsync: an entry that a power
        # loss leaves empty or torn fails its digest on load and is recomputed, so syncing buys nothing
        # built in memory, then written at once: zipfile seeks back over every member's header, and on a
        # file each seek flushes a small write (same bytes, about half the time for 150-array entries)
        buf = io.BytesIO()
        np.savez(buf, **payload)
        atomic_write(self.path_for(metric, key), lambda f: f.write(buf.getbuffer()))

    def get_or_compute(self, metric: str, key: str, compute: Callable[[], Mapping[str, Any]]) -> tuple[dict[str, Any], bool]:
        """Return (measurement, hit). Round-trips fresh results through the same encoding as cached ones."""
        if self.enabled:
            got = self.load(metric, key)
            if got is not None:
                self.hits += 1
                return got, True
        self.misses += 1
        m = dict(compute())
        if not self.enabled:
            return m, False
        self.store(metric, key, m)
        arrays, meta = split_measurement(m)
        # scoring must see exactly what a later cache hit would see (JSON turns tuples into lists, …)
        return {**json.loads(json.dumps(meta, allow_nan=True)), **arrays}, False


class ScoreCache:
    """Memo of the pure score stage: (measurement key, metric version, thresholds) -> values (+ artifacts).

    ``score`` is a pure function, so its result can be reused whenever those inputs repeat: a sweep over
    one metric's thresholds re-scores that metric only, and every other metric's rows come from here.
    One small JSON file per entry, with a digest; a damaged entry is ignored and recomputed.
    """

    def __init__(self, root: Path | str, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled
        self.hits = 0

    def _path(self, metric: str, key: str) -> Path:
        return self.root / metric / key[:2] / f"{key}.json"

    def get(self, metric: str, key: str) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        p = self._path(metric, key)
        try:
            doc = json.loads(p.read_text())
            body = json.dumps(doc["entry"], sort_keys=True, allow_nan=True)
            if doc["digest"] != hashlib.sha256(body.encode()).hexdigest():
                raise ValueError("digest mismatch")
            entry = doc["entry"]
            if any(not Path(a).exists() for a in entry.get("artifacts", [])):
                return None  # artifacts were cleaned up: score again to rewrite them
        except FileNotFoundError:
            return None
        except Exception as e:
            log.warning("score cache entry %s unreadable (%s); re-scoring", p, e)
            return None
        self.hits += 1
        return entry

    def put(self, metric: str, key: str, entry: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        self.write_body(metric, key, json.dumps(entry, sort_keys=True, allow_nan=True))

    def write_body(self, metric: str, key: str, body: str) -> None:
        """Write the entry whose canonical JSON (sorted keys) is ``body``."""
        doc = json.dumps({"digest": hashlib.sha256(body.encode()).hexdigest(), "entry": json.loads(body)},
                         allow_nan=True)
        atomic_write_text(self._path(metric, key), doc)
