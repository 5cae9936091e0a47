"""``tables/cases.csv`` drawn per (benchmark, metric) and memoised: a re-score job that changed one metric's
rows writes that metric's lines again and reuses the others'.

The file is exactly ``case_table(rows).to_csv(index=False)``: the columns are the whole table's (in order of
first appearance, as ``case_table`` builds them), each part's lines are drawn against that column list,
sorted as the whole is (benchmark, model, case, metric) and joined in benchmark order. A benchmark is drawn
per metric (its metrics' lines merged by model, case and metric) only where every cell is written on its own
— string strata, float or missing values, one line per row —; a line of a column pandas types by all its
cells (integer strata next to missing ones …) is the whole benchmark's, drawn at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from worldrecall.core.cache import cache_key
from worldrecall.core.data import ScoreRow
from worldrecall.core.tables import case_table
from worldrecall.engine.stages.aggregate import benchmarks_contiguous
from worldrecall.engine.stages.bounded import remember
from worldrecall.engine.stages.row_digests import rows_digest

_LINES: dict[str, str] = {}  # (columns, a benchmark's rows) -> its CSV lines, for the later jobs of this process
MEMO_ENTRIES = 2000


def case_columns(rows: Sequence[ScoreRow]) -> list[str]:
    """``case_table``'s columns: the fixed ones, then strata and values in order of first appearance."""
    cols = dict.fromkeys(["benchmark", "model", "case_id", "metric", "status", "reason", "backend", "metric_version"])
    if not benchmarks_contiguous(rows):
        cols.update(dict.fromkeys(_own_columns(rows)))
        return list(cols)
    # each benchmark's rows follow one another, so the whole's first appearances are each benchmark's in
    # turn: a benchmark's columns are taken from the memo while its rows are the same (a re-score job's others)
    per: dict[str, list[ScoreRow]] = {}
    for r in rows:
        per.setdefault(r.benchmark, []).append(r)
    for part in per.values():
        key = rows_digest(part)
        own = _COLUMNS.get(key)
        if own is None:
            own = remember(_COLUMNS, key, _own_columns(part), MEMO_ENTRIES)
        cols.update(dict.fromkeys(own))  # a column already there keeps its place
    return list(cols)


def _own_columns(rows: Sequence[ScoreRow]) -> list[str]:
    """The strata and value columns of ``rows`` in order of first appearance."""
    cols: dict[str, None] = {}
    # rows of one metric share their keys: each distinct (strata, values) key list is walked once, in order of
    # first appearance, which keeps every key's first appearance where it was
    for strata, values in dict.fromkeys((tuple(r.strata), tuple(r.values)) for r in rows):
        for k in strata:
            cols.setdefault(f"strata.{k}")
        for k in values:
            cols.setdefault(f"value.{k}")
    return list(cols)


_COLUMNS: dict[str, list[str]] = {}  # a benchmark's rows (digest) -> their strata and value columns, in order


def case_csv(rows: Sequence[ScoreRow]) -> str:
    """The per-case table as CSV text (``case_table(rows).to_csv(index=False)``, byte for byte)."""
    if not rows:
        return case_table(list(rows)).to_csv(index=False)
    cols = case_columns(rows)
    per: dict[str, list[ScoreRow]] = {}
    for r in rows:
        per.setdefault(r.benchmark, []).append(r)
    ckey = cache_key({"columns": cols})
    head = _HEADS.get(ckey)
    if head is None:
        head = remember(_HEADS, ckey, pd.DataFrame(columns=cols).to_csv(index=False), MEMO_ENTRIES)
    return head + "".join(_benchmark_lines(per[b], cols, ckey) for b in sorted(per))


def _benchmark_lines(rows: list[ScoreRow], cols: list[str], ckey: str) -> str:
    """One benchmark's lines, memoised by (columns, its rows' content in order): a re-score job changes one
    benchmark, and the others' lines are then taken whole."""
    key = cache_key({"benchmark": ckey, "rows": rows_digest(rows)})
    text = _BENCHMARKS.get(key)
    if text is None:
        text = remember(_BENCHMARKS, key, _draw_benchmark(rows, cols, ckey), MEMO_ENTRIES)
    return text


_BENCHMARKS: dict[str, str] = {}  # (columns, a benchmark's rows) -> its lines
_HEADS: dict[str, str] = {}  # columns -> the header line


def _draw_benchmark(rows: list[ScoreRow], cols: list[str], ckey: str) -> str:
    per: dict[str, list[ScoreRow]] = {}
    for r in rows:
        per.setdefault(r.metric, []).append(r)
    if len(per) < 2 or not all(_part_cellwise(part) for part in per.values()):
        return _lines(rows, cols, ckey)
    keyed: list[tuple[tuple[str, str, str], str]] = []
    for part in per.values():
        lines = _lines(part, cols, ckey).splitlines(keepends=True)
        if len(lines) != len(part):  # a quoted line break: lines are not rows
            return _lines(rows, cols, ckey)
        order = sorted(part, key=lambda r: (r.model, r.case_id))  # a metric's part, sorted as case_table does
        keyed += [((r.model, r.case_id, r.metric), line) for r, line in zip(order, lines)]
    keyed.sort(key=lambda kv: kv[0])
    return "".join(line for _, line in keyed)


def _part_cellwise(rows: list[ScoreRow]) -> bool:
    """:func:`_cellwise` of one metric's rows, memoised by their content (a re-score job changes one metric)."""
    key = rows_digest(rows)
    known = _CELLWISE.get(key)
    if known is None:
        known = remember(_CELLWISE, key, _cellwise(rows), MEMO_ENTRIES)
    return known


_CELLWISE: dict[str, bool] = {}


def _cellwise(rows: list[ScoreRow]) -> bool:
    """Every cell's text is its own (not typed by the column's other cells): string strata, float values."""
    return (all(type(v) is str for r in rows for v in r.strata.values())
            and all(v is None or type(v) is float for r in rows for v in r.values.values()))


def _lines(rows: list[ScoreRow], cols: list[str], ckey: str) -> str:
    key = cache_key({"columns": ckey, "rows": rows_digest(rows)})
    text = _LINES.get(key)
    if text is None:
        df = case_table(rows)
        text = remember(_LINES, key, df.reindex(columns=cols).to_csv(index=False, header=False), MEMO_ENTRIES)
    return text
