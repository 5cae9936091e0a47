"""The rows this process appended, by what determines them, for the later jobs of the same process.

A sweep's re-score job rebuilds every unchanged row from the score memo; this gives it back as the row
appended before — read back from its line, with that line and its content digest — so it is not serialised,
parsed or hashed again. Only rows taken from the score memo are looked up here (computed, skipped and
failed rows never are), and such a row is determined by its key (benchmark, model, case, metric), its score
key (which names the measurement: the case's inputs and alignment, the metric's version, params, backends
and thresholds), the memo entry it came from, and what the case adds around it: strata, backends, warnings,
videos, version and status.
"""

from __future__ import annotations

import json
from typing import Any

from worldrecall.core.data import ScoreRow

MEMO_ROWS = 100_000  # a default run has ~4,000 rows; a sweep's jobs share most of them
_ROWS: dict[tuple[Any, ...], ScoreRow] = {}


def context(strata: Any, videos: Any) -> str:
    """What a case adds to each of its rows that no metric changes: strata and videos (once per case)."""
    return json.dumps([strata, videos], sort_keys=True, default=str)


def memo_key(row: ScoreRow, score_key: str, entry: str, case_context: str) -> tuple[Any, ...]:
    """What determines a row taken from the score memo entry ``entry`` (its JSON text) under ``score_key``, of
    a case whose :func:`context` is ``case_context``."""
    return (row.row_key, score_key, entry, case_context, tuple(sorted(row.backend.items())), tuple(row.warnings),
            row.metric_version, row.status, row.reason)


def recall(key: tuple[Any, ...]) -> ScoreRow | None:
    """The row appended earlier in this process under ``key`` (as read back from its line), or None."""
    return _ROWS.get(key)


def remember(key: tuple[Any, ...], row: ScoreRow) -> None:
    """Keep ``row`` (a row read back from its line) under ``key``; bounded, the oldest go first."""
    _ROWS[key] = row
    while len(_ROWS) > MEMO_ROWS:
        _ROWS.pop(next(iter(_ROWS)))
