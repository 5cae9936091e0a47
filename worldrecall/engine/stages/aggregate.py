"""Stage 4 — aggregate: run the configured aggregators over the rows, and summarise failures.

Aggregators get what they declare they need (``uses_primary_values``, ``uses_value_meta``, ``uses_benchmarks``)
from the metrics' and benchmarks' own metadata; tables are found later by the kind each aggregator declares, never by name.
:func:`outcome` is the one place the failure rate and the exit code are decided, for ``run`` and
``aggregate`` alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from worldrecall.core.components import Aggregator, UndeclaredValue
from worldrecall.core.data import ScoreRow
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)
from worldrecall.engine.cache import Store, component_identity, key_of, named_files, store_for
from worldrecall.engine.cache.frames import PACKED, decode_tables, encode_tables, pack_tables
from worldrecall.engine.stages.name_checks import configured_aggregator_params
from worldrecall.engine.stages.plan import enabled_benchmarks
from worldrecall.engine.stages.row_digests import row_digests, rows_digest
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
                   per_benchmark: Mapping[str, list[str]] | None = None, store: Store | None = None,
                   digests: Mapping[tuple[str, str, str, str], str] | None = None,
                   part_keys: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """Run the global, suite and per-benchmark aggregators; returns every table by name.

    Tables are cached (``store``; default: the config's cache folder) under the key of the rows they reduce
    and the aggregator's identity, params and the files those name. An aggregator that declares
    ``by_benchmark`` is run (and cached) per benchmark and its tables concatenated in benchmark order, and one
    that declares ``by_metric`` per metric within a benchmark, so a re-score job aggregates the changed metric.
    ``digests``: the rows' :func:`~worldrecall.engine.stages.row_digests.row_digests`, when the caller has them.
    ``part_keys``: filled with, per table of a ``by_benchmark`` aggregator, each benchmark's key of the tables its
    part was cut from (only where every row of a part names that benchmark): a sink that writes such a table one
    file per benchmark renders an unchanged benchmark's file once (``engine/sinks/files.py``).
    """
    if per_benchmark is None:
        # what the run itself aggregated (`worldrecall aggregate` and a shard merge give the same tables)
        per_benchmark = {n: list(b.get("aggregators") or []) for n, b in enabled_benchmarks(cfg).items()}
    if store is None:
        store = store_for(cfg)
    groups = _Groups(host, rows, cfg, store, row_digests(rows) if digests is None else digests)
    tables: dict[str, Any] = {}
    for name in all_rows_aggregators(cfg):
        tables.update(groups.run(name, "*"))
    for bench, names in per_benchmark.items():
        for name in names:
            for tname, df in groups.run(name, bench).items():
                tables[tname if tname.startswith(bench) else f"{bench}.{tname}"] = df
    if part_keys is not None:
        part_keys.update(groups.part_keys)
    return tables


def all_rows_aggregators(cfg: Mapping[str, Any]) -> list[str]:
    """The aggregators run over every row of a run (the config's, then the suite's), in that order; each
    benchmark's own aggregators are under ``benchmarks.<name>.aggregators``."""
    return list(cfg.get("aggregators") or []) + list((cfg.get("suite") or {}).get("aggregators") or [])


class _Groups:
    """The groups of rows an aggregator may see — all (``"*"``), a benchmark's, a (benchmark, metric)'s —,
    each hashed once, and the cached call of an aggregator on one of them."""

    def __init__(self, host: PluginHost, rows: list[ScoreRow], cfg: Mapping[str, Any], store: Store,
                 digests: Mapping[tuple[str, str, str, str], str]):
        self.host, self.rows, self.store = host, rows, store
        # keyed by registered name: `aggregator_params.memobench.leaderboard.x=…` from the shell arrives split
        self.params = configured_aggregator_params(cfg, host.components["aggregator"], strict=False)
        self.primary = {name: cls.primary for name, cls in host.metrics.items()}
        self.meta = value_meta(host, rows)
        self.declared = {name: b.to_json() for name, b in getattr(host, "benchmarks", {}).items()}
        self.subsets: dict[str, list[ScoreRow]] = {}
        for r in rows:
            self.subsets.setdefault(r.benchmark, []).append(r)
        self._metrics: dict[str, dict[str, list[ScoreRow]]] = {}  # benchmark -> metric -> rows, in row order
        self._digests: dict[Any, str] = {}
        self.row_digests = digests
        self.entries: dict[tuple[str, Any], str] = {}  # (aggregator, group) -> the key of the tables it gave
        self.part_keys: dict[str, dict[str, str]] = {}  # by_benchmark table -> benchmark -> key of its part

    def rows_of(self, key: Any) -> list[ScoreRow]:
        if key == "*":
            return self.rows
        if isinstance(key, tuple):
            return self.metrics_of(key[0]).get(key[1], [])
        return self.subsets.get(key, [])

    def metrics_of(self, bench: str) -> dict[str, list[ScoreRow]]:
        if bench not in self._metrics:
            per: dict[str, list[ScoreRow]] = {}
            for r in self.subsets.get(bench, []):
                per.setdefault(r.metric, []).append(r)
            self._metrics[bench] = per
        return self._metrics[bench]

    def digest(self, key: Any) -> str:
        if key not in self._digests:
            self._digests[key] = rows_digest(self.rows_of(key), self.row_digests)
        return self._digests[key]

    def cached(self, name: str, agg: Aggregator, p: dict[str, Any], key: Any) -> dict[str, Any]:
        # the stored form is in the key: a version that stored them plain never reads a packed entry, nor this
        # one a plain one
        entry = key_of(component_identity(agg), {"rows": self.digest(key), "files": named_files(agg, p),
                                                 "stored": PACKED}, json.loads(json.dumps(p, sort_keys=True, default=str)))
        self.entries[(name, key)] = entry
        doc = self.store.get_json("aggregates", entry)
        if doc is not None:
            return decode_tables(doc)
        got = agg.aggregate(self.rows_of(key), p)
        enc = encode_tables(got)
        if enc is not None:  # a table the JSON form cannot carry exactly is computed every time
            self.store.put_json("aggregates", entry, pack_tables(enc))
        return got

    def one_benchmark(self, name: str, agg: Aggregator, p: dict[str, Any], bench: str) -> dict[str, Any]:
        order = getattr(agg, "by_metric", None)
        per = self.metrics_of(bench) if order else {}
        if len(per) < 2:
            return self.cached(name, agg, p, bench)
        # the benchmark's tables as assembled from its metrics' parts, kept under the benchmark's rows: a job
        # that re-scored another benchmark (or nothing) reads them as one entry, not one per metric
        entry = key_of(component_identity(agg), {"rows": self.digest(bench), "files": named_files(agg, p),
                                                 "assembled": "by_metric", "stored": PACKED},
                       json.loads(json.dumps(p, sort_keys=True, default=str)))
        self.entries[(name, bench)] = entry
        doc = self.store.get_json("aggregates", entry)
        if doc is not None:
            return decode_tables(doc)
        out = self._assemble(name, agg, p, bench, per, order)
        enc = encode_tables(out)
        if enc is not None:
            self.store.put_json("aggregates", entry, pack_tables(enc))
        return out

    def _assemble(self, name: str, agg: Aggregator, p: dict[str, Any], bench: str,
                  per: Mapping[str, list[ScoreRow]], order: Mapping[str, Any]) -> dict[str, Any]:
        parts: dict[str, list[Any]] = {}
        for m in sorted(per):
            for tname, df in self.cached(name, agg, p, (bench, m)).items():
                parts.setdefault(tname, []).append(df)
        for tname, frames in parts.items():  # a plugin's declaration, checked where it is used: one clear line
            missing = [c for c in order.get(tname) or [] if any(len(f) and c not in f.columns for f in frames)]
            if missing:
                raise ValueError(f"aggregator {name!r}: by_metric sorts table {tname!r} by {missing}, which the "
                                 f"table does not have (its columns: {list(frames[0].columns)})")
        out = {}
        for tname, frames in parts.items():
            whole, sort = _concat(frames), order.get(tname)
            out[tname] = whole.sort_values(list(sort), kind="stable").reset_index(drop=True) if sort and len(whole) \
                else whole
        return out

    def run(self, name: str, bench: str) -> dict[str, Any]:
        agg = self.host.aggregator(name)
        p = _params(agg, self.params.get(name, {}), self.primary, self.meta, self.declared)
        if bench != "*":
            return self.one_benchmark(name, agg, p, bench)
        by_benchmark = getattr(agg, "by_benchmark", False)
        if not by_benchmark or not self.subsets:
            return self.cached(name, agg, p, "*")
        parts: dict[str, list[Any]] = {}
        keys: dict[str, dict[str, str | None]] = {}
        for b in sorted(self.subsets):
            for tname, df in self.one_benchmark(name, agg, p, b).items():
                parts.setdefault(tname, []).append(df)
                keys.setdefault(tname, {})[b] = self.entries[(name, b)] if _of_benchmark(df, b) else None
        for tname, of in keys.items():
            if all(of.values()):
                self.part_keys[tname] = {b: str(k) for b, k in of.items()}
        if len(self.subsets) == 1:
            return {tname: frames[0] for tname, frames in parts.items()}
        return {tname: _concat(frames) for tname, frames in parts.items()}


def _of_benchmark(df: Any, bench: str) -> bool:
    """Whether every row of a benchmark's table names that benchmark (its part of the concatenated table is then
    exactly its rows)."""
    return "benchmark" in getattr(df, "columns", ()) and bool((df["benchmark"] == bench).all())


def _concat(frames: list[Any]) -> Any:
    """One benchmark-partitioned table: the non-empty parts in order (an empty part adds no dtype)."""
    kept = [f for f in frames if len(f)] or frames[:1]
    if len(kept) == 1:
        return kept[0].reset_index(drop=True).copy()  # its own frame, never a cached entry's
    return pd.concat(kept, ignore_index=True)


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
