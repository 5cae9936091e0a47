"""A sweep's MLflow parent run: opened as the sweep starts (jobs attach to it through
:data:`~worldrecall.engine.sinks.tracking.sink.PARENT_ENV` or the sweep folder's file), and closed with the
summary across swept values.

The run is made and finished by an MLflow process of its own (:mod:`.process`), so the process that launches
the jobs never imports MLflow (~1.5–2 s before the first job could start, and carried by every worker a cold
job forks). With Hydra's basic launcher the jobs run in this process: the sweep starts at once and a job that
needs the parent's id (its MLflow sink, after its own work) waits for the answer if it has not come yet. Any
other launcher starts jobs elsewhere, which read the sweep folder's file: there the id is waited for before
the first job is launched.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worldrecall.engine.sinks.tracking.sink import PARENT_ENV, PARENT_FILE, TrackingError

ANSWER_TIMEOUT_S = 300.0


class SweepParent:
    """The sweep's parent run, being made by its MLflow process: :attr:`run_id` waits for it (None when MLflow
    is missing or the run could not be made: the jobs are then logged as runs of their own, said once)."""

    def __init__(self, proc: Any, sweep: Path, output_root: Path):
        self.proc, self.sweep, self.output_root = proc, Path(sweep), Path(output_root)
        self._id: str | None = None
        self.problem = ""
        self._said = False
        self._ready = threading.Event()
        threading.Thread(target=self._receive, name="worldrecall-sweep-parent", daemon=True).start()

    def _receive(self) -> None:
        try:
            answer = self.proc.answer()
        except RuntimeError as e:
            answer = {"error": str(e)}
        if answer.get("run_id"):
            self._id = str(answer["run_id"])
            os.environ[PARENT_ENV] = self._id  # inherited by local launchers' worker processes
            (self.sweep / PARENT_FILE).write_text(self._id)  # for launchers whose jobs don't inherit the environment
        else:
            self.problem = str(answer.get("error") or "")  # MLflow missing: every job says so itself
        self._ready.set()

    @property
    def run_id(self) -> str | None:
        if not self._ready.wait(ANSWER_TIMEOUT_S):
            self.problem = self.problem or f"the MLflow process did not answer in {ANSWER_TIMEOUT_S:.0f} s"
            return None
        if self.problem and not self._said:
            self._said = True
            print(f"warning: the sweep's MLflow parent run could not be made ({self.problem}); each job is "
                  "logged as a run of its own", file=sys.stderr)
        return self._id


def open_sweep_parent(tcfg: Mapping[str, Any], output_root: Path, sweep: Path, task: list[str],
                      keys: list[str], wait: bool = True) -> SweepParent | None:
    """Start making the parent run (None with tracking off) and publish its id to the jobs as it comes;
    ``wait``: have it before returning (jobs launched elsewhere read it from the sweep folder)."""
    from worldrecall.engine.sinks.tracking.process import SWEEPS, MlflowProcess

    SWEEPS.clear()
    if not tcfg.get("enabled", True):
        return None
    swept = [o for o in task if o.partition("=")[0].lstrip("+~") in keys]
    name = tcfg.get("run_name") or ("sweep " + " ".join(swept) if swept else "sweep")
    output_root = Path(output_root).resolve()
    proc = MlflowProcess()
    proc.send({"op": "sweep_open", "tcfg": dict(tcfg), "output_root": str(output_root),
               "name": name, "tags": {"worldrecall.sweep_dir": str(sweep), "worldrecall.kind": "sweep",
                                      "worldrecall.swept": ",".join(keys)}})
    parent = SweepParent(proc, sweep, output_root)
    SWEEPS.append(parent)
    if wait:
        parent.run_id  # noqa: B018  (the id, before any job is launched)
    return parent


def close_sweep_parent(parent: SweepParent | None, sweep: Path, files: list[Path]) -> str:
    """Log the sweep summary's files to the parent run and finish it; returns the `mlflow ui` line."""
    from worldrecall.engine.sinks.tracking.process import SWEEPS

    os.environ.pop(PARENT_ENV, None)  # a later run in this process must not attach to this sweep
    SWEEPS.clear()
    if parent is None:
        return ""
    run_id = parent.run_id
    if run_id is None:
        parent.proc.close()
        return ""
    from worldrecall.engine.cache.blobs import BlobStore
    from worldrecall.engine.sinks.tracking.runs import file_entries

    # each file copied into the blob store (not linked: the summary's plots may be drawn again in place)
    entries = file_entries(files, BlobStore(parent.output_root / "blobs"),
                           dict.fromkeys({Path(f).suffix for f in files}, "sweep_summary"))
    parent.proc.send({"op": "sweep_close", "run_id": run_id, "entries": entries,
                      "n_jobs": len(list(Path(sweep).glob("*/summary.json")))})
    answer = parent.proc.reply()
    if "error" in answer:
        raise TrackingError(answer["error"])
    return str(answer.get("ui") or "")
