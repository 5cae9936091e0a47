"""Stage 3 — executors: run the per-case pipeline over groups of cases, serially or in forked workers.

Both executors have one interface, :meth:`run`, and the same contract: rows go to ``emit`` in the parent
only (the parent alone decides a row is done and appends it), one call per case, as cases finish. A forked
worker that dies (SIGKILL, out of memory, a segfault in a native library) costs exactly the case it was
scoring: that case gets failed rows with a one-line reason, the rest of its group goes to a new worker, and
the run continues. A worker never outlives the parent: it holds no parent-side pipe end (so a dead parent
reads as EOF) and asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG`` on Linux; elsewhere
a thread polls the parent pid) — a SIGKILLed, OOM-killed or ``scancel``-ed run leaks no memory or GPUs.

Groups are a clip's cases (all models of one clip), so a shared reference video is decoded once per worker.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from worldrecall.core.data import Case, CaseError, ScoreRow
from worldrecall.core.digests import adopt, learned
from worldrecall.core.results import json_default

log = logging.getLogger(__name__)

Item = Case | CaseError
Work = Callable[[Item], list[ScoreRow]]                # one case -> its rows (runs in the worker)
Emit = Callable[[Item, list[ScoreRow]], None]          # parent: record a case's rows
Dead = Callable[[Item, str], list[ScoreRow]]           # parent: rows for a case whose worker died


class Executor(Protocol):
    """Runs ``work`` on every item of every group; ``emit`` receives each item's rows in the parent."""

    def run(self, groups: Sequence[Sequence[Item]], work: Work, emit: Emit, dead: Dead,
            counters: CounterHooks) -> None: ...


class CounterHooks(Protocol):
    """How an executor resets, reads and merges the pipeline's counters across processes."""

    def reset_counters(self) -> None: ...
    def snapshot(self) -> dict[str, dict[str, float]]: ...
    def merge(self, other: Mapping[str, Mapping[str, float]]) -> None: ...


class SerialExecutor:
    """Everything in this process, in order."""

    def run(self, groups: Sequence[Sequence[Item]], work: Work, emit: Emit, dead: Dead,
            counters: CounterHooks) -> None:
        blas = one_thread_per_process()  # the numbers a worker process would give (workers=1 and 2: identical rows)
        try:
            for group in groups:
                for item in group:
                    emit(item, work(item))
        finally:  # the parent's own BLAS threads again for what follows (aggregation), as after forked workers
            blas.restore_original_limits()


class ForkExecutor:
    """Up to ``workers`` forked processes, each taking one group at a time from the parent.

    Fork (not spawn): workers inherit the planned run — registry, hubs, caches, the groups — without
    pickling anything. Messages are JSON over pipes. Each worker has a slot (0 … workers-1, kept by the
    worker that replaces a dead one); ``on_start(slot)`` runs in the worker right after the fork (the runner
    gives each slot its own GPU there).
    """

    def __init__(self, workers: int, on_start: Callable[[int], None] | None = None):
        self.workers = max(1, int(workers))
        self.on_start = on_start

    def run(self, groups: Sequence[Sequence[Item]], work: Work, emit: Emit, dead: Dead,
            counters: CounterHooks) -> None:
        ctx = mp.get_context("fork")
        todo: deque[tuple[int, int]] = deque((g, 0) for g in range(len(groups)))  # (group, first item)
        live: dict[Connection, _Worker] = {}

        def start(slot: int) -> None:
            parent, child = ctx.Pipe()
            # the parent-side ends the child inherits (its own and the other workers'): closed in the child,
            # or a worker would keep its own pipe open and never see EOF once the parent is gone
            inherited = [parent, *live]
            proc = ctx.Process(target=_worker_main, daemon=True,
                               args=(child, groups, work, counters, inherited, os.getpid(), self.on_start, slot))
            proc.start()
            child.close()
            live[parent] = _Worker(proc, parent, slot)

        def assign(w: _Worker) -> None:
            if todo:
                w.group, w.next_item = todo.popleft()
                w.conn.send_bytes(json.dumps([w.group, w.next_item]).encode())
            else:
                w.group = None
                w.conn.send_bytes(b"null")  # no more work: the worker exits

        opencv = OpenCVPoolStopped()  # before the first fork, until the last worker is joined
        try:
            for slot in range(min(self.workers, len(todo))):
                start(slot)
            for w in list(live.values()):
                assign(w)
            while any(w.group is not None for w in live.values()):
                ready = wait([w.conn for w in live.values() if w.group is not None])
                for conn in ready:
                    w = live[conn]
                    try:
                        msg = json.loads(conn.recv_bytes())
                    except (EOFError, OSError):
                        self._died(w, groups, todo, dead, emit)
                        conn.close()
                        del live[conn]
                        if todo:
                            start(w.slot)
                            assign(list(live.values())[-1])
                        continue
                    if msg["t"] == "rows":
                        emit(groups[w.group][msg["i"]], [ScoreRow.from_json(r) for r in msg["rows"]])
                        w.next_item = msg["i"] + 1
                    elif msg["t"] == "done":
                        counters.merge(msg["counters"])
                        adopt(msg.get("memo") or {})  # the worker's digests and facts: kept in this run's memo
                        assign(w)
        finally:
            for w in live.values():
                try:
                    if w.group is not None:
                        w.proc.kill()
                    w.conn.close()
                except OSError:
                    pass
                w.proc.join(timeout=5)
            opencv.restore()

    @staticmethod
    def _died(w: _Worker, groups: Sequence[Sequence[Item]], todo: deque[tuple[int, int]], dead: Dead,
              emit: Emit) -> None:
        """The worker died mid-group: its current case fails, the rest of its group is queued again."""
        w.proc.join(timeout=5)
        group = groups[w.group]
        item = group[w.next_item]
        reason = f"worker process died while scoring this case ({_exit_reason(w.proc.exitcode)})"
        log.error("%s/%s: %s", item.model, item.case_id, reason)
        emit(item, dead(item, reason))
        if w.next_item + 1 < len(group):
            todo.appendleft((w.group, w.next_item + 1))
        w.group = None


class _Worker:
    def __init__(self, proc: Any, conn: Connection, slot: int = 0):
        self.proc, self.conn, self.slot = proc, conn, slot
        self.group: int | None = None
        self.next_item = 0


class OpenCVPoolStopped:
    """OpenCV's thread pool stopped in this process while workers are forked from it, then given back.

    A pool the parent started (any large OpenCV call with more than one thread) is copied into a forked child
    without its threads; the child's ``cv2.setNumThreads(1)`` then waits for them forever (a hang seen when a
    Python session resized a big image before a run with two workers). One thread here joins the pool's
    threads before the fork, so each child starts from a process without them.
    """

    def __init__(self) -> None:
        self.cv2 = sys.modules.get("cv2")
        self.before = self.cv2.getNumThreads() if self.cv2 is not None else None
        if self.cv2 is not None and self.before != 1:
            self.cv2.setNumThreads(1)

    def restore(self) -> None:
        if self.cv2 is not None and self.before is not None and self.before != 1:
            self.cv2.setNumThreads(self.before)
        self.before = None


def one_thread_per_process() -> Any:
    """One intra-op thread for torch (when imported), OpenMP and BLAS: case-parallel processes already fill the
    cores, and a case's numbers must not depend on which process scored it (float reductions follow the thread
    count). numpy's OpenBLAS, loaded before the fork, otherwise keeps a helper thread per core that spins after
    every matrix product: with two workers on two cores the spinning helpers take the CPU from the other worker
    (the Scene Memory F1 kernel ran 3.6x slower in wall time when two processes shared the cores). Returns the
    BLAS limit (``restore_original_limits()`` undoes it)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # for a torch first imported later
    os.environ.setdefault("OPENCV_FOR_THREADS_NUM", "1")  # for an OpenCV first imported later
    from threadpoolctl import threadpool_limits

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    if "cv2" in sys.modules:  # DIS flow, remap, resize split work by thread count: same numbers in any process
        sys.modules["cv2"].setNumThreads(1)
    return threadpool_limits(1, user_api="blas")  # the BLAS libraries loaded already (numpy's OpenBLAS)


def _worker_main(conn: Connection, groups: Sequence[Sequence[Item]], work: Work, counters: CounterHooks,
                 inherited: Sequence[Connection] = (), parent_pid: int | None = None,
                 on_start: Callable[[int], None] | None = None, slot: int = 0) -> None:
    """A forked worker: take (group, first item) tasks until told to stop; send rows per case, counters per group."""
    for other in inherited:
        other.close()
    if parent_pid is not None:
        die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    one_thread_per_process()
    learned()  # what the parent computed before the fork is its own already
    if on_start is not None:
        on_start(slot)
    while True:
        try:
            task = json.loads(conn.recv_bytes())
        except (EOFError, OSError):  # the parent stopped (an error it reports itself): nothing left to do
            return
        if task is None:
            return
        g, first = task
        counters.reset_counters()
        for i in range(first, len(groups[g])):
            rows = work(groups[g][i])
            conn.send_bytes(json.dumps({"t": "rows", "i": i, "rows": [r.to_json() for r in rows]},
                                       default=json_default, allow_nan=True).encode())
        conn.send_bytes(json.dumps({"t": "done", "counters": counters.snapshot(), "memo": learned()},
                                   default=json_default).encode())


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int, poll_s: float = 1.0) -> None:
    """Make this (forked) process end when ``parent_pid`` does, even mid-case.

    Linux: the kernel sends SIGKILL on the parent's death (``prctl(PR_SET_PDEATHSIG)``). Elsewhere, or if that
    call fails, a daemon thread polls the parent pid. Either way, a parent already gone ends this process now.
    """
    armed = False
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)
    if not armed:
        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(poll_s)
            os._exit(1)

        threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = ", e.g. the out-of-memory killer" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"


def make_executor(workers: int, on_start: Callable[[int], None] | None = None) -> Executor:
    """The serial executor for one worker, else the forked one; ``on_start`` (per-worker setup, e.g. its GPU)
    always forks, so the parent itself never takes a worker's place."""
    if on_start is not None:
        return ForkExecutor(workers, on_start)
    return SerialExecutor() if workers <= 1 else ForkExecutor(workers)
