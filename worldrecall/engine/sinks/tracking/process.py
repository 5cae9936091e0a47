"""The MLflow process: a second Python process that imports MLflow and logs a job's runs, so the job's own
process never imports MLflow and never shares its interpreter lock with MLflow's work.

MLflow's import (~2 s of one core), its SQL store and the ~40 runs of a default job were ~4 s of a re-score's
wall time when they ran on a thread of the job's process: the outputs written meanwhile waited for the lock.
Here they run on another core. The job's process decides everything that needs the result and the plugins
(:func:`~worldrecall.engine.sinks.tracking.runs.plan_job`, the files' blobs, the printed columns) and sends it
as JSON lines; this process makes the runs (:func:`~worldrecall.engine.sinks.tracking.runs.open_planned`,
:func:`~worldrecall.engine.sinks.tracking.runs.finish_job`) and answers one JSON line per job. A process that
answered a job is kept for the next job of the same job process (:func:`release`): a sweep's jobs, which Hydra's
basic launcher runs one after another in one process, import MLflow once, not once per job.

A sweep's parent run is made and finished the same way, by a process of its own (``{"op": "sweep_open",
"tcfg", "output_root", "name", "tags"}`` answered ``{"run_id"}``; ``{"op": "sweep_close", "run_id", "entries",
"n_jobs"}`` answered ``{"ui"}``).

Protocol, one JSON object per line on stdin: ``{"op": "open", "uri", "tcfg", "output_root", "reuse", "plan"}``
once the tables are written, then ``{"op": "finish", "entries", "benchmarks", "columns", "ui_missing"}``; the
answer on stdout: ``{"run_id", "reused", "ui", "uri", "import_s", "setup_s", "log_s"}``, or ``{"reused_record"}``
(an earlier run is reused: nothing logged), ``{"missing"}`` (MLflow is not installed) or ``{"error"}``. At the
end of its input the process ends; a job opened and never finished (its process was killed) is ended KILLED.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import IO, Any, NoReturn


class MlflowProcess:
    """The job's side: the MLflow process started (``python -m`` this module), messages sent on a thread
    (a large plan never blocks the job while the process is still importing), the answer read once."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, encoding="utf-8")
        LAUNCHED.append(self.proc.pid)
        self.early = False  # started by prefetch, before the job's outputs
        self._writer: threading.Thread | None = None
        self.used = False

    def send(self, msg: Mapping[str, Any]) -> None:
        """Queue one message (written in order, on a thread)."""
        self.used = True
        previous, line = self._writer, json.dumps(msg, default=str) + "\n"

        def write() -> None:
            if previous is not None:
                previous.join()
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):  # the process is gone: reply() says so
                pass

        self._writer = threading.Thread(target=write, name="worldrecall-mlflow-send", daemon=True)
        self._writer.start()

    def answer(self) -> dict[str, Any]:
        """The process's next answer, once every message before it is written (the process stays open)."""
        if self._writer is not None:
            self._writer.join()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            raise RuntimeError(f"the MLflow process ended (exit code {self.proc.returncode}) before it answered; "
                               "its messages are above")
        return json.loads(line)

    def reply(self) -> dict[str, Any]:
        """The process's answer to the job, once every message is written; then the process is closed."""
        got = self.answer()
        self.close()
        return got

    def close(self) -> None:
        """End the process: its input closed, it finishes what it was doing and exits; one never sent anything
        (a job that logged nothing after all) is stopped at once."""
        if not self.used and self.proc.poll() is None:
            self.proc.kill()
        try:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


_EARLY: list[MlflowProcess] = []  # started as a job began (prefetch), taken by its MLflow sink
# answered a job of this process and kept, its MLflow imported: the next job (a sweep's, run here) logs through it
_IDLE: list[MlflowProcess] = []
LAUNCHED: list[int] = []  # the pids of the MLflow processes this process started (what a job cost, said in tests)


def prefetch(tcfg: Mapping[str, Any]) -> None:
    """Have the MLflow process ready for a job that will track (``tracking.enabled``, ``tracking.prefetch``): one
    an earlier job of this process used, else a new one, whose import then overlaps the job's own work."""
    close_early()  # one an earlier job of this process took and never used (it failed before logging)
    if not (tcfg.get("enabled") and tcfg.get("prefetch", True)):
        return
    proc = _idle() or MlflowProcess()
    proc.early = True
    _EARLY.append(proc)


def take_process() -> MlflowProcess:
    """The process :func:`prefetch` readied for this job, else one an earlier job used, else a new one."""
    while _EARLY:
        proc = _EARLY.pop()
        if proc.proc.poll() is None:
            return proc
        proc.close()
    return _idle() or MlflowProcess()


def release(proc: MlflowProcess) -> None:
    """A process whose job is answered (its runs committed): kept for this process's next job, and closed when
    this process ends (:func:`close_all`). A sweep's jobs then pay MLflow's import once, not once per job."""
    if proc.proc.poll() is None:
        proc.early = False
        _IDLE.append(proc)
    else:
        proc.close()


def _idle() -> MlflowProcess | None:
    while _IDLE:
        proc = _IDLE.pop()
        if proc.proc.poll() is None:
            return proc
        proc.close()
    return None


@atexit.register
def close_all() -> None:
    """End every MLflow process this process keeps (each finishes what it was sent, then exits)."""
    while _EARLY or _IDLE:
        (_EARLY or _IDLE).pop().close()


SWEEPS: list[Any] = []  # the parent run of the sweep this process launches (:mod:`.sweep`), at most one


def pending_parent(sweep_dir: Any) -> Any:
    """The parent run (a :class:`~.sweep.SweepParent`) of the sweep this process launches, when ``sweep_dir`` is
    that sweep's folder; else None."""
    from pathlib import Path

    if sweep_dir is None or not SWEEPS:
        return None
    return SWEEPS[-1] if SWEEPS[-1].sweep == Path(sweep_dir) else None


def close_early() -> None:
    """Put back a process :func:`prefetch` readied for a job that logs nothing after all (:func:`release`)."""
    while _EARLY:
        release(_EARLY.pop())


# ---- the MLflow process's own side ------------------------------------------------------------------------

def _read(stream: IO[str], inbox: queue.Queue) -> None:
    for line in stream:
        if line.strip():
            inbox.put(json.loads(line))
    inbox.put(None)


class _Job:
    """One job in the MLflow process: opened (its runs made) from the plan, finished with its files."""

    def __init__(self, msg: Mapping[str, Any], import_s: float) -> None:
        self.msg, self.import_s = msg, import_s
        self.tracker: Any = None
        self.opened: Any = None
        self.early: dict[str, Any] | None = None
        self.error = ""
        self.t0 = time.perf_counter()

    def open(self) -> None:
        from pathlib import Path

        from worldrecall.engine.sinks.tracking.reuse import reusable
        from worldrecall.engine.sinks.tracking.runs import open_planned
        from worldrecall.engine.sinks.tracking.tracker import Tracker

        msg = self.msg
        try:
            reuse = msg.get("reuse")
            if reuse:
                self.early = reusable(Path(reuse["results_dir"]), msg["uri"], reuse["config_hash"], reuse["digest"])
                if self.early is not None:
                    return
            self.tracker = Tracker(msg["tcfg"], Path(msg["output_root"]))
            self.opened = open_planned(self.tracker, msg["plan"])
        except Exception as e:  # noqa: BLE001  (answered, and raised by the job's sink: one line there)
            self.error = f"{type(e).__name__}: {e}"

    def finish(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        from worldrecall.engine.sinks.tracking.runs import finish_job

        if self.error:
            return {"error": self.error}
        if self.early is not None:
            return {"reused_record": self.early, "log_s": time.perf_counter() - self.t0}
        try:
            opened, parent = self.opened, self.msg["plan"]["parent"]
            if isinstance(opened, tuple):  # an earlier run reused: nothing was logged
                (run_id, reused), unchanged = opened, {}
            else:
                (run_id, reused), unchanged = finish_job(self.tracker, opened, msg["entries"]), opened.unchanged
            ui = self.tracker.ui_command(run_id if parent is None else None, msg["benchmarks"], msg["columns"],
                                         missing=msg.get("ui_missing"),
                                         holders={b: held[0] for b, held in unchanged.items()})
        except Exception as e:  # noqa: BLE001
            return {"error": f"{type(e).__name__}: {e}"}
        return {"run_id": run_id, "reused": reused, "ui": ui, "uri": self.tracker.uri, "import_s": self.import_s,
                "unchanged": unchanged,
                "setup_s": self.tracker.setup_s, "log_s": time.perf_counter() - self.t0 - self.tracker.setup_s}

    def abandon(self) -> None:
        """The job's process ended before finishing: its run is ended KILLED, as a later run would find it."""
        if self.opened is not None and not isinstance(self.opened, tuple):
            try:
                self.tracker.end_run(self.opened.job, "KILLED")
            except Exception:  # noqa: BLE001, S110  (close_stale_runs of a later run ends it then)
                pass


ANSWERED = ("finish", "sweep_open", "sweep_close")  # the messages the process answers (each with one line)


class _SweepParent:
    """A sweep's parent run (``sweep_open``: made, its id answered; ``sweep_close``: the summary's files logged,
    the run finished, the ``mlflow ui`` line answered), so the process that launches a sweep's jobs never
    imports MLflow (:mod:`.sweep`)."""

    def __init__(self) -> None:
        self.tracker: Any = None

    def handle(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        from pathlib import Path

        from worldrecall.engine.sinks.tracking.tracker import Tracker

        try:
            if msg["op"] == "sweep_open":
                self.tracker = Tracker(msg["tcfg"], Path(msg["output_root"]))
                return {"run_id": self.tracker.start_run(msg["name"], tags=msg["tags"])}
            if self.tracker is None:
                return {"error": "sweep_close without sweep_open"}
            run_id = msg["run_id"]
            for e in msg["entries"]:
                self.tracker.log_blob(run_id, e)
            self.tracker.log_batch(run_id, metrics={"n_jobs": msg["n_jobs"]})
            self.tracker.end_run(run_id, "FINISHED", end_time=time.time())
            return {"ui": self.tracker.ui_command()}
        except Exception as e:  # noqa: BLE001  (answered: the launching process says it in one line)
            return {"error": f"{type(e).__name__}: {e}"}


def serve(stdin: IO[str], out: IO[str]) -> int:
    """The MLflow process: import MLflow, then open and finish jobs as their messages come."""
    t0 = time.perf_counter()
    inbox: queue.Queue = queue.Queue()
    threading.Thread(target=_read, args=(stdin, inbox), name="inbox", daemon=True).start()
    missing = ""
    try:
        import mlflow.store.tracking.sqlalchemy_store
        import mlflow.tracking  # noqa: F401
    except ImportError as e:
        missing = str(e)
    import_s = time.perf_counter() - t0
    job: _Job | None = None
    sweep = _SweepParent()
    while (msg := inbox.get()) is not None:
        if missing:
            answer: dict[str, Any] | None = {"missing": missing} if msg.get("op") in ANSWERED else None
        elif msg.get("op") in ("sweep_open", "sweep_close"):
            answer = sweep.handle(msg)
        elif msg.get("op") == "open":
            job, answer = _Job(msg, import_s), None
            job.open()
        else:
            answer = job.finish(msg) if job is not None else {"error": "finish without open"}
            job, import_s = None, 0.0  # a later job of the same process (a sweep's) imports nothing
        if answer is not None:
            out.write(json.dumps(answer) + "\n")
            out.flush()
    if job is not None:
        job.abandon()
    return 0


def main() -> NoReturn:
    # Ctrl-C reaches the whole process group: the job's process decides (it ends, and this process then sees
    # its input end and ends the job's run KILLED), not a traceback from here
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the answers go on a copy of stdout; anything a library prints goes to stderr, as it did in the job
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    code = serve(sys.stdin, out)
    # every run is committed and every answer written. The job waits for this process to end, and tearing
    # down an interpreter with MLflow and SQLAlchemy loaded takes ~0.55 s (module teardown, collection) that
    # changes nothing on disk: ended at once instead
    for stream in (out, sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
