"""`devices=[0,1,…]`: one forked worker per GPU, each seeing only its own (checked on CPU through the env)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_config

from worldrecall.engine.stages.runner import Runner
from worldrecall.registry.host import load_plugins


@pytest.fixture()
def seen(tmp_path, monkeypatch):
    """Each measure call appends (pid, CUDA_VISIBLE_DEVICES, the context's device) to a file (forks inherit it)."""
    log = tmp_path / "seen.jsonl"
    orig = toy_plugin.BrightnessDrift.measure

    def measure(self, case, alignment, ctx):
        with open(log, "a") as f:
            f.write(json.dumps([os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES"), ctx.device, case.key]) + "\n")
        return orig(self, case, alignment, ctx)

    monkeypatch.setattr(toy_plugin.BrightnessDrift, "measure", measure)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return lambda: [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_one_worker_per_device_each_sees_only_its_own(tmp_path, seen, device):
    ds = make_dataset(tmp_path, {"good": [0, 10, 20, 30, 40, 50], "bad": [5, 15, 25, 35, 45, 55]})
    host = load_plugins(extra=[toy_plugin], fresh=True)
    serial = Runner(toy_config(tmp_path / "s", ds, workers=1), host).run()
    serial_calls = seen()
    assert {c[0] for c in serial_calls} == {os.getpid()} and {c[1] for c in serial_calls} == {None}

    res = Runner(toy_config(tmp_path / "d", ds, devices=[3, 5], workers=7, device=device), host).run()
    calls = seen()[len(serial_calls):]
    assert len(calls) == 12
    by_pid: dict[int, set[tuple[str, str]]] = {}
    for pid, visible, dev, _ in calls:
        by_pid.setdefault(pid, set()).add((visible, dev))
    assert os.getpid() not in by_pid  # the parent scores nothing
    # two workers (`workers=7` is overridden by the device list), one GPU each; under cuda the only
    # visible GPU is cuda:0 inside each worker
    want = "cuda:0" if device == "cuda" else "cpu"
    assert sorted(sorted(v) for v in by_pid.values()) == [[("3", want)], [("5", want)]]
    assert os.environ.get("CUDA_VISIBLE_DEVICES") is None  # the parent's own environment is untouched
    assert [(r.row_key[1:], r.values) for r in res.rows] == [(r.row_key[1:], r.values) for r in serial.rows]


def test_one_clip_still_runs_in_a_worker_with_its_device(tmp_path, seen):
    ds = make_dataset(tmp_path, {"m": [0]})
    host = load_plugins(extra=[toy_plugin], fresh=True)
    res = Runner(toy_config(tmp_path, ds, devices=[1, 2]), host).run()
    ((pid, visible, dev, _),) = seen()
    assert pid != os.getpid() and visible == "1" and dev == "cpu" and res.rows[0].status == "ok"
