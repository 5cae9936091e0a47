"""A cache of aggregator outputs: one JSON file per (group of rows, aggregator, params, aggregator code).

Aggregators are pure reductions of rows, so a re-score job of a sweep (one metric's rows changed) or a warm
rerun (no row changed) can reuse the tables of every group whose rows are the same. The key covers
everything the output depends on: the rows themselves (every field but how the row was obtained, the
cache-hit flags), the aggregator's name and class, its resolved params (incl. the metadata the engine passes),
and a digest of the modules in its module's folder and of ``worldrecall/core`` (an edited aggregator is never
served a stale table).

Tables are stored as JSON (column names, dtypes, values; never pickle) and an entry is only written when it
reads back as exactly the same frame (values, dtypes, and the CSV the tables sink writes), so a table the
format cannot carry is simply recomputed every time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from worldrecall.core.atomic import atomic_write_text
from worldrecall.core.cache import cache_key
from worldrecall.core.digests import file_digest, file_state
from worldrecall.engine.stages.bounded import remember
from worldrecall.engine.stages.later import later

log = logging.getLogger(__name__)
FORMAT = 2  # bump when the stored layout changes
_CORE = Path(__file__).resolve().parents[2] / "core"


def _files_digest(files: list[Path], base: Path) -> str:
    """Digest of source files (names and bytes; per-file digests memoised by stat)."""
    h = hashlib.sha256()
    for p in sorted(files):
        h.update(str(p.relative_to(base)).encode())
        h.update(file_digest(p).encode())
    return h.hexdigest()


_CODE: dict[str, str] = {}  # module -> digest, once per process (sources do not change under a run)


def code_digest(agg: Any) -> str:
    """The aggregator's module with its sibling modules (a plugin package's helpers), and core's modules."""
    name = type(agg).__module__
    if name not in _CODE:
        mod = sys.modules.get(name)
        src = Path(getattr(mod, "__file__", "") or "")
        parts = [_files_digest(sorted(_CORE.glob("*.py")), _CORE)]
        if src.is_file():
            # a module inside a package: its folder's modules; a top-level module (site-packages): itself only
            siblings = sorted(src.parent.glob("*.py")) if getattr(mod, "__package__", "") else [src]
            parts.append(_files_digest(siblings, src.parent))
        _CODE[name] = hashlib.sha256("".join(parts).encode()).hexdigest()
    return _CODE[name]


def entry_key(agg: Any, name: str, params: Mapping[str, Any], digest: str) -> str:
    cls = type(agg)
    return cache_key({"format": FORMAT, "aggregator": name, "class": f"{cls.__module__}.{cls.__qualname__}",
                      "version": str(getattr(agg, "version", "")), "code": code_digest(agg),
                      "params": json.loads(json.dumps(params, sort_keys=True, default=str)), "rows": digest})


# -- frames as JSON ------------------------------------------------------------------------------------
def _cell(v: Any) -> Any:
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalars -> Python
        v = v.item()
    if v is pd.NA or v is pd.NaT:
        return None
    return v


def _encode(df: pd.DataFrame) -> dict[str, Any] | None:
    """A frame as plain JSON, or None when it is not one this format carries (index, attrs, column names)."""
    if not isinstance(df, pd.DataFrame) or df.attrs or not isinstance(df.index, pd.RangeIndex):
        return None
    if df.index.start != 0 or df.index.step != 1 or not all(isinstance(c, str) for c in df.columns):
        return None
    if df.columns.has_duplicates or not isinstance(df.columns.name, (str, type(None))):
        return None
    return {"columns": list(df.columns), "columns_name": df.columns.name, "dtypes": [str(t) for t in df.dtypes],
            "data": [[_cell(v) for v in df[c].tolist()] for c in df.columns]}


def _decode(doc: Mapping[str, Any]) -> pd.DataFrame:
    cols = {c: pd.Series(vals, dtype=t) for c, t, vals in zip(doc["columns"], doc["dtypes"], doc["data"])}
    df = pd.DataFrame(cols, columns=list(doc["columns"])) if doc["columns"] else pd.DataFrame()
    df.columns.name = doc.get("columns_name")  # e.g. an unstacked table's "status"
    return df


def _same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if list(a.columns) != list(b.columns) or [str(t) for t in a.dtypes] != [str(t) for t in b.dtypes]:
        return False
    if a.to_csv(index=False) != b.to_csv(index=False):
        return False
    try:
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    except AssertionError:
        return False
    for c in a.columns:  # object columns: the same Python types cell by cell (1 vs 1.0 vs True)
        if a[c].dtype == object and [type(_cell(v)) for v in a[c]] != [type(v) for v in b[c]]:
            return False
    return True


_PLAIN_DTYPES = {"int64", "float64", "bool", "object", "str"}  # "str": pandas 3's default strings


def _plain(df: pd.DataFrame) -> bool:
    """Only dtypes whose cells JSON writes as they are (no categories, dates, extension types)."""
    return all(str(t) in _PLAIN_DTYPES for t in df.dtypes)


def _plain_same(a: pd.DataFrame, b: pd.DataFrame, text: str) -> bool:
    """:func:`_same` for a frame of plain dtypes: the read-back frame writes the same JSON (every cell and
    dtype), and its object cells have the same Python types (a tuple is not a list, 1 is not 1.0)."""
    back = _encode(b)
    if back is None or json.dumps(back, sort_keys=True, allow_nan=True) != text:
        return False
    if list(a.columns) != list(b.columns) or [str(t) for t in a.dtypes] != [str(t) for t in b.dtypes]:
        return False
    return all(a[c].dtype != object or [type(_cell(v)) for v in a[c]] == [type(v) for v in b[c]] for c in a.columns)


class AggregateCache:
    """``<cache_dir>/aggregates/<key[:2]>/<key>.json``: ``{"digest", "tables": {name: frame}}``."""

    def __init__(self, root: Path | str | None, defer: bool = False):
        self.root = Path(root) if root is not None else None
        self.hits = self.misses = 0
        # defer: an entry computed here is kept in memory at once (trusted, as computed) and written after
        # the job's outputs (stages/later.py); a job's outputs then never wait for its cache files
        self.defer = defer

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, copy: bool = True) -> dict[str, pd.DataFrame] | None:
        """The entry's tables, or None. ``copy=False``: frames this process may share with later reads (the
        caller copies what it hands on, e.g. the engine only the tables that leave it unchanged)."""
        if self.root is None:
            return None
        p = self._path(key)
        known = _MEMO.get(str(p))
        # computed by this process, or read or written by it with the file unchanged since
        if known is not None and (known[0] is COMPUTED or known[0] == file_state(p)):
            self.hits += 1
            return {name: df.copy() for name, df in known[1].items()} if copy else dict(known[1])
        computed = (_MEMO.get(("computed", key)) or (None, None))[1]
        if computed is not None:  # computed by this process for another cache folder (a sweep's): the same key
            self.hits += 1
            remember(_MEMO, str(p), (COMPUTED, computed), MEMO_ENTRIES)
            if not p.exists():  # this folder gets its entry too (a later process finds it here)
                (later if self.defer else _now)(lambda: self._write(key, computed, remembered=True))
            return {name: df.copy() for name, df in computed.items()} if copy else dict(computed)
        try:
            doc = json.loads(p.read_text())
            body = json.dumps(doc["tables"], sort_keys=True, allow_nan=True)
            if doc["digest"] != hashlib.sha256(body.encode()).hexdigest():
                raise ValueError("digest mismatch")
            out = {name: _decode(t) for name, t in doc["tables"].items()}
        except FileNotFoundError:
            return None
        except Exception as e:  # noqa: BLE001 - a damaged entry: recompute (and overwrite it)
            log.warning("aggregate cache entry %s unreadable (%s); aggregating again", p, e)
            return None
        self.hits += 1
        _remember(p, out)
        return {name: df.copy() for name, df in out.items()} if copy else dict(out)

    def put(self, key: str, tables: Mapping[str, Any]) -> None:
        """Store ``tables`` when every one reads back identical; otherwise store nothing."""
        if self.root is None:
            return
        if self.defer:
            kept = {name: df.copy() for name, df in tables.items()}
            remember(_MEMO, str(self._path(key)), (COMPUTED, kept), MEMO_ENTRIES)
            remember(_MEMO, ("computed", key), (COMPUTED, kept), MEMO_ENTRIES)
            later(lambda: self._write(key, kept, remembered=True))
            return
        self._write(key, tables)

    def _write(self, key: str, tables: Mapping[str, Any], remembered: bool = False) -> None:
        enc: dict[str, Any] = {}
        for name, df in tables.items():
            doc = _encode(df)
            if doc is None:
                return
            try:
                text = json.dumps(doc, sort_keys=True, allow_nan=True)
                back = _decode(json.loads(text))
            except (TypeError, ValueError):
                return
            if not (_plain_same(df, back, text) if _plain(df) else _same(df, back)):
                log.debug("aggregate table %s is not carried exactly by the JSON cache; not cached", name)
                return
            enc[name] = json.loads(text)
        body = json.dumps(enc, sort_keys=True, allow_nan=True)
        try:
            atomic_write_text(self._path(key), json.dumps({"digest": hashlib.sha256(body.encode()).hexdigest(),
                                                           "tables": enc}, allow_nan=True))
            if not remembered:
                kept = {name: df.copy() for name, df in tables.items()}
                _remember(self._path(key), kept)
                remember(_MEMO, ("computed", key), (COMPUTED, kept), MEMO_ENTRIES)
        except OSError as e:  # a full or read-only cache costs time, never results
            log.debug("could not write aggregate cache %s: %s", key, e)


# entry file -> (its state, tables), for the later jobs of this process (a sweep's re-score jobs read a
# hundred small entries a job; each read from disk costs a parse, a digest and a frame build); a file changed
# or removed since is read (and its digest checked) again. And ("computed", key) -> (COMPUTED, tables) this
# process computed: an aggregator's pure output for that key, right in any cache folder (the first re-score
# job in a results folder after a sweep ran in another); an entry read from a file is trusted for that file
# only, so it is never shared
_MEMO: dict[Any, tuple[Any, dict[str, pd.DataFrame]]] = {}
MEMO_ENTRIES = 5000
COMPUTED = object()  # the state of an entry this process computed: valid for its key whatever the file holds


def _now(fn: Any) -> None:
    fn()


def _remember(p: Path, tables: dict[str, pd.DataFrame]) -> None:
    state = file_state(p)
    if state is None:
        return
    remember(_MEMO, str(p), (state, tables), MEMO_ENTRIES)
