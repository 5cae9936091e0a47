"""Atomic file writes: readers see the old file or the whole new one, never a torn one (kill -9 safe)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: Path | str, write: Callable[[BinaryIO], None], *, fsync: bool = False) -> Path:
    """Call ``write`` on a temp file beside ``path``, then ``os.replace`` it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def atomic_write_text(path: Path | str, text: str, *, fsync: bool = False) -> Path:
    """Write ``text`` (UTF-8) atomically."""
    data = text.encode("utf-8")
    return atomic_write(path, lambda f: f.write(data), fsync=fsync)
