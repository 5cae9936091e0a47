"""Everything after the run: sinks, each ``write(result, ctx) -> list[Path]`` over one frozen
:class:`~worldrecall.engine.stages.result.RunResult`, run in order and isolated by
:func:`~worldrecall.engine.sinks.base.write_sinks`.

The lists below are the only place that says which outputs a job has: the built-in ones in order, then
the sinks plugins register (``register_sinks``), before MLflow (which logs every file) and the console.
"""

from __future__ import annotations

from typing import Any

from worldrecall.engine.sinks.base import Sink, SinkContext, write_sinks
from worldrecall.engine.sinks.console import ConsoleSink
from worldrecall.engine.sinks.disk import DiskSink
from worldrecall.engine.sinks.files import TablesSink, TableTextSink, TimingSink
from worldrecall.engine.sinks.plots import PlotsSink
from worldrecall.engine.sinks.report.sink import ReportSink
from worldrecall.engine.sinks.submission import SubmissionSink
from worldrecall.engine.sinks.sweep_summary import JobSummarySink
from worldrecall.engine.sinks.tracking.sink import MlflowSink, MlflowStartSink
from worldrecall.engine.sinks.unchanged import OutputsRecordSink

__all__ = ["Sink", "SinkContext", "write_sinks", "job_sinks", "shard_sinks", "merge_sinks"]


def _files(host: Any, mlflow: MlflowSink | None = None) -> list[Sink]:
    # order matters: the aggregated tables' CSVs first (MLflow's runs start from them and the rows, in the MLflow
    # process, when ``mlflow`` is given), the per-case tables and the Markdown after;
    # the report embeds the plots; timing records the sinks before it; MLflow logs them all
    plugins = list(getattr(host, "sinks", {}).values()) if host is not None else []
    start = [MlflowStartSink(mlflow)] if mlflow is not None else []
    return [TablesSink(), *start, TableTextSink(), PlotsSink(), ReportSink(), SubmissionSink(), *plugins,
            TimingSink(), JobSummarySink()]


def job_sinks(host: Any = None) -> list[Sink]:
    """A job's outputs: files (MLflow's runs made in the MLflow process meanwhile), MLflow's files, the outputs' record,
    then the console (which prints the MLflow link) and the output root's size by part with how to trim it."""
    disk = DiskSink()
    mlflow = MlflowSink(while_waiting=disk.start)  # the disk line's measure runs while MLflow logs the files
    return [*_files(host, mlflow), mlflow, OutputsRecordSink(), ConsoleSink(), disk]


def shard_sinks(host: Any = None) -> list[Sink]:
    """One shard's outputs: its partial files only (the merge logs and prints the whole)."""
    return _files(host)


def merge_sinks(n_shard_files: int, run_name: str | None, rows_digest: str, host: Any = None) -> list[Sink]:
    """The merge of every shard's rows: files, MLflow once per set of rows, the console."""
    mlflow = MlflowSink(run_name=run_name, rows_digest=rows_digest)
    return [*_files(host, mlflow), mlflow, OutputsRecordSink(), ConsoleSink(merged=n_shard_files), DiskSink()]
