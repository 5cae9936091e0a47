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

# bounded by the rows' line lengths (their objects take a few times as much): a default run's rows are ~9 MB
# of lines, and a sweep's jobs share most of them
MEMO_LINE_BYTES = 32 << 20
_ROWS: dict[tuple[Any, ...], ScoreRow] = {}
_BYTES = [0]


def context(strata: Any, videos: Any) -> str:
    """What a case adds to each of its rows that no metric changes: strata and videos (once per case)."""
    return json.dumps([strata, videos], sort_keys=True, default=str)


def memo_key(row: ScoreRow, score_key: str, entry: str, case_context: str, absent: str | None = None,
             warnings: tuple[str, ...] | None = None) -> tuple[Any, ...]:
    """What determines a row taken from the score memo entry ``entry`` (its JSON text) under ``score_key``, of
    a case whose :func:`context` is ``case_context``: ``row`` as it stands before the entry fills it (its
    warnings then are the case's and the alignment's, or ``warnings``), and the note said on the row when its
    metric's values are systematically absent (``absent``). The entry's values, artifacts, verdict and
    warnings follow from its text, so the key is known before the entry is parsed."""
    return (row.row_key, score_key, entry, case_context, tuple(sorted(row.backend.items())),
            tuple(row.warnings) if warnings is None else warnings, row.metric_version, row.status, row.reason, absent)


def recall(key: tuple[Any, ...]) -> ScoreRow | None:
    """The row appended earlier in this process under ``key`` (as read back from its line), or None."""
    return _ROWS.get(key)


def remember(key: tuple[Any, ...], row: ScoreRow) -> None:
    """Keep ``row`` (a row read back from its line) under ``key``; bounded, the oldest go first."""
    old = _ROWS.pop(key, None)
    if old is not None:
        _BYTES[0] -= _size(old)
    _ROWS[key] = row
    _BYTES[0] += _size(row)
    while _BYTES[0] > MEMO_LINE_BYTES and _ROWS:
        _BYTES[0] -= _size(_ROWS.pop(next(iter(_ROWS))))


def _size(row: ScoreRow) -> int:
    return len(row.__dict__.get("_line") or "")


def forget_all() -> None:
    """Empty the memo (tests: a fresh process)."""
    _ROWS.clear()
    _BYTES[0] = 0
