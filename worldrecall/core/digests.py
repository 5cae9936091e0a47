"""Content digests of input files, memoised per process and persisted between runs.

A case's fingerprint (and so every cache key) is built from these; the memo is keyed by
(path, mtime, size, inode), so an edited file is always re-hashed. :func:`stat_memo` keeps other facts a
loader reads from a file (a container's frame count and fps, a parsed sheet) under the same key, so a job
that finds the file unchanged does not open it again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any

from worldrecall.core.atomic import atomic_write_text

_DIGESTS: dict[tuple[str, int, int, int], str] = {}
_FACTS: dict[tuple[str, str, int, int, int], Any] = {}  # (kind, path, mtime, size, inode) -> (fact, persist)


def stat_memo(path: Path, kind: str, compute: Callable[[], Any], persist: bool = False) -> Any:
    """``compute()`` (a fact read from the file at ``path``, never mutated by callers), memoised while the
    file's path, mtime, size and inode are unchanged; ``persist``: kept in the digest memo between runs."""
    st = os.stat(path)
    key = (kind, os.path.abspath(path), st.st_mtime_ns, st.st_size, st.st_ino)
    if key not in _FACTS:
        value = compute()
        _FACTS[key] = (value, persist)
        _LEARNT[0] += persist
    return _FACTS[key][0]


def file_digest(path: Path) -> str:
    """sha256 of a file (or of a folder's files in sorted order), memoised by (path, mtime, size, inode)."""
    # the inode (with mtime and size) identifies the content; an absolute path without resolving symlinks
    # saves a realpath per file (thousands per warm run), and one stat tells a folder from a file
    abspath = os.path.abspath(path)
    st = os.stat(abspath)
    if S_ISDIR(st.st_mode):
        h = hashlib.sha256()
        for rel, file, fst in _tree_files(abspath):
            h.update("/".join(rel).encode())
            h.update(_digest_of(file, fst).encode())
        return h.hexdigest()
    return _digest_of(abspath, st)


def _digest_of(abspath: str, st: os.stat_result) -> str:
    key = (abspath, st.st_mtime_ns, st.st_size, st.st_ino)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(abspath, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _DIGESTS[key] = h.hexdigest()
        _LEARNT[0] += 1
    return _DIGESTS[key]


def _tree_files(root: str) -> list[tuple[tuple[str, ...], str, os.stat_result]]:
    """Every regular file under ``root`` (symlinks to files included, linked folders not entered, unreadable
    ones skipped) as (parts relative to it, absolute path, stat), sorted by parts: what
    ``sorted(p for p in Path(root).rglob("*") if p.is_file())`` lists, without a Path object per entry."""
    out = []
    for folder, _, names in os.walk(root):
        rel = tuple(folder[len(root) + 1:].split(os.sep)) if folder != root else ()
        for name in names:
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:  # a dangling link, or removed while listing: not a file
                continue
            if S_ISREG(st.st_mode):
                out.append(((*rel, name), path, st))
    return sorted(out, key=lambda t: t[0])


def load_digest_memo(path: Path) -> None:
    """Reuse digests (and persisted facts) a previous run computed (valid while path, mtime, size and inode
    are unchanged). The memo is a list of digest records, or ``{"digests": [...], "facts": [...]}``."""
    if str(path) in _SYNCED and _SYNCED[str(path)][0] == file_state(path):
        return  # this process read or wrote that very file: all of it is in memory
    try:
        doc = json.loads(Path(path).read_text())
        records, facts = (doc, []) if isinstance(doc, list) else (doc.get("digests") or [], doc.get("facts") or [])
        for rec in records:
            _DIGESTS[(rec[0], int(rec[1]), int(rec[2]), int(rec[3]))] = str(rec[4])
        for rec in facts:
            _FACTS.setdefault((str(rec[0]), str(rec[1]), int(rec[2]), int(rec[3]), int(rec[4])), (rec[5], True))
    except (FileNotFoundError, ValueError, TypeError, IndexError, AttributeError):
        pass
    _SYNCED[str(path)] = (file_state(path), -1)  # merged; what this process knew before is not in the file yet


def save_digest_memo(path: Path) -> None:
    """Write the memo (skipped when nothing was learnt since this process last read or wrote that file)."""
    if _SYNCED.get(str(path)) == (file_state(path), _LEARNT[0]):
        return
    facts = [[*k, v] for k, (v, persist) in _FACTS.items() if persist]
    atomic_write_text(path, json.dumps({"digests": [[*k, v] for k, v in _DIGESTS.items()], "facts": facts}))
    _SYNCED[str(path)] = (file_state(path), _LEARNT[0])


_SYNCED: dict[str, tuple[Any, int]] = {}  # memo file -> (its state, _LEARNT) when last read or written
_LEARNT = [0]  # digests and persisted facts computed by this process (not read from a memo file)


def file_state(path: Path | str) -> tuple[int, int, int] | None:
    """(mtime ns, size, inode) of a file, or None when it is gone: what the per-process memos check."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
