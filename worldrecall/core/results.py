"""Per-case results on disk: append-only JSONL per shard, safe against crashes and kill -9.

Each finished (case, metric) is appended as one JSON line and fsynced, so a rerun of the same config
skips what is done. Reading tolerates a torn last line and keeps the last row per key, so a resumed run
never duplicates a row.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from worldrecall.core.data import ScoreRow


def shard_file(results_dir: Path, index: int, count: int) -> Path:
    return Path(results_dir) / f"rows-shard-{index:04d}-of-{count:04d}.jsonl"


def read_rows(paths: Iterable[Path]) -> list[ScoreRow]:
    """Rows from every file, last write per (benchmark, model, case, metric) wins; torn lines are ignored."""
    latest: dict[tuple[str, str, str, str], ScoreRow] = {}
    for p in sorted(paths):
        for row in _iter_file(p):
            latest[row.row_key] = row
    return sorted(latest.values(), key=lambda r: r.row_key)


def _iter_file(p: Path) -> Iterator[ScoreRow]:
    try:
        text = Path(p).read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            yield ScoreRow.from_json(json.loads(line))
        except (json.JSONDecodeError, TypeError, KeyError):
            continue  # a line torn by a crash mid-write; its case is simply recomputed


SYNC_EVERY_S = 1.0


class ResultStore:
    """Appends rows for one shard; knows which (case, metric) pairs are already final."""

    def __init__(self, results_dir: Path, index: int = 0, count: int = 1):
        self.dir = Path(results_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = shard_file(self.dir, index, count)
        self._repair_tail()
        self.done: dict[tuple[str, str, str, str], ScoreRow] = {r.row_key: r for r in read_rows([self.path])}
        self._f: Any = None
        self._synced = time.monotonic()
        self._appended = False

    def _repair_tail(self) -> None:
        # A kill -9 can leave a partial last line; terminate it so the next append starts cleanly.
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    def is_final(self, key: tuple[str, str, str, str]) -> bool:
        """ok and skipped rows are final; failed rows are retried on a rerun."""
        row = self.done.get(key)
        return row is not None and row.status in ("ok", "skipped")

    def append(self, row: ScoreRow) -> None:
        """Append one row. Flushed to the OS at once (a kill -9 loses nothing written); fsynced at most every
        ``SYNC_EVERY_S`` and on :meth:`close` (a power cut loses at most those rows, and they are recomputed)."""
        line = json.dumps(row.to_json(), sort_keys=True, allow_nan=True, default=json_default)
        if self._f is None:
            self._f = open(self.path, "a", encoding="utf-8")
        self._f.write(line + "\n")
        self._f.flush()
        now = time.monotonic()
        if now - self._synced >= SYNC_EVERY_S:
            os.fsync(self._f.fileno())
            self._synced = now
        self.done[row.row_key] = row
        self._appended = True

    def close(self) -> None:
        """fsync and close the shard file (the runner calls this when a run's rows are all written)."""
        if self._f is not None:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
            self._f = None

    def all_rows(self) -> list[ScoreRow]:
        """Every shard's rows as written (read back, so a resumed run sees what a fresh one would)."""
        if self._f is not None:
            self._f.flush()
        files = list(self.dir.glob("rows-shard-*.jsonl"))
        if not self._appended and files == [self.path]:  # nothing new (a warm rerun): the rows read at start
            return sorted(self.done.values(), key=lambda r: r.row_key)
        return read_rows(files)


def json_default(o: object) -> object:
    """JSON for numpy scalars/arrays and paths (rows, alignments, meta files); anything else is an error."""
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")
