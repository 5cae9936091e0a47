"""Everything after the run: sinks, each ``write(result, ctx) -> list[Path]`` over one frozen
:class:`~worldrecall.engine.stages.result.RunResult`, run in order and isolated by
:func:`~worldrecall.engine.sinks.base.write_sinks`.

The lists below are the only place that says which outputs a job has; a new output is one module with a
sink class and one entry here.
"""

from __future__ import annotations

from worldrecall.engine.sinks.base import Sink, SinkContext, write_sinks
from worldrecall.engine.sinks.console import ConsoleSink
from worldrecall.engine.sinks.files import TablesSink, TimingSink
from worldrecall.engine.sinks.plots import PlotsSink
from worldrecall.engine.sinks.report.sink import ReportSink
from worldrecall.engine.sinks.submission import SubmissionSink
from worldrecall.engine.sinks.sweep_summary import JobSummarySink
from worldrecall.engine.sinks.tracking.sink import MlflowSink

__all__ = ["Sink", "SinkContext", "write_sinks", "job_sinks", "shard_sinks", "merge_sinks"]


def _files() -> list[Sink]:
    # order matters: the report embeds the plots; timing records the sinks before it; MLflow logs them all.
    # The report is written by a forked child while the tables and the submission (which read only the
    # result) are written here; it is joined before timing (sinks/forked.py)
    return [PlotsSink(), ReportSink(), TablesSink(), SubmissionSink(), TimingSink(), JobSummarySink()]


def job_sinks() -> list[Sink]:
    """A job's outputs: files, MLflow, then the console (which prints the MLflow link last)."""
    return [*_files(), MlflowSink(), ConsoleSink()]


def shard_sinks() -> list[Sink]:
    """One shard's outputs: its partial files only (the merge logs and prints the whole)."""
    return _files()


def merge_sinks(n_shard_files: int, run_name: str | None, rows_digest: str) -> list[Sink]:
    """The merge of every shard's rows: files, MLflow once per set of rows, the console."""
    return [*_files(), MlflowSink(run_name=run_name, rows_digest=rows_digest), ConsoleSink(merged=n_shard_files)]
