"""Work a job's outputs start early, done by a forked copy of the job's process on the other core.

A sink whose part needs only the rows (the report's case pages) starts it once they are final, before the
aggregation (``begin``); a forked copy of the process does it meanwhile and answers with one JSON document on a
pipe, which the sink reads when it writes (:meth:`Beside.join`). The file digests the copy looked up are then
this process's (its memo keeps them for the next run). Nothing depends on the copy: where ``fork`` is not how a
process starts (not Linux), or the copy ends without an answer, the sink does the work itself, the same way.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from worldrecall.core.digests import adopt, learned
from worldrecall.engine.stages.executor import OpenCVPoolStopped

log = logging.getLogger(__name__)


def can_fork() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork")


class Beside:
    """``work()`` (returning plain JSON) in a forked copy of this process; :meth:`join` gives its value."""

    def __init__(self, work: Callable[[], Any]) -> None:
        read, write = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice
            stream.flush()
        pool = OpenCVPoolStopped()  # a copied OpenCV pool without its threads would hang the copy
        try:
            pid = os.fork()
        except OSError:  # no process to be had: the caller does the work itself
            pool.restore()
            os.close(read)
            os.close(write)
            raise
        if pid == 0:
            os.close(read)
            _child(work, write)  # never returns
        pool.restore()
        os.close(write)
        self.pid, self.read, self.seconds = pid, read, 0.0

    def join(self) -> Any | None:
        """The value ``work()`` returned, or None when the copy raised or ended without an answer (then the
        caller does the work itself; the reason is in the debug log)."""
        try:
            with os.fdopen(self.read, "rb") as f:
                data = f.read()
            _, status = os.waitpid(self.pid, 0)
        except OSError as e:
            log.debug("the forked copy's answer could not be read: %s", e)
            return None
        try:
            doc = json.loads(data)
        except ValueError:
            log.debug("the forked copy ended without an answer (wait status %s)", status)
            return None
        adopt(doc["learned"])  # the digests it looked up, kept by this process's memo
        self.seconds = float(doc["seconds"])
        if doc["error"]:
            log.debug("the forked copy failed: %s", doc["error"])
            return None
        return doc["value"]


def _child(work: Callable[[], Any], fd: int) -> None:
    """The forked copy: do the work, answer, end at once (the exit handlers and buffers are the parent's)."""
    t0 = time.perf_counter()
    doc: dict[str, Any] = {"value": None, "error": ""}
    try:
        # the answer is read late (after the tables, their text and MLflow's plan): where three processes want
        # two cores (the job, MLflow's still importing, this copy), the copy is the one that can wait
        os.nice(10)
    except OSError:
        pass
    try:
        doc["value"] = work()
    except BaseException as e:  # answered: the parent does the work again and meets the same error itself
        doc["error"] = f"{type(e).__name__}: {e}"
    code = 0
    try:
        doc.update(seconds=time.perf_counter() - t0, learned=learned())
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(doc).encode("utf-8"))
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    except BaseException:  # the parent sees no answer and does the work itself
        code = 1
    os._exit(code)
