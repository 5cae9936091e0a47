"""What an output root's cache holds, and removing it: ``worldrecall cache info | clear | prune``.

A *kind* is a folder under ``cache_dir`` (the store's ``alignments``, ``measurements``, ``scores`` … and the
judges' ``judge_answers``), the file digests kept between runs (``file_digests.json`` and its journal), the
score rows' digests kept between jobs (``row_digests.json``) and the output root's blob store (``blobs``). Entries are files; an entry's mtime is when it was last written or read
(the store sets it on every read from disk), so a prune removes the least recently used first. Pruned one file at a time:
the content-addressed kinds (each file one entry under its key, or one blob under its digest). Kinds that are
not (a built suite's folder, per-case artifact folders, the digests file) are removed whole by ``clear`` only.
Removing anything here costs time on the next run, never results: a missing entry is computed again.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# what each kind holds (for `cache info`); a kind not named here is listed under its folder's name
KINDS = {
    "alignments": "alignment of a case by an aligner",
    "measurements": "metric measurement (arrays)",
    "scores": "metric score of a measurement",
    "input_notes": "reader notes kept beside a measurement",
    "skips": "a metric's skip decided while measuring (the case lacks what it needs)",
    "ingredients": "what a key was built from (cache explain)",
    "aggregates": "aggregator tables of a set of rows",
    "report_sections": "rendered report section",
    "report_pages": "a benchmark's report page of a set of rows (its file in the blob store, the pictures it shows)",
    "case_tables": "a benchmark's per-case table of a set of rows (its file in the blob store)",
    "table_parts": "a benchmark's file of a table written one file per benchmark (its file in the blob store)",
    "figures": "an aggregator's figures of the tables they show (their files in the blob store)",
    "report_thumbs": "report thumbnail",
    "video_facts": "video frame count and size",
    "backend_outputs": "a perception backend's output on its input (poses, embeddings …)",
    "judge_answers": "judge answer to a question list",
    "artifacts": "per-case artifact files of a score",
    "synthetic": "built synthetic suite",
    "file_digests.json": "input file digests kept between runs",
    "file_digests.learnt.jsonl": "input file digests learnt since file_digests.json was last written",
    "row_digests.json": "score rows' content digests by the line they were read from, kept between jobs",
    "blobs": "output root's blob store (logged files)",
}
# kinds laid out one entry per file under its key (or digest): pruned file by file
PRUNABLE = {"alignments", "measurements", "scores", "input_notes", "skips", "ingredients", "aggregates",
            "case_tables", "table_parts", "figures", "report_pages", "report_sections", "report_thumbs", "video_facts",
            "judge_answers", "blobs"}


@dataclass
class Kind:
    """One kind of entry in a cache: its name, where it lives, what it holds."""

    name: str
    path: Path

    @property
    def what(self) -> str:
        return KINDS.get(self.name, "")

    @property
    def prunable(self) -> bool:
        return self.name in PRUNABLE

    def files(self) -> Iterator[Path]:
        """Every entry file (temporary files of a write in progress left out)."""
        if self.path.is_file():
            yield self.path
            return
        for dirpath, _, names in os.walk(self.path):
            for n in names:
                if not n.startswith((".tmp-", ".now-")):
                    yield Path(dirpath) / n


def kinds(cache_dir: Path, output_root: Path | None) -> list[Kind]:
    """The kinds present in ``cache_dir`` (and the output root's blob store), by name."""
    out = []
    if cache_dir.is_dir():
        out = [Kind(p.name, p) for p in cache_dir.iterdir() if not p.name.startswith(".")]
    blobs = output_root / "blobs" if output_root is not None else None
    if blobs is not None and blobs.is_dir() and not any(k.path == blobs for k in out):
        out.append(Kind("blobs", blobs))
    return sorted(out, key=lambda k: k.name)


def known_kinds(cache_dir: Path, output_root: Path | None) -> list[str]:
    """Every kind name a user may name: those present and the store's own."""
    return sorted({*KINDS, *(k.name for k in kinds(cache_dir, output_root))})


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:  # removed meanwhile (another run's prune)
        return 0


def info(cache_dir: Path, output_root: Path | None) -> list[dict]:
    """One record per kind: name, what it holds, entries, bytes, path."""
    out = []
    for k in kinds(cache_dir, output_root):
        files = list(k.files())
        out.append({"kind": k.name, "what": k.what, "entries": len(files), "bytes": sum(map(_size, files)),
                    "path": str(k.path)})
    return out


def results_rows(output_root: Path | None) -> dict | None:
    """The output root's result rows (not cache: neither ``clear`` nor ``prune`` touches them), as a record
    like :func:`info`'s, or None without any."""
    files = sorted([*Path(output_root).glob("results/*/rows-shard-*.jsonl"),
                    *Path(output_root).glob("results/*/alignments-shard-*.jsonl")]) if output_root is not None else []
    if not files:
        return None
    return {"kind": "rows", "what": "result rows (results, not cache: never cleared or pruned)",
            "entries": len(files), "bytes": sum(map(_size, files)), "path": str(Path(output_root) / "results")}


def clear(cache_dir: Path, output_root: Path | None, kind: str | None = None) -> list[dict]:
    """Remove every kind (or the one named); returns what was removed, as :func:`info` counted it."""
    removed = []
    for rec, k in zip(info(cache_dir, output_root), kinds(cache_dir, output_root)):
        if kind is not None and k.name != kind:
            continue
        if k.path.is_dir():
            shutil.rmtree(k.path, ignore_errors=True)
        else:
            k.path.unlink(missing_ok=True)
        removed.append(rec)
    return removed


@dataclass
class Pruned:
    """What a prune removed and what is left."""

    entries: int
    bytes: int
    left_bytes: int
    over: int  # bytes still above --max-size (kinds that are cleared whole only)


def prune(cache_dir: Path, output_root: Path | None, *, older_than_s: float | None = None,
          max_bytes: int | None = None, now: float | None = None) -> Pruned:
    """Remove entries unused for ``older_than_s`` seconds, then the least recently used until the whole cache
    is at most ``max_bytes`` (only the kinds in :data:`PRUNABLE`)."""
    now = time.time() if now is None else now
    entries: list[tuple[float, int, Path]] = []
    total = 0
    for k in kinds(cache_dir, output_root):
        for f in k.files():
            try:
                st = f.stat()
            except OSError:
                continue
            total += st.st_size
            if k.prunable:
                entries.append((st.st_mtime, st.st_size, f))
    entries.sort(key=lambda e: (e[0], str(e[2])))  # least recently used first
    n = freed = 0
    for mtime, size, f in entries:
        old = older_than_s is not None and mtime < now - older_than_s
        big = max_bytes is not None and total - freed > max_bytes
        if not (old or big):
            break  # sorted by last use: no later entry is older, and the size is reached
        try:
            f.unlink()
        except OSError:
            continue
        n, freed = n + 1, freed + size
    _remove_empty_dirs(cache_dir)
    if output_root is not None:
        _remove_empty_dirs(output_root / "blobs")
    left = total - freed
    return Pruned(n, freed, left, max(0, left - max_bytes) if max_bytes is not None else 0)


def _remove_empty_dirs(root: Path) -> None:
    """The key-prefix folders a prune emptied (the kind folders themselves stay)."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        p = Path(dirpath)
        if p != root and p.parent != root and not dirnames and not filenames:
            try:
                p.rmdir()
            except OSError:
                pass


_DURATION = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[A-Za-z]*)")
UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, where: str) -> float:
    """``7d``, ``12h``, ``30m``, ``90s``, ``2w`` as seconds; anything else raises ``ValueError`` naming
    ``where``, with a did-you-mean for a unit close to a known one."""
    from worldrecall.registry.names import did_you_mean

    m = _DURATION.fullmatch(str(text).strip())
    unit = (m["unit"] if m else "").lower()
    spelled = {"sec": "s", "secs": "s", "second": "s", "seconds": "s", "min": "m", "mins": "m", "minute": "m",
               "minutes": "m", "hour": "h", "hours": "h", "day": "d", "days": "d", "week": "w", "weeks": "w"}
    unit = spelled.get(unit, unit)
    if m is None or unit not in UNITS_S:
        hint = did_you_mean(m["unit"], [*UNITS_S, *spelled]) if m and m["unit"] else ""
        what = f"unknown unit {m['unit']!r} in {text!r}" if m and m["unit"] else f"{text!r} is not a duration"
        raise ValueError(f"{where}: {what}; write a number and a unit: s, m, h, d, w (e.g. 7d, 12h)"
                         + (f"; {hint}" if hint else ""))
    return float(m["number"]) * UNITS_S[unit]


def human_bytes(n: int) -> str:
    """``1.5 MiB``: binary units, as sizes are written on the command line (``--max-size 2G``)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def table(records: Iterable[dict]) -> str:
    """``cache info`` as text: one line per kind and a total."""
    recs = list(records)
    lines = [f"{'kind':<18} {'entries':>8} {'bytes':>11}  what"]
    for r in recs:
        lines.append(f"{r['kind']:<18} {r['entries']:>8} {human_bytes(r['bytes']):>11}  {r['what']}")
    lines.append(f"{'total':<18} {sum(r['entries'] for r in recs):>8} "
                 f"{human_bytes(sum(r['bytes'] for r in recs)):>11}")
    return "\n".join(lines)
