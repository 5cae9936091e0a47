"""One content digest per score row: what the aggregate and report caches key on.

A row read back from a rows file is a function of its line (and of the alignment its ``alignment_ref`` names:
the ref is that alignment's content hash), so its digest is too: :class:`LineDigests` keeps each digest under
the sha256 of its line, in one file of the cache folder, and a warm rerun or a re-score — whose rows are those
an earlier job wrote, read back or adopted as the same bytes — hashes each line instead of encoding each row
again (~6,400 rows a default job). The file names the code that computed its digests; other code reads none.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from worldrecall.core.data import ScoreRow
from worldrecall.core.results import json_default

# how a row was obtained (computed, or read back from the cache, under which keys), not what it holds: a warm
# rerun's or a re-score job's rows equal the cold run's except for these, and no aggregator or sink shows them
HOW_OBTAINED = ("cache_hit", "score_cache_hit", "alignment_hit", "keys")
# of those, the cache hits: on a row while its run goes on (the cache log records them), never in a rows file, so a
# job that read a row back writes the bytes of the job that computed it (its keys are what the row is)
CACHE_FLAGS = HOW_OBTAINED[:3]


def row_content(r: ScoreRow) -> dict[str, Any]:
    """The row as JSON without :data:`HOW_OBTAINED` and its cache key (what a table, a report section or a
    digest may show: equal content, equal tables, whatever code computed it)."""
    d = r.to_json()
    d.pop("key", None)
    info = d.get("info")
    if isinstance(info, dict) and any(k in info for k in HOW_OBTAINED):
        d["info"] = {k: v for k, v in info.items() if k not in HOW_OBTAINED}
    return d


_CANONICAL = json.JSONEncoder(sort_keys=True, allow_nan=True, default=json_default)  # one, not one a row


def canonical(obj: Any) -> str:
    """A row's JSON as a rows file holds it and its digest hashes: keys sorted, NaN kept."""
    return _CANONICAL.encode(obj)


def row_digest(r: ScoreRow, alignments: dict[int, tuple[Any, str]] | None = None) -> str:
    """sha256 of :func:`row_content`, its alignment (``info["alignment"]``) by its own sha256. ``alignments``:
    the digests of the alignment objects hashed so far (by identity, each kept with its object), shared over
    the rows of a call: a case's rows hold one alignment object, hashed once rather than once per row."""
    d = row_content(r)
    info = d.get("info")
    al = info.get("alignment") if isinstance(info, dict) else None
    if isinstance(al, dict):
        seen = alignments if alignments is not None else {}
        if id(al) not in seen:
            seen[id(al)] = (al, hashlib.sha256(canonical(al).encode()).hexdigest())
        d["info"] = {**info, "alignment": {"sha256": seen[id(al)][1]}}
    return hashlib.sha256(canonical(d).encode()).hexdigest()


def row_digests(rows: Iterable[ScoreRow], lines: Mapping[tuple[str, str, str, str], str] | None = None,
                known: LineDigests | None = None) -> dict[tuple[str, str, str, str], str]:
    """Each row's :func:`row_digest` by its (benchmark, model, case, metric): computed once per result, read
    by the aggregation and the report (each row is unique under that key in a result). ``lines``: the line each
    row was read back from (:meth:`~worldrecall.engine.stages.row_store.ResultStore.lines_of`), whose digest
    ``known`` may hold already (a row whose alignment its folder lost is digested as it is, never looked up)."""
    alignments: dict[int, tuple[Any, str]] = {}
    out = {}
    for r in rows:
        line = lines.get(r.row_key) if lines is not None and known is not None else None
        if line is None or (isinstance(r.info, dict) and "alignment_ref" in r.info):
            out[r.row_key] = row_digest(r, alignments)
            continue
        assert known is not None
        h = hashlib.sha256(line.encode("utf-8")).hexdigest()
        d = known.get(h)
        if d is None:
            d = known.put(h, row_digest(r, alignments))
        out[r.row_key] = d
    return out


class LineDigests:
    """Row digests by the sha256 of the line a row was read back from, kept in ``path`` between jobs of an
    output root (``cache/row_digests.json``). Valid for ``code`` (what reads a line into a row and digests it);
    a file written by other code, or unreadable, holds nothing. :meth:`save` keeps the digests this job used."""

    FORMAT = 1

    def __init__(self, path: Path | str, code: str) -> None:
        self.path, self.code = Path(path), code
        self._loaded: dict[str, str] = {}
        self._used: dict[str, str] = {}
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(doc, dict) and doc.get("format") == self.FORMAT and doc.get("code") == code \
                    and isinstance(doc.get("digests"), dict):
                self._loaded = {str(k): v for k, v in doc["digests"].items() if isinstance(v, str)}
        except (OSError, ValueError):
            pass

    def get(self, line_sha: str) -> str | None:
        d = self._loaded.get(line_sha)
        if d is not None:
            self._used[line_sha] = d
        return d

    def put(self, line_sha: str, digest: str) -> str:
        self._used[line_sha] = digest
        return digest

    def save(self) -> None:
        """Write what this job used, unless that is what the file holds (a warm rerun writes nothing); a file
        that cannot be written costs the next job the encoding, never a result."""
        if self._used == self._loaded:
            return
        from worldrecall.core.atomic import atomic_write_text

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps({"format": self.FORMAT, "code": self.code,
                                                     "digests": self._used}, separators=(",", ":")))
            os.chmod(self.path, 0o644)
        except OSError:
            pass


def rows_digest(rows: Iterable[ScoreRow], known: Mapping[tuple[str, str, str, str], str] | None = None) -> str:
    """sha256 over the rows' :func:`row_digest`, in order; ``known``: :func:`row_digests` of these rows."""
    h = hashlib.sha256()
    for r in rows:
        d = known.get(r.row_key) if known is not None else None
        h.update((d or row_digest(r)).encode())
    return h.hexdigest()
