"""A sink written by a forked child while the parent writes the next sinks (two cores, one job's outputs).

A re-score job spends half its time after the run, in sinks that are independent of one another: the HTML
report (a 20 MB page) needs only the result and the plots, while the tables, the submission bundle and
MLflow's preparation need only the result. A sink that says so (``forks = True``) is written in a child
forked from this process — it inherits the frozen result, the host and every memo, nothing is pickled — and
joined before the first later sink that reads what the earlier ones wrote (``reads_outputs``, e.g. timing,
MLflow, the console).

What the child sends back is JSON (in an unlinked temporary file): its files, its seconds, its failure if it failed, what it
printed and logged (replayed here, at the sink's place), and what it added to the sink's in-memory memos
(``memo_mark`` / ``memo_delta`` / ``memo_merge``), so this process's later jobs find them as if the sink had
run here. A byte on a pipe says the answer is complete; the child then writes the job's deferred cache entries
while this process goes on, and is reaped by the next job's outputs or at exit. A child that dies or answers
nothing is not a lost output: the sink is written here instead.

Forking needs a platform with ``os.fork`` and a process without other Python threads (a thread holding a
lock at the fork would leave the child waiting for it forever); otherwise the sink simply runs in order.
"""

from __future__ import annotations

import atexit
import io
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worldrecall.engine.stages import later
from worldrecall.engine.stages.result import RunResult

log = logging.getLogger(__name__)
RunOne = Callable[[Any, RunResult, Any], None]


# threads that cannot leave the child waiting: MLflow's background import, which every fork waits for
# (``os.register_at_fork``, sinks/tracking/tracker.py), and tqdm's monitor, which any progress bar starts for
# the life of the process and which takes only tqdm's own lock (a forked sink draws no bar)
FORK_SAFE_THREADS = {"mlflow-import", "tqdm_monitor"}


def can_fork() -> bool:
    """A fork is safe here: POSIX, and no other Python thread runs but those a fork waits for."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    return (hasattr(os, "fork") and threading.current_thread() is threading.main_thread()
            and all(t.name in FORK_SAFE_THREADS for t in others))


class _Records(logging.Handler):
    """The child's log records, kept to be handled again by the parent's loggers."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        exc = logging.Formatter().formatException(record.exc_info) if record.exc_info else ""
        self.records.append({"name": record.name, "levelno": record.levelno, "levelname": record.levelname,
                             "msg": record.getMessage() + (f"\n{exc}" if exc else ""), "pathname": record.pathname,
                             "lineno": record.lineno, "funcName": record.funcName})


class Forked:
    """One sink being written by a forked child; :meth:`join` folds its outcome into the job's context."""

    def __init__(self, sink: Any, result: RunResult, ctx: Any, run_one: RunOne) -> None:
        self.sink, self.result, self.ctx, self.run_one = sink, result, ctx, run_one
        self.at = len(ctx.written)  # its files go where the sink's place in the order is
        sys.stdout.flush()
        sys.stderr.flush()  # or the child would write this process's buffered lines a second time
        from worldrecall.engine.stages.executor import OpenCVPoolStopped

        opencv = OpenCVPoolStopped()  # a pool this process started would leave the child's OpenCV waiting
        # the child's answer goes to an unlinked temporary file, read once the child is gone (a pipe would
        # make the child wait, megabytes of memo 64 KiB at a time, until this process reads)
        self.answer = tempfile.TemporaryFile()
        # one byte on this pipe says the answer is complete: the child then does the deferred cache writes
        # while this process goes on (EOF without it: the child died first)
        ready, done = os.pipe()
        try:
            self.pid: int | None = os.fork()
        except OSError:
            opencv.restore()
            self.answer.close()
            os.close(ready)
            os.close(done)
            raise
        if self.pid == 0:
            os.close(ready)
            self._child(self.answer.fileno(), done)  # never returns
        os.close(done)
        self.ready = ready
        opencv.restore()
        later.hand_over()  # the child does the job's deferred cache writes, after its answer

    def _child(self, fd: int, done: int) -> None:
        code = 0
        try:
            from worldrecall.engine.stages.executor import die_with_parent

            die_with_parent(os.getppid())
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C (as for forked workers)
            out, err, records = io.StringIO(), io.StringIO(), _Records()
            sys.stdout, sys.stderr = out, err
            for lg in [logging.root, *logging.Logger.manager.loggerDict.values()]:
                if isinstance(lg, logging.Logger):
                    lg.handlers, lg.propagate = [], True
            logging.root.handlers = [records]
            mark = self.sink.memo_mark() if hasattr(self.sink, "memo_mark") else None
            n_written, n_notes, n_failed = len(self.ctx.written), len(self.ctx.notes), len(self.ctx.failed)
            self.run_one(self.sink, self.result, self.ctx)
            memo = None
            if mark is not None and self.sink.name not in self.ctx.failed[n_failed:]:
                try:
                    memo = self.sink.memo_delta(mark)
                except Exception:  # noqa: BLE001  (a memo that cannot travel costs a later job time only)
                    log.debug("memo of %s not handed back", self.sink.name, exc_info=True)
            doc = {"written": [str(p) for p in self.ctx.written[n_written:]], "notes": self.ctx.notes[n_notes:],
                   "failed": self.ctx.failed[n_failed:], "seconds": self.ctx.seconds.get(self.sink.name, 0.0),
                   "out": out.getvalue(), "err": err.getvalue(), "logs": records.records, "memo": memo}
            data = json.dumps(doc, allow_nan=True).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.write(done, b"1")
            later.run_later()  # the deferred cache writes, on this core, while the parent goes on (reap waits)
        except BaseException:  # noqa: BLE001  (no message: the parent writes the sink itself)
            code = 1
        finally:
            os._exit(code)

    def join(self) -> int:
        """Wait for the child; its files, notes, failure, output and memo become this process's. Returns how
        many files went in at its place (a sink forked after it has its place that much further on)."""
        t_join = time.perf_counter()
        answered = os.read(self.ready, 1) == b"1"  # b"": the child is gone without answering
        os.close(self.ready)
        wait = time.perf_counter() - t_join
        with self.answer as f:
            f.seek(0)
            data = f.read()
        try:
            if not answered:
                raise ValueError(f"exit status {self.reap()}")
            doc = json.loads(data)
        except ValueError as e:
            log.debug("output %s: its forked child gave no result (%s); writing it here", self.sink.name, e)
            n = len(self.ctx.written)
            self.run_one(self.sink, self.result, self.ctx)
            new = self.ctx.written[n:]
            del self.ctx.written[n:]
            self.ctx.written[self.at:self.at] = new  # in the sink's place, as if written in order
            return len(new)
        sys.stdout.write(doc["out"])
        sys.stderr.write(doc["err"])
        for rec in doc["logs"]:
            record = logging.makeLogRecord(rec)
            logging.getLogger(record.name).handle(record)
        written = [Path(p) for p in doc["written"]]
        self.ctx.written[self.at:self.at] = written
        self.ctx.notes.extend(doc["notes"])
        self.ctx.failed.extend(doc["failed"])
        self.ctx.seconds[self.sink.name] = float(doc["seconds"])
        self.ctx.seconds[f"{self.sink.name}.wait"] = wait  # what this process waited for it, after its own sinks
        if doc["memo"] is not None:
            self.sink.memo_merge(doc["memo"])
        return len(written)

    def reap(self) -> int | None:
        """Wait for the child to end (its deferred cache writes, after its answer); its exit status."""
        if self.pid is None:
            return None
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if self in _WRITING:
            _WRITING.remove(self)
        return status


# children that answered and may still be writing their job's deferred cache entries: a job does not wait for
# them (a sweep's next job runs on this core meanwhile); the next job's outputs, or this process's exit, do
_WRITING: list[Forked] = []
_HOOKED = [False]


def let_write(children: list[Forked]) -> None:
    """Leave ``children`` to finish their deferred writes; they are waited for by :func:`wait_children`."""
    if not _HOOKED[0]:
        atexit.register(wait_children)  # a child dies with this process: its writes finish first
        _HOOKED[0] = True
    _WRITING.extend(f for f in children if f.pid is not None)


def wait_children() -> None:
    """Wait for every child still writing an earlier job's deferred cache entries (each one's entries are
    then on disk)."""
    while _WRITING:
        _WRITING[0].reap()
