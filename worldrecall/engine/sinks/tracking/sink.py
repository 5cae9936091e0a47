"""The MLflow sink: one run per job (under the sweep's parent in a multirun) with one child per
(benchmark, model); the run layout is :mod:`worldrecall.engine.sinks.tracking.runs`, the client
:mod:`worldrecall.engine.sinks.tracking.tracker`."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worldrecall.engine.redaction import flatten
from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.sinks.tracking.reuse import RECORD, store_uri
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
    from worldrecall.engine.sinks.tracking.process import pending_parent

    pending = pending_parent(sweep_dir)
    if pending is not None:  # this process launches the sweep: its parent run is being made (waited for)
        return pending.run_id
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
    """Logs the job (``tracking.enabled``) through the MLflow process (:mod:`.process`); leaves the
    ``mlflow ui`` line for the console.

    ``run_name`` names the run (a merge's); ``rows_digest``: log only if these rows were not logged before
    (a merge after the last shard already merged them).
    """

    name = "mlflow"

    def __init__(self, run_name: str | None = None, rows_digest: str | None = None,
                 while_waiting: Callable[[RunResult, SinkContext], None] | None = None) -> None:
        """``while_waiting``: called once the job's files are handed to the MLflow process, before its answer is
        waited for (the disk line's measure starts then: ``sinks/disk.py``)."""
        self.run_name, self.rows_digest, self.while_waiting = run_name, rows_digest, while_waiting

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        begun = self.__dict__.pop("_begun", None)  # by MlflowStartSink, before the other outputs
        if begun is None:
            begun = self._begin(result, ctx)
        return self._end(result, ctx, begun)

    def start(self, result: RunResult, ctx: SinkContext) -> None:
        """Send the MLflow process what needs the result and its tables only (the reuse check; the job's runs,
        their metrics, params and per-case files), so MLflow's logging overlaps the outputs written after
        this; :meth:`write` sends the job's files and waits for the answer. The tables' digest (MLflow's reuse
        check, its tag and record) is taken over the files written before this: the tables."""
        self._begun = self._begin(result, ctx)

    def _begin(self, result: RunResult, ctx: SinkContext) -> dict[str, Any]:
        from worldrecall.engine.cache.blobs import BlobStore
        from worldrecall.engine.sinks.sweep_summary import current_swept_keys
        from worldrecall.engine.sinks.tracking.process import close_early, take_process
        from worldrecall.engine.sinks.tracking.runs import override_label, plan_job

        t0 = time.perf_counter()
        cfg = result.config
        tcfg = cfg["tracking"]
        if not tcfg["enabled"]:
            return {"done": []}
        if self.rows_digest is not None and already_logged(result.results_dir, self.rows_digest):
            close_early()
            ctx.notes.append("MLflow: these merged rows are already logged (by the last shard or an earlier "
                             "aggregate)")
            return {"done": []}
        output_root = Path(cfg["output_root"]).resolve()
        files = _files(result, ctx)
        overrides = list(ctx.overrides)
        parent = parent_run(ctx.sweep_dir)
        swept = set(current_swept_keys(ctx.sweep_dir)) if parent else set()
        varying = [o for o in overrides if o.partition("=")[0].lstrip("+~") in swept]  # what a job varies
        name = self.run_name or ((override_label(varying) or "job") if parent else
                                 (tcfg["run_name"] or f"worldrecall · {','.join(result.benchmarks) or 'no benchmark'}"))
        blobs = BlobStore(output_root / "blobs")
        plan = plan_job(result, cfg, ctx.host, files, varying, parent, name, provenance_tags(result, overrides),
                        flatten(dict(cfg)), blobs)
        uri = store_uri(tcfg, output_root)
        # the rows' and tables' digest, taken once: the reuse check, the runs' tag and the record compare it
        reuse = None
        if parent is None and self.rows_digest is None:
            reuse = {"results_dir": str(result.results_dir), "config_hash": result.provenance.config_hash,
                     "digest": plan["results_digest"]}
        proc = take_process()
        proc.send({"op": "open", "uri": uri, "tcfg": dict(tcfg), "output_root": str(output_root), "reuse": reuse,
                   "plan": plan})
        return {"proc": proc, "blobs": blobs, "digest": plan["results_digest"], "parent": parent,
                "plan_s": time.perf_counter() - t0, "prefetched": proc.early}

    def _end(self, result: RunResult, ctx: SinkContext, begun: dict[str, Any]) -> list[Path]:
        from worldrecall.engine.sinks.tracking.process import release
        from worldrecall.engine.sinks.tracking.runs import file_entries
        from worldrecall.engine.sinks.tracking.tracker import ui_missing_module
        from worldrecall.engine.sinks.tracking.views import headline_keys

        if "done" in begun:
            return begun["done"]
        t0 = time.perf_counter()
        proc = begun["proc"]
        columns = {b: headline_keys(ctx.host, b, result.rows) for b in result.benchmarks}
        proc.send({"op": "finish", "entries": file_entries(_files(result, ctx), begun["blobs"]),
                   "benchmarks": list(result.benchmarks), "columns": columns, "ui_missing": ui_missing_module()})
        if self.while_waiting is not None:
            self.while_waiting(result, ctx)
        t_wait = time.perf_counter()
        answer = proc.answer()
        release(proc)  # kept for this process's next job (a sweep's)
        waited = time.perf_counter() - t_wait
        if "missing" in answer:
            print("warning: MLflow is not installed (pip install 'worldrecall[tracking]'); nothing tracked "
                  f"({answer['missing']})", file=sys.stderr)
            return []
        if "error" in answer:
            raise TrackingError(answer["error"])
        here = begun["plan_s"] + time.perf_counter() - t0  # this process's own part: the plan, blobs, waiting
        meta = result.results_dir / RECORD
        if "reused_record" in answer:  # same config and tables as a run still current: nothing logged
            rec = answer["reused_record"]
            _write_record(meta, {**rec, "mlflow_s": round(answer["log_s"], 4), "setup_s": 0.0, "import_s": 0.0,
                                 "job_s": round(here, 4), "waited_s": round(waited, 4), "reused": True,
                                 "reused_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            ctx.notes.append(f"MLflow: same config and same numbers as run {rec['run_id']}; nothing logged "
                             "again (that run is reused)")
            ctx.notes.append(rec["ui"])
            return [meta]
        run_id, parent = answer["run_id"], begun["parent"]
        if self.rows_digest is not None:
            mark_logged(result.results_dir, self.rows_digest)
        if answer["reused"]:
            ctx.notes.append(f"MLflow: same config and same numbers as run {run_id}; nothing logged again (that "
                             "run is reused)")
        unchanged = answer.get("unchanged") or {}
        by_run: dict[tuple[str, str], list[str]] = {}
        for bench, (held_by, held_name) in unchanged.items():
            by_run.setdefault((held_by, held_name), []).append(bench)
        for (held_by, held_name), benches in by_run.items():
            ctx.notes.append(f"MLflow: {', '.join(benches)} came out as run {held_by[:8]} ('{held_name}') logged "
                             "them: their (benchmark, model) runs are not logged again; this run points to them "
                             "(tag worldrecall.same_as.<benchmark>)")
        ctx.notes.append(answer["ui"])
        # what was logged, for a later rerun (reuse.py); measured after logging, so not logged itself.
        # mlflow_s: the MLflow process's import, store setup and logging (on another core); job_s: what this
        # process spent on it (the plan, the files' blobs, waiting: waited_s)
        _write_record(meta, {"mlflow_s": round(answer["import_s"] + answer["setup_s"] + answer["log_s"], 4),
                             "setup_s": round(answer["setup_s"], 4), "import_s": round(answer["import_s"], 4),
                             "job_s": round(here, 4), "waited_s": round(waited, 4), "prefetched": begun["prefetched"],
                             "run_id": run_id, "reused": answer["reused"], "parent": parent, "uri": answer["uri"],
                             "config_hash": result.provenance.config_hash, "results_digest": begun["digest"],
                             "ui": answer["ui"], "unchanged": unchanged})
        return [meta]


class TrackingError(RuntimeError):
    """MLflow failed in the MLflow process (its exception's type and message)."""


class MlflowStartSink:
    """Starts ``mlflow``'s first part in the MLflow process (:meth:`MlflowSink.start`) once the tables are
    written; the :class:`MlflowSink` after the other outputs finishes it."""

    name = "mlflow_start"

    def __init__(self, sink: MlflowSink) -> None:
        self.sink = sink

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        self.sink.start(result, ctx)
        return []


def _files(result: RunResult, ctx: SinkContext) -> list[Path]:
    """The job's files under its results folder (not the job folder's), in the order they were written."""
    return [Path(p) for p in ctx.written if Path(p).is_relative_to(result.results_dir)]
