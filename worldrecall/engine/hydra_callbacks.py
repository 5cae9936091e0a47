"""Hydra callbacks: the swept keys and the sweep's MLflow parent run, set up before any job starts, and the
summary across swept values at the end (MLflow itself: :mod:`worldrecall.engine.sinks.tracking.sweep`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf


class MlflowSweepCallback(Callback):
    """Records the swept keys and opens the sweep's parent run on the launching machine; jobs attach to it.

    At the end of the sweep it prints the summary across swept values and logs it to the parent run.
    """

    def __init__(self) -> None:
        # only plain values here: a launcher such as submitit pickles the callbacks with each job (the parent
        # run's MLflow process lives in tracking.process.SWEEPS)
        self.run_id: str | None = None
        self.keys: list[str] = []

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from worldrecall.engine.sinks.sweep_summary import SWEPT_ENV, SWEPT_FILE, swept_keys
        from worldrecall.engine.sinks.tracking.sweep import open_sweep_parent

        sweep = Path(config.hydra.sweep.dir)
        sweep.mkdir(parents=True, exist_ok=True)
        task = list(config.hydra.overrides.task)
        self.keys = swept_keys(task)
        os.environ[SWEPT_ENV] = json.dumps(self.keys)
        (sweep / SWEPT_FILE).write_text(json.dumps(self.keys))  # for launchers whose jobs don't inherit the env
        tcfg = OmegaConf.to_container(config.tracking, resolve=True)
        # jobs run in this process (Hydra's basic launcher): they wait for the parent's id only when they need it;
        # jobs launched elsewhere read it from the sweep folder, so it is there before the first one starts
        target = str(OmegaConf.select(config, "hydra.launcher._target_", default="") or "")
        here = target.endswith("BasicLauncher")
        open_sweep_parent(tcfg, Path(config.output_root), sweep, task, self.keys, wait=not here)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from worldrecall.engine.sinks.sweep_summary import SWEPT_ENV, summarise
        from worldrecall.engine.sinks.tracking.process import pending_parent
        from worldrecall.engine.sinks.tracking.sweep import close_sweep_parent

        os.environ.pop(SWEPT_ENV, None)
        sweep = Path(config.hydra.sweep.dir)
        try:
            text, files = summarise(sweep, self.keys)
        except Exception as e:  # noqa: BLE001  (results are written; a summary failure must not hide them)
            text, files = f"sweep summary failed: {type(e).__name__}: {e}", []
        print("\n" + text)
        if files:
            print(f"sweep summary: {files[0]}")
        parent = pending_parent(sweep)
        self.run_id = parent.run_id if parent is not None else None
        line = close_sweep_parent(parent, sweep, files)
        if line:
            print(line)
        from worldrecall.engine.sinks.disk import print_disk

        print_disk(config)  # the sweep's last lines: the output root's size by part and how to trim it
