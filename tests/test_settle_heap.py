"""Between launches in one process, the heap is settled: the launch's garbage collected, what stays alive
taken out of later collections (``gc.freeze``) — nothing that would have been freed is kept."""

from __future__ import annotations

import gc
import weakref

from worldrecall.engine import cli, hydra_entry, job


class _Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_a_launch_collects_its_garbage_then_freezes_what_stays(tmp_path, monkeypatch):
    made: list[weakref.ref] = []
    kept = []

    def fake_job(plain, **kw):
        garbage, alive = _Node(), _Node()
        made.append(weakref.ref(garbage))
        kept.append(alive)  # stays alive after the launch (like a memo entry)
        return 0

    monkeypatch.setattr(job, "run_plain", fake_job)
    gc.unfreeze()
    try:
        assert cli.hydra_run([f"output_root={tmp_path}", "progress=false", "tracking=none"]) == 0
        assert made and made[0]() is None  # the job's cyclic garbage was collected, not frozen
        frozen = gc.get_freeze_count()
        assert frozen > 0 and kept
    finally:
        gc.unfreeze()


def test_worldrecall_run_does_not_settle_or_foresee_for_a_process_that_ends(tmp_path, monkeypatch):
    """``worldrecall run`` ends its process after its one job: no settling, and the job builds no rows for a
    re-score job that will not come; a multirun's jobs, and a launch in a process that goes on, do."""
    calls, foresee = [], []
    monkeypatch.setattr(job, "run_plain", lambda plain, **kw: foresee.append(kw["foresee"]) or 0)
    monkeypatch.setattr(hydra_entry, "settle_heap", lambda: calls.append(1))
    args = [f"output_root={tmp_path}", "progress=false", "tracking=none"]
    assert cli.main(["run", *args]) == 0
    assert calls == [] and foresee == [False]
    assert cli.main(["run", "-m", *args, "workers=1,2"]) == 0
    assert calls == [] and foresee == [False, True, True]
    assert cli.hydra_run(args) == 0
    assert calls == [1] and foresee == [False, True, True, True]
