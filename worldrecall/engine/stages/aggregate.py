"""Stage 4 — aggregate: run the configured aggregators over the rows, and summarise failures.

Aggregators get what they declare they need (``uses_primary_values``, ``uses_value_meta``, ``uses_benchmarks``)
from the metrics' and benchmarks' own metadata; tables are found later by the kind each aggregator declares, never by name.
:func:`outcome` is the one place the failure rate and the exit code are decided, for ``run`` and
``aggregate`` alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from worldrecall.core.components import Aggregator, UndeclaredValue
from worldrecall.core.data import ScoreRow
from worldrecall.engine.stages.plan import enabled_benchmarks
from worldrecall.registry.host import PluginHost

EXIT_OK, EXIT_FAILURE_RATE = 0, 3


@dataclass(frozen=True)
class Outcome:
    """Cases (benchmark x model x case id), failed cases, the failure rate and the exit code it implies."""

    n_cases: int
    n_failed: int
    rate: float
    exit_code: int


def outcome(rows: Iterable[ScoreRow], max_failure_rate: float) -> Outcome:
    """A case fails when any of its rows failed; exit code 3 when the failed fraction exceeds the limit
    (a rate exactly at the limit passes)."""
    failed: dict[tuple[str, str, str], bool] = {}
    for r in rows:
        k = (r.benchmark, r.model, r.case_id)
        failed[k] = failed.get(k, False) or r.status == "failed"
    n, nf = len(failed), sum(failed.values())
    rate = nf / n if n else 0.0
    return Outcome(n, nf, rate, EXIT_FAILURE_RATE if rate > max_failure_rate else EXIT_OK)


def value_meta(host: PluginHost, rows: Iterable[ScoreRow]) -> dict[str, dict[str, dict[str, Any]]]:
    """metric -> value -> {higher_is_better, range, unit, description}, from each metric's declared metadata."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r.metric not in host.metrics:
            continue
        per = out.setdefault(r.metric, {})
        for v in r.values:
            if v not in per:
                try:
                    m = host.metric(r.metric).value_meta(v)
                except UndeclaredValue:  # rows read back from an older run: no metadata, so never ranked
                    continue
                per[v] = {"higher_is_better": m.higher_is_better, "range": list(m.range) if m.range else None,
                          "unit": m.unit, "description": m.description}
    return out


def aggregate_rows(host: PluginHost, rows: list[ScoreRow], cfg: Mapping[str, Any],
                   per_benchmark: Mapping[str, list[str]] | None = None) -> dict[str, Any]:
    """Run the global, suite and per-benchmark aggregators; returns every table by name."""
    suite = cfg["suite"]
    params = {**(cfg["aggregator_params"] or {}), **(suite.get("aggregator_params") or {})}
    primary = {name: cls.primary for name, cls in host.metrics.items()}
    meta = value_meta(host, rows)
    declared = {name: b.to_json() for name, b in getattr(host, "benchmarks", {}).items()}
    if per_benchmark is None:
        # what the run itself aggregated (`worldrecall aggregate` and a shard merge give the same tables)
        per_benchmark = {n: list(b.get("aggregators") or []) for n, b in enabled_benchmarks(cfg).items()}

    def run(name: str, subset: list[ScoreRow]) -> dict[str, Any]:
        agg = host.aggregator(name)
        return agg.aggregate(subset, _params(agg, params.get(name, {}), primary, meta, declared))

    tables: dict[str, Any] = {}
    for name in list(cfg["aggregators"] or []) + list(suite.get("aggregators") or []):
        tables.update(run(name, rows))
    for bench, names in per_benchmark.items():
        subset = [r for r in rows if r.benchmark == bench]
        for name in names:
            for tname, df in run(name, subset).items():
                tables[tname if tname.startswith(bench) else f"{bench}.{tname}"] = df
    return tables


def _params(agg: Aggregator, given: Mapping[str, Any], primary: dict[str, str],
            meta: dict[str, dict[str, dict[str, Any]]], declared: Mapping[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if getattr(agg, "uses_benchmarks", False):
        extra["benchmarks"] = dict(declared)
    if agg.uses_primary_values:
        extra["primary_values"] = primary
    if getattr(agg, "uses_value_meta", False):
        extra["value_meta"] = meta
    return {**agg.defaults, **extra, **given}
