"""Content digests of input files: the one place where a file's state on disk is trusted.

A digest is reused, in this process and between runs (the persisted memo), only while the file's state is
exactly what it was when it was hashed: device, inode, size, modification time and change time (the
change time cannot be set back by ``cp -p``, ``tar x`` or ``rsync -t``, so a rewrite with its mtime restored
is still seen). As git does with its index, a file changed within the last :data:`RACY_S` seconds is hashed
every time and its digest is never kept: a write in the same clock tick as the hash could otherwise go
unseen. :func:`content_memo` keeps other facts read from a file (a container's frame count) under the file's
digest, so they too are trusted only through it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any

from worldrecall.core.atomic import atomic_write_text

RACY_S = 2.0  # seconds: a file changed more recently than this is hashed again every time
_DIGESTS: dict[tuple[str, int, int, int, int, int], str] = {}  # (path, dev, ino, size, mtime, ctime) -> sha256
_FACTS: dict[tuple[str, str], tuple[Any, bool]] = {}  # (kind, content digest) -> (fact, persist)
_LEARNT = [0]  # entries this process added since it last read or wrote the memo file


def file_digest(path: Path | str) -> str:
    """sha256 of a file, or of a folder (every regular file under it, by relative name and content)."""
    abspath = os.path.abspath(path)
    st = os.stat(abspath)
    if S_ISDIR(st.st_mode):
        h = hashlib.sha256()
        for rel, file, fst in _tree_files(abspath):
            h.update("/".join(rel).encode())
            h.update(_digest_of(file, fst).encode())
        return h.hexdigest()
    return _digest_of(abspath, st)


def _state(abspath: str, st: os.stat_result) -> tuple[str, int, int, int, int, int]:
    return (abspath, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _racy(st: os.stat_result) -> bool:
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_S * 1e9


def _digest_of(abspath: str, st: os.stat_result) -> str:
    key = _state(abspath, st)
    known = _DIGESTS.get(key)
    if known is not None:
        return known
    h = hashlib.sha256()
    with open(abspath, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    if not _racy(st):  # a file that may still change within its timestamp's tick is never trusted by state
        _DIGESTS[key] = digest
        _LEARNT[0] += 1
    return digest


def _tree_files(root: str) -> list[tuple[tuple[str, ...], str, os.stat_result]]:
    """Every regular file under ``root`` (symlinks to files included, linked folders not entered, unreadable
    ones skipped) as (parts relative to it, absolute path, stat), sorted by parts."""
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


def content_memo(path: Path | str, kind: str, compute: Callable[[], Any], persist: bool = False) -> Any:
    """``compute()`` (a fact read from the file at ``path``; callers never mutate it), kept under the file's
    content digest; ``persist``: also kept in the memo file between runs (JSON-able facts only)."""
    key = (kind, file_digest(path))
    if key not in _FACTS:
        _FACTS[key] = (compute(), persist)
        _LEARNT[0] += persist
    return _FACTS[key][0]


def load_digest_memo(path: Path | str) -> None:
    """Reuse the digests and facts an earlier run kept in ``path`` (each digest valid while its file's state
    is unchanged); an unreadable or older-format memo is ignored."""
    try:
        doc = json.loads(Path(path).read_text())
        if doc.get("format") != 2:
            return
        for rec in doc["digests"]:
            _DIGESTS[(str(rec[0]), *(int(x) for x in rec[1:6]))] = str(rec[6])
        for rec in doc["facts"]:
            _FACTS.setdefault((str(rec[0]), str(rec[1])), (rec[2], True))
    except (OSError, ValueError, TypeError, IndexError, KeyError, AttributeError):
        pass


def save_digest_memo(path: Path | str) -> None:
    """Write the memo when this process learnt something since it last read or wrote one."""
    if not _LEARNT[0]:
        return
    facts = [[*k, v] for k, (v, persist) in _FACTS.items() if persist]
    atomic_write_text(path, json.dumps({"format": 2, "digests": [[*k, v] for k, v in _DIGESTS.items()],
                                        "facts": facts}))
    _LEARNT[0] = 0
