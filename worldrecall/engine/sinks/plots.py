"""The plots sink: each aggregator draws its own tables (``Aggregator.plots``); the engine names no plugin."""

from __future__ import annotations

import logging
from pathlib import Path

from worldrecall.core.data import one_line
from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.stages.result import RunResult

log = logging.getLogger("worldrecall")


class PlotsSink:
    """``plots/``: every aggregator's figures; one aggregator that cannot plot is a warning, not a failure."""

    name = "plots"

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        pdir = result.results_dir / "plots"
        out: list[Path] = []
        for name, agg in (getattr(ctx.host, "components", {}) or {}).get("aggregator", {}).items():
            inst = agg() if isinstance(agg, type) else agg
            try:
                out.extend(Path(p) for p in inst.plots(result.tables, pdir))
            except Exception as e:  # noqa: BLE001  (a plot must never cost the results)
                log.warning("aggregator %s could not plot: %s", name, one_line(e))
        return out
