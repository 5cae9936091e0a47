"""Per-case results on disk: append-only JSONL per shard, safe against crashes and kill -9.

Each finished (case, metric) is appended as one JSON line with the key it was computed under, so a rerun of
the same config keeps exactly the rows whose key is unchanged. Reading tolerates a torn last line and keeps
the last row per (benchmark, model, case, metric), so a resumed run never duplicates a row; when a run's rows
are all written, rows superseded by a later one (a rerun whose inputs changed) are dropped from the file, so it
holds one row per (benchmark, model, case, metric). Appends and reads hold a shared lock on the file, the
compaction an exclusive one (tried, never waited for: another process appending skips it). The store keeps
every row of its shard as a reader of its line gets it (the line read back), so the rows a run aggregates
are exactly what a later reader of the file sees.

A case's alignment (``info["alignment"]``: phases, frame maps, the aligner's notes) is the same on each of its
rows, so it is stored once per shard, in ``alignments-shard-*.jsonl`` beside the rows file (one line
``{"ref": …, "alignment": …}`` per distinct alignment, ``ref`` the sha256 of its canonical JSON), and a row's
line carries ``info["alignment_ref"]`` in its place. Every reader here (:func:`read_rows`,
:func:`read_row_dicts`, ``worldrecall.testing``) restores it, so a row reads back exactly as it was computed;
an alignment line is written (and flushed) before the first row that refers to it. Rows files written before
(each row with its own copy) read as they always did.

While a run writes, its shard's rows go to that append-only file. When the run closes its store, the rows are
laid out by metric, ``rows-shard-0000-of-0001-<benchmark>-<metric>.jsonl`` (one line per place, in (model,
case) order), and the append-only file is removed: each part is kept once in the output root's blob store, so
a re-score or a sweep's job whose rows of a metric are those of an earlier job (every metric but the one it
re-scored) links that file instead of writing it again. A line holds what the row is, not how this run got it
(:data:`CACHE_FLAGS`, which the cache log records), so equal rows are equal bytes whatever the cache held. Parts
sort before their shard's append-only file: a run killed after its store was split once reads its parts, then
the rows it appended since, which win.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from worldrecall.core.data import ScoreRow
from worldrecall.core.paths import file_safe
from worldrecall.engine.cache.blobs import BlobStore, write_if_changed, write_shared
from worldrecall.engine.cache.explain import log_path
from worldrecall.engine.stages.row_digests import CACHE_FLAGS, canonical

SYNC_EVERY_S = 1.0
_ALIGNMENT_REF = re.compile(r'"alignment_ref": "([0-9a-f]+)"')  # in a canonical line (see split_alignment)


def shard_file(results_dir: Path, index: int, count: int) -> Path:
    return Path(results_dir) / f"rows-shard-{index:04d}-of-{count:04d}.jsonl"


def part_file(rows_file: Path, benchmark: str, metric: str) -> Path:
    """The file of a shard's rows of one benchmark's metric once its run is closed (see the module's
    docstring): ``rows-shard-0000-of-0001-<benchmark>-<metric>.jsonl``."""
    rows_file = Path(rows_file)
    return rows_file.with_name(f"{rows_file.stem}-{file_safe(benchmark)}-{file_safe(metric)}.jsonl")


def shard_parts(rows_file: Path) -> list[Path]:
    """A shard's per-metric files on disk (not its append-only file), sorted."""
    rows_file = Path(rows_file)
    return sorted(rows_file.parent.glob(f"{rows_file.stem}-*.jsonl"))


def rows_files(results_dir: Path) -> list[Path]:
    """Every rows file of a results folder in the order they are read (a later line wins): by shard, each
    shard's per-metric files, then its append-only file (name order gives exactly this)."""
    return sorted(Path(results_dir).glob("rows-shard-*.jsonl"))


def shards_on_disk(results_dir: Path) -> int:
    """How many shards wrote rows into the folder (each has an append-only file or its per-metric parts)."""
    return len({p.name[: len("rows-shard-0000-of-0000")] for p in rows_files(results_dir)})


def alignments_file(rows_file: Path) -> Path:
    """The file beside a shard's rows file that holds each of its alignments once."""
    rows_file = Path(rows_file)
    return rows_file.with_name(rows_file.name.replace("rows-shard-", "alignments-shard-", 1))


def split_alignment(d: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, str] | None]:
    """A row's JSON with its alignment replaced by ``alignment_ref``, and (ref, the alignment's JSON) — or the
    row unchanged and None when it has no alignment. ``d`` itself is not changed."""
    info = d.get("info")
    al = info.get("alignment") if isinstance(info, dict) else None
    if not isinstance(al, dict):
        return d, None
    text = canonical(al)
    ref = hashlib.sha256(text.encode()).hexdigest()[:32]
    return {**d, "info": {**{k: v for k, v in info.items() if k != "alignment"}, "alignment_ref": ref}}, (ref, text)


def restore_alignment(d: dict[str, Any], alignments: Mapping[str, Any]) -> dict[str, Any]:
    """A row's JSON as it was computed: ``alignment_ref`` replaced by the alignment it names (left as it is when
    the alignment is not known: the alignments file was removed)."""
    info = d.get("info")
    if not isinstance(info, dict) or "alignment_ref" not in info:
        return d
    al = alignments.get(info["alignment_ref"])
    if al is None:
        return d
    if isinstance(al, str):
        al = json.loads(al)
    d["info"] = {**{k: v for k, v in info.items() if k != "alignment_ref"}, "alignment": al}
    return d


def _without_run_flags(d: dict[str, Any]) -> dict[str, Any]:
    info = d.get("info")
    if isinstance(info, dict) and any(k in info for k in CACHE_FLAGS):
        return {**d, "info": {k: v for k, v in info.items() if k not in CACHE_FLAGS}}
    return d


def row_line(row: ScoreRow) -> str:
    """The row's line in a shard file (without the newline), its alignment in full (see :func:`split_alignment`
    for the line a :class:`ResultStore` writes)."""
    return canonical(row.to_json())


def parse_line(line: str, alignments: Mapping[str, Any] | None = None) -> ScoreRow:
    """A row as a reader of the file gets it (its alignment restored from ``alignments``, ref -> JSON)."""
    d = json.loads(line)
    return ScoreRow.from_json(restore_alignment(d, alignments) if alignments else d)


def read_alignments(paths: Iterable[Path]) -> dict[str, Any]:
    """ref -> alignment (parsed) from alignments files; torn lines are ignored."""
    out: dict[str, Any] = {}
    for p in paths:
        for line in _lines(p):
            try:
                d = json.loads(line)
                out[str(d["ref"])] = d["alignment"]
            except (json.JSONDecodeError, TypeError, KeyError):
                continue
    return out


def _alignments_beside(paths: Iterable[Path]) -> dict[str, Any]:
    folders = sorted({Path(p).parent for p in paths})
    return read_alignments(sorted(f for d in folders for f in d.glob("alignments-shard-*.jsonl")))


def read_rows(paths: Iterable[Path]) -> list[ScoreRow]:
    """Rows from every file, last write per (benchmark, model, case, metric) wins; torn lines are ignored;
    alignments restored from the alignments files beside them."""
    paths = sorted(paths)
    alignments = _alignments_beside(paths)
    latest: dict[tuple[str, str, str, str], ScoreRow] = {}
    for p in paths:
        for row in _iter_file(p, alignments):
            latest[row.row_key] = row
    return sorted(latest.values(), key=lambda r: r.row_key)


def read_row_dicts(results_dir: Path) -> list[dict[str, Any]]:
    """Every line of a results folder's rows files as JSON, in file order (superseded rows included), each
    with its alignment restored: what a plugin author's test reads (``worldrecall.testing``)."""
    files = rows_files(results_dir)
    alignments = _alignments_beside(files)
    out = []
    for p in files:
        for line in _lines(p):
            try:
                out.append(restore_alignment(json.loads(line), alignments))
            except json.JSONDecodeError:
                continue
    return out


def _lines(p: Path) -> list[str]:
    """The file's non-empty lines (none when it does not exist)."""
    try:
        with open(p, encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_SH)  # never a file half rewritten by a compaction
            text = f.read()
    except FileNotFoundError:
        return []
    return [ln for ln in (x.strip() for x in text.splitlines()) if ln]


def _iter_file(p: Path, alignments: Mapping[str, Any] | None = None) -> Iterator[ScoreRow]:
    for line in _lines(p):
        try:
            yield parse_line(line, alignments)
        except (json.JSONDecodeError, TypeError, KeyError):
            continue  # a line torn by a crash mid-write; its case is simply recomputed


def _read_shard(path: Path, parts: list[Path]) -> tuple[dict[str, Any], dict[tuple[str, str, str, str], ScoreRow],
                                                       dict[tuple[str, str, str, str], str], int]:
    """A shard's alignments, its rows by place as read back and their lines, and how many lines were read
    (the per-metric ``parts`` first: the append-only file at ``path`` holds newer rows)."""
    alignments = read_alignments([alignments_file(path)])
    done: dict[tuple[str, str, str, str], ScoreRow] = {}
    text: dict[tuple[str, str, str, str], str] = {}
    n = 0
    for f in [*parts, path]:
        for line in _lines(f):
            try:
                r = parse_line(line, alignments)
            except (json.JSONDecodeError, TypeError, KeyError):
                continue  # a line torn by a crash mid-write; its case is simply recomputed
            done[r.row_key], text[r.row_key] = r, line
            n += 1
    return alignments, done, text, n


class EarlierRows(Mapping):
    """The rows of the newest other finished results folder of the output root, same shard (read, never
    written): where a new results folder (a re-score, a sweep's job) computes a row's key and finds that folder's
    row of the same place under the same key, it takes that row and its line as they are, as a rerun keeps its
    own (:meth:`ResultStore.adopt`), instead of reading the row's score from the cache and writing it anew.

    Finished: its run wrote its cache log (after its rows were final). Which folder it is decides only how fast,
    never what: a row is taken only under the key computed now, and equal keys are equal rows."""

    def __init__(self, results_dir: Path, index: int, count: int):
        """Nothing is read until a row is asked for (a rerun that keeps its own rows never reads another folder)."""
        self._args = (Path(results_dir), index, count)
        self.dir: Path | None = None
        self._rows: dict[tuple[str, str, str, str], ScoreRow] | None = None
        self._text: dict[tuple[str, str, str, str], str] = {}
        self.alignments: dict[str, Any] = {}
        self._alignment_text: dict[str, str] = {}

    @property
    def rows(self) -> dict[tuple[str, str, str, str], ScoreRow]:
        """That folder's rows by place (those whose alignment it still holds), read on first use."""
        if self._rows is None:
            results_dir, index, count = self._args
            newest: tuple[int, Path] | None = None
            for log in results_dir.parent.glob(f"*/meta/{log_path(results_dir, index, count).name}"):
                folder = log.parents[1]
                try:
                    stamp = log.stat().st_mtime_ns
                except OSError:
                    continue
                if folder != results_dir and (newest is None or stamp > newest[0]):
                    newest = (stamp, folder)
            self._rows = {}
            if newest is not None:
                self.dir = newest[1]
                path = shard_file(self.dir, index, count)
                self.alignments, rows, self._text, _ = _read_shard(path, shard_parts(path))
                # a row whose alignment that folder lost reads back without it: not the row it was
                self._rows = {k: r for k, r in rows.items()
                              if not (isinstance(r.info, dict) and "alignment_ref" in r.info)}
        return self._rows

    def __getitem__(self, place: tuple[str, str, str, str]) -> ScoreRow:
        return self.rows[place]

    def __iter__(self) -> Iterator[tuple[str, str, str, str]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def holds(self, row: ScoreRow) -> bool:
        """Whether ``row`` is this folder's row of its place (one that :meth:`ResultStore.adopt` takes)."""
        return self._rows is not None and self._rows.get(row.row_key) is row

    def line(self, row: ScoreRow) -> str:
        return self._text[row.row_key]

    def alignment_line(self, ref: str) -> str | None:
        """The canonical JSON of the alignment ``ref`` names (None when its folder lost it)."""
        if ref not in self._alignment_text and ref in self.alignments:
            self._alignment_text[ref] = canonical(self.alignments[ref])
        return self._alignment_text.get(ref)


class ResultStore:
    """Appends rows for one shard; knows which (case, metric) pairs are already final."""

    def __init__(self, results_dir: Path, index: int = 0, count: int = 1, blobs: BlobStore | None = None):
        """``blobs``: the output root's blob store, where the per-metric files are kept once (None: each is
        a file of its own)."""
        self.dir = Path(results_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = shard_file(self.dir, index, count)
        self.alignments_path = alignments_file(self.path)
        self.blobs = blobs
        self._repair_tail(self.path)
        self._repair_tail(self.alignments_path)
        self.parts = shard_parts(self.path)
        # ref -> alignment (this shard's); place -> row as read back, and its line (what a part file holds);
        # lines read and appended: more than rows kept when some were superseded
        self.alignments, self.done, self._text, self._lines = _read_shard(self.path, self.parts)
        self._log_size = self.path.stat().st_size if self.path.exists() else 0  # what this store knows is there
        self._f: Any = None
        self._af: Any = None
        self._synced = time.monotonic()
        self._last_alignment: tuple[Any, str, str] | None = None  # (the object, its ref, its JSON)

    @staticmethod
    def _repair_tail(path: Path) -> None:
        # A kill -9 can leave a partial last line; terminate it so the next append starts cleanly.
        if path.exists() and path.stat().st_size:
            with open(path, "rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    def append(self, row: ScoreRow, flush: bool = True) -> ScoreRow:
        """Append one row; returns it as read back from its line (``row`` itself when it is such a row).

        Flushed to the OS at once unless ``flush=False`` (the runner flushes once after a case's rows: a kill -9
        loses at most that case's unflushed rows, recomputed on resume); fsynced at most every ``SYNC_EVERY_S``
        and on :meth:`close` (a power cut loses at most those rows, and they are recomputed)."""
        d, al = self._split(row)
        if al is not None and al[0] not in self.alignments:
            self._append_alignment(*al)
        line = canonical(_without_run_flags(d))
        self._write_line(line, flush)
        kept = parse_line(line, self.alignments)
        flags = {k: row.info[k] for k in CACHE_FLAGS if isinstance(row.info, dict) and k in row.info}
        if flags:  # how this run got it, for this run's cache log (not in the file)
            kept.info = {**kept.info, **flags}
        self.done[row.row_key], self._text[row.row_key] = kept, line
        return kept

    def adopt(self, row: ScoreRow, earlier: EarlierRows, flush: bool = True) -> ScoreRow:
        """Append ``row``, a row of ``earlier`` (:meth:`EarlierRows.holds`), as its line there: the bytes
        :meth:`append` would write for it (canonical, its alignment by reference, written here first when this
        shard lacks it), without encoding the row again or reading it back."""
        line = earlier.line(row)
        found = _ALIGNMENT_REF.search(line)
        ref = found.group(1) if found else None
        if ref is not None and ref not in self.alignments:
            text = earlier.alignment_line(ref)
            if text is None:  # its alignment is gone from that folder: written as any row is
                return self.append(row, flush)
            self._append_alignment(ref, text)
        self._write_line(line, flush)
        # how this run got it, for this run's cache log (not in the file): its score was known under its key
        kept = replace(row, info={**row.info, "cache_hit": True, "score_cache_hit": True})
        self.done[row.row_key], self._text[row.row_key] = kept, line
        return kept

    def _write_line(self, line: str, flush: bool) -> None:
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
        self._log_size += len(line.encode("utf-8")) + 1
        self._lines += 1

    def _split(self, row: ScoreRow) -> tuple[dict[str, Any], tuple[str, str] | None]:
        """:func:`split_alignment` of the row; a case's rows hold one alignment object (settled together), whose
        canonical JSON and ref are then taken once, not once per row."""
        info = row.info
        al = info.get("alignment") if isinstance(info, dict) else None
        last = self._last_alignment
        if last is not None and al is not None and al is last[0]:
            rest = {k: v for k, v in info.items() if k != "alignment"}
            return {**row.to_json(), "info": {**rest, "alignment_ref": last[1]}}, (last[1], last[2])
        d, split = split_alignment(row.to_json())
        self._last_alignment = (al, *split) if split is not None else None
        return d, split

    def _append_alignment(self, ref: str, text: str) -> None:
        """One alignment line, handed to the OS before the row that refers to it is written."""
        if self._af is None:
            self._af = open(self.alignments_path, "a", encoding="utf-8")  # noqa: SIM115
        fcntl.flock(self._af, fcntl.LOCK_SH)
        try:
            self._af.write('{"alignment": ' + text + ', "ref": "' + ref + '"}\n')
            self._af.flush()
        finally:
            fcntl.flock(self._af, fcntl.LOCK_UN)
        self.alignments[ref] = json.loads(text)

    def flush(self) -> None:
        """Hand what was appended to the OS (and fsync it when the last sync is ``SYNC_EVERY_S`` old)."""
        if self._f is None:
            return
        self._f.flush()
        now = time.monotonic()
        if now - self._synced >= SYNC_EVERY_S:
            if self._af is not None:  # the alignments a synced row refers to are synced with it
                os.fsync(self._af.fileno())
            os.fsync(self._f.fileno())
            self._synced = now

    def close(self) -> None:
        """fsync and close the shard file (the runner calls this when a run's rows are all written), then lay its
        rows out by metric (:meth:`split`); while another process appends to the same shard, drop the rows a
        later row of the same place superseded instead (:meth:`compact`)."""
        if self._af is not None:
            self._af.flush()
            os.fsync(self._af.fileno())
            self._af.close()
            self._af = None
        if self._f is not None:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
            self._f = None
        if not self.path.exists():
            return  # nothing appended since the rows were laid out: no file is written again
        if not self.split() and self._lines > len(self.done):
            self.compact()

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[Any]:
        """The shard's append-only file open for rewriting under an exclusive lock, tried and never waited for
        (None: no such file, or another process holds it)."""
        try:
            f = open(self.path, "r+", encoding="utf-8")  # noqa: SIM115
        except FileNotFoundError:
            yield None
            return
        with f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield None
                return
            yield f

    def split(self) -> bool:
        """Write the shard's rows as one file per metric of each benchmark (kept once in the blob store: equal
        rows, one file for every job that has them) and remove the append-only file. Done under the append-only file's
        exclusive lock, and only when it holds exactly what this store read and appended (False otherwise:
        another process of the same shard appends, and the file stays as it is)."""
        with self._exclusive() as f:
            if f is None or os.fstat(f.fileno()).st_size != self._log_size:
                return False
            by_metric: dict[tuple[str, str], list[tuple[str, str, str, str]]] = {}
            for place in sorted(self.done):  # (benchmark, model, case, metric)
                by_metric.setdefault((place[0], place[3]), []).append(place)
            written = []
            for (benchmark, metric), places in by_metric.items():
                text = "".join(self._text[k] + "\n" for k in places)
                path = part_file(self.path, benchmark, metric)
                if self.blobs is not None:
                    write_shared(path, text, self.blobs)
                else:
                    write_if_changed(path, text)
                written.append(path)
            for stale in set(self.parts) - set(written):  # read at start, its rows are in the new parts: a file of
                stale.unlink(missing_ok=True)             # another layout (per benchmark) would be read after them
            self.parts = sorted(written)
            self._compact_alignments({m for t in self._text.values() for m in _ALIGNMENT_REF.findall(t)})
            self.path.unlink()
        self._log_size, self._lines = 0, len(self.done)
        return True

    def compact(self) -> bool:
        """Rewrite the shard file with the last row of each (benchmark, model, case, metric), in the order they
        were written, when it holds superseded rows; skipped (False) while another process holds the file. In
        place, under an exclusive lock: a process appending with the file open appends after the rewrite."""
        with self._exclusive() as f:
            if f is None:
                return False
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
            last: dict[tuple[str, str, str, str], int] = {}  # place -> its last line's index
            refs: dict[int, str] = {}  # line index -> the alignment it refers to
            for i, ln in enumerate(lines):
                try:
                    r = parse_line(ln)
                except (json.JSONDecodeError, TypeError, KeyError):
                    continue  # a torn line: dropped, its case is recomputed
                last[r.row_key] = i
                if isinstance(r.info, dict) and "alignment_ref" in r.info:
                    refs[i] = str(r.info["alignment_ref"])
            if len(last) == len(lines):
                return False
            self._compact_alignments({refs[i] for i in last.values() if i in refs})
            kept = set(last.values())
            f.seek(0)
            f.write("".join(ln + "\n" for i, ln in enumerate(lines) if i in kept))
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        return True

    def _compact_alignments(self, refs: set[str]) -> None:
        """Rewrite the alignments file with the alignments the kept rows refer to, when it holds others (the
        rows file's exclusive lock is held: no process of this shard appends meanwhile)."""
        on_disk = read_alignments([self.alignments_path])
        if set(on_disk) <= refs:
            return
        text = "".join('{"alignment": ' + canonical(al) + ', "ref": "' + ref + '"}\n'
                       for ref, al in on_disk.items() if ref in refs)
        tmp = self.alignments_path.with_name(self.alignments_path.name + f".tmp{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as t:
            t.write(text)
            t.flush()
            os.fsync(t.fileno())
        os.replace(tmp, self.alignments_path)

    def lines_of(self, rows: Iterable[ScoreRow]) -> dict[tuple[str, str, str, str], str]:
        """The line each of ``rows`` was read back from, for the rows this store holds as they are (those of
        :meth:`all_rows` that came from this shard): what their digests are a function of."""
        return {r.row_key: self._text[r.row_key] for r in rows
                if self.done.get(r.row_key) is r and r.row_key in self._text}

    def all_rows(self) -> list[ScoreRow]:
        """Every shard's rows as written: this shard's as kept (each read back from its line when it was
        read or appended), the other shards' read from their files."""
        if self._f is not None:
            self._f.flush()
        if self._af is not None:
            self._af.flush()
        mine = {self.path, *self.parts}
        others = [p for p in rows_files(self.dir) if p not in mine]
        if not others:
            return sorted(self.done.values(), key=lambda r: r.row_key)
        return read_rows([*others, *mine])  # a shard file not written yet reads as no rows

