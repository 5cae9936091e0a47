"""Why a row was reused or computed again: ``worldrecall cache explain <benchmark> [model] [case] [metric]``.

Every run records, beside its rows, each row's keys (alignment, measurement, score), how it got the row (kept
from disk, score or measurement read from the store, computed) and the keys of the row that stood at the same
place before it — the same results folder's, else the most recent one of another run in the output root
(``<results>/meta/cache_log.json.gz``: gzipped JSON, a quarter of its size, since its keys and reasons were a
results folder's largest file after the rows; logs written before as ``cache_log.json`` are read too). The keys
are most of it and change with the metric a job re-scores, so they are kept per metric in ``meta/cache_keys/``
through the blob store: a re-score links the parts it did not change (:func:`read_log` joins them back). What
each key was built from is stored beside the entry it names, in the store's ``ingredients`` kind (the canonical JSON the key hashed: identities, digests, params). ``explain``
reads the newest log, prints each named row's ingredients and, for a row that was computed, which
ingredients differ from the previous row's.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from worldrecall.core.atomic import atomic_write
from worldrecall.core.data import ScoreRow
from worldrecall.core.paths import file_safe
from worldrecall.engine.cache.blobs import BlobStore, write_shared

STAGES = ("alignment", "measurement", "score")
OUTCOMES = {
    "kept": "reused: the row on disk was kept (its key is the one computed now)",
    "score": "reused: its score was read from the cache",
    "measurement": "measurement reused from the cache, scored again",
    "computed": "computed",
    "failed": "failed (a failure is never cached: computed again on the next run)",
    "skipped": "skipped",
}


class ExplainError(Exception):
    """Nothing to explain, or a name that is not in the last run (one line)."""


def log_path(results_dir: Path, index: int, count: int) -> Path:
    name = "cache_log.json.gz" if count == 1 else f"cache_log-shard-{index:04d}-of-{count:04d}.json.gz"
    return Path(results_dir) / "meta" / name


def log_files(folder: Path, pattern: str = "cache_log*") -> list[Path]:
    """The cache logs under ``folder`` matching ``pattern`` (a glob up to the log's name), as written now
    (``.json.gz``) and before (``.json``)."""
    return sorted([*Path(folder).glob(pattern + ".json.gz"), *Path(folder).glob(pattern + ".json")])


def keys_dir(path: Path) -> Path:
    """The folder of a log's key parts: ``meta/cache_keys/`` beside ``cache_log.json.gz`` (a shard's:
    ``cache_keys-shard-<i>-of-<n>/``), one ``<metric>.json.gz`` per metric."""
    return path.with_name(path.name[: -len(".json.gz")].replace("cache_log", "cache_keys", 1))


def read_log(path: Path) -> dict:
    """A cache log's document (gzipped or, written before, plain JSON), each row with its keys (``key``,
    ``keys``) from the log's key parts. A part that cannot be read leaves its rows without keys."""
    path = Path(path)
    data = path.read_bytes()
    doc = json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)
    if "keys" in doc:  # written since the keys moved to parts: join them back
        known: dict[tuple[str, ...], tuple[str, dict]] = {}
        for part in sorted((path.parent / str(doc["keys"])).glob("*.json.gz")):
            try:
                for place, key, keys in json.loads(gzip.decompress(part.read_bytes()))["rows"]:
                    known[tuple(place)] = (key, keys)
            except (OSError, ValueError, KeyError, TypeError):
                continue
        for e in doc.get("rows", []):
            e["key"], e["keys"] = known.get(tuple(e["place"]), ("", {}))
    return doc


def _logs(output_root: Path, exclude: Path | None = None) -> list[tuple[float, Path, dict]]:
    """Every run log of the output root, newest first."""
    out = []
    for p in log_files(Path(output_root) / "results", "*/meta/cache_log*"):
        if exclude is not None and p == exclude:
            continue
        try:
            doc = read_log(p)
            out.append((float(doc["finished_at"]), p, doc))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # torn or foreign: not a run to compare with
    return sorted(out, key=lambda t: t[0], reverse=True)


def _latest_elsewhere(output_root: Path, exclude: Path, needed: set[tuple[str, ...]]) -> dict[tuple[str, ...], dict]:
    """For each place in ``needed``, the entry of the newest other run's log that has it. Logs are read newest
    first (by their file's modification time: each is written once, when its run finishes) and reading stops
    once every place is found — a sweep's job or a re-score reads one earlier log, not all of them."""
    found: dict[tuple[str, ...], dict] = {}
    paths = []
    for p in log_files(Path(output_root) / "results", "*/meta/cache_log*"):
        if p != exclude:
            try:
                paths.append((p.stat().st_mtime_ns, p))
            except OSError:
                continue
    for _, p in sorted(paths, reverse=True):
        if len(found) >= len(needed):
            break
        try:
            entries = read_log(p)["rows"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # torn or foreign: not a run to compare with
        for e in entries:
            place = tuple(e["place"])
            if place in needed and place not in found:
                found[place] = {"from": p.parents[1].name, "key": e.get("key", ""), "status": e.get("status", ""),
                                "keys": e.get("keys") or {}}
    return found


def _from_rows(name: str, rows: Mapping[tuple[str, str, str, str], ScoreRow],
               needed: set[tuple[str, ...]]) -> dict[tuple[str, ...], dict]:
    """:func:`_latest_elsewhere`'s entries, from a run's rows rather than its log."""
    return {tuple(p): {"from": name, "key": r.key, "status": r.status, "keys": (r.info or {}).get("keys") or {}}
            for p, r in rows.items() if tuple(p) in needed}


def _outcome(row: ScoreRow, written: bool) -> str:
    info = row.info or {}
    if not written:
        return "kept"
    if row.status in ("failed", "skipped"):
        return row.status
    if info.get("score_cache_hit"):
        return "score"
    if info.get("cache_hit"):
        return "measurement"
    return "computed"


def write_log(results_dir: Path, index: int, count: int, rows: Iterable[ScoreRow],
              written: set[tuple[str, str, str, str]], before: Mapping[tuple[str, str, str, str], ScoreRow],
              mode: str, newest: tuple[str, Mapping[tuple[str, str, str, str], ScoreRow]] | None = None) -> Path:
    """Record this run's rows: keys, outcome, and the previous row's keys where this run wrote a row.
    ``newest``: (folder name, its rows by place) of the newest other run, when the caller has read them: the
    rows :func:`_latest_elsewhere` would find first, taken as they are (the others are looked up)."""
    path = log_path(results_dir, index, count)
    elsewhere: dict[tuple[str, ...], dict] | None = None
    entries, parts = [], {}
    for r in rows:
        info = r.info or {}
        prev = None
        if r.row_key in written:
            old = before.get(r.row_key)
            if old is not None:
                prev = {"from": Path(results_dir).name, "key": old.key, "status": old.status,
                        "keys": (old.info or {}).get("keys") or {}}
            else:  # a new place in this results folder: the last row another run had there
                if elsewhere is None:
                    needed = {tuple(x.row_key) for x in rows if x.row_key in written and x.row_key not in before}
                    elsewhere = _from_rows(*newest, needed) if newest is not None else {}
                    if len(elsewhere) < len(needed):
                        elsewhere.update(_latest_elsewhere(Path(results_dir).parents[1], path, needed - set(elsewhere)))
                prev = elsewhere.get(tuple(r.row_key))
        keys = info.get("keys") or {}
        if prev is not None and prev.get("key") == r.key and prev.get("keys") == keys:
            # most rows of a re-score or a sweep job: the previous row's keys are this row's, said once
            prev = {"from": prev["from"], "status": prev["status"], "same_keys": True}
        entries.append({"place": list(r.row_key), "status": r.status, "outcome": _outcome(r, r.row_key in written),
                        "alignment_hit": bool(info.get("alignment_hit")), "reason": r.reason, "previous": prev})
        parts.setdefault(r.metric, []).append([list(r.row_key), r.key, keys])
    _write_key_parts(keys_dir(path), parts, BlobStore(Path(results_dir).parents[1] / "blobs"))
    doc = {"finished_at": time.time(), "mode": mode, "results_dir": str(results_dir),
           "keys": keys_dir(path).name, "rows": entries}
    data = gzip.compress(json.dumps(doc, separators=(",", ":")).encode("utf-8"), compresslevel=1, mtime=0)
    atomic_write(path, lambda f: f.write(data))
    os.chmod(path, 0o644)  # readable like the other meta files (a temp file is created 0600)
    path.with_name(path.name[: -len(".gz")]).unlink(missing_ok=True)  # this folder's log as written before
    return path


def _write_key_parts(folder: Path, parts: Mapping[str, list], blobs: BlobStore) -> None:
    """The rows' keys, one file per metric (place order), through the blob store: the keys are most of a log
    (random hex does not compress) and a re-score or a sweep's job changes one metric's, so the parts of the
    others are links to the blobs an earlier job wrote. The per-run part (outcomes, previous rows) stays small."""
    written = []
    for metric, rows in sorted(parts.items()):
        text = json.dumps({"metric": metric, "rows": sorted(rows, key=lambda e: e[0])}, separators=(",", ":"),
                          sort_keys=True)
        written.append(write_shared(folder / f"{file_safe(metric)}.json.gz",
                                    gzip.compress(text.encode("utf-8"), compresslevel=1, mtime=0), blobs))
    for stale in set(folder.glob("*.json.gz")) - set(written):  # a metric this run no longer has
        stale.unlink(missing_ok=True)


def _select(entries: list[dict], names: Sequence[str]) -> list[dict]:
    from worldrecall.registry.names import unknown_name

    kinds = ("benchmark", "model", "case", "metric")
    out = entries
    for i, name in enumerate(names):
        known = {e["place"][i] for e in out}
        if i == 3:  # a metric by its full name or its short name within the benchmark
            short = {e["place"][3].split(".", 1)[-1]: e["place"][3] for e in out}
            name = short.get(name, name)
        if name not in known:
            shown = known | ({m.split(".", 1)[-1] for m in known} if i == 3 else set())
            raise ExplainError(unknown_name(kinds[i], name, shown, "worldrecall cache explain"))
        out = [e for e in out if e["place"][i] == name]
    return out


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a.b": leaf}`` of nested dicts (lists are leaves)."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for k in sorted(value):
            out.update(flatten(value[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def differences(old: Any, new: Any) -> list[tuple[str, Any, Any]]:
    """(path, old, new) of every ingredient that differs (absent: None)."""
    a, b = flatten(old), flatten(new)
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _written_out(e: Mapping[str, Any]) -> Mapping[str, Any]:
    """A log entry with its previous row's keys in full (:func:`write_log` writes ``same_keys`` instead of
    repeating this row's keys)."""
    prev = e.get("previous")
    if not (isinstance(prev, dict) and prev.get("same_keys")):
        return e
    prev = {k: v for k, v in prev.items() if k != "same_keys"}
    return {**e, "previous": {**prev, "key": e.get("key", ""), "keys": e.get("keys") or {}}}


def _short(v: Any, limit: int = 100) -> str:
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _why(e: Mapping[str, Any], ingredients: Mapping[str, Any], stored: Any, mode: str,
         here: str = "") -> list[str]:
    """What made this run compute (or re-score) the row, as far as the keys tell; ``here``: the name of the
    results folder the run wrote."""
    prev = e.get("previous")
    keys = e.get("keys") or {}
    if mode in ("refresh", "off"):
        return [f"cache.mode={mode}: every row is computed again"]
    if not prev:
        return ["no earlier row at this place in this output root: nothing stored under its keys"]
    pk = prev.get("keys") or {}
    where = f" (results {prev['from']})" if prev.get("from") else ""
    changed = [s for s in STAGES if pk.get(s) != keys.get(s) and (pk.get(s) or keys.get(s))]
    if not changed:
        if prev.get("status") not in ("ok", "skipped"):
            return [(f"same keys as the previous row{where}, which was {prev.get('status') or 'not final'}: "
                     "retried")]
        if e.get("outcome") == "score" and prev.get("from") and prev.get("from") != here:
            return [f"same keys as the previous row{where}: a new row in this results folder, its score read "
                    "from the cache"]
        return [(f"same keys as the previous row{where}; its stored entries were gone (cleared, pruned or "
                 "damaged) or its files were removed")]
    out = []
    for s in changed:
        old = stored(pk.get(s)) if pk.get(s) else None
        new = ingredients.get(s)
        if old is None or new is None:
            out.append(f"{s} key changed since the previous row{where} ({_short(pk.get(s) or '-', 12)} -> "
                       f"{_short(keys.get(s) or '-', 12)}); "
                       f"{'previous' if old is None else 'current'} ingredients not stored")
            continue
        diffs = differences(old, new)
        upstream = {"inputs.alignment", "inputs.measurement"}
        own = [d for d in diffs if d[0] not in upstream]
        if not own and diffs:
            out.append(f"{s} key changed because its upstream key did ({', '.join(d[0] for d in diffs)})")
            continue
        out.append(f"{s} key changed since the previous row{where}: "
                   + "; ".join(f"{p}: {_short(a)} -> {_short(b)}" for p, a, b in own[:12])
                   + (f"; … {len(own) - 12} more" if len(own) > 12 else ""))
    return out


def explain(output_root: Path, cache_dir: Path, names: Sequence[str], results_dir: Path | None = None,
            *, as_json: bool = False) -> Any:
    """The explanation of the named rows of the last run (text, or a list of dicts ``as_json``)."""
    from worldrecall.engine.cache.store import Store

    if results_dir is not None:
        docs = [read_log(p) for p in log_files(results_dir / "meta")]
        if not docs:
            raise ExplainError(f"{results_dir}: no run recorded there (no meta/cache_log.json.gz)")
    else:
        logs = _logs(output_root)
        if not logs:
            raise ExplainError(f"{output_root}: no run recorded there "
                               f"(run `worldrecall run output_root={output_root}` first)")
        newest = logs[0][1].parent
        docs = [doc for _, p, doc in logs if p.parent == newest]  # every shard of that results folder
    entries = [_written_out(e) for doc in docs for e in doc.get("rows", [])]
    mode, here = str(docs[0].get("mode", "use")), Path(str(docs[0].get("results_dir", ""))).name
    chosen = _select(entries, names)
    store = Store(cache_dir)

    def stored(key: str | None) -> Any:
        return store.get_json("ingredients", key) if key else None

    out = []
    for e in chosen:
        keys = e.get("keys") or {}
        ingredients = {s: stored(keys.get(s)) for s in STAGES}
        rec = {"benchmark": e["place"][0], "model": e["place"][1], "case": e["place"][2], "metric": e["place"][3],
               "status": e["status"], "outcome": e["outcome"], "alignment_reused": e.get("alignment_hit", False),
               "row_key": e.get("key", ""), "keys": keys, "ingredients": ingredients,
               "previous": e.get("previous"), "reason": e.get("reason", "")}
        rec["why"] = _why(e, ingredients, stored, mode, here) if e["outcome"] not in ("kept", "skipped") else []
        out.append(rec)
    if as_json:
        return out
    return _text(out, docs[0].get("results_dir", ""), mode)


def _text(recs: list[dict], results_dir: str, mode: str) -> str:
    lines = [f"last run: {results_dir}" + (f" (cache.mode={mode})" if mode != "use" else "")]
    for r in recs:
        lines.append("")
        place = f"{r['benchmark']} / {r['model']} / {r['case']} / {r['metric']}"
        reused = " (alignment reused)" if r["alignment_reused"] and r["outcome"] == "computed" else ""
        lines.append(f"{place}: {OUTCOMES.get(r['outcome'], r['outcome'])}{reused}")
        if r["reason"]:
            lines.append(f"  reason: {r['reason']}")
        for w in r["why"]:
            lines.append(f"  why: {w}")
        if r["row_key"]:
            lines.append(f"  row key: {r['row_key']}")
        for s in STAGES:
            key = r["keys"].get(s)
            if not key:
                continue
            ing = r["ingredients"].get(s)
            lines.append(f"  {s} key {key}" + ("" if ing is not None else "  (ingredients not stored)"))
            for path, v in flatten(ing or {}).items():
                if ing is not None:
                    lines.append(f"    {path}: {_short(v, 160)}")
    return "\n".join(lines)
