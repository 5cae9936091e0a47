"""The file sinks: tables (CSV, the per-case table; then Markdown and the printed leaderboard), meta files
(resolved config, plugin manifest) and timing."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from worldrecall.core.paths import file_safe
from worldrecall.core.tables import case_table
from worldrecall.engine.cache import code_digest, key_of, library_versions, store_for
from worldrecall.engine.cache.blobs import BlobStore, stored_text, write_shared
from worldrecall.engine.redaction import redact_tree
from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.sinks.leaderboard_view import leaderboard_text
from worldrecall.engine.sinks.pipe_table import pipe_table
from worldrecall.engine.stages.aggregate import all_rows_aggregators
from worldrecall.engine.stages.result import RunResult
from worldrecall.engine.stages.row_digests import rows_digest


def json_dump(obj: Any, path: Path) -> Path:
    """Write ``obj`` as indented JSON (meta files), creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
    return path


class TablesSink:
    """``tables/``: every aggregated table as CSV; ``meta/``: the resolved config (secrets redacted) and the
    plugin manifest. MLflow's runs start from these tables (with the rows' content digest, their digest says
    "the same numbers"); the per-case table, the Markdown and the printed leaderboard follow in
    :class:`TableTextSink`, written while MLflow makes the runs."""

    name = "tables"

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        tdir = result.results_dir / "tables"
        tdir.mkdir(parents=True, exist_ok=True)
        # never rewritten in place (atomic, and only when changed): a file logged to MLflow earlier is a hard link;
        # a table some job wrote before with the same bytes is that file again (one copy on disk)
        blobs = BlobStore(Path(result.config["output_root"]) / "blobs")
        paths = table_files(result, ctx, tdir, ".csv", _csv, blobs, _renderer("csv", "worldrecall.engine.sinks.files"))
        meta = result.results_dir / "meta"
        paths.append(json_dump(redact_tree(dict(result.config)), meta / "resolved_config.json"))
        paths.append(json_dump(ctx.host.manifest(), meta / "plugin_manifest.json"))
        return paths


def by_benchmark_tables(result: RunResult, ctx: SinkContext) -> set[str]:
    """The tables of the run's aggregators that declare ``by_benchmark`` (each the concatenation, in benchmark
    order, of every benchmark's own table): written one file per benchmark (:func:`table_files`)."""
    known = ctx.host.components["aggregator"]
    return {table for name in all_rows_aggregators(result.config) if getattr(known.get(name), "by_benchmark", False)
            for table in known[name].tables}


def _csv(df: Any) -> str:
    return df.to_csv(index=False)


def _renderer(kind: str, module: str) -> dict[str, Any]:
    """What renders a table's file: the code that cuts and renders it, and pandas (which holds its values)."""
    return {"name": f"tables.{kind}", "code": [code_digest("worldrecall.engine.sinks.files"), code_digest(module)],
            "libraries": library_versions()}


def table_files(result: RunResult, ctx: SinkContext, tdir: Path, suffix: str, render: Callable[[Any], str],
                blobs: BlobStore, renderer: Mapping[str, Any] | None = None) -> list[Path]:
    """Every aggregated table as ``render`` writes it (``suffix``: .csv, .md). A table declared by benchmark
    (:func:`by_benchmark_tables`) is a folder, one file per benchmark (``ranking/memobench.csv``), so a
    re-score or a sweep's job shares the unchanged benchmarks' files through the blob store and writes the
    changed one only; read back whole with :func:`worldrecall.core.tables.read_tables`. Others are one file.

    ``renderer``: what ``render`` is (:func:`_renderer`). Given, a benchmark's file whose part the aggregation
    keyed (``result.table_parts``) is kept in the cache under that key, the whole table's columns and dtypes
    (what its part's values were cast to) and the renderer: a job that changed other benchmarks only links it."""
    split, paths = by_benchmark_tables(result, ctx), []
    store = store_for(result.config) if renderer is not None else None
    for name, df in result.tables.items():
        if not hasattr(df, "to_csv"):
            continue
        if name in split and len(df) and "benchmark" in df.columns:
            keys = (getattr(result, "table_parts", None) or {}).get(name) if store is not None else None
            columns = [[str(c), str(t)] for c, t in df.dtypes.items()] if keys else []
            parts = []
            for bench, part in df.groupby("benchmark", sort=True, dropna=False):
                path = tdir / name / f"{file_safe(str(bench))}{suffix}"
                key = keys.get(bench) if keys and isinstance(bench, str) else None
                if key:
                    assert store is not None and renderer is not None
                    parts.append(stored_text(path, "table_parts", key_of(renderer, {"part": key, "columns": columns}),
                                             lambda part=part: render(part.reset_index(drop=True)), store, blobs))
                else:
                    parts.append(write_shared(path, render(part.reset_index(drop=True)), blobs))
            (tdir / f"{name}{suffix}").unlink(missing_ok=True)  # written whole by a version before the split
            _remove_other_parts(tdir / name, suffix, parts)  # a benchmark no longer in the table
            paths += parts
        else:
            paths.append(write_shared(tdir / f"{name}{suffix}", render(df), blobs))
            if name in split:  # empty now: parts an earlier run of this folder wrote would be read in its place
                _remove_other_parts(tdir / name, suffix, [])
    return paths


def _remove_other_parts(folder: Path, suffix: str, keep: list[Path]) -> None:
    """Remove the ``suffix`` files of a by-benchmark table's folder that this job did not write."""
    for stale in set(folder.glob(f"*{suffix}")) - set(keep):
        stale.unlink(missing_ok=True)


def case_parts(result: RunResult, tdir: Path) -> list[Path]:
    """``tables/cases/<benchmark>/<metric>.csv``: the per-case table (one line per row: status, reason, values;
    the metric's own columns), one file per metric, shared as :func:`metric_files` shares a part."""
    return metric_files(result, tdir / "cases", ".csv", _case_part_identity(),
                        lambda rows: case_table(rows).to_csv(index=False))


def metric_files(result: RunResult, folder: Path, suffix: str, identity: Mapping[str, Any],
                 render: Callable[[list[Any]], str]) -> list[Path]:
    """One file per (benchmark, metric), ``<folder>/<benchmark>/<metric><suffix>``: ``render`` of those rows, kept
    in the blob store under the key of the rows and ``identity`` (what renders them; :func:`stored_text`), so a
    job whose rows of a metric were written before (a re-score of another metric, a sweep's job) links that file
    instead of writing it again. Parts this job did not write, and the whole-benchmark files an earlier version
    wrote beside the folder (``cases.<benchmark>.csv``), are removed."""
    cfg = result.config
    store, blobs = store_for(cfg), BlobStore(Path(cfg["output_root"]) / "blobs")
    paths = []
    for (bench, metric), rows in rows_by_metric(result.rows).items():
        key = key_of(identity, {"rows": rows_digest(rows, result.row_digests or None)})
        paths.append(stored_text(folder / file_safe(bench) / f"{file_safe(metric)}{suffix}", "case_tables", key,
                                 lambda rows=rows: render(rows), store, blobs))
    for stale in set(folder.glob(f"*/*{suffix}")) - set(paths):
        stale.unlink(missing_ok=True)
    for old in [folder.with_suffix(suffix), *folder.parent.glob(f"{folder.name}.*{suffix}")]:
        old.unlink(missing_ok=True)
    return paths


def rows_by_metric(rows: list[Any]) -> dict[tuple[str, str], list[Any]]:
    """(benchmark, metric), sorted -> its rows sorted by (benchmark, model, case, metric): a part's digest and text
    do not depend on the order the rows came in."""
    out: dict[tuple[str, str], list[Any]] = {}
    for r in sorted(rows, key=lambda r: r.row_key):
        out.setdefault((r.benchmark, r.metric), []).append(r)
    return dict(sorted(out.items()))


def _case_part_identity() -> dict[str, Any]:
    """What draws a case table: its code, and pandas (which writes the CSV)."""
    return {"name": "tables.cases", "code": code_digest("worldrecall.core.tables"), "libraries": library_versions()}


class TableTextSink:
    """``tables/``: ``cases/<benchmark>/<metric>.csv`` (:func:`case_parts`), every aggregated table as Markdown, and
    ``leaderboard.txt`` (what the console prints)."""

    name = "table_text"

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        tdir = result.results_dir / "tables"
        tdir.mkdir(parents=True, exist_ok=True)
        blobs = BlobStore(Path(result.config["output_root"]) / "blobs")
        paths = case_parts(result, tdir)
        paths += table_files(result, ctx, tdir, ".md", pipe_table, blobs,
                             _renderer("md", "worldrecall.engine.sinks.pipe_table"))
        paths.append(write_shared(tdir / "leaderboard.txt", leaderboard_text(result, ctx.host), blobs))
        return paths


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
