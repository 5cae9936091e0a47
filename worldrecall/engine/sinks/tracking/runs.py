"""How a job is laid out in MLflow: one run per (benchmark, model) under the invocation's parent.

    single run:  parent ("<run_name>")              headline numbers, full config, tables, report
                 └─ "<model> · <benchmark>"          identical metric keys across models (NaN = n/a)
                 a rerun of the same config with the same tables reuses this run; with other numbers it
                 logs a new one and tags the earlier ones worldrecall.superseded_by / worldrecall.current
    sweep:       sweep parent (hydra callback)       sweep summary (table + plots across swept values)
                 └─ job "<override>"                 headline numbers, config, tables, report
                    └─ "<model> · <benchmark> · <override>"
    either way, a benchmark whose (benchmark, model) runs a current run already logged with the same content
    (a re-score's or a sweep's value that does not reach it) is not logged again: the job's tag
    ``worldrecall.same_as.<benchmark>`` names the run that holds them (:func:`holders`)

A benchmark that prints its own leaderboard (MemoBench) also gets that leaderboard's cells as
``leaderboard.<column label>`` at the printed scale (see :func:`leaderboard_metrics`).
Each (benchmark, model) run carries ``model``, ``benchmark``, ``backends``, ``config_hash`` and the
sweep's overrides as params, so MLflow's runs table, compare view and parallel coordinates put models
and swept values side by side. Durations are the job's real wall time. Every file is stored once in
the content-addressed blob store (:mod:`worldrecall.engine.cache.blobs`); per-case files are listed by a
small ``cases/index.json`` per run, never copied.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall.core.data import one_line
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)
from worldrecall.core.paths import file_safe
from worldrecall.core.tables import backend_signature
from worldrecall.engine.cache.blobs import BlobStore, write_shared
from worldrecall.engine.sinks.leaderboard_view import gate_not_measured
from worldrecall.engine.sinks.results_view import (
    column_rows,
    direction_label,
    metric_key,
    missing,
    summary,
    tables_of_kind,
    value_meta,
    view_ranks,
)
from worldrecall.engine.stages.row_digests import rows_digest

RUN_KEYS = ("n_cases", "n_failed_cases", "failure_rate")


def override_label(overrides: list[str]) -> str:
    """``benchmarks.memobench.metrics.ors.thresholds.area_max=0.3`` -> ``ors.thresholds.area_max=0.3``."""
    out = []
    for o in overrides:
        k, eq, v = o.partition("=")
        parts = k.lstrip("+~").split(".")
        out.append((".".join(parts[-3:]) if len(parts) > 3 else k.lstrip("+~")) + eq + v)
    return " ".join(out)


def per_model_metrics(result: Any, host: Any, means: Any = None) -> dict[tuple[str, str], dict[str, float]]:
    """(benchmark, model) -> metrics; every model of a benchmark gets the same keys (NaN where n/a). ``means``:
    the result's :func:`~worldrecall.engine.sinks.results_view.summary`, when the caller has it."""
    s = summary(host, result.tables) if means is None else means
    per: dict[tuple[str, str], dict[str, float]] = {}
    keys: dict[str, set[str]] = {}
    for bench, model, metric, value, mean, lo, hi in column_rows(s, "benchmark", "model", "metric", "value", "mean",
                                                             "ci_low", "ci_high"):
        k = metric_key(metric, value, bench, host)
        m = per.setdefault((bench, model), {})
        m[k] = _f(mean)
        if not (math.isnan(_f(lo)) and math.isnan(_f(hi))):
            m[f"{k}.ci_low"], m[f"{k}.ci_high"] = _f(lo), _f(hi)
        keys.setdefault(bench, set()).update(m)
    for (bench, model), lb in leaderboard_metrics(result, host).items():
        per.setdefault((bench, model), {}).update(lb)
        keys.setdefault(bench, set()).update(lb)
    cases: dict[tuple[str, str], dict[str, bool]] = {}
    for row in result.rows:
        c = cases.setdefault((row.benchmark, row.model), {})
        c[row.case_id] = c.get(row.case_id, False) or row.status == "failed"
        per.setdefault((row.benchmark, row.model), {})
    for (bench, model), variants in view_ranks(host, result.tables).items():
        m = per.setdefault((bench, model), {})
        first = variants.get("gated") or variants.get("all")  # the view printed first ranks the model
        m["rank"], m["rank_tied"] = first[0], float(first[1].split(" ", 1)[0].endswith("="))
        for variant, (rank, _) in variants.items():
            m[f"rank.{variant}"] = rank  # NaN: not ranked in that view (✗ never gated, – not applicable)
        keys.setdefault(bench, set()).update(k for k in m if k.startswith("rank"))
    for (bench, model), m in per.items():
        c = cases.get((bench, model), {})
        n, nf = len(c), sum(c.values())
        m.update({"n_cases": float(n), "n_failed_cases": float(nf), "failure_rate": nf / n if n else math.nan})
        for k in keys.get(bench, ()):
            m.setdefault(k, math.nan)  # not applicable for this model: logged as NaN, not dropped
    return per


def leaderboard_metrics(result: Any, host: Any) -> dict[tuple[str, str], dict[str, float]]:
    """The printed leaderboard's numbers at the printed scale, under the printed column labels.

    Every declared benchmark's ranked views (tables of kind ``view`` and the cells other aggregators add,
    ``view_columns``) are logged cell by cell as ``leaderboard.<label>`` (all cases) and
    ``leaderboard_gated.<label>`` (camera-gated), so the number a user reads in the console (MemoBench's
    CamCtrl in points, 93.67, where the metric's own mean is 0.937) is the number MLflow shows under that name.
    """
    frames = [*tables_of_kind(host, result.tables, "view").values(),
              *tables_of_kind(host, result.tables, "view_columns").values()]
    models = {(r.benchmark, r.model) for r in result.rows}
    out: dict[tuple[str, str], dict[str, float]] = {}
    for t in frames:
        for bench, model, variant, column, mean, lo, hi in column_rows(t, "benchmark", "model", "variant", "column",
                                                                    "mean", "ci_low", "ci_high"):
            if (bench, model) not in models:  # an imported official result row, not a model of this run
                continue
            prefix = "leaderboard" if variant == "all" else f"leaderboard_{variant}"
            key = f"{prefix}.{mlflow_key(str(column))}"
            m = out.setdefault((bench, model), {})
            m[key] = _f(mean)
            if not (math.isnan(_f(lo)) and math.isnan(_f(hi))):
                m[f"{key}.ci_low"], m[f"{key}.ci_high"] = _f(lo), _f(hi)
    return out


@functools.lru_cache(maxsize=4096)  # a pure function of a label; the same few labels come every job
def mlflow_key(label: str) -> str:
    """A column label as an MLflow metric name (letters, digits, ``_ - . /`` and spaces only)."""
    key = re.sub(r"[^A-Za-z0-9_\-./ ]+", "_", label).strip("_ ")
    return re.sub(r"_+", "_", key) or "value"


def headline_metrics(result: Any, host: Any, means: Any = None) -> tuple[dict[str, float], dict[str, str]]:
    """The invocation's headline: run counts and, per benchmark x primary metric, the best model's mean.
    ``means``: as :func:`per_model_metrics` takes it."""
    m: dict[str, float] = {"n_cases": float(result.n_cases), "n_failed_cases": float(result.n_failed_cases),
                           "failure_rate": float(result.failure_rate)}
    if "total" in result.timing:
        m["wall_s"] = float(result.timing["total"])
    tags: dict[str, str] = {}
    s = summary(host, result.tables) if means is None else means
    # (benchmark, metric, value) -> its rows' (model, mean), in the summary's order; groups in sorted order and
    # NaN keys left out, as ``groupby`` visits them (a few hundred groups a job: no sub-frame per group)
    groups: dict[tuple[Any, Any, Any], list[tuple[Any, float]]] = {}
    for bench, metric, value, model, mean in column_rows(s, "benchmark", "metric", "value", "model", "mean"):
        if not any(missing(k) for k in (bench, metric, value)):
            groups.setdefault((bench, metric, value), []).append((model, _f(mean)))
    for (bench, metric, value) in sorted(groups):
        cls = host.metrics.get(metric)
        if cls is None or getattr(cls, "primary", "") != value:
            continue
        meta = value_meta(host, metric, value)
        g = [(model, mean) for model, mean in groups[(bench, metric, value)] if not math.isnan(mean)]
        if meta is None or meta.higher_is_better is None or not g:
            continue
        best = g[0]  # the first of the best, as idxmax / idxmin take it
        for cand in g[1:]:
            if (cand[1] > best[1]) if meta.higher_is_better else (cand[1] < best[1]):
                best = cand
        key = f"{bench}.{metric_key(metric, value, bench, host)}"
        m[f"{key}.best"] = float(best[1])
        tags[f"best.{key}"] = f"{best[0]} ({direction_label(meta)})"
    return m, tags


def case_index(result: Any, blobs: BlobStore, output_root: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(benchmark, model) -> [{case_id, metric, file, sha256, bytes, blob}]: every per-case file, stored once."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in result.rows:
        for a in (r.info or {}).get("artifacts") or []:
            p = Path(a)
            if not p.is_file():
                continue
            digest, blob = blobs.put(p, link=True)
            entry = {"file": p.name, "sha256": digest, "bytes": p.stat().st_size,
                     "blob": os.path.relpath(blob, output_root)}
            out.setdefault((r.benchmark, r.model), []).append({"case_id": r.case_id, "metric": r.metric, **entry})
    return out


def job_rows_digest(result: Any) -> str:
    """The content digest of a result's rows (every value of every case), from the digests it carries."""
    return rows_digest(result.rows, result.row_digests or None)


def results_digest(files: list[Path], rows: str = "") -> str:
    """Hash of the job's rows (``rows``: their content digest, :func:`job_rows_digest`) and tables (every CSV
    among ``files``): equal digests = the same numbers, case by case."""
    h = hashlib.sha256(rows.encode())
    for p in sorted((Path(f) for f in files if Path(f).suffix == ".csv" and Path(f).exists()), key=_table_name):
        h.update(_table_name(p).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _table_name(p: Path) -> str:
    """A table file's name in its run, relative to its ``tables/`` folder: ``mean.csv``, ``ranking/memobench.csv``
    (a table written one file per benchmark, :func:`worldrecall.engine.sinks.files.table_files`), or
    ``cases/memobench/memobench.ors.csv`` (the per-case table, one file per metric)."""
    parts = Path(p).parts
    at = len(parts) - 1 - parts[::-1].index("tables") if "tables" in parts else len(parts) - 2
    return "/".join(parts[at + 1:])


SUPERSEDED_BY, CURRENT = "worldrecall.superseded_by", "worldrecall.current"


def earlier_invocations(tracker: Any, chash: str) -> list[Any]:
    """Top-level runs of the same config (hash) that no later run superseded (RUNNING ones are another
    process's and left alone)."""
    runs = tracker.search(f"tags.`worldrecall.config_hash` = '{chash}' and tags.`worldrecall.kind` = 'invocation'")
    return [r for r in runs if SUPERSEDED_BY not in r.data.tags and r.info.status != "RUNNING"]


def supersede(tracker: Any, runs: list[Any], by: str) -> None:
    """Tag earlier invocations and their per-model children as superseded by run ``by`` (kept, not deleted).
    A benchmark's children that a current run still points to (``worldrecall.same_as.<benchmark>``: the same
    numbers, not logged again there) stay current."""
    for run in runs:
        rid = run.info.run_id
        held = {k[len(LOGGED) + 1:] for k in run.data.tags if k.startswith(LOGGED + ".")}
        held = {b for b in held if tracker.search(f"tags.`{SAME_AS}.{b}` = '{rid}' and tags.`{CURRENT}` = 'true'",
                                                  max_results=1)}
        children = tracker.search(f"tags.`mlflow.parentRunId` = '{rid}'")
        tracker.set_tags(rid, {SUPERSEDED_BY: by, CURRENT: "false"})
        for r in children:
            if r.data.params.get("benchmark") not in held:
                tracker.set_tags(r.info.run_id, {SUPERSEDED_BY: by, CURRENT: "false"})


def job_metrics(result: Any, host: Any) -> dict[str, Any]:
    """What a job logs that depends on its result only: the headline and each model's metrics."""
    means = summary(host, result.tables)  # both read it: computed once
    return {"headline": headline_metrics(result, host, means), "models": per_model_metrics(result, host, means)}


@dataclass
class OpenJob:
    """A job whose runs exist (with their metrics, params, tags and per-case files) and whose own files are
    still to be logged (:func:`finish_job`). ``unchanged``: benchmark -> [run id, name] of the earlier run that
    holds its (benchmark, model) runs with the same content (not logged again by this job)."""

    job: str
    earlier: list[Any]
    unchanged: dict[str, list[str]] = field(default_factory=dict)


LOGGED, SAME_AS = "worldrecall.logged", "worldrecall.same_as"  # job tags: <prefix>.<benchmark>
# provenance tags that differ between the jobs of one sweep whatever their numbers
_PER_JOB_TAGS = ("worldrecall.results_dir", "worldrecall.overrides")
_TAG_SAFE = re.compile(r"[A-Za-z0-9_.\-]+")  # a benchmark name that can end a tag key and sit in a search filter


def benchmark_contents(children: list[Mapping[str, Any]], job_tags: Mapping[str, str]) -> dict[str, str]:
    """Per benchmark, a digest of everything its (benchmark, model) runs hold apart from the job they sit in:
    each run's metrics (NaN included), params and own tags, its per-case index, and the job's provenance
    (code, inputs, backends, packages). Left out: what names the job — the swept values (``override.*``
    params, the run name), the config hash, the results folder. Two jobs with equal digests would log the same
    runs for that benchmark."""
    shared = {k: v for k, v in job_tags.items() if k not in _PER_JOB_TAGS}
    per: dict[str, list[Any]] = {}
    for c in children:
        if not _TAG_SAFE.fullmatch(str(c["params"]["benchmark"])):
            continue  # a name MLflow's tag keys and filters cannot carry as it is: its runs are always logged
        params = {k: v for k, v in c["params"].items() if not k.startswith("override.") and k != "config_hash"}
        tags = {k: v for k, v in c["tags"].items() if k not in job_tags and k != "worldrecall.config_hash"}
        per.setdefault(str(params["benchmark"]), []).append(
            [params, tags, c["metrics"], Path(c["cases"]["blob"]).name if c["cases"] else None])
    return {bench: hashlib.sha256(json.dumps([shared, runs], sort_keys=True).encode()).hexdigest()[:16]
            for bench, runs in per.items()}


def holders(tracker: Any, contents: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """benchmark -> (run id, name) of the first finished, current job or invocation of the experiment that logged
    that benchmark's runs with the same content digest (:func:`benchmark_contents`): one search per benchmark."""
    found: dict[str, tuple[str, str]] = {}
    for bench, digest in sorted(contents.items()):
        runs = [r for r in tracker.search(f"tags.`{LOGGED}.{bench}` = '{digest}' and tags.`{CURRENT}` = 'true'")
                if r.info.status == "FINISHED"]
        if runs:
            first = min(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id))
            found[bench] = (first.info.run_id, first.info.run_name)
    return found


def plan_job(result: Any, plain: Mapping[str, Any], host: Any, files: list[Path], overrides: list[str],
             parent: str | None, run_name: str, job_tags: Mapping[str, str], params: Mapping[str, Any],
             blobs: BlobStore) -> dict[str, Any]:
    """What a job logs, as plain JSON, from the result (its rows and tables; ``files``: the tables' CSVs) and the
    plugins' declarations: the job's run and one child per (benchmark, model) with their tags, params and metrics
    (NaN kept), and each child's per-case files, stored once in ``blobs`` and listed by an index file. No
    MLflow call: :func:`open_planned` makes the runs from it, in the MLflow process."""
    chash = result.provenance.config_hash
    digest = results_digest(files, job_rows_digest(result))
    end = time.time()
    start = result.started_at or end  # the runner's own start (`aggregate` has none: its run is the merge)
    label = override_label(overrides)
    metrics = job_metrics(result, host)
    head, best_tags = metrics["headline"]
    job_tags_all = {**job_tags, **best_tags, "worldrecall.kind": "job" if parent else "invocation",
                    "worldrecall.config_hash": chash, "worldrecall.results_digest": digest, CURRENT: "true"}
    over = {f"override.{o.partition('=')[0].lstrip('+~')}": o.partition("=")[2] for o in overrides if "=" in o}
    backends_of: dict[tuple[str, str], set[str]] = {}
    for r in result.rows:
        if r.backend:
            backends_of.setdefault((r.benchmark, r.model), set()).add(backend_signature(r.backend))
    # a camera gate that gave no verdict is said on the model's run (and no pass rate is logged for it: not 0)
    unmeasured = gate_not_measured(pd.concat(list(tables_of_kind(host, result.tables, "view").values()) or
                                             [pd.DataFrame()], ignore_index=True))
    index = case_index(result, blobs, blobs.root.parent)
    index_dir = result.results_dir / "mlflow_index"
    for old in (d for d in (index_dir.iterdir() if index_dir.is_dir() else ()) if d.is_dir()):
        shutil.rmtree(old, ignore_errors=True)  # <benchmark>/<model>/index.json, as an earlier version wrote them
    children = []
    for (bench, model), model_metrics in sorted(metrics["models"].items()):
        backends = sorted(backends_of.get((bench, model), set()) - {"-"})
        entries = index.get((bench, model))
        cases = None
        if entries:
            # one folder for every run's index (a folder per run was 4 KB each on disk, 45 a job)
            idx = index_dir / f"{file_safe(bench)}--{file_safe(model)}.json"  # file_safe names hold no "--"
            idx.parent.mkdir(parents=True, exist_ok=True)
            write_shared(idx, json.dumps({"blob_root": str(blobs.root.parent), "files": entries}, indent=1), blobs)
            cases = {**file_entries([idx], blobs, {".json": "cases"})[0], "name": "index.json"}
        children.append({"name": f"{model} · {bench}" + (f" · {label}" if label else ""),
                         "tags": {**job_tags, "worldrecall.kind": "model", "worldrecall.config_hash": chash,
                                  CURRENT: "true", **({"worldrecall.camera_gate": one_line(
                                      f"not measured: {unmeasured[(bench, model)]}", 5000)}
                                      if (bench, model) in unmeasured else {})},
                         "metrics": model_metrics, "cases": cases, "params": {
                             "model": model, "benchmark": bench, "backends": ";".join(backends) or "-",
                             "backend_set": str((plain.get("models") or {}).get("set") or "-"),
                             "config_hash": chash, **over}})
    return {"config_hash": chash, "results_digest": digest, "parent": parent, "run_name": run_name,
            "start": start, "end": end, "tags": job_tags_all, "metrics": head, "params": dict(params),
            "children": children, "contents": benchmark_contents(children, job_tags)}


def open_planned(tracker: Any, plan: Mapping[str, Any]) -> tuple[str, bool] | OpenJob:
    """A job's runs, from a :func:`plan_job` plan (in the MLflow process, :mod:`.process`): the earlier run
    reused (a top-level invocation of the same config with the same rows and tables: nothing logged), or the
    job's run (under ``parent`` when given) and one child per (benchmark, model) made, with their metrics,
    params and per-case files. Then :func:`finish_job` logs the job's files. A run logged with other numbers
    tags the earlier runs of that config ``worldrecall.superseded_by=<new run>`` and
    ``worldrecall.current=false`` (sweep jobs always log: their sweep parent is new each time)."""
    parent = plan["parent"]
    earlier = earlier_invocations(tracker, plan["config_hash"]) if parent is None else []
    for run in earlier:
        if run.info.status == "FINISHED" and run.data.tags.get("worldrecall.results_digest") == plan["results_digest"]:
            tracker.set_tags(run.info.run_id, {"worldrecall.reused_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            return run.info.run_id, True
    start, end = plan["start"], plan["end"]
    # a benchmark's runs are logged only if no current run of the experiment holds the same ones (a sweep's
    # other jobs, a re-score's earlier run: the benchmarks the changed value does not reach)
    contents = plan.get("contents") or {}
    same = holders(tracker, contents) if contents else {}
    tags = {**plan["tags"], **{f"{LOGGED}.{b}": d for b, d in contents.items() if b not in same},
            **{f"{SAME_AS}.{b}": run_id for b, (run_id, _) in same.items()}}
    # the job's run, then its (benchmark, model) runs, through MLflow's public client
    job = tracker.start_run(plan["run_name"], parent_id=parent, start_time=start, tags=tags)
    try:
        tracker.log_batch(job, metrics=plan["metrics"], params=plan["params"])
        ids = []
        children = [c for c in plan["children"] if c["params"].get("benchmark") not in same]
        for c in children:
            child = tracker.start_run(c["name"], parent_id=job, start_time=start, tags=c["tags"])
            tracker.log_batch(child, metrics=c["metrics"], params=c["params"])
            tracker.end_run(child, "FINISHED", end_time=end)
            ids.append(child)
        for c, child in zip(children, ids):
            if c["cases"]:
                tracker.log_blob(child, c["cases"])
    except Exception:
        tracker.end_run(job, "FAILED")
        raise
    return OpenJob(job, earlier, {b: list(held) for b, held in sorted(same.items())})


_SUBFOLDER = {".csv": "tables", ".md": "tables", ".json": "meta", ".png": "plots", ".html": "report"}


def file_entries(files: list[Path], blobs: BlobStore, folders: Mapping[str, str] | None = None) -> list[dict]:
    """The job's files as :meth:`Tracker.log_blob` takes them — artifact folder, name, blob — each stored
    once in ``blobs`` (in the process whose digests are known: the job's). ``folders``: artifact folder by
    suffix (default: tables, meta, plots, report); a file without one, or gone, is left out."""
    out = []
    for p in dict.fromkeys(Path(f) for f in files):  # each file once, however often a sink listed it
        if p.parent.name == "assets" and p.parent.parent.name == "report":
            # the report's pictures are links to blobs already: logged as links to the same blob (MLflow
            # shows the page with its pictures), no byte copied for a rerun, a re-score or a sweep's job
            sub, link = "report/assets", True
        else:
            sub = (folders or _SUBFOLDER).get(p.suffix, "")
            # tables, the report and the index files are written whole (a new file each time): safe to hard-link
            link = sub in ("tables", "report", "cases")
            if sub == "tables":  # a table written one file per benchmark or metric: its folders under tables/
                sub = "/".join(["tables", *Path(_table_name(p)).parent.parts])
        if not sub or not p.exists():
            continue
        _, blob = blobs.put(p, link=link)
        out.append({"folder": sub, "name": p.name, "blob": str(blob), "source": str(p)})
    return out


def finish_job(tracker: Any, opened: OpenJob, entries: list[Mapping[str, str]]) -> tuple[str, bool]:
    """The job's files (tables, meta, plots, report; :func:`file_entries`), then its run's end."""
    job = opened.job
    try:
        for e in entries:
            tracker.log_blob(job, e)
        tracker.end_run(job, "FINISHED", end_time=time.time())
    except Exception:
        tracker.end_run(job, "FAILED")
        raise
    supersede(tracker, opened.earlier, job)
    return job, False


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan
