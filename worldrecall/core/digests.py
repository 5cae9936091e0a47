"""Content digests of input files, memoised per process and persisted between runs.

A case's fingerprint (and so every cache key) is built from these; the memo is keyed by
(path, mtime, size, inode), so an edited file is always re-hashed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from worldrecall.core.atomic import atomic_write_text

_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def file_digest(path: Path) -> str:
    """sha256 of a file (or of a folder's files in sorted order), memoised by (path, mtime, size, inode)."""
    path = Path(path)
    if path.is_dir():
        h = hashlib.sha256()
        for p in sorted(q for q in path.rglob("*") if q.is_file()):
            h.update(str(p.relative_to(path)).encode())
            h.update(file_digest(p).encode())
        return h.hexdigest()
    st = path.stat()
    # the inode (with mtime and size) identifies the content; an absolute path without resolving symlinks
    # saves a realpath per file (thousands per warm run)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size, st.st_ino)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def load_digest_memo(path: Path) -> None:
    """Reuse digests a previous run computed (valid while path, mtime, size and inode are unchanged)."""
    try:
        for rec in json.loads(Path(path).read_text()):
            _DIGESTS[(rec[0], int(rec[1]), int(rec[2]), int(rec[3]))] = str(rec[4])
    except (FileNotFoundError, ValueError, TypeError, IndexError):
        pass


def save_digest_memo(path: Path) -> None:
    atomic_write_text(path, json.dumps([[*k, v] for k, v in _DIGESTS.items()]))
