"""The one result of a run: what every sink reads, frozen so no sink can change what another one sees."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall.core.data import ScoreRow
from worldrecall.engine.stages.aggregate import outcome
from worldrecall.engine.stages.provenance import Provenance


@dataclass(frozen=True)
class RunResult:
    """Rows, aggregated tables (declared views among them), timing and provenance of one run or merge.

    ``config`` is the effective config the rows were computed with; ``partial`` marks one shard's share.
    """

    results_dir: Path
    rows: tuple[ScoreRow, ...]
    tables: Mapping[str, Any]
    config: Mapping[str, Any]
    provenance: Provenance
    failure_rate: float
    n_cases: int
    n_failed_cases: int
    exit_code: int
    timing: Mapping[str, float] = field(default_factory=dict)
    decode_counts: Mapping[str, int] = field(default_factory=dict)
    cache_stats: Mapping[str, int] = field(default_factory=dict)
    model_seconds: Mapping[str, float] = field(default_factory=dict)
    backends: Mapping[str, str] = field(default_factory=dict)
    started_at: float | None = None  # epoch seconds when the runner started (MLflow run start times)
    partial: bool = False
    # each row's content digest by (benchmark, model, case, metric) (``row_digests.row_digests``): the keys of
    # what sinks cache (report sections) read it instead of hashing every row again
    row_digests: Mapping[tuple[str, str, str, str], str] = field(default_factory=dict)
    # per table a ``by_benchmark`` aggregator wrote, each benchmark's key of the tables its part was cut from
    # (``aggregate_rows``'s ``part_keys``): a sink writing one file per benchmark renders a known part once
    table_parts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # the content key of the outputs (engine/sinks/unchanged.py); "" when the job does not record one
    outputs_key: str = ""
    # the record of the earlier job whose outputs this result would write again unchanged: then nothing was
    # aggregated (``tables`` is empty) and no output is written
    unchanged: Mapping[str, Any] | None = None

    @property
    def benchmarks(self) -> list[str]:
        """The benchmarks that have rows, sorted."""
        return sorted({r.benchmark for r in self.rows})


def build_result(results_dir: Path, rows: list[ScoreRow], tables: Mapping[str, Any], cfg: Mapping[str, Any],
                 plugins: Any = (), totals: Mapping[str, Mapping[str, float]] | None = None,
                 backends: Mapping[str, str] | None = None, started_at: float | None = None,
                 row_digests: Mapping[tuple[str, str, str, str], str] | None = None,
                 identities: Mapping[str, Any] | None = None) -> RunResult:
    """The one result builder (``run`` and ``aggregate``): failure rate and exit code from :func:`outcome`."""
    o = outcome(rows, float(cfg["max_failure_rate"]))
    totals = totals or {}
    backends = dict(backends or {})
    prov = Provenance.of(cfg, plugins, ((r.benchmark, r.model, r.case_id) for r in rows), backends, identities)
    return RunResult(Path(results_dir), tuple(rows), dict(tables), cfg, prov, o.rate, o.n_cases, o.n_failed,
                     o.exit_code, dict(totals.get("timing", {})),
                     {k: int(v) for k, v in totals.get("decodes", {}).items()},
                     {k: int(v) for k, v in totals.get("cache", {}).items()},
                     dict(totals.get("model_seconds", {})), backends, started_at,
                     row_digests=dict(row_digests or {}))
