"""MLflow tracking: the client wrapper (runs, batched params/metrics/tags, artifacts stored once).

How runs nest is decided in :mod:`worldrecall.engine.sinks.tracking.runs`.

SQLite under the output root by default (``MLFLOW_TRACKING_URI`` or ``tracking.tracking_uri`` override it).
Every call goes through :func:`_retry`, so parallel sweep jobs sharing one SQLite file wait out
"database is locked" instead of failing. Params are flattened with secrets redacted.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from worldrecall.engine.redaction import redact, redact_tags, scrub

log = logging.getLogger(__name__)
T = TypeVar("T")

# MLflow 3's UI opens an experiment on the view its kind names; without it, it infers "GenAI" and shows traces.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"


def _retry(fn: Callable[[], T], attempts: int = 40) -> T:
    for i in range(attempts):
        try:
            return fn()
        except Exception as e:  # sqlite "database is locked" surfaces as several exception types
            msg = str(e).lower()
            transient = ("locked", "busy", "duplicate column", "alembic_version")
            if not any(w in msg for w in transient) or i == attempts - 1:
                raise
            time.sleep(min(2.0, 0.05 * (1.5 ** i)) * (0.5 + random.random()))
    raise AssertionError("unreachable")


OWNER_HOST, OWNER_PID = "worldrecall.host", "worldrecall.pid"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _store_lock:
    """An exclusive lock beside a SQLite store while it is opened (created and migrated on first use)."""

    def __init__(self, uri: str):
        self.path = Path(uri[len("sqlite:///"):] + ".lock") if uri.startswith("sqlite:///") else None
        self.fd: Any = None

    def __enter__(self) -> _store_lock:
        if self.path is not None:
            import fcntl

            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = open(self.path, "a")
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_UN)
            self.fd.close()


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for any other store)."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def template_path() -> Path:
    """An empty, fully migrated store for this MLflow version, kept in the user's cache
    (``WORLDRECALL_MLFLOW_TEMPLATE_DIR``, else ``$XDG_CACHE_HOME`` or ``~/.cache``, ``/worldrecall``)."""
    import mlflow

    root = os.environ.get("WORLDRECALL_MLFLOW_TEMPLATE_DIR") or (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "worldrecall")
    return Path(root) / f"mlflow-{mlflow.__version__}-empty.db"


def seed_store(db: Path) -> bool:
    """Create a new SQLite store as a copy of the migrated template; False when there is none (yet).

    MLflow migrates a new store through every schema revision, seconds per fresh output root; the copy
    is the same database (same alembic head: MLflow checks it on opening), written by MLflow itself. Its
    tables are never written here: worldrecall logs to its own experiment (with this store's artifact
    folder); MLflow's ``Default`` experiment keeps the template's artifact location, and no run goes there."""
    import shutil

    tpl = template_path()
    if not tpl.is_file():
        return False
    db.parent.mkdir(parents=True, exist_ok=True)
    tmp = db.with_name(f".{db.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(tpl, tmp)
        os.replace(tmp, db)
    except OSError as e:  # a broken template: migrate as before
        log.debug("could not seed %s from %s: %s", db, tpl, e)
        tmp.unlink(missing_ok=True)
        return False
    return True


def save_template(db: Path) -> None:
    """Keep a just-migrated, still empty store as the template for later fresh stores (never fatal)."""
    import sqlite3

    tpl = template_path()
    tmp = tpl.with_name(f".{tpl.name}.{os.getpid()}.tmp")
    try:
        tpl.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(db) as src, sqlite3.connect(tmp) as dst:
            src.backup(dst)  # a consistent copy even while MLflow holds a connection
        os.replace(tmp, tpl)
    except (OSError, sqlite3.Error) as e:
        log.debug("could not save the MLflow store template %s: %s", tpl, e)
        tmp.unlink(missing_ok=True)


def default_uri(output_root: Path) -> str:
    return f"sqlite:///{(Path(output_root).resolve() / 'mlflow.db')}"


class Tracker:
    """Thin wrapper over ``MlflowClient`` with explicit parent/child run ids."""

    def __init__(self, tcfg: Mapping[str, Any], output_root: Path):
        from mlflow.tracking import MlflowClient

        self.output_root = Path(output_root).resolve()
        self.output_root.mkdir(parents=True, exist_ok=True)
        self.uri = os.environ.get("MLFLOW_TRACKING_URI") or tcfg.get("tracking_uri") or default_uri(self.output_root)
        if sqlite_path(self.uri) is not None:
            import mlflow.store.tracking.sqlalchemy_store  # noqa: F401  (the client imports it on first use)
        t1 = time.perf_counter()  # the import is the MLflow process's own figure (process.py)
        self.experiment_name = tcfg.get("experiment") or "worldrecall"
        self.extra_tags = redact_tags(tcfg.get("tags") or {})
        self._artifact_uri: dict[str, str] = {}
        # No mlflow.set_tracking_uri: it exports MLFLOW_TRACKING_URI, which would leak into later runs.
        # A new SQLite store is created and migrated by exactly one process (file lock); jobs that start
        # together wait for it instead of racing alembic ("duplicate column name: step").
        with _store_lock(self.uri):
            db = sqlite_path(self.uri)
            fresh = db is not None and not db.exists()
            seeded = fresh and seed_store(db)
            self.client = _retry(lambda: MlflowClient(tracking_uri=self.uri))
            if fresh and not seeded:
                save_template(db)  # the next fresh store is a copy, not ~50 migrations (~8 s)
            self.experiment_id = self._experiment()
        if not fresh:
            self.close_stale_runs()
        self.setup_s = time.perf_counter() - t1  # store creation/migration/opening, experiment, stale runs

    def _experiment(self) -> str:
        def get_or_create() -> str:
            exp = self.client.get_experiment_by_name(self.experiment_name)
            if exp is not None:
                if exp.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:  # stores made before this tag existed
                    self.client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
                return exp.experiment_id
            try:
                art = (self.output_root / "mlartifacts").as_uri()
                return self.client.create_experiment(self.experiment_name, artifact_location=art,
                                                     tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
            except Exception as e:
                if "already exists" in str(e).lower() or "unique" in str(e).lower():
                    return self.client.get_experiment_by_name(self.experiment_name).experiment_id
                raise
        return _retry(get_or_create)

    def close_stale_runs(self) -> list[str]:
        """Runs left RUNNING by a killed process of this host (its pid is gone) are marked KILLED."""
        import socket

        from mlflow.entities import ViewType

        host, stale = socket.gethostname(), []
        runs = _retry(lambda: self.client.search_runs(
            [self.experiment_id], f"attributes.status = 'RUNNING' and tags.`{OWNER_HOST}` = '{host}'",
            run_view_type=ViewType.ACTIVE_ONLY, max_results=1000))
        for run in runs:
            pid = int(run.data.tags.get(OWNER_PID, "0") or 0)
            if pid and not _alive(pid):
                self.end_run(run.info.run_id, "KILLED")
                stale.append(run.info.run_id)
        return stale

    def start_run(self, name: str, parent_id: str | None = None, tags: Mapping[str, str] | None = None,
                  start_time: float | None = None) -> str:
        """Create a run (``start_time`` in epoch seconds: when the work it records began, not now).

        Names and tags are scrubbed of secrets; the run records which process owns it, so a later
        invocation can close it if that process was killed."""
        name, t = self._run_tags(name, parent_id, tags)
        ms = int(start_time * 1000) if start_time is not None else None
        run = _retry(lambda: self.client.create_run(self.experiment_id, start_time=ms, tags=t, run_name=name))
        self._artifact_uri[run.info.run_id] = run.info.artifact_uri
        return run.info.run_id

    def _run_tags(self, name: str, parent_id: str | None, tags: Mapping[str, str] | None) -> tuple[str, dict]:
        import socket

        name = scrub(name)
        t = {"mlflow.runName": name, **self.extra_tags, **redact_tags(tags or {}),
             OWNER_HOST: socket.gethostname(), OWNER_PID: str(os.getpid())}
        if parent_id:
            t["mlflow.parentRunId"] = parent_id
        return name, t

    def search(self, filter_string: str, max_results: int = 1000) -> list[Any]:
        """Active runs of this experiment matching an MLflow filter string."""
        from mlflow.entities import ViewType

        return _retry(lambda: self.client.search_runs([self.experiment_id], filter_string,
                                                      run_view_type=ViewType.ACTIVE_ONLY, max_results=max_results))

    def end_run(self, run_id: str, status: str = "FINISHED", end_time: float | None = None) -> None:
        ms = int(end_time * 1000) if end_time is not None else None
        _retry(lambda: self.client.set_terminated(run_id, status, end_time=ms))

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        """Tags on an existing run (a superseded or reused run of the same config)."""
        self.log_batch(run_id, tags=tags)

    def log_batch(self, run_id: str, metrics: Mapping[str, float] | None = None,
                  params: Mapping[str, Any] | None = None, tags: Mapping[str, Any] | None = None) -> None:
        """Metrics, params and tags in as few ``log_batch`` calls as MLflow's limits allow (one, usually).

        NaN metrics are kept: a value that is not applicable for one model stays a column, not a gap.
        """
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        ms = [Metric(_metric_key(k), float("nan") if v is None else float(v), now, 0) for k, v in (metrics or {}).items()]
        ps = [Param(k[:250], str(v)[:6000]) for k, v in redact(params or {}).items()]
        ts = [RunTag(k[:250], str(v)[:5000]) for k, v in redact_tags(tags or {}).items()]
        while ms or ps or ts:  # MLflow: at most 1000 entries per call, 100 params, 100 tags
            mc, pc, tc = ms[:1000 - min(len(ps), 100) - min(len(ts), 100)], ps[:100], ts[:100]
            ms, ps, ts = ms[len(mc):], ps[100:], ts[100:]
            _retry(lambda: self.client.log_batch(run_id, metrics=mc, params=pc, tags=tc))

    def log_file_once(self, run_id: str, path: Path, artifact_path: str, blobs: Any, link: bool = False) -> str:
        """Log ``path`` as ``artifact_path/<name>``, its bytes kept once: stored in ``blobs`` (a
        :class:`~worldrecall.engine.cache.blobs.BlobStore`) and hard-linked into a local artifact store; a remote
        store gets an upload. ``link``: the file is never rewritten in place (written atomically), so the blob
        may be a hard link to it. Returns the blob digest."""
        digest, blob = blobs.put(path, link=link)
        self.log_blob(run_id, {"folder": artifact_path, "name": Path(path).name, "blob": str(blob),
                               "source": str(path)})
        return digest

    def log_blob(self, run_id: str, entry: Mapping[str, str]) -> None:
        """Log a file stored in the blob store as ``<folder>/<name>`` (``entry``: folder, name, blob, and the
        file it came from): a hard link from a local artifact store to the blob, an upload to a remote one."""
        from worldrecall.engine.cache.blobs import link_or_copy

        uri = self._artifact_uri.get(run_id) or _retry(lambda: self.client.get_run(run_id)).info.artifact_uri
        if uri.startswith("file:") or "://" not in uri:
            from urllib.parse import unquote, urlparse

            local = Path(unquote(urlparse(uri).path)) if uri.startswith("file:") else Path(uri)
            link_or_copy(Path(entry["blob"]), local / entry["folder"] / entry["name"])
        else:
            _retry(lambda: self.client.log_artifact(run_id, str(entry["source"]), entry["folder"]))

    def runs_view(self, parent_run: str | None = None, benchmark: str | None = None,
                  columns: Sequence[str] = ()) -> str:
        """The runs view's address; with ``parent_run`` it opens on that invocation's per-model runs (of one
        ``benchmark``), best rank first, with the metric ``columns`` shown.

        MLflow's runs page takes filter and sort from the URL but its visible columns only from a shared
        view: an experiment tag ``mlflow.sharedViewState.<key>`` holding the page's state as JSON, opened by
        ``?viewStateShareKey=<key>`` (the UI's own "Share" button writes the same). The key is a digest of
        the state, so the same view is stored once however often it is printed."""
        keys = self.share_views([_view_state(parent_run, benchmark, columns)]) if parent_run else [None]
        return self._runs_url(keys[0])

    def _runs_url(self, view_key: str | None) -> str:
        import urllib.parse

        q: dict[str, str] = {VIEW_KEY_PARAM: view_key} if view_key else {}
        q["workflowType"] = "machine_learning"
        query = urllib.parse.urlencode(q, quote_via=urllib.parse.quote, safe="")
        return f"http://127.0.0.1:5000/#/experiments/{self.experiment_id}/runs?{query}"

    def share_views(self, states: Sequence[Mapping[str, Any]]) -> list[str]:
        """Store runs-page states as this experiment's shared views; returns their keys."""
        import hashlib
        import json

        values = [json.dumps(state, sort_keys=True) for state in states]
        keys = [hashlib.sha256(v.encode()).hexdigest()[:16] for v in values]
        for k, v in zip(keys, values):
            _retry(lambda k=k, v=v: self.client.set_experiment_tag(self.experiment_id, SHARED_VIEW_TAG + k, v))
        return keys

    def ui_command(self, parent_run: str | None = None, benchmarks: Sequence[str] = (),
                   columns: Mapping[str, Sequence[str]] | None = None, missing: str | None = None,
                   holders: Mapping[str, str] | None = None) -> str:
        """The line to start the UI (this environment's own ``mlflow``), and the address of the runs view.

        The command names the venv's executable, so it works without activating the venv; where the UI's
        server modules are missing (only the ``tracking`` extra installed) the install line comes first.
        MLflow 3.17's UI takes the view from its GenAI / Model-training switch (``workflowType`` in the URL or
        the browser's storage) rather than from the experiment-kind tag, so the printed link names it.
        ``columns``: per benchmark, the metric keys its link shows (its headline; see ``views.headline_keys``).
        ``missing``: what :func:`ui_missing_module` said in the job's own process (default: ask here).
        ``holders``: benchmark -> the run whose per-model runs of that benchmark this run points to (the same
        numbers, logged once: ``runs.holders``); its link opens those.
        """
        lines = []
        missing = ui_missing_module() if missing is None else missing
        if missing:
            lines.append(f"the MLflow UI needs the ui extra ({missing} is not installed): "
                         f"{venv_tool('pip')} install 'worldrecall[ui]'")
        lines.append(f"{venv_tool('mlflow')} ui --backend-store-uri {self.uri}")
        lines.append("then open (one run per benchmark x model; select runs -> Compare):")
        lines.append(f"  {self.runs_view()}")
        shown = list(benchmarks) if parent_run else []
        keys = self.share_views([_view_state((holders or {}).get(b, parent_run), b, (columns or {}).get(b, ["rank"]))
                                 for b in shown])
        if shown:
            lines.append("this run's models by rank, per benchmark:")
        for bench, key in zip(shown, keys):  # every benchmark's view stored at once
            lines.append(f"  {bench}: {self._runs_url(key)}")
        return "\n".join(lines)


def _view_state(parent_run: str | None, benchmark: str | None, columns: Sequence[str]) -> dict[str, Any]:
    """The runs page's state on one invocation's per-model runs (of one benchmark), best rank first."""
    f = f"tags.mlflow.parentRunId = '{parent_run}'"
    return {"searchFilter": f + (f" and params.benchmark = '{benchmark}'" if benchmark else ""),
            "orderByKey": "metrics.`rank`", "orderByAsc": True, "selectedColumns": [f"metrics.`{c}`" for c in columns]}


SHARED_VIEW_TAG = "mlflow.sharedViewState."  # MLflow UI's shared view state (experiment tag prefix)
VIEW_KEY_PARAM = "viewStateShareKey"  # its URL parameter; any filter/sort parameter beside it overrides it


UI_MODULES = ("flask", "flask_cors", "gunicorn")  # what `mlflow ui` imports beyond the tracking client


def ui_missing_module() -> str:
    """The first module `mlflow ui` needs that this environment lacks ('' when the UI can start)."""
    import importlib.util

    for name in UI_MODULES:
        if importlib.util.find_spec(name) is None:
            return name
    return ""


def venv_tool(name: str) -> str:
    """``.venv/bin/<name>`` of the running interpreter's environment (relative when under the working
    directory, as a user types it), else the bare name."""
    tool = Path(sys.executable).parent / name
    if not tool.exists():
        return name
    try:
        rel = tool.relative_to(Path.cwd())
        return str(rel)
    except ValueError:
        return str(tool)


@functools.lru_cache(maxsize=65536)  # the same few hundred keys in every job of a sweep
def _metric_key(k: str) -> str:
    return "".join(c if c.isalnum() or c in "_-. /:" else "_" for c in k)[:250]
