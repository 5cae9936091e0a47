"""``tables/cases.csv`` drawn per benchmark and memoised: a re-score job that changed one benchmark's rows
writes that benchmark's lines again and reuses the others'.

The file is exactly ``case_table(rows).to_csv(index=False)``: the columns are the whole table's (in order of
first appearance, as ``case_table`` builds them), each benchmark's lines are drawn against that column list,
sorted as the whole is (benchmark, model, case, metric) and joined in benchmark order.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from worldrecall.core.cache import cache_key
from worldrecall.core.data import ScoreRow
from worldrecall.core.tables import case_table
from worldrecall.engine.stages.row_digests import rows_digest

_LINES: dict[str, str] = {}  # (columns, a benchmark's rows) -> its CSV lines, for the later jobs of this process
MEMO_ENTRIES = 2000


def case_columns(rows: Sequence[ScoreRow]) -> list[str]:
    """``case_table``'s columns: the fixed ones, then strata and values in order of first appearance."""
    cols = dict.fromkeys(["benchmark", "model", "case_id", "metric", "status", "reason", "backend", "metric_version"])
    for r in rows:
        for k in r.strata:
            cols.setdefault(f"strata.{k}")
        for k in r.values:
            cols.setdefault(f"value.{k}")
    return list(cols)


def case_csv(rows: Sequence[ScoreRow]) -> str:
    """The per-case table as CSV text (``case_table(rows).to_csv(index=False)``, byte for byte)."""
    if not rows:
        return case_table(list(rows)).to_csv(index=False)
    cols = case_columns(rows)
    per: dict[str, list[ScoreRow]] = {}
    for r in rows:
        per.setdefault(r.benchmark, []).append(r)
    head = pd.DataFrame(columns=cols).to_csv(index=False)
    ckey = cache_key({"columns": cols})
    return head + "".join(_lines(per[b], cols, ckey) for b in sorted(per))


def _lines(rows: list[ScoreRow], cols: list[str], ckey: str) -> str:
    key = cache_key({"columns": ckey, "rows": rows_digest(rows)})
    text = _LINES.get(key)
    if text is None:
        df = case_table(rows)
        text = df.reindex(columns=cols).to_csv(index=False, header=False)
        if len(_LINES) >= MEMO_ENTRIES:
            _LINES.pop(next(iter(_LINES)))
        _LINES[key] = text
    return text
