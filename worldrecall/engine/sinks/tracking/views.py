"""Which MLflow metric columns the printed per-benchmark link shows: the benchmark's declared headline.

A declared benchmark (``register_benchmarks``) names its headline values as ``<metric>:<value>``; each is
logged on the per-model runs under :func:`~worldrecall.engine.sinks.results_view.metric_key`. A benchmark
nobody declares shows the primary value of each metric it ran. ``rank`` comes first: the runs are sorted by it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from worldrecall.engine.sinks.results_view import metric_key


def headline_keys(host: Any, benchmark: str, rows: Iterable[Any]) -> list[str]:
    """The MLflow metric keys of ``benchmark``'s headline values, in declared order (no duplicates)."""
    decl = (getattr(host, "benchmarks", None) or {}).get(benchmark)
    if decl is not None:
        refs = [r.partition(":") for r in decl.headline]
        keys = [metric_key(m, v, benchmark, host) for m, _, v in refs]
    else:
        metrics = sorted({r.metric for r in rows if r.benchmark == benchmark})
        keys = [metric_key(m, host.metrics[m].primary, benchmark, host) for m in metrics
                if m in getattr(host, "metrics", {}) and getattr(host.metrics[m], "primary", "")]
    return list(dict.fromkeys(["rank", *keys]))
