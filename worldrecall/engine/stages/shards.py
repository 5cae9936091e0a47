"""Shards are not sweep values: where a shard job's partial outputs go, and who merges the shards.

A multirun over ``shard.index`` splits one configuration's cases over jobs; every shard job appends its
rows to the configuration's one results folder. Each job's own tables see only the rows written so far, so
they are *partial*: written under ``<results>/partial/shard-<i>-of-<n>/`` with a note saying so, never over
the merged ``<results>/tables``, and never logged to MLflow or reported as a sweep value. The merged
result (tables, report, leaderboard, one MLflow run with its per-model runs) comes from the last shard of
a multirun to finish (exactly one job claims the merge) or from ``worldrecall aggregate``; a second merge
of unchanged rows logs nothing new.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from worldrecall.core.atomic import atomic_write_text
from worldrecall.engine.stages.row_store import rows_files

SHARD_KEYS = frozenset({"shard.index", "shard.count"})
MERGED_MARK = "merged_rows.json"


def is_shard_key(key: str) -> bool:
    """``shard.index`` / ``shard.count`` (with Hydra's ``+``/``~`` prefixes)."""
    return key.lstrip("+~") in SHARD_KEYS


def partial_dir(results_dir: Path, index: int, count: int) -> Path:
    """Where shard ``index`` of ``count`` writes its own (partial) tables, plots and report."""
    return Path(results_dir) / "partial" / f"shard-{index:04d}-of-{count:04d}"


def partial_note(index: int, count: int, n_cases: int) -> str:
    return (f"PARTIAL: shard {index + 1} of {count} (shard.index={index}); these tables cover the {n_cases} "
            f"case(s) written when this shard ended, not the merged result. The merged tables are in "
            f"../../tables once the last shard of a multirun ends or after `worldrecall aggregate "
            f"shard.count={count}`.\n")


def finish_shard(results_dir: Path, sweep_dir: Path, index: int, count: int) -> bool:
    """Record that shard ``index`` of this sweep ended; True for exactly one job: the one that merges.

    Every shard writes its marker, then looks for all of them; the last to write always sees them all, and
    an exclusive create decides between two that end at the same moment.
    """
    sweep_id = hashlib.sha256(str(Path(sweep_dir).resolve()).encode()).hexdigest()[:12]
    d = Path(results_dir) / "shards" / sweep_id
    d.mkdir(parents=True, exist_ok=True)
    atomic_write_text(d / f"done-{index}", str(sweep_dir))
    if not all((d / f"done-{i}").exists() for i in range(count)):
        return False
    try:
        os.close(os.open(d / "merge.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def rows_digest(results_dir: Path) -> str:
    """Content digest of every shard's rows file (what a merge's tables follow from)."""
    h = hashlib.sha256()
    for p in rows_files(results_dir):
        h.update(p.name.encode() + b"\0")
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def already_logged(results_dir: Path, digest: str) -> bool:
    """Were exactly these rows merged into MLflow before (by the last shard, or an earlier aggregate)?"""
    p = Path(results_dir) / "meta" / MERGED_MARK
    try:
        return json.loads(p.read_text()).get("digest") == digest
    except (OSError, ValueError):
        return False


def mark_logged(results_dir: Path, digest: str) -> None:
    atomic_write_text(Path(results_dir) / "meta" / MERGED_MARK, json.dumps({"digest": digest}))
