"""The plots sink: each aggregator draws its own tables (``Aggregator.plots``); the engine names no plugin."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from worldrecall.core.data import one_line
from worldrecall.engine.cache.blobs import BlobStore, write_shared
from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.stages.result import RunResult

log = logging.getLogger("worldrecall")


class PlotsSink:
    """``plots/``: every aggregator's figures; one aggregator that cannot plot is a warning, not a failure.

    An aggregator draws into a folder of its own, and each figure is then placed under ``plots/`` through the
    blob store (:func:`write_shared`): never rewritten in place, so the report and MLflow link it instead of
    keeping a copy, and a job that draws the same figure as an earlier one (a sweep's) adds no bytes."""

    name = "plots"

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        pdir = result.results_dir / "plots"
        blobs = BlobStore(Path(result.config["output_root"]) / "blobs")
        out: list[Path] = []
        result.results_dir.mkdir(parents=True, exist_ok=True)  # the drawing folders are made inside it
        for name, agg in (getattr(ctx.host, "components", {}) or {}).get("aggregator", {}).items():
            inst = agg() if isinstance(agg, type) else agg
            with tempfile.TemporaryDirectory(prefix=".plots-", dir=result.results_dir) as tmp:
                try:
                    drawn = [Path(p) for p in inst.plots(result.tables, Path(tmp))]
                except Exception as e:  # noqa: BLE001  (a plot must never cost the results)
                    log.warning("aggregator %s could not plot: %s", name, one_line(e))
                    continue
                for p in drawn:
                    inside = p.is_relative_to(tmp) and p.is_file()
                    out.append(write_shared(pdir / p.relative_to(tmp), p.read_bytes(), blobs) if inside else p)
        return out
