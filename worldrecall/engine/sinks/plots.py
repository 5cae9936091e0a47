"""The plots sink: each aggregator draws its own tables (``Aggregator.plots``); the engine names no plugin."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worldrecall.core.data import one_line
from worldrecall.engine.cache import component_identity, key_of, store_for
from worldrecall.engine.cache.blobs import BlobStore, as_written, place_blob, write_shared, written_state
from worldrecall.engine.cache.frames import encode_tables
from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.stages.result import RunResult

log = logging.getLogger("worldrecall")


class PlotsSink:
    """``plots/``: every aggregator's figures; one aggregator that cannot plot is a warning, not a failure.

    An aggregator draws into a folder of its own, and each figure is then placed under ``plots/`` through the
    blob store (:func:`write_shared`): never rewritten in place, so the report and MLflow link it instead of
    keeping a copy, and a job that draws the same figure as an earlier one (a sweep's) adds no bytes. An
    aggregator that declares the tables it draws (``plots_from``) is drawn once per content of those tables:
    the cache's ``figures`` entry, under the tables' content and the aggregator's identity, names each figure's
    blob, and a job with the same tables links them (a missing blob draws them again)."""

    name = "plots"

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        pdir = result.results_dir / "plots"
        blobs = BlobStore(Path(result.config["output_root"]) / "blobs")
        store = store_for(result.config)
        out: list[Path] = []
        result.results_dir.mkdir(parents=True, exist_ok=True)  # the drawing folders are made inside it
        for name, agg in (getattr(ctx.host, "components", {}) or {}).get("aggregator", {}).items():
            inst = agg() if isinstance(agg, type) else agg
            key = figures_key(inst, result.tables)
            linked = _linked(store, key, pdir, blobs) if key else None
            if linked is not None:
                out.extend(linked)
                continue
            with tempfile.TemporaryDirectory(prefix=".plots-", dir=result.results_dir) as tmp:
                try:
                    drawn = [Path(p) for p in inst.plots(result.tables, Path(tmp))]
                except Exception as e:  # noqa: BLE001  (a plot must never cost the results)
                    log.warning("aggregator %s could not plot: %s", name, one_line(e))
                    continue
                kept: list[list[str]] = []
                for p in drawn:
                    inside = p.is_relative_to(tmp) and p.is_file()
                    if inside:
                        rel = p.relative_to(tmp)
                        placed = write_shared(pdir / rel, p.read_bytes(), blobs)
                        digest = blobs.digest(placed)
                        blob = blobs.path_for(digest, placed.suffix.lower())
                        kept.append([rel.as_posix(), digest, written_state(blob)])
                    else:  # a file the aggregator placed elsewhere: never kept for a later job
                        placed, key = p, None
                    out.append(placed)
                if key:
                    store.put_json("figures", key, {"files": kept})
        return out


def figures_key(agg: Any, tables: Mapping[str, Any]) -> str | None:
    """The ``figures`` key of an aggregator's plots: its identity and the content of the tables it declares it
    draws (``plots_from``); None when it declares none, or one of them is not a table the cache can encode."""
    names = getattr(agg, "plots_from", None)
    if names is None:
        return None
    enc = encode_tables({n: tables[n] for n in names if n in tables})
    if enc is None:
        return None
    content = hashlib.sha256(json.dumps(enc, sort_keys=True, allow_nan=True).encode()).hexdigest()
    return key_of(component_identity(agg), {"tables": content}, {"plots_from": list(names)})


def _linked(store: Any, key: str, pdir: Path, blobs: BlobStore) -> list[Path] | None:
    """The figures kept under ``key``, each placed under ``pdir`` as a link to its blob (None: drawn again)."""
    doc = store.get_json("figures", key)
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list):
        return None
    out = []
    for entry in files:
        if not (isinstance(entry, list) and len(entry) == 3):  # kept before blobs' states were: drawn again
            return None
        rel, digest, state = entry
        path = pdir / rel
        # a figure edited in place edited its blob: drawn again, never linked as it now reads
        if not (path.resolve().is_relative_to(pdir.resolve()) and
                as_written(blobs.path_for(str(digest), path.suffix.lower()), state) and
                place_blob(str(digest), path, blobs)):
            return None
        out.append(path)
    return out
