"""One content digest per score row: what the aggregate cache, the report and the tables sink key on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from worldrecall.core.data import ScoreRow
from worldrecall.core.results import json_default

# how a row was obtained (computed, or read back from the measurement/score memo), not what it holds: a warm
# rerun's or a re-score job's rows equal the cold run's except for these, and no aggregator or sink shows them
HOW_OBTAINED = ("cache_hit", "score_cache_hit")


def row_content(r: ScoreRow) -> dict[str, Any]:
    """The row as JSON without :data:`HOW_OBTAINED` (what a table, a report section or a digest may show)."""
    d = r.to_json()
    info = d.get("info")
    if isinstance(info, dict) and any(k in info for k in HOW_OBTAINED):
        d["info"] = {k: v for k, v in info.items() if k not in HOW_OBTAINED}
    return d


def row_digest(r: ScoreRow) -> str:
    """sha256 of :func:`row_content`, computed once per row object (rows are not changed once read back or
    aggregated; the aggregate cache, the report and the tables sink all key on it)."""
    cached = r.__dict__.get("_content_digest")
    if cached is None:
        blob = json.dumps(row_content(r), sort_keys=True, allow_nan=True, default=json_default)
        cached = r.__dict__["_content_digest"] = hashlib.sha256(blob.encode()).hexdigest()
    return cached


def rows_digest(rows: Iterable[ScoreRow]) -> str:
    """sha256 over the rows' :func:`row_digest`, in order."""
    h = hashlib.sha256()
    for r in rows:
        h.update(row_digest(r).encode())
    return h.hexdigest()
