"""What a sink is, and how the sinks of a job run: each isolated, in order, over one frozen result.

A sink is one output of a run: files (tables, meta), plots, the HTML report, the submission bundle, timing,
the sweep job summary, MLflow, the console. The rows are on disk before any sink runs, so a failing sink
never costs results: it is reported in one line, the others still run, and the exit code says so
(:data:`EXIT_OUTPUT_FAILED`); rerunning the same command resumes and writes it again.

Adding an output is one class that has a ``name`` and ``write(result, ctx) -> list[Path]``: a built-in one is
an entry in :func:`worldrecall.engine.sinks.job_sinks`; a plugin's is registered through ``register_sinks``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from worldrecall.core.data import one_line
from worldrecall.engine.stages.result import RunResult

EXIT_OUTPUT_FAILED = 5  # every result was written, but an output (report, MLflow …) could not be
log = logging.getLogger("worldrecall")


@dataclass(frozen=True)
class SinkContext:
    """Where a job's outputs go, and what the sinks before this one did.

    ``written`` collects every sink's paths in order (the report embeds the plots, MLflow logs all files);
    ``notes`` are lines the console sink prints last (the MLflow link); ``seconds`` each sink's wall time.
    """

    host: Any
    job_dir: Path | None = None
    overrides: tuple[str, ...] = ()
    sweep_dir: Path | None = None
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)


class Sink(Protocol):
    """One output of a run: a ``name`` and ``write(result, ctx) -> list[Path]`` (the files it wrote; empty for
    the console or MLflow). Plugins add their own through the ``register_sinks`` hook. A sink may also have
    ``begin(result, host)``: called once the rows are final, before the aggregation (``result`` has no tables
    yet), to start what needs the rows only beside it (the report's case pages: ``sinks/beside.py``)."""

    name: str

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        """Write this output of ``result``; returns the files written (empty for the console, MLflow)."""
        ...


def run_one(sink: Sink, result: RunResult, ctx: SinkContext) -> None:
    """Write one sink, isolated: a failure is one line on stderr and a name in ``ctx.failed``."""
    t0 = time.perf_counter()
    try:
        ctx.written.extend(sink.write(result, ctx))
    except Exception as e:  # noqa: BLE001  (one output must not cost the others; the exit code tells)
        log.debug("output %s failed", sink.name, exc_info=True)
        print(f"error: output {sink.name} failed: {type(e).__name__}: {one_line(e)} (the other outputs were "
              "written; rerun the same command to retry)", file=sys.stderr)
        ctx.failed.append(sink.name)
    ctx.seconds[sink.name] = time.perf_counter() - t0


def write_sinks(result: RunResult, ctx: SinkContext, sinks: Sequence[Sink]) -> int:
    """Run every sink in order, each isolated; returns the job's exit code: the result's own, or
    :data:`EXIT_OUTPUT_FAILED` where it was 0 and a sink failed. When this returns, every file is written."""
    for sink in sinks:
        run_one(sink, result, ctx)
    return EXIT_OUTPUT_FAILED if result.exit_code == 0 and ctx.failed else result.exit_code
