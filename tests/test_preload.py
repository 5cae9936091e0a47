"""Declared heavy imports (``Metric.imports``, ``Aligner.imports``) are done once in the parent before workers
fork, so the workers share them; a module that cannot be imported changes nothing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_config

from worldrecall.engine.stages.runner import Runner
from worldrecall.registry.host import load_plugins


def _probe(tmp_path, monkeypatch, name: str) -> Path:
    """A module that logs the pid of each process that imports it; the toy metric declares it and logs the
    pid of each process that measures."""
    log = tmp_path / f"{name}.log"
    (tmp_path / f"{name}.py").write_text(f"import os\nopen({str(log)!r}, 'a').write(f'import {{os.getpid()}}\\n')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    orig = toy_plugin.BrightnessDrift.measure

    def measure(self, case, alignment, ctx):
        __import__(name)  # what a metric's lazy import does
        with open(log, "a") as f:
            f.write(f"measure {os.getpid()}\n")
        return orig(self, case, alignment, ctx)

    monkeypatch.setattr(toy_plugin.BrightnessDrift, "measure", measure)
    monkeypatch.setattr(toy_plugin.BrightnessDrift, "imports", (name,))
    return log


def test_forked_workers_share_one_import_done_before_they_fork(tmp_path, monkeypatch):
    log = _probe(tmp_path, monkeypatch, "wr_probe_forked")
    ds = make_dataset(tmp_path, {"good": [0, 10, 20, 30], "bad": [5, 15, 25, 35]})
    host = load_plugins(extra=[toy_plugin], fresh=True)
    res = Runner(toy_config(tmp_path / "out", ds, workers=2), host).run()
    events = [ln.split() for ln in log.read_text().splitlines()]
    imports = [int(pid) for kind, pid in events if kind == "import"]
    measured = {int(pid) for kind, pid in events if kind == "measure"}
    assert imports == [os.getpid()]  # once, here, before any worker measured
    assert events[0][0] == "import" and os.getpid() not in measured and len(measured) == 2
    assert all(r.status == "ok" for r in res.rows) and res.timing["preload"] > 0


def test_one_process_imports_lazily_and_a_missing_module_changes_nothing(tmp_path, monkeypatch):
    log = _probe(tmp_path, monkeypatch, "wr_probe_serial")
    ds = make_dataset(tmp_path, {"good": [0, 10, 20, 30]})
    host = load_plugins(extra=[toy_plugin], fresh=True)
    serial = Runner(toy_config(tmp_path / "s", ds, workers=1), host).run()
    assert "preload" not in serial.timing  # nothing to share: the metric's own import, when it first measures
    assert log.read_text().splitlines()[:2] == [f"import {os.getpid()}", f"measure {os.getpid()}"]
    monkeypatch.setattr(toy_plugin.BrightnessDrift, "imports", ("wr_no_such_module_anywhere",))
    forked = Runner(toy_config(tmp_path / "f", ds, workers=2), host).run()
    assert [(r.row_key[1:], r.status, r.values) for r in forked.rows] == \
        [(r.row_key[1:], r.status, r.values) for r in serial.rows]
    assert forked.rows and all(r.status == "ok" for r in forked.rows)
