"""A killed `worldrecall run` takes its forked workers with it (no orphan keeps memory or a GPU)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers.procs import alive, descendants, wait_gone
from helpers.toy_plugin import make_dataset, toy_cli_overrides

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc to list workers")

# `worldrecall run` (the console entry point, engine.cli.main) with the toy plugin and a slow measure stage,
# so both workers are mid-case when the parent is killed
CLI = r"""
import sys, time
sys.path.insert(0, {tests!r})
from helpers import toy_plugin
orig = toy_plugin.BrightnessDrift.measure
def slow(self, *a, **k):
    time.sleep(0.5)
    return orig(self, *a, **k)
toy_plugin.BrightnessDrift.measure = slow
from worldrecall.registry import host as host_mod
host_mod._HOST = host_mod.load_plugins(extra=[toy_plugin], fresh=True)
from worldrecall.engine.cli import main
sys.exit(main(["run", *{overrides!r}]))
"""


def test_sigkill_of_worldrecall_run_ends_both_workers(tmp_path):
    ds = make_dataset(tmp_path, {"good": list(range(8)), "bad": list(range(50, 58))})
    overrides = toy_cli_overrides(ds, tmp_path / "out", "workers=2", "tracking=none",
                                  "aggregator_params.bootstrap.replicates=100")
    script = CLI.format(tests=str(Path(__file__).parent), overrides=overrides)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        rows: list[Path] = []
        while time.monotonic() < deadline and proc.poll() is None:
            rows = list((tmp_path / "out" / "results").rglob("rows-shard-*.jsonl"))
            if rows and rows[0].read_text().count("\n") >= 1:
                break
            time.sleep(0.05)
        assert rows, "the run never wrote a row"
        workers = descendants(proc.pid)
        assert len(workers) == 2, f"expected two forked workers, found {sorted(workers)}"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        survivors = wait_gone(workers, 5.0)
    finally:  # whatever happened, this test leaves no process behind
        if proc.poll() is None:
            workers |= descendants(proc.pid)
            proc.kill()
            proc.wait()
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    # before the fix both stayed alive (parent pid 1), each blocked reading a pipe it also held open
    assert survivors == set(), f"workers {sorted(survivors)} outlived their SIGKILLed parent"
