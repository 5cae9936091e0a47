"""Hydra callbacks: the MLflow parent run of a sweep is created once, before any job starts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf


class MlflowSweepCallback(Callback):
    """Creates the experiment and the sweep's parent run on the launching machine; jobs attach to it."""

    def __init__(self) -> None:
        self.parent: str | None = None
        self.tracker: Any = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from worldrecall.engine.app import PARENT_FILE
        from worldrecall.engine.tracking import PARENT_ENV, Tracker

        tcfg = OmegaConf.to_container(config.tracking, resolve=True)
        if not tcfg.get("enabled", True):
            return
        try:
            self.tracker = Tracker(tcfg, Path(config.output_root))
        except ImportError:
            return
        self.parent = self.tracker.start_run(tcfg.get("run_name") or "worldrecall-sweep",
                                             tags={"worldrecall.sweep_dir": str(config.hydra.sweep.dir)})
        os.environ[PARENT_ENV] = self.parent  # inherited by local launchers' worker processes
        sweep = Path(config.hydra.sweep.dir)
        sweep.mkdir(parents=True, exist_ok=True)
        (sweep / PARENT_FILE).write_text(self.parent)  # for launchers whose jobs don't inherit the env

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from worldrecall.engine.tracking import PARENT_ENV

        os.environ.pop(PARENT_ENV, None)  # a later run in this process must not attach to this sweep
        if self.tracker is not None and self.parent:
            self.tracker.end_run(self.parent, "FINISHED")
            print(self.tracker.ui_command())
