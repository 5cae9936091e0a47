"""The content-addressed store: one file per key, JSON or safetensors, written atomically.

``<root>/<kind>/<key[:2]>/<key>.json`` holds ``{"digest": sha256(entry text), "entry": …}``;
``<key>.safetensors`` holds a measurement's arrays, with its JSON values and a digest over both in the
header's metadata. A file that is missing, cut short or altered is a miss (and is removed), never a wrong
entry. In front of the files sits a plain bounded LRU keyed by the entry's name (kind and key) alone: a key names its
content, so an entry in memory can never be stale.

A store has a mode (config ``cache.mode``): ``use`` reads and writes; ``refresh`` treats every file written
before it was opened as absent (and overwrites it), while what this run writes — in this process or a
worker it forked — is read back; ``off`` reads and writes nothing. A file read from disk has its mtime set
to now, so an entry's mtime is when it was last written or used (``worldrecall cache prune`` removes the least
recently used first).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.atomic import atomic_write

log = logging.getLogger(__name__)
LRU_ENTRIES = 4096
MODES = ("use", "refresh", "off")


_JSON = json.JSONEncoder(sort_keys=True, allow_nan=True, separators=(",", ":"))  # one, not one an entry


def _json_text(value: Any) -> str:
    return _JSON.encode(value)


def split_measurement(m: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Arrays go to safetensors; everything else must be JSON-able and goes to the header's metadata."""
    arrays, meta = {}, {}
    for k, v in m.items():
        if isinstance(v, np.ndarray):
            if v.dtype == object:
                raise TypeError(f"measurement {k!r}: object arrays are not cacheable (no pickle)")
            arrays[k] = v
        else:
            meta[k] = v
    return arrays, meta


def _arrays_digest(arrays: Mapping[str, np.ndarray], meta_text: str) -> str:
    h = hashlib.sha256(meta_text.encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


_HEAD = '{"digest":"'
_MID = '","entry":'


def _entry(raw: str) -> tuple[Any, str]:
    """(the entry, its canonical JSON) of a JSON entry file, its digest checked. A file as :meth:`Store.put_json`
    writes it (``{"digest":"<sha256>","entry":<canonical JSON>}``) is hashed as it is, without parsing and
    writing its entry again; any other layout is read in full and the entry's canonical JSON hashed."""
    n = len(_HEAD) + 64
    if raw.startswith(_HEAD) and raw[n:n + len(_MID)] == _MID and raw.endswith("}"):
        digest, text = raw[len(_HEAD):n], raw[n + len(_MID):-1]
        if hashlib.sha256(text.encode()).hexdigest() == digest:
            return json.loads(text), text
    doc = json.loads(raw)
    text = _json_text(doc["entry"])
    if doc["digest"] != hashlib.sha256(text.encode()).hexdigest():
        raise ValueError("digest mismatch")
    return json.loads(text), text


class Store:
    """Get and put entries by (kind, key); ``enabled=False`` (or ``mode="off"``) stores nothing and finds
    nothing; ``mode="refresh"`` finds only what was written since the store was opened."""

    def __init__(self, root: Path | str, enabled: bool = True, lru_entries: int = LRU_ENTRIES, mode: str = "use"):
        if mode not in MODES:
            raise ValueError(f"cache.mode: expected one of {', '.join(MODES)}, got {mode!r}")
        self.root = Path(root)
        self._root = str(self.root)
        self.enabled = enabled and mode != "off"
        self.mode = mode if self.enabled else "off"
        # refresh: files older than this (the file system's own clock, read from a file written now) are misses
        self.not_before_ns = _fs_now_ns(self.root) if self.mode == "refresh" else None
        self.lru: OrderedDict[str, Any] = OrderedDict()
        self.lru_entries = lru_entries
        self.hits: dict[str, int] = {}
        self.misses: dict[str, int] = {}
        self.corrupt = 0

    def path(self, kind: str, key: str, suffix: str = ".json") -> Path:
        return self.root / kind / key[:2] / f"{key}{suffix}"

    def has(self, kind: str, key: str, suffix: str = ".json") -> bool:
        if not self.enabled:
            return False
        if f"{kind}/{key}" in self.lru:
            return True
        try:
            st = self.path(kind, key, suffix).stat()
        except OSError:
            return False
        return self._current(st)

    def _current(self, st: os.stat_result) -> bool:
        """Whether a file in this state may be read (refresh: only one written since the store opened)."""
        return self.not_before_ns is None or st.st_mtime_ns >= self.not_before_ns

    def _stale(self, p: Path) -> bool:
        """refresh: whether ``p`` was written before this store opened (then it is a miss); raises
        FileNotFoundError for a missing file, as the read would."""
        return self.not_before_ns is not None and not self._current(p.stat())

    @staticmethod
    def _used(p: Path | str) -> None:
        """Mark ``p`` as just used (its mtime), for the least-recently-used prune."""
        try:
            os.utime(p)
        except OSError:
            pass

    # -- memory ---------------------------------------------------------------------------------
    def _recall(self, key: str) -> Any:
        if key in self.lru:
            self.lru.move_to_end(key)
            return self.lru[key]
        return None

    def _keep(self, key: str, value: Any) -> None:
        self.lru[key] = value
        self.lru.move_to_end(key)
        while len(self.lru) > self.lru_entries:
            self.lru.popitem(last=False)

    def _count(self, kind: str, hit: bool) -> None:
        counts = self.hits if hit else self.misses
        counts[kind] = counts.get(kind, 0) + 1

    def _damaged(self, p: Path, e: Exception) -> None:
        self.corrupt += 1
        log.warning("cache entry %s is damaged (%s); computing it again", p, e)
        try:
            p.unlink()
        except OSError:
            pass

    # -- JSON -----------------------------------------------------------------------------------
    def get_json(self, kind: str, key: str) -> Any:
        """The entry stored under ``key``, or None (a fresh copy: callers may change it)."""
        if not self.enabled:
            return None
        text = self._recall(f"{kind}/{key}")
        if text is not None:
            self._count(kind, True)
            return json.loads(text)
        p = os.path.join(self._root, kind, key[:2], f"{key}.json")  # a plain string: a few thousand reads a job
        try:
            if self.not_before_ns is not None and self._stale(Path(p)):
                self._count(kind, False)
                return None
            with open(p, encoding="utf-8") as f:
                raw = f.read()
            value, text = _entry(raw)
        except FileNotFoundError:
            self._count(kind, False)
            return None
        except Exception as e:  # noqa: BLE001  (cut short, altered, not ours: a miss)
            self._damaged(Path(p), e)
            self._count(kind, False)
            return None
        self._used(p)
        self._keep(f"{kind}/{key}", text)
        self._count(kind, True)
        return value

    def put_json(self, kind: str, key: str, entry: Any) -> Any:
        """Store ``entry``; returns it as a later :meth:`get_json` will (JSON turns tuples into lists …)."""
        text = _json_text(entry)
        if self.enabled:
            doc = '{"digest":"%s","entry":%s}' % (hashlib.sha256(text.encode()).hexdigest(), text)
            try:
                atomic_write(self.path(kind, key), lambda f: f.write(doc.encode("utf-8")))
            except OSError as e:  # a full or read-only cache costs time, never results
                log.warning("could not write cache entry %s/%s: %s", kind, key, e)
            self._keep(f"{kind}/{key}", text)
        return json.loads(text)

    # -- arrays (measurements) -------------------------------------------------------------------
    def get_arrays(self, kind: str, key: str) -> dict[str, Any] | None:
        """A measurement (arrays and JSON values) stored under ``key``, or None. Arrays are fresh copies."""
        if not self.enabled:
            return None
        got = self._recall(f"{kind}/{key}")
        if got is None:
            p = self.path(kind, key, ".safetensors")
            try:
                if self._stale(p):
                    self._count(kind, False)
                    return None
                got = _read_arrays(p)
            except FileNotFoundError:
                self._count(kind, False)
                return None
            except Exception as e:  # noqa: BLE001
                self._damaged(p, e)
                self._count(kind, False)
                return None
            self._used(p)
            self._keep(f"{kind}/{key}", got)
        self._count(kind, True)
        arrays, meta_text = got
        return {**json.loads(meta_text), **{k: a.copy() for k, a in arrays.items()}}

    def put_arrays(self, kind: str, key: str, measurement: Mapping[str, Any]) -> dict[str, Any]:
        """Store a measurement; returns it exactly as a later :meth:`get_arrays` will."""
        from safetensors.numpy import save

        arrays, meta = split_measurement(measurement)
        meta_text = _json_text(meta)
        arrays = {k: np.ascontiguousarray(a) for k, a in arrays.items()}
        if self.enabled:
            blob = save(arrays, metadata={"meta": meta_text, "digest": _arrays_digest(arrays, meta_text)})
            try:
                atomic_write(self.path(kind, key, ".safetensors"), lambda f: f.write(blob))
            except OSError as e:
                log.warning("could not write cache entry %s/%s: %s", kind, key, e)
            self._keep(f"{kind}/{key}", (arrays, meta_text))
        return {**json.loads(meta_text), **{k: a.copy() for k, a in arrays.items()}}


def store_for(cfg: Mapping[str, Any]) -> Store:
    """The store of a resolved config: ``cache_dir`` in ``cache.mode`` (none without a ``cache_dir``)."""
    root = cfg.get("cache_dir")
    return Store(root or ".", enabled=bool(root), mode=str((cfg.get("cache") or {}).get("mode") or "use"))


def _fs_now_ns(root: Path) -> int:
    """Now, on the file system's clock (a file's mtime is set from a coarse kernel clock, which can lag
    ``time.time_ns()`` by a tick): the mtime of a file written under ``root`` now."""
    import tempfile
    import time

    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".now-")
        try:
            return os.fstat(fd).st_mtime_ns
        finally:
            os.close(fd)
            os.unlink(tmp)
    except OSError:
        return time.time_ns()


def _read_arrays(p: Path) -> tuple[dict[str, np.ndarray], str]:
    from safetensors import safe_open
    from safetensors.numpy import load

    data = p.read_bytes()
    arrays = load(data)
    with safe_open(str(p), framework="numpy") as f:
        header = f.metadata() or {}
    meta_text = header["meta"]
    if header.get("digest") != _arrays_digest(arrays, meta_text):
        raise ValueError("digest mismatch")
    return arrays, meta_text


class VideoFacts:
    """A video's decoded frame count and size (``core.video.FactsCache``), kept in the store under the key of
    its content and of the decoder (``core/video.py``'s code, the libraries' versions)."""

    def __init__(self, store: Store):
        from worldrecall.engine.cache.keys import code_digest, library_versions

        self.store = store
        self.identity = {"name": "video.facts", "code": code_digest("worldrecall.core.video"),
                         "libraries": library_versions()}

    def _key(self, content_hash: str) -> str:
        from worldrecall.engine.cache.keys import key_of

        return key_of(self.identity, content_hash)

    def get(self, content_hash: str) -> dict[str, int] | None:
        return self.store.get_json("video_facts", self._key(content_hash))

    def put(self, content_hash: str, facts: dict[str, int]) -> None:
        self.store.put_json("video_facts", self._key(content_hash), facts)
