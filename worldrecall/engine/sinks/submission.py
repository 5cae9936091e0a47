"""The submission bundle: what a leaderboard or a paper asks for, in one folder per run.

``results/<run-key>/submission/``:

* ``aggregate.json`` — per declared benchmark its declaration (headline, ranking, gate) and each ranked view
  (camera-gated, all cases): per model its rank, rank label, case count and every cell with its mean, CI,
  unit and direction — the same numbers as ``tables/ranking/<benchmark>.csv`` and the printed leaderboard;
* ``cases/<benchmark>/<metric>.jsonl`` — per metric, one line per score row (benchmark, model, case, metric,
  status, reason, values, strata, backend, metric version), sorted; a metric whose rows did not change since a
  job wrote them is that file again (a hard link to its blob), so a re-score adds only the metric it changed;
* ``provenance.json`` — worldrecall's version and git commit, every plugin's version, the backends, the
  config hash, the input manifest hash (the cases scored) and, for a built-in suite, its content digest;
* ``schema.json`` — the JSON schema ``aggregate.json`` follows (checked by the tests).

Secrets never reach it: the bundle holds numbers, names and digests, not the config.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.engine.cache import code_digest
from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.cache.blobs import BlobStore, write_shared
from worldrecall.engine.sinks.files import metric_files
from worldrecall.engine.sinks.results_view import missing, tables_of_kind
from worldrecall.engine.stages.result import RunResult

SCHEMA_ID = "worldrecall.submission/1"

_NUM = {"type": ["number", "null"]}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": SCHEMA_ID,
    "type": "object",
    "required": ["schema", "benchmarks"],
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "benchmarks": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["declaration", "views"],
            "properties": {
                "declaration": {"type": "object", "required": ["name", "headline", "rank_by"]},
                "views": {"type": "array", "items": {
                    "type": "object", "required": ["variant", "title", "models"],
                    "properties": {
                        "variant": {"enum": ["gated", "all"]},
                        "title": {"type": "string"},
                        "note": {"type": "string"},
                        "models": {"type": "array", "items": {
                            "type": "object", "required": ["model", "rank", "rank_label", "n_cases", "cells"],
                            "properties": {
                                "model": {"type": "string"}, "rank": _NUM, "rank_label": {"type": "string"},
                                "n_cases": {"type": "integer"},
                                "cells": {"type": "object", "additionalProperties": {
                                    "type": "object", "required": ["mean", "ci_low", "ci_high", "unit", "direction"],
                                    "properties": {"mean": _NUM, "ci_low": _NUM, "ci_high": _NUM,
                                                   "unit": {"type": "string"}, "direction": {"enum": ["↑", "↓", "·"]},
                                                   "metric": {"type": "string"}}}},
                            }}},
                    }}},
            }}},
    },
}


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def aggregate_doc(result: Any, host: Any) -> dict[str, Any]:
    """``aggregate.json``: every declared benchmark's declaration and ranked views."""
    views = tables_of_kind(host, result.tables, "view")
    benches: dict[str, Any] = {}
    for name, t in views.items():
        for bench, view in _view_entries(t):
            decl = host.benchmarks.get(bench)
            entry = benches.setdefault(bench, {"declaration": decl.to_json() if decl else {"name": bench},
                                               "views": []})
            entry["views"].append(json.loads(view))
    return {"schema": SCHEMA_ID, "benchmarks": benches}


def _view_entries(t: Any) -> list[tuple[str, str]]:
    """A view table's views, each as (benchmark, the view as JSON), in the document's order.

    Read from the table's columns once (a view table holds every benchmark's views: a few hundred cells), in
    the order pandas would give them: views by (benchmark, order, variant), a view's rows by position as
    ``sort_values`` sorts them (numpy's quicksort), models in order of first appearance."""
    names = ("benchmark", "order", "variant", "title", "note", "model", "position", "rank", "rank_label",
             "n_cases", "column", "mean", "ci_low", "ci_high", "unit", "direction", "metric")
    col = {c: t[c].tolist() for c in names}
    views: dict[tuple[Any, Any, Any], list[int]] = {}
    for i, key in enumerate(zip(col["benchmark"], col["order"], col["variant"])):
        if not any(missing(k) for k in key):  # groupby leaves out a view without a key
            views.setdefault(key, []).append(i)
    out = []
    for (bench, _, variant), rows in sorted(views.items(), key=lambda kv: kv[0]):
        positions = np.asarray([col["position"][i] for i in rows])
        if positions.dtype.kind not in "iu":  # a missing position: pandas' own sort decides where it goes
            return _view_entries_by_pandas(t)
        models: dict[Any, list[int]] = {}
        for j in np.argsort(positions, kind="quicksort").tolist():
            models.setdefault(col["model"][rows[j]], []).append(rows[j])
        entries = []
        for model, mine in models.items():
            first = mine[0]
            cells = {str(col["column"][i]): {"mean": _num(col["mean"][i]), "ci_low": _num(col["ci_low"][i]),
                                             "ci_high": _num(col["ci_high"][i]), "unit": str(col["unit"][i]),
                                             "direction": str(col["direction"][i]), "metric": str(col["metric"][i])}
                     for i in mine}
            entries.append({"model": str(model), "rank": _num(col["rank"][first]),
                            "rank_label": str(col["rank_label"][first]), "n_cases": int(col["n_cases"][first]),
                            "cells": cells})
        out.append((str(bench), json.dumps({"variant": str(variant), "title": str(col["title"][rows[0]]),
                                            "note": str(col["note"][rows[0]]), "models": entries})))
    return out


def _view_entries_by_pandas(t: Any) -> list[tuple[str, str]]:
    out = []
    for (bench, order, variant), v in t.groupby(["benchmark", "order", "variant"], sort=True):
        models = []
        for model, m in v.sort_values("position").groupby("model", sort=False):
            rows = list(m.itertuples(index=False))
            cells = {str(r.column): {"mean": _num(r.mean), "ci_low": _num(r.ci_low), "ci_high": _num(r.ci_high),
                                     "unit": str(r.unit), "direction": str(r.direction), "metric": str(r.metric)}
                     for r in rows}
            models.append({"model": str(model), "rank": _num(rows[0].rank), "rank_label": str(rows[0].rank_label),
                           "n_cases": int(rows[0].n_cases), "cells": cells})
        out.append((str(bench), json.dumps({"variant": str(variant), "title": str(v["title"].iloc[0]),
                                            "note": str(v["note"].iloc[0]), "models": models})))
    return out


def provenance_doc(result: RunResult) -> dict[str, Any]:
    """``provenance.json``: code, plugin and backend versions, config hash, input and suite digests."""
    prov = result.provenance
    doc: dict[str, Any] = {
        "worldrecall_version": prov.worldrecall_version, "git_commit": prov.git_commit,
        "config_hash": prov.config_hash, "plugins": {k: dict(v) for k, v in prov.plugins.items()},
        "backends": dict(prov.backends), "input_manifest_sha256": prov.input_manifest_sha256,
        "n_cases": result.n_cases, "n_failed_cases": result.n_failed_cases,
    }
    if prov.suite:
        doc["suite"] = dict(prov.suite)
    if prov.cpu_kernels:
        doc["cpu_kernels"] = dict(prov.cpu_kernels)
    if prov.packages:
        doc["packages"] = dict(prov.packages)
    if prov.identities:
        doc["identities"] = json.loads(json.dumps(prov.identities, default=str))
    if prov.modified:
        doc["modified_working_tree"] = dict(prov.modified)
    return doc


def cases_lines(rows: list[Any]) -> str:
    """A ``cases/<benchmark>/<metric>.jsonl`` part: the rows (sorted by the caller), one JSON object per line."""
    keys = ("benchmark", "model", "case_id", "metric", "status", "reason", "values", "strata", "backend",
            "metric_version", "warnings")
    return "".join(json.dumps({k: getattr(r, k) for k in keys}, sort_keys=True, default=str) + "\n" for r in rows)


def case_files(result: Any, out: Path) -> list[Path]:
    """``cases/<benchmark>/<metric>.jsonl``, one file per metric, shared as :func:`~.files.metric_files` shares a
    part."""
    return metric_files(result, out / "cases", ".jsonl", {"name": "submission.cases", "code": code_digest(__name__)},
                           cases_lines)


class SubmissionSink:
    """Writes the bundle under ``results/<key>/submission/``."""

    name = "submission"

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        out = Path(result.results_dir) / "submission"
        out.mkdir(parents=True, exist_ok=True)
        docs = {"aggregate.json": aggregate_doc(result, ctx.host), "provenance.json": provenance_doc(result),
                "schema.json": SCHEMA}
        blobs = BlobStore(Path(result.config["output_root"]) / "blobs")
        paths = [write_shared(out / name, json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n", blobs)
                 for name, doc in docs.items()]
        paths += case_files(result, out)
        return paths
