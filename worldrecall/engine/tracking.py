"""MLflow tracking: one parent run per invocation or sweep, one child run per job.

SQLite under the output root by default (``MLFLOW_TRACKING_URI`` or ``tracking.tracking_uri`` override it).
Every call goes through :func:`_retry`, so parallel sweep jobs sharing one SQLite file wait out
"database is locked" instead of failing. Params are flattened with secrets redacted.
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

SECRET_WORDS = ("key", "token", "secret", "password")
REDACTED = "***"
PARENT_ENV = "WORLDRECALL_MLFLOW_PARENT"


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> ``a.b.c`` keys (lists kept as JSON strings)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = json.dumps(v) if isinstance(v, (list, tuple, Mapping)) else v
    return out


def is_secret(key: str) -> bool:
    last = key.lower().rsplit(".", 1)[-1]
    return any(w in last for w in SECRET_WORDS)


def redact(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Replace values whose (last) key names a key, token, secret or password."""
    return {k: (REDACTED if is_secret(k) and v not in (None, "") else v) for k, v in flat.items()}


def redact_tree(d: Any) -> Any:
    if isinstance(d, Mapping):
        return {k: (REDACTED if is_secret(str(k)) and v not in (None, "") and not isinstance(v, Mapping)
                    else redact_tree(v)) for k, v in d.items()}
    if isinstance(d, list):
        return [redact_tree(x) for x in d]
    return d


def _retry(fn: Callable[[], T], what: str, attempts: int = 40) -> T:
    for i in range(attempts):
        try:
            return fn()
        except Exception as e:  # sqlite "database is locked" surfaces as several exception types
            msg = str(e).lower()
            if ("locked" not in msg and "busy" not in msg) or i == attempts - 1:
                raise
            time.sleep(min(2.0, 0.05 * (1.5 ** i)) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def default_uri(output_root: Path) -> str:
    return f"sqlite:///{(Path(output_root).resolve() / 'mlflow.db')}"


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip()
    except Exception:
        return ""


class Tracker:
    """Thin wrapper over ``MlflowClient`` with explicit parent/child run ids."""

    def __init__(self, tcfg: Mapping[str, Any], output_root: Path):
        from mlflow.tracking import MlflowClient

        self.output_root = Path(output_root).resolve()
        self.output_root.mkdir(parents=True, exist_ok=True)
        self.uri = os.environ.get("MLFLOW_TRACKING_URI") or tcfg.get("tracking_uri") or default_uri(self.output_root)
        # No mlflow.set_tracking_uri: it exports MLFLOW_TRACKING_URI, which would leak into later runs.
        self.client = MlflowClient(tracking_uri=self.uri)
        self.experiment_name = tcfg.get("experiment") or "worldrecall"
        self.extra_tags = {str(k): str(v) for k, v in (tcfg.get("tags") or {}).items()}
        self.experiment_id = self._experiment()

    def _experiment(self) -> str:
        def get_or_create() -> str:
            exp = self.client.get_experiment_by_name(self.experiment_name)
            if exp is not None:
                return exp.experiment_id
            try:
                art = (self.output_root / "mlartifacts").as_uri()
                return self.client.create_experiment(self.experiment_name, artifact_location=art)
            except Exception as e:
                if "already exists" in str(e).lower() or "unique" in str(e).lower():
                    return self.client.get_experiment_by_name(self.experiment_name).experiment_id
                raise
        return _retry(get_or_create, "experiment")

    def start_run(self, name: str, parent_id: str | None = None, tags: Mapping[str, str] | None = None) -> str:
        t = {"mlflow.runName": name, **self.extra_tags, **(tags or {})}
        if parent_id:
            t["mlflow.parentRunId"] = parent_id
        run = _retry(lambda: self.client.create_run(self.experiment_id, tags=t, run_name=name), "create_run")
        return run.info.run_id

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        _retry(lambda: self.client.set_terminated(run_id, status), "end_run")

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k[:250], str(v)[:6000]) for k, v in redact(params).items()]
        for i in range(0, len(items), 100):
            chunk = items[i:i + 100]
            _retry(lambda: self.client.log_batch(run_id, params=chunk), "log_params")

    def log_metrics(self, run_id: str, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(_metric_key(k), float(v), now, 0) for k, v in metrics.items()
                 if v is not None and v == v]
        for i in range(0, len(items), 1000):
            chunk = items[i:i + 1000]
            _retry(lambda: self.client.log_batch(run_id, metrics=chunk), "log_metrics")

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k[:250], str(v)[:5000]) for k, v in tags.items()]
        for i in range(0, len(items), 100):
            chunk = items[i:i + 100]
            _retry(lambda: self.client.log_batch(run_id, tags=chunk), "set_tags")

    def log_artifacts(self, run_id: str, paths: Iterable[Path], artifact_path: str | None = None) -> None:
        for p in paths:
            p = Path(p)
            if p.is_dir():
                _retry(lambda: self.client.log_artifacts(run_id, str(p), artifact_path), "log_artifacts")
            elif p.exists():
                _retry(lambda: self.client.log_artifact(run_id, str(p), artifact_path), "log_artifact")

    def ui_command(self) -> str:
        return f"mlflow ui --backend-store-uri {self.uri}"


def _metric_key(k: str) -> str:
    return "".join(c if c.isalnum() or c in "_-. /:" else "_" for c in k)[:250]
