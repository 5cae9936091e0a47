"""Path safety: paths read from manifests and sheets may never leave their data root."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path
from stat import S_ISLNK

from worldrecall.core.data import CaseFailure

# lstat errors that mean "nothing more of this path exists": the rest of it is taken as written, as
# ``Path.resolve()`` does (a manifest may name a file that is missing: its case says so later)
_ABSENT = (errno.ENOENT, errno.ENOTDIR)


def safe_join(root: Path | str, relative: str | Path, *, what: str = "path") -> Path:
    """``root / relative``, refusing absolute paths and ``..`` tricks (symlinks included) that escape ``root``."""
    try:  # a NUL byte (ValueError) or an over-long name (OSError) in a sheet/manifest cell: this case only
        real_root = os.path.realpath(root)
        rel = os.fspath(relative)
        if "\0" in rel:
            raise ValueError("embedded null byte")
        candidate = os.path.realpath(rel) if os.path.isabs(rel) else _resolve_below(real_root, rel)
        _check_usable(candidate)
    except (OSError, ValueError) as e:
        problem = getattr(e, "strerror", None) or e
        raise CaseFailure(f"{what} {str(relative)[:120]!r}: unusable path ({problem})") from None
    if candidate != real_root and not candidate.startswith(real_root.rstrip(os.sep) + os.sep):
        raise CaseFailure(f"{what} {str(relative)!r} escapes the data root {real_root}")
    return Path(candidate)


def _resolve_below(real_root: str, rel: str) -> str:
    """``realpath(real_root / rel)`` for a root already resolved: only ``rel``'s own components are looked at
    (one lstat each, where ``realpath`` would walk the root's again); the first symlink hands the rest to
    ``realpath``."""
    path = real_root
    parts = [p for p in rel.split(os.sep) if p not in ("", ".")]
    for i, part in enumerate(parts):
        if part == "..":  # everything up to here is free of links, so ".." is the parent folder
            path = os.path.dirname(path)
            continue
        nxt = os.path.join(path, part)
        try:
            st = os.lstat(nxt)
        except OSError as e:
            if e.errno in _ABSENT:
                return os.path.normpath(os.path.join(nxt, *parts[i + 1:]))
            raise
        if S_ISLNK(st.st_mode):
            return os.path.realpath(os.path.join(nxt, *parts[i + 1:]))
        path = nxt
    return path


def _check_usable(path: str) -> None:
    """Raise for a path the file system cannot take (a name too long, no permission), as ``Path.exists``
    would; a missing file is fine here."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno not in (*_ABSENT, errno.ELOOP, errno.EBADF):
            raise


def file_safe(name: str) -> str:
    """``name`` as a part of a file name we write (a plugin's benchmark or metric name): as it is when it is
    letters, digits, ``_`` and ``.``, else a digest of it (never a path or a separator, whatever the name)."""
    if name and all(c.isalnum() or c in "_." for c in name) and name.strip("."):
        return name
    return "h" + hashlib.sha256(name.encode()).hexdigest()[:16]
