"""A rerun that changed nothing logs nothing — and does not even load MLflow.

After logging, the MLflow sink records in ``meta/tracking.json`` what it logged: the run id, the store, the
config hash, the digest of the tables and the lines it printed. A later invocation of the same config whose
tables have the same digest reuses that run when the store still holds it, finished, active and not
superseded (asked through MLflow's client, in the MLflow process: :mod:`.process`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RECORD = Path("meta") / "tracking.json"


def store_uri(tcfg: Mapping[str, Any], output_root: Path) -> str:
    """The tracking URI a :class:`~worldrecall.engine.sinks.tracking.tracker.Tracker` would open."""
    from worldrecall.engine.sinks.tracking.tracker import default_uri

    return os.environ.get("MLFLOW_TRACKING_URI") or tcfg.get("tracking_uri") or default_uri(Path(output_root).resolve())


def read_record(results_dir: Path) -> dict[str, Any]:
    """The last MLflow record of a results folder ({} when there is none or it is unreadable)."""
    try:
        rec = json.loads((Path(results_dir) / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def run_is_current(uri: str, run_id: str) -> bool:
    """The run exists in the store, FINISHED, active, and no later run superseded it."""
    from mlflow.tracking import MlflowClient

    try:
        run = MlflowClient(tracking_uri=uri).get_run(run_id)
    except Exception:  # noqa: BLE001  (gone, or a store that cannot say: log again)
        return False
    return (run.info.status == "FINISHED" and run.info.lifecycle_stage == "active"
            and "worldrecall.superseded_by" not in run.data.tags)


def reusable(results_dir: Path, uri: str, config_hash: str, digest: str) -> dict[str, Any] | None:
    """The record of the run this invocation can reuse (same store, config and tables), else None."""
    rec = read_record(results_dir)
    if (not rec.get("run_id") or rec.get("parent") is not None or rec.get("uri") != uri
            or rec.get("config_hash") != config_hash or rec.get("results_digest") != digest
            or not isinstance(rec.get("ui"), str)):
        return None
    return rec if run_is_current(uri, str(rec["run_id"])) else None
