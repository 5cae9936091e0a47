"""Per-case results on disk: append-only JSONL per shard, safe against crashes and kill -9.

Each finished (case, metric) is appended as one JSON line with the key it was computed under, so a rerun of
the same config keeps exactly the rows whose key is unchanged. Reading tolerates a torn last line and keeps
the last row per (benchmark, model, case, metric), so a resumed run never duplicates a row; when a run's rows
are all written, rows superseded by a later one (a rerun whose inputs changed) are dropped from the file, so it
holds one row per (benchmark, model, case, metric). Appends and reads hold a shared lock on the file, the
compaction an exclusive one (tried, never waited for: another process appending skips it). The store keeps
every row of its shard as a reader of its line gets it (the line read back), so the rows a run aggregates
are exactly what a later reader of the file sees.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from worldrecall.core.data import ScoreRow
from worldrecall.core.results import json_default

SYNC_EVERY_S = 1.0


def shard_file(results_dir: Path, index: int, count: int) -> Path:
    return Path(results_dir) / f"rows-shard-{index:04d}-of-{count:04d}.jsonl"


def row_line(row: ScoreRow) -> str:
    """The row's line in a shard file (without the newline)."""
    return json.dumps(row.to_json(), sort_keys=True, allow_nan=True, default=json_default)


def parse_line(line: str) -> ScoreRow:
    """A row as a reader of the file gets it."""
    return ScoreRow.from_json(json.loads(line))


def read_rows(paths: Iterable[Path]) -> list[ScoreRow]:
    """Rows from every file, last write per (benchmark, model, case, metric) wins; torn lines are ignored."""
    latest: dict[tuple[str, str, str, str], ScoreRow] = {}
    for p in sorted(paths):
        for row in _iter_file(p):
            latest[row.row_key] = row
    return sorted(latest.values(), key=lambda r: r.row_key)


def _iter_file(p: Path) -> Iterator[ScoreRow]:
    try:
        with open(p, encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_SH)  # never a file half rewritten by a compaction
            text = f.read()
    except FileNotFoundError:
        return
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            yield parse_line(line)
        except (json.JSONDecodeError, TypeError, KeyError):
            continue  # a line torn by a crash mid-write; its case is simply recomputed


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

    def _repair_tail(self) -> None:
        # A kill -9 can leave a partial last line; terminate it so the next append starts cleanly.
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    def append(self, row: ScoreRow, flush: bool = True) -> ScoreRow:
        """Append one row; returns it as read back from its line (``row`` itself when it is such a row).

        Flushed to the OS at once unless ``flush=False`` (the runner flushes once after a case's rows: a kill -9
        loses at most that case's unflushed rows, recomputed on resume); fsynced at most every ``SYNC_EVERY_S``
        and on :meth:`close` (a power cut loses at most those rows, and they are recomputed)."""
        line = row_line(row)
        if self._f is None:
            self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  (kept open across appends)
        fcntl.flock(self._f, fcntl.LOCK_SH)
        try:
            self._f.write(line + "\n")
            self._f.flush()
        finally:
            fcntl.flock(self._f, fcntl.LOCK_UN)
        if flush:
            self.flush()
        kept = parse_line(line)
        self.done[row.row_key] = kept
        return kept

    def flush(self) -> None:
        """Hand what was appended to the OS (and fsync it when the last sync is ``SYNC_EVERY_S`` old)."""
        if self._f is None:
            return
        self._f.flush()
        now = time.monotonic()
        if now - self._synced >= SYNC_EVERY_S:
            os.fsync(self._f.fileno())
            self._synced = now

    def close(self) -> None:
        """fsync and close the shard file (the runner calls this when a run's rows are all written), then drop
        the rows a later row of the same place superseded (:meth:`compact`)."""
        if self._f is not None:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
            self._f = None
        self.compact()

    def compact(self) -> bool:
        """Rewrite the shard file with the last row of each (benchmark, model, case, metric), in the order they
        were written, when it holds superseded rows; skipped (False) while another process holds the file. In
        place, under an exclusive lock: a process appending with the file open appends after the rewrite."""
        try:
            f = open(self.path, "r+", encoding="utf-8")  # noqa: SIM115
        except FileNotFoundError:
            return False
        with f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
            last: dict[tuple[str, str, str, str], int] = {}  # place -> its last line's index
            for i, ln in enumerate(lines):
                try:
                    last[parse_line(ln).row_key] = i
                except (json.JSONDecodeError, TypeError, KeyError):
                    continue  # a torn line: dropped, its case is recomputed
            if len(last) == len(lines):
                return False
            kept = set(last.values())
            f.seek(0)
            f.write("".join(ln + "\n" for i, ln in enumerate(lines) if i in kept))
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        return True

    def all_rows(self) -> list[ScoreRow]:
        """Every shard's rows as written: this shard's as kept (each read back from its line when it was
        read or appended), the other shards' read from their files."""
        if self._f is not None:
            self._f.flush()
        others = [p for p in self.dir.glob("rows-shard-*.jsonl") if p != self.path]
        if not others:
            return sorted(self.done.values(), key=lambda r: r.row_key)
        return read_rows([*others, self.path])  # a shard file not written yet reads as no rows
