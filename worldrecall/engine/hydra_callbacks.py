"""Hydra callbacks: the sweep's MLflow parent run, created before any job starts, and its summary at the end."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf


class MlflowSweepCallback(Callback):
    """Creates the experiment and the sweep's parent run on the launching machine; jobs attach to it.

    At the end of the sweep it prints the summary across swept values and logs it to the parent run.
    """

    def __init__(self) -> None:
        self.parent: str | None = None
        self.tracker: Any = None
        self.keys: list[str] = []

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from worldrecall.engine.sinks.sweep_summary import SWEPT_ENV, SWEPT_FILE, swept_keys
        from worldrecall.engine.sinks.tracking.sink import PARENT_ENV, PARENT_FILE
        from worldrecall.engine.sinks.tracking.tracker import Tracker

        sweep = Path(config.hydra.sweep.dir)
        sweep.mkdir(parents=True, exist_ok=True)
        task = list(config.hydra.overrides.task)
        self.keys = swept_keys(task)
        os.environ[SWEPT_ENV] = json.dumps(self.keys)
        (sweep / SWEPT_FILE).write_text(json.dumps(self.keys))  # for launchers whose jobs don't inherit the env
        tcfg = OmegaConf.to_container(config.tracking, resolve=True)
        if not tcfg.get("enabled", True):
            return
        try:
            self.tracker = Tracker(tcfg, Path(config.output_root))
        except ImportError:
            return
        swept = [o for o in task if o.partition("=")[0].lstrip("+~") in self.keys]
        name = tcfg.get("run_name") or ("sweep " + " ".join(swept) if swept else "sweep")
        self.parent = self.tracker.start_run(name, tags={"worldrecall.sweep_dir": str(sweep),
                                                         "worldrecall.kind": "sweep",
                                                         "worldrecall.swept": ",".join(self.keys)})
        os.environ[PARENT_ENV] = self.parent  # inherited by local launchers' worker processes
        (sweep / PARENT_FILE).write_text(self.parent)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from worldrecall.engine.sinks.blobs import BlobStore
        from worldrecall.engine.sinks.sweep_summary import SWEPT_ENV, summarise
        from worldrecall.engine.sinks.tracking.sink import PARENT_ENV

        os.environ.pop(PARENT_ENV, None)  # a later run in this process must not attach to this sweep
        os.environ.pop(SWEPT_ENV, None)
        sweep = Path(config.hydra.sweep.dir)
        try:
            text, files = summarise(sweep, self.keys)
        except Exception as e:  # noqa: BLE001  (results are written; a summary failure must not hide them)
            text, files = f"sweep summary failed: {type(e).__name__}: {e}", []
        print("\n" + text)
        if files:
            print(f"sweep summary: {files[0]}")
        if self.tracker is not None and self.parent:
            blobs = BlobStore(self.tracker.output_root / "blobs")
            for f in files:
                self.tracker.log_file_once(self.parent, f, "sweep_summary", blobs)
            blobs.save()
            n_jobs = len(list(sweep.glob("*/summary.json")))
            self.tracker.log_batch(self.parent, metrics={"n_jobs": n_jobs})
            self.tracker.end_run(self.parent, "FINISHED", end_time=time.time())
            print(self.tracker.ui_command())
