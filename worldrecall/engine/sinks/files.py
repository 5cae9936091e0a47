"""The file sinks: tables (CSV + Markdown, the per-case table, the printed leaderboard), meta files
(resolved config, plugin manifest) and timing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from worldrecall.engine.redaction import redact_tree
from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.sinks.blobs import write_if_changed
from worldrecall.engine.sinks.case_csv import case_csv
from worldrecall.engine.sinks.leaderboard_view import leaderboard_text
from worldrecall.engine.sinks.pipe_table import pipe_head, pipe_rows, pipe_table
from worldrecall.engine.stages.aggregate import joined_parts
from worldrecall.engine.stages.bounded import remember
from worldrecall.engine.stages.result import RunResult


def json_dump(obj: Any, path: Path) -> Path:
    """Write ``obj`` as indented JSON (meta files), creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
    return path


class TablesSink:
    """``tables/``: every aggregated table as CSV and Markdown, ``cases.csv``, ``leaderboard.txt``; ``meta/``:
    the resolved config (secrets redacted) and the plugin manifest."""

    name = "tables"
    reads_outputs = False  # the result only: written while a forked report is (sinks/forked.py)

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        tdir = result.results_dir / "tables"
        tdir.mkdir(parents=True, exist_ok=True)
        # never rewritten in place (atomic, and only when changed): a file logged to MLflow earlier is a hard link
        paths = [write_if_changed(tdir / "cases.csv", case_csv(result.rows))]
        for name, df in result.tables.items():
            if hasattr(df, "to_csv"):
                csv, md = table_text(df, result.table_keys.get(name))
                paths.append(write_if_changed(tdir / f"{name}.csv", csv))
                paths.append(write_if_changed(tdir / f"{name}.md", md))
        paths.append(write_if_changed(tdir / "leaderboard.txt", leaderboard_text(result, ctx.host)))
        meta = result.results_dir / "meta"
        paths.append(json_dump(redact_tree(dict(result.config)), meta / "resolved_config.json"))
        paths.append(json_dump(ctx.host.manifest(), meta / "plugin_manifest.json"))
        return paths


_TEXT: dict[str, tuple[str, str]] = {}  # table content key -> (CSV, Markdown), for later jobs of this process


def table_text(df: Any, key: str | None) -> tuple[str, str]:
    """A table as CSV and as a Markdown pipe table, drawn once per content key (``RunResult.table_keys``).

    A table the aggregation joined from parts (a re-score's changed metric and the unchanged ones) is written
    from its parts' lines, each part's drawn once (:func:`_row_lines`): byte for byte what ``to_csv`` and
    :func:`pipe_table` write for the whole."""
    if key is not None and key in _TEXT:
        return _TEXT[key]
    lines = _row_lines(df, key, list(df.columns)) if joined_parts(key) is not None and len(df.columns) else None
    if lines is not None:
        text = (df.iloc[0:0].to_csv(index=False) + "".join(lines[0]),
                "\n".join([*pipe_head(df), *lines[1]]) + "\n")
    else:
        text = (df.to_csv(index=False), pipe_table(df))
    if key is not None:
        remember(_TEXT, key, text, 5000)
    return text


_LINES: dict[tuple[Any, ...], tuple[list[str], list[str]]] = {}  # (part key, columns) -> its CSV and MD lines


def _row_lines(df: Any, key: str | None, cols: list[str]) -> tuple[list[str], list[str]] | None:
    """The CSV and Markdown lines of ``df``'s rows (no header) as a table with columns ``cols`` and ``df``'s
    dtypes writes them, or None where a line would depend on other rows (a quoted line break)."""
    memo = (key, tuple(cols))
    if key is not None and memo in _LINES:
        return _LINES[memo]
    joined = joined_parts(key)
    if joined is not None and list(df.columns) == cols:
        parts, order = joined
        dtypes = [str(t) for t in df.dtypes]
        csv: list[str] = []
        md: list[str] = []
        for part_key, part in parts:
            # a cell's text follows its column's dtype: a part reads as in the whole only with the whole's dtypes
            if list(part.columns) != cols or [str(t) for t in part.dtypes] != dtypes:
                return _own_lines(df, key, cols)
            got = _row_lines(part, part_key, cols)
            if got is None:
                return None
            csv += got[0]
            md += got[1]
        if len(csv) != len(df) or len(order) != len(df):
            return _own_lines(df, key, cols)
        out = ([csv[i] for i in order], [md[i] for i in order])
    else:
        return _own_lines(df, key, cols)
    return remember(_LINES, memo, out, 5000)


def _own_lines(df: Any, key: str | None, cols: list[str]) -> tuple[list[str], list[str]] | None:
    csv = df.to_csv(index=False, header=False).splitlines(keepends=True) if len(df) else []
    if len(csv) != len(df):
        return None
    out = (csv, pipe_rows(df))
    if key is not None:
        remember(_LINES, (key, tuple(cols)), out, 5000)
    return out


class TimingSink:
    """``meta/timing.json``: the run's stage seconds, each earlier sink's seconds (``outputs.<sink>``), model
    forward seconds, decode counts and cache statistics (``benchmarks/pipeline.py`` reads it)."""

    name = "timing"

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        out_s = {f"outputs.{name}": s for name, s in ctx.seconds.items()}
        timing = {**{k: round(v, 4) for k, v in {**result.timing, **out_s}.items()},
                  "model_forward_seconds": {k: round(v, 4) for k, v in result.model_seconds.items()},
                  "decode_counts": dict(result.decode_counts), "cache": dict(result.cache_stats)}
        return [json_dump(timing, result.results_dir / "meta" / "timing.json")]
