"""One content digest per score row: what the aggregate and report caches key on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
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


def canonical(obj: Any) -> str:
    """A row's JSON as a rows file holds it and its digest hashes: keys sorted, NaN kept."""
    return json.dumps(obj, sort_keys=True, allow_nan=True, default=json_default)


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


def row_digests(rows: Iterable[ScoreRow]) -> dict[tuple[str, str, str, str], str]:
    """Each row's :func:`row_digest` by its (benchmark, model, case, metric): computed once per result, read
    by the aggregation and the report (each row is unique under that key in a result)."""
    alignments: dict[int, tuple[Any, str]] = {}
    return {r.row_key: row_digest(r, alignments) for r in rows}


def rows_digest(rows: Iterable[ScoreRow], known: Mapping[tuple[str, str, str, str], str] | None = None) -> str:
    """sha256 over the rows' :func:`row_digest`, in order; ``known``: :func:`row_digests` of these rows."""
    h = hashlib.sha256()
    for r in rows:
        d = known.get(r.row_key) if known is not None else None
        h.update((d or row_digest(r)).encode())
    return h.hexdigest()
