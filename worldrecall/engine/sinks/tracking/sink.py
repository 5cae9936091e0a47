"""The MLflow sink: one run per job (under the sweep's parent in a multirun) with one child per
(benchmark, model); the run layout is :mod:`worldrecall.engine.sinks.tracking.runs`, the client
:mod:`worldrecall.engine.sinks.tracking.tracker`."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from worldrecall.engine.redaction import flatten
from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.sinks.tracking.reuse import RECORD, reusable, store_uri
from worldrecall.engine.stages.result import RunResult
from worldrecall.engine.stages.shards import already_logged, mark_logged

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
    }
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
        from worldrecall.engine.sinks.sweep_summary import current_swept_keys
        from worldrecall.engine.sinks.tracking.runs import log_job, override_label, results_digest
        from worldrecall.engine.sinks.tracking.tracker import Tracker
        from worldrecall.engine.sinks.tracking.views import headline_keys

        cfg = result.config
        tcfg = cfg["tracking"]
        if not tcfg["enabled"]:
            return []
        if self.rows_digest is not None and already_logged(result.results_dir, self.rows_digest):
            ctx.notes.append("MLflow: these merged rows are already logged (by the last shard or an earlier "
                             "aggregate)")
            return []
        overrides = list(ctx.overrides)
        parent = parent_run(ctx.sweep_dir)
        files = [p for p in ctx.written if Path(p).is_relative_to(result.results_dir)]  # not the job folder's
        t0 = time.perf_counter()
        meta = result.results_dir / RECORD
        digest = results_digest(files)
        uri = store_uri(tcfg, Path(cfg["output_root"]))
        if parent is None and self.rows_digest is None:
            rec = reusable(result.results_dir, uri, result.provenance.config_hash, digest)
            if rec is not None:  # nothing changed: nothing to log, MLflow not even imported
                _write_record(meta, {**rec, "mlflow_s": round(time.perf_counter() - t0, 4), "setup_s": 0.0,
                                     "import_s": 0.0, "prefetch_s": 0.0, "reused": True,
                                     "reused_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
                ctx.notes.append(f"MLflow: same config and same numbers as run {rec['run_id']}; nothing logged "
                                 "again (that run is reused)")
                ctx.notes.append(rec["ui"])
                return [meta]
        try:
            tracker = Tracker(tcfg, Path(cfg["output_root"]))
        except ImportError:
            print("warning: MLflow is not installed (pip install 'worldrecall[tracking]'); nothing tracked",
                  file=sys.stderr)
            return []
        swept = set(current_swept_keys(ctx.sweep_dir)) if parent else set()
        varying = [o for o in overrides if o.partition("=")[0].lstrip("+~") in swept]  # what a job varies
        name = self.run_name or ((override_label(varying) or "job") if parent else
                                 (tcfg["run_name"] or f"worldrecall · {','.join(result.benchmarks) or 'no benchmark'}"))
        t_log = time.perf_counter()
        run_id, reused = log_job(tracker, result, cfg, ctx.host, files, varying, parent, name,
                                 provenance_tags(result, overrides), flatten(dict(cfg)))
        if self.rows_digest is not None:
            mark_logged(result.results_dir, self.rows_digest)
        if reused:
            ctx.notes.append(f"MLflow: same config and same numbers as run {run_id}; nothing logged again (that "
                             "run is reused)")
        columns = {b: headline_keys(ctx.host, b, result.rows) for b in result.benchmarks}
        ui = tracker.ui_command(run_id if parent is None else None, result.benchmarks, columns)
        ctx.notes.append(ui)
        # what was logged, for a later rerun (reuse.py); measured after logging, so not logged itself;
        # benchmarks/pipeline.py reads the seconds
        _write_record(meta, {"mlflow_s": round(time.perf_counter() - t_log + tracker.setup_s + tracker.import_s, 4),
                             "setup_s": round(tracker.setup_s, 4), "import_s": round(tracker.import_s, 4),
                             "prefetch_s": round(tracker.prefetch_s, 4), "run_id": run_id, "reused": reused,
                             "parent": parent, "uri": tracker.uri, "config_hash": result.provenance.config_hash,
                             "results_digest": digest, "ui": ui})
        return [meta]
