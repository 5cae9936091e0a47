"""The MLflow sink: one run per job (under the sweep's parent in a multirun) with one child per
(benchmark, model); the run layout is :mod:`worldrecall.engine.sinks.tracking.runs`, the client
:mod:`worldrecall.engine.sinks.tracking.tracker`."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from worldrecall.engine.redaction import flatten
from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.sinks.tracking.reuse import RECORD, reusable, store_uri
from worldrecall.engine.stages.result import RunResult
from worldrecall.engine.stages.shards import already_logged, mark_logged
from worldrecall.numerics import isa

PARENT_FILE = "mlflow_parent_run_id"  # in the sweep folder: the parent run jobs attach to
PARENT_ENV = "WORLDRECALL_MLFLOW_PARENT"


def parent_run(sweep_dir: Path | None) -> str | None:
    """The sweep's parent run id: inherited through the environment, else read from the sweep folder."""
    env = os.environ.get(PARENT_ENV)
    if env:
        return env
    p = Path(sweep_dir) / PARENT_FILE if sweep_dir is not None else None
    return p.read_text().strip() if p is not None and p.exists() else None


def provenance_tags(result: RunResult, overrides: list[str]) -> dict[str, str]:
    """The run's provenance as MLflow tags (the same record the submission bundle states)."""
    prov = result.provenance
    tags = {
        "worldrecall.version": prov.worldrecall_version,
        "worldrecall.git_commit": prov.git_commit,
        "worldrecall.input_manifest_hash": prov.input_manifest_sha256[:16],
        "worldrecall.results_dir": str(result.results_dir),
        "worldrecall.overrides": " ".join(overrides),
        "worldrecall.backends": ",".join(f"{k}={v}" for k, v in prov.backends.items()),
        "worldrecall.python": prov.python,
        "worldrecall.cpu_kernels": isa.summary(dict(prov.cpu_kernels)),
        # which of worldrecall and the plugins ran from a git working tree with uncommitted changes
        "worldrecall.modified_tree": ",".join(k for k, v in prov.modified.items() if v) or "none",
    }
    if prov.packages:  # the full list is in the submission's provenance.json
        tags["worldrecall.packages"] = (f"sha256 {str(prov.packages.get('digest', ''))[:16]}; "
                                        f"{prov.packages.get('lock', 'no requirements.lock beside the code')}")
    for name, p in prov.plugins.items():
        tags[f"plugin.{name}"] = p.get("version") or "?"
    return tags


def _write_record(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, sort_keys=True))


class MlflowSink:
    """Logs the job (``tracking.enabled``); leaves the ``mlflow ui`` line for the console.

    ``run_name`` names the run (a merge's); ``rows_digest``: log only if these rows were not logged before
    (a merge after the last shard already merged them).
    """

    name = "mlflow"

    def __init__(self, run_name: str | None = None, rows_digest: str | None = None) -> None:
        self.run_name, self.rows_digest = run_name, rows_digest

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        started = self.__dict__.pop("_started", None)
        if started is not None:  # begun on a thread by MlflowStartSink: wait for it, then log the files
            thread, box, view = started
            thread.join()
            ctx.notes.extend(view.notes)
            if "error" in box:
                raise box["error"]
            if box["early"] is not None:
                return box["early"]
            return [] if box["opened"] is None else self._finish(result, ctx, box["opened"], box["files"])
        early = self._early(result, ctx)
        if early is not None:
            return early
        opened = self._open(result, ctx)
        return [] if opened is None else self._finish(result, ctx, opened)

    def start(self, result: RunResult, ctx: SinkContext) -> None:
        """Begin on a thread what needs the result and its tables only (the reuse check; the job's runs, their
        metrics, params and per-case files), so MLflow's logging overlaps the outputs written after this; the
        job's files are logged by :meth:`write`, which waits for it. The tables' digest (MLflow's reuse check,
        its tag and record) is taken over the files written before this: the tables."""
        import threading

        files = _files(result, ctx)
        box: dict[str, Any] = {"files": files}
        view = SinkContext(ctx.host, ctx.job_dir, ctx.overrides, ctx.sweep_dir, list(ctx.written))

        def run() -> None:
            try:
                box["early"] = self._early(result, view)
                box["opened"] = None if box["early"] is not None else self._open(result, view)
            except BaseException as e:  # noqa: BLE001  (raised again by write, where the sink is isolated)
                box["error"] = e

        thread = threading.Thread(target=run, name="worldrecall-mlflow", daemon=True)
        self._started = (thread, box, view)
        thread.start()

    def _nothing_to_log(self, result: RunResult, ctx: SinkContext) -> tuple[str, Any] | None:
        """Why nothing is to be logged — ("off" | "logged" | "reused", the reused run's record) — or None.
        Reads the record of an earlier run (and asks MLflow whether that run is still current)."""
        from worldrecall.engine.sinks.tracking.runs import results_digest

        cfg = result.config
        tcfg = cfg["tracking"]
        if not tcfg["enabled"]:
            return ("off", None)
        if self.rows_digest is not None and already_logged(result.results_dir, self.rows_digest):
            return ("logged", None)
        if parent_run(ctx.sweep_dir) is None and self.rows_digest is None:
            rec = reusable(result.results_dir, store_uri(tcfg, Path(cfg["output_root"])),
                           result.provenance.config_hash, results_digest(_files(result, ctx)))
            if rec is not None:
                return ("reused", rec)
        return None

    def _early(self, result: RunResult, ctx: SinkContext) -> list[Path] | None:
        """The outcome when nothing is to be logged (tracking off, rows logged already, a reused run)."""
        t0 = time.perf_counter()
        why = self._nothing_to_log(result, ctx)
        if why is None:
            return None
        if why[0] == "logged":
            ctx.notes.append("MLflow: these merged rows are already logged (by the last shard or an earlier "
                             "aggregate)")
        if why[0] != "reused":
            return []
        rec = why[1]  # nothing changed: nothing to log
        meta = result.results_dir / RECORD
        _write_record(meta, {**rec, "mlflow_s": round(time.perf_counter() - t0, 4), "setup_s": 0.0,
                             "import_s": 0.0, "prefetch_s": 0.0, "reused": True,
                             "reused_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        ctx.notes.append(f"MLflow: same config and same numbers as run {rec['run_id']}; nothing logged "
                         "again (that run is reused)")
        ctx.notes.append(rec["ui"])
        return [meta]

    def _open(self, result: RunResult, ctx: SinkContext) -> Any:
        """The tracker and the job's runs (:func:`~worldrecall.engine.sinks.tracking.runs.open_job`), for a
        job :meth:`_nothing_to_log` let through; None where MLflow is not installed."""
        from worldrecall.engine.sinks.sweep_summary import current_swept_keys
        from worldrecall.engine.sinks.tracking.runs import open_job, override_label
        from worldrecall.engine.sinks.tracking.tracker import Tracker

        cfg = result.config
        tcfg = cfg["tracking"]
        t0 = time.perf_counter()
        try:
            tracker = Tracker(tcfg, Path(cfg["output_root"]))
        except ImportError:
            print("warning: MLflow is not installed (pip install 'worldrecall[tracking]'); nothing tracked",
                  file=sys.stderr)
            return None
        overrides = list(ctx.overrides)
        parent = parent_run(ctx.sweep_dir)
        swept = set(current_swept_keys(ctx.sweep_dir)) if parent else set()
        varying = [o for o in overrides if o.partition("=")[0].lstrip("+~") in swept]  # what a job varies
        name = self.run_name or ((override_label(varying) or "job") if parent else
                                 (tcfg["run_name"] or f"worldrecall · {','.join(result.benchmarks) or 'no benchmark'}"))
        files = _files(result, ctx)
        job = open_job(tracker, result, cfg, ctx.host, files, varying, parent, name,
                       provenance_tags(result, overrides), flatten(dict(cfg)))
        return {"tracker": tracker, "job": job, "parent": parent, "seconds": time.perf_counter() - t0}

    def _finish(self, result: RunResult, ctx: SinkContext, opened: dict[str, Any],
                tables: list[Path] | None = None) -> list[Path]:
        """``tables``: the files the runs were opened with (their CSVs' digest is the record's), when
        :meth:`start` opened them before the other outputs were written."""
        from worldrecall.engine.sinks.tracking.runs import finish_job, results_digest
        from worldrecall.engine.sinks.tracking.views import headline_keys

        t0 = time.perf_counter()
        tracker, job, parent = opened["tracker"], opened["job"], opened["parent"]
        files = _files(result, ctx)
        run_id, reused = job if isinstance(job, tuple) else finish_job(tracker, job, files)
        if self.rows_digest is not None:
            mark_logged(result.results_dir, self.rows_digest)
        if reused:
            ctx.notes.append(f"MLflow: same config and same numbers as run {run_id}; nothing logged again (that "
                             "run is reused)")
        columns = {b: headline_keys(ctx.host, b, result.rows) for b in result.benchmarks}
        ui = tracker.ui_command(run_id if parent is None else None, result.benchmarks, columns)
        ctx.notes.append(ui)
        # what was logged, for a later rerun (reuse.py); measured after logging, so not logged itself;
        # benchmarks/pipeline.py reads the seconds (both parts: the runs, then the files)
        seconds = opened["seconds"] + time.perf_counter() - t0
        meta = result.results_dir / RECORD
        _write_record(meta, {"mlflow_s": round(seconds + tracker.import_s, 4),
                             "setup_s": round(tracker.setup_s, 4), "import_s": round(tracker.import_s, 4),
                             "prefetch_s": round(tracker.prefetch_s, 4), "run_id": run_id, "reused": reused,
                             "parent": parent, "uri": tracker.uri, "config_hash": result.provenance.config_hash,
                             "results_digest": results_digest(files if tables is None else tables), "ui": ui})
        return [meta]


class MlflowStartSink:
    """Starts ``mlflow``'s first part on a thread (:meth:`MlflowSink.start`) once the tables are written; the
    :class:`MlflowSink` after the other outputs finishes it."""

    name = "mlflow_start"

    def __init__(self, sink: MlflowSink) -> None:
        self.sink = sink

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        self.sink.start(result, ctx)
        return []


def _files(result: RunResult, ctx: SinkContext) -> list[Path]:
    """The job's files under its results folder (not the job folder's), in the order they were written."""
    return [Path(p) for p in ctx.written if Path(p).is_relative_to(result.results_dir)]
