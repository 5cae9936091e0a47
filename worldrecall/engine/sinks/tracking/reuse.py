"""A rerun that changed nothing logs nothing — and does not even load MLflow.

After logging, the MLflow sink records in ``meta/tracking.json`` what it logged: the run id, the store, the
config hash, the digest of the tables and the lines it printed. A later invocation of the same config whose
tables have the same digest reuses that run when the store still holds it, finished, active and not
superseded. The check reads the SQLite store read-only with the standard library (MLflow's import costs
~1.2 s of one core, more than a whole resumed rerun). Anything else — another store kind, a run deleted or
superseded in the meantime, a schema the query does not know — goes through MLflow's client as before.
"""

from __future__ import annotations

import json
import os
import sqlite3
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


def likely_reused(results_dir: Path, config_hash: str) -> bool:
    """Before the run: an invocation of this config was logged from this folder (a rerun, which usually
    resumes every row); the background MLflow import would then only compete with the run."""
    rec = read_record(results_dir)
    return bool(rec.get("run_id")) and rec.get("config_hash") == config_hash and rec.get("parent") is None


def _run_is_current(db: Path, run_id: str) -> bool:
    """The run exists in the SQLite store, FINISHED, active, and no later run superseded it (read-only)."""
    if not db.is_file():
        return False
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return False
    try:
        row = con.execute("SELECT status, lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
        superseded = con.execute("SELECT 1 FROM tags WHERE run_uuid = ? AND key = ?",
                                 (run_id, "worldrecall.superseded_by")).fetchone()
    except sqlite3.Error:  # another schema: let MLflow's client decide
        return False
    finally:
        con.close()
    return row is not None and tuple(row) == ("FINISHED", "active") and superseded is None


def reusable(results_dir: Path, uri: str, config_hash: str, digest: str) -> dict[str, Any] | None:
    """The record of the run this invocation can reuse without MLflow, else None."""
    from worldrecall.engine.sinks.tracking.tracker import sqlite_path

    rec = read_record(results_dir)
    db = sqlite_path(uri)
    if (db is None or not rec.get("run_id") or rec.get("parent") is not None or rec.get("uri") != uri
            or rec.get("config_hash") != config_hash or rec.get("results_digest") != digest
            or not isinstance(rec.get("ui"), str)):
        return None
    return rec if _run_is_current(db, str(rec["run_id"])) else None
