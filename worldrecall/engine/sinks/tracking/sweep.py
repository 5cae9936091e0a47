"""A sweep's MLflow parent run: opened on the launching machine before any job starts (jobs attach to it
through :data:`~worldrecall.engine.sinks.tracking.sink.PARENT_ENV` or the sweep folder's file), and closed
with the summary across swept values."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldrecall.engine.sinks.tracking.sink import PARENT_ENV, PARENT_FILE


@dataclass
class SweepParent:
    tracker: Any
    run_id: str


def open_sweep_parent(tcfg: Mapping[str, Any], output_root: Path, sweep: Path, task: list[str],
                      keys: list[str]) -> SweepParent | None:
    """Start the parent run (None with tracking off or MLflow missing) and publish its id to the jobs."""
    from worldrecall.engine.sinks.tracking.tracker import Tracker

    if not tcfg.get("enabled", True):
        return None
    try:
        tracker = Tracker(tcfg, output_root)
    except ImportError:
        return None
    swept = [o for o in task if o.partition("=")[0].lstrip("+~") in keys]
    name = tcfg.get("run_name") or ("sweep " + " ".join(swept) if swept else "sweep")
    run_id = tracker.start_run(name, tags={"worldrecall.sweep_dir": str(sweep), "worldrecall.kind": "sweep",
                                           "worldrecall.swept": ",".join(keys)})
    os.environ[PARENT_ENV] = run_id  # inherited by local launchers' worker processes
    (sweep / PARENT_FILE).write_text(run_id)  # for launchers whose jobs don't inherit the environment
    return SweepParent(tracker, run_id)


def close_sweep_parent(parent: SweepParent | None, sweep: Path, files: list[Path]) -> str:
    """Log the sweep summary's files to the parent run and finish it; returns the `mlflow ui` line."""
    os.environ.pop(PARENT_ENV, None)  # a later run in this process must not attach to this sweep
    if parent is None:
        return ""
    from worldrecall.engine.sinks.blobs import BlobStore

    tracker = parent.tracker
    blobs = BlobStore(tracker.output_root / "blobs")
    for f in files:
        tracker.log_file_once(parent.run_id, f, "sweep_summary", blobs)
    tracker.log_batch(parent.run_id, metrics={"n_jobs": len(list(sweep.glob("*/summary.json")))})
    tracker.end_run(parent.run_id, "FINISHED", end_time=time.time())
    return tracker.ui_command()
