"""Writes that only later jobs read, done after the job's own outputs: a cache entry a job computed is
already in this process's memory, so nothing in the job waits for its file.

The first sink that is written by a forked child (:mod:`worldrecall.engine.sinks.forked`) takes the queue
with it and does the writes there, on the other core; otherwise :func:`run_later` does them at the end of
the job's outputs. Work that is lost (a child killed mid-write) is a cache miss for a later job, never a
wrong result: each item writes one cache entry, atomically.
"""

from __future__ import annotations

import atexit
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)
_QUEUE: list[Callable[[], None]] = []
_HOOKED = [False]


def later(work: Callable[[], None]) -> None:
    """Do ``work`` after this job's outputs (or when the process exits, whichever comes first)."""
    if not _HOOKED[0]:
        atexit.register(run_later)  # a job that raised before its outputs still writes its entries
        _HOOKED[0] = True
    _QUEUE.append(work)


def run_later() -> None:
    """Do the queued work now, each item isolated (a failed cache write costs a later job time only)."""
    while _QUEUE:
        work = _QUEUE.pop(0)
        try:
            work()
        except Exception:  # noqa: BLE001
            log.debug("a deferred write failed", exc_info=True)


def hand_over() -> None:
    """The queue has gone with a forked child, which does it: this process forgets it."""
    _QUEUE.clear()
