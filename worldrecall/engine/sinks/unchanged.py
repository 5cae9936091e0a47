"""A rerun that changed nothing writes nothing: the outputs' content key, recorded once the outputs are written.

The outputs of a job (tables, plots, the report, the submission, MLflow) are a function of:

- every row's content (:func:`~worldrecall.engine.stages.row_digests.rows_digest`: values, strata, backends,
  alignment … — not how a row was obtained);
- the identity of every aggregator the job runs (name, version, code digest, libraries: the cache's
  :func:`~worldrecall.engine.cache.component_identity`) with the content of the files its params name (an
  official results CSV), and the identity of every plugin sink;
- the config that shapes outputs (every key but :data:`NOT_OUTPUTS`: progress bars, workers, devices …);
- the provenance the outputs state (code and plugin versions, git commit and working-tree state, installed
  packages, suite digests, the backends' and judges' identities);
- the engine's, core's and registry's source files (the sinks that write them and what they call), the
  metrics' declared values (units, directions, descriptions the report shows), the plugin manifest, the
  overrides as typed (MLflow tags them) and the MLflow store.

After every output of a job was written without a failure, :class:`OutputsRecordSink` stores that key and each
written file's size and modification time in ``<results>/meta/outputs.json``. A later job whose key equals the
record's, and whose recorded files are all still there as written, skips the aggregation and every output and
prints one line (``outputs unchanged: …``). Any difference — a row, an aggregator's code, a report setting, a
deleted or edited table — and the job writes its outputs as usual (and the record is removed first, so a job
that stops half way never leaves a record that vouches for files it did not finish).

Not outputs, and rewritten by every job: ``meta/timing.json`` (this job's seconds), the cache log that
``worldrecall cache explain`` reads, and the rows file's own compaction.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.stages.result import RunResult

RECORD = Path("meta") / "outputs.json"
# config keys that never change an output file (how the work is done, what the console shows)
NOT_OUTPUTS = frozenset({"progress", "workers", "devices", "batch_size", "verbose", "view", "cache", "video",
                         "inputs"})
# files a job rewrites every time (its own timing, the record itself): never part of the check
VOLATILE = frozenset({"meta/timing.json", str(RECORD)})


def outputs_key(result: RunResult, host: Any, aggregators: Mapping[str, Iterable[str]],
                overrides: Iterable[str] = ()) -> str:
    """The content key of a job's outputs (see the module's docstring). ``aggregators``: per scope (``"*"``
    for the run's and the suite's, else a benchmark's name) the names of the aggregators the job runs."""
    from worldrecall.engine.cache import component_identity, key_of, named_files
    from worldrecall.engine.sinks.submission import provenance_doc
    from worldrecall.engine.sinks.tracking.reuse import store_uri
    from worldrecall.engine.stages.name_checks import configured_aggregator_params
    from worldrecall.engine.stages.row_digests import rows_digest

    cfg = result.config
    configured = configured_aggregator_params(cfg, host.components["aggregator"], strict=False)
    aggs: dict[str, Any] = {}
    for scope, names in sorted(aggregators.items()):
        for name in names:
            try:
                agg = host.aggregator(name)
                # the files its params name (an official results CSV …), by content, as its cache key has them
                files = named_files(agg, {**agg.defaults, **configured.get(name, {})})
                aggs[f"{scope}:{name}"] = [component_identity(agg), files]
            except Exception as e:  # noqa: BLE001  (an aggregator that cannot be named: its own state)
                aggs[f"{scope}:{name}"] = f"unavailable: {type(e).__name__}: {e}"
    sinks = {name: component_identity(s) for name, s in sorted((getattr(host, "sinks", {}) or {}).items())}
    tcfg = cfg.get("tracking") or {}
    parts = {
        "rows": rows_digest(result.rows, result.row_digests),
        "aggregators": aggs,
        "sinks": sinks,
        "config": {k: v for k, v in cfg.items() if k not in NOT_OUTPUTS},
        "provenance": provenance_doc(result),
        "manifest": host.manifest() if hasattr(host, "manifest") else [],
        "engine": source_digest(),
        "metrics": {n: [getattr(c, "primary", ""), {v: repr(m) for v, m in (getattr(c, "values", None) or {}).items()}]
                    for n, c in sorted((getattr(host, "metrics", {}) or {}).items())},
        "overrides": list(overrides),
        "mlflow": store_uri(tcfg, Path(cfg["output_root"])) if tcfg.get("enabled") else "",
    }
    return key_of({"name": "worldrecall.outputs", "version": "1"}, parts)


def source_digest() -> str:
    """The content of worldrecall's engine, core and registry sources (every ``.py`` file, by the one input
    digest: a stat per file on a warm run). The sinks' code and what they call, as files: a lazily imported
    sink module (the report) counts the same before and after it is imported."""
    import hashlib

    from worldrecall.core.digests import file_digest

    top = Path(__file__).resolve().parents[2]  # the worldrecall package
    h = hashlib.sha256()
    for sub in ("engine", "core", "registry"):
        for p in sorted((top / sub).rglob("*.py")):
            h.update(f"{p.relative_to(top)}\0{file_digest(p)}\n".encode())
    return h.hexdigest()


def read_record(results_dir: Path) -> dict[str, Any]:
    """The outputs record of a results folder ({} when there is none or it is unreadable)."""
    try:
        rec = json.loads((Path(results_dir) / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def unchanged(results_dir: Path, key: str, mlflow_uri: str = "") -> dict[str, Any] | None:
    """The record when the outputs under ``results_dir`` were written under ``key``, every file it lists is
    still there with the size and modification time it was written with and, when the job tracks
    (``mlflow_uri``), the MLflow run it logged is still current in that store; else None."""
    rec = read_record(results_dir)
    if not key or rec.get("key") != key or not isinstance(rec.get("files"), list):
        return None
    if mlflow_uri and rec.get("mlflow_run_id") and not run_is_current(mlflow_uri, str(rec["mlflow_run_id"])):
        return None
    for f in rec["files"]:
        try:
            st = os.stat(Path(results_dir) / f["path"])
        except (OSError, KeyError, TypeError):
            return None
        if st.st_size != f.get("size") or st.st_mtime_ns != f.get("mtime_ns"):
            return None
    return rec


def run_is_current(uri: str, run_id: str) -> bool:
    """Whether the run is FINISHED, active and not superseded in a local SQLite MLflow store, read with sqlite3
    (read-only, a few milliseconds, MLflow not imported). Any other store, or a store that cannot say: False
    (the job then goes through MLflow, which checks the run itself)."""
    import sqlite3

    if not uri.startswith("sqlite:///"):
        return False
    path = Path(uri[len("sqlite:///"):])
    if not path.is_file():
        return False
    try:
        con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            row = con.execute("SELECT status, lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
            superseded = con.execute("SELECT 1 FROM tags WHERE run_uuid = ? AND key = ?",
                                     (run_id, "worldrecall.superseded_by")).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return row is not None and tuple(row) == ("FINISHED", "active") and superseded is None


def forget(results_dir: Path) -> None:
    """Remove the record before outputs are rewritten (a job that stops half way leaves none)."""
    try:
        (Path(results_dir) / RECORD).unlink()
    except OSError:
        pass


class OutputsCheck:
    """What a job hands its runner to check its outputs before aggregating (the run stages import no sink):
    the overrides as typed, and the checks themselves."""

    def __init__(self, overrides: Iterable[str] = ()) -> None:
        self.overrides = list(overrides)

    @staticmethod
    def has_record(results_dir: Path) -> bool:
        return (Path(results_dir) / RECORD).is_file()

    def check(self, result: RunResult, host: Any, aggregators: Mapping[str, Iterable[str]]) -> RunResult:
        """``result`` with its outputs' key, marked ``unchanged`` with the record when the outputs on disk were
        written under it (:func:`unchanged`); otherwise the old record is removed (:func:`forget`)."""
        from dataclasses import replace

        from worldrecall.engine.sinks.tracking.reuse import store_uri

        cfg = result.config
        key = outputs_key(result, host, aggregators, self.overrides)
        tcfg = cfg["tracking"]
        uri = store_uri(tcfg, Path(cfg["output_root"])) if tcfg["enabled"] else ""
        rec = unchanged(result.results_dir, key, uri)
        if rec is None:
            forget(result.results_dir)
        return replace(result, outputs_key=key, unchanged=rec)


class OutputsRecordSink:
    """Writes ``meta/outputs.json`` last (after MLflow): the key the outputs were written under and each written
    file's size and modification time. Not written when an output failed (the next job writes them again)."""

    name = "outputs_record"

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        key = getattr(result, "outputs_key", "")
        if not key or ctx.failed or result.partial:
            return []
        root = Path(result.results_dir)
        files = []
        for p in dict.fromkeys(Path(p) for p in ctx.written):
            try:
                rel = p.relative_to(root)
            except ValueError:
                continue  # a job folder's file (the sweep's job summary): not this record's to vouch for
            if str(rel) in VOLATILE:
                continue
            try:
                st = p.stat()
            except OSError:
                continue
            files.append({"path": str(rel), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
        rec = {"key": key, "files": files}
        tracking = _tracking_record(root)
        if tracking.get("run_id"):
            rec["mlflow_run_id"], rec["mlflow_ui"] = tracking["run_id"], tracking.get("ui", "")
        path = root / RECORD
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(rec, indent=1, sort_keys=True))
        os.replace(tmp, path)
        return []  # not an output itself (MLflow logged the others before it)


def _tracking_record(results_dir: Path) -> dict[str, Any]:
    from worldrecall.engine.sinks.tracking.reuse import read_record as read_tracking

    return read_tracking(results_dir)


def unchanged_line(result: RunResult, rec: Mapping[str, Any]) -> str:
    """The one line a job whose outputs are unchanged prints."""
    where = Path(result.results_dir)
    mlflow = f"; MLflow run {rec['mlflow_run_id']} stands" if rec.get("mlflow_run_id") else ""
    return (f"outputs unchanged: {where} (same rows, aggregators, config and code as the job that wrote them: "
            f"nothing rewritten{mlflow}); leaderboard: {where / 'tables' / 'leaderboard.txt'}; "
            f"cases: {result.n_cases}  failed: {result.n_failed_cases}")
