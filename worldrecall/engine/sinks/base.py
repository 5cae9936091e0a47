"""What a sink is, and how the sinks of a job run: each isolated, in order, over one frozen result.

A sink is one output of a run: files (tables, meta), plots, the HTML report, the submission bundle, timing,
the sweep job summary, MLflow, the console. The rows are on disk before any sink runs, so a failing sink
never costs results: it is reported in one line, the others still run, and the exit code says so
(:data:`EXIT_OUTPUT_FAILED`); rerunning the same command resumes and writes it again.

Adding an output is one module with one class that has a ``name`` and ``write(result, ctx) -> list[Path]``,
and one entry in :func:`worldrecall.engine.sinks.job_sinks`.
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
from worldrecall.engine.stages.later import run_later
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
    """One output of a run.

    Optional, declared on the class (torchmetrics-style metadata; absent means the conservative default):

    - ``reads_outputs: bool = True`` — it reads what earlier sinks wrote (``ctx.written``, ``seconds``,
      ``notes``). A sink that reads only the result says False, and may run while a forked sink is written.
    - ``forks: bool = False`` (or ``forks(result) -> bool``) — it may be written by a forked child (:mod:`worldrecall.engine.sinks.forked`)
      while the sinks after it that do not read outputs run here. Such a sink hands its in-memory memos back
      through ``memo_mark() -> Any`` (in the child, before writing: what to tell new entries by),
      ``memo_delta(mark) -> JSON`` and
      ``memo_merge(delta)`` (here), so later jobs of this process find them.
    - ``prepare(result, ctx) -> None`` — the part it can do before earlier outputs exist: called before it
      forks, and, for every sink still to run, before a forked sink is waited for (MLflow makes its runs
      while the report is written, and logs the files once they are there).
    """

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


def _prepare(sink: Sink, result: RunResult, ctx: SinkContext) -> None:
    prepare = getattr(sink, "prepare", None)
    if prepare is None:
        return
    try:
        prepare(result, ctx)
    except Exception:  # noqa: BLE001  (what it prepares, ``write`` does again; its failure is reported there)
        log.debug("output %s: preparing failed", sink.name, exc_info=True)


def _join(pending: Sequence[Any]) -> None:
    """Join forked sinks in the order they forked; each one's files go in at its place, so the places of the
    ones forked after it move by that many."""
    for i, f in enumerate(pending):
        n = f.join()
        for later in pending[i + 1:]:
            later.at += n


def write_sinks(result: RunResult, ctx: SinkContext, sinks: Sequence[Sink]) -> int:
    """Run every sink in order, each isolated; returns the job's exit code.

    That is the result's own code, or :data:`EXIT_OUTPUT_FAILED` where it was 0 and a sink failed. A sink that
    ``forks`` is written by a child while the next sinks that do not read outputs run here; it is joined
    before the first one that does (its files keep their place in ``ctx.written``).
    """
    from worldrecall.engine.sinks.forked import Forked, can_fork, let_write, wait_children

    wait_children()  # an earlier job's children: their cache writes had this job's run to finish
    pending: list[Forked] = []
    children: list[Forked] = []  # each may still write the deferred cache entries after its answer
    for i, sink in enumerate(sinks):
        if pending and getattr(sink, "reads_outputs", True):
            for later in sinks[i:]:  # before waiting: what every sink still to run can do already
                _prepare(later, result, ctx)
            _join(pending)
            pending = []
        forks = getattr(sink, "forks", False)
        if (forks(result) if callable(forks) else forks) and can_fork():
            _prepare(sink, result, ctx)
            try:
                pending.append(Forked(sink, result, ctx, run_one))
                children.append(pending[-1])
                continue
            except OSError as e:  # no fork to be had (out of memory, a process limit): written here, in order
                log.debug("output %s: not forked (%s)", sink.name, e)
        run_one(sink, result, ctx)
    _join(pending)
    run_later()  # what no forked sink took with it: the job's new cache entries (stages/later.py)
    let_write(children)  # waited for by the next job's outputs or at exit, not here (forked.wait_children)
    return EXIT_OUTPUT_FAILED if result.exit_code == 0 and ctx.failed else result.exit_code
