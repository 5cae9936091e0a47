"""Deterministic file writing for the suite, with hard links instead of duplicate bytes.

Every file goes through :class:`SuiteFiles`: identical content written twice (the oracle's poses reused by
five counterfactuals, a depth stack that a colour-only failure leaves unchanged) becomes a hard link to
the first copy, and the other benchmark layouts link to the MemoBench copies. ``.npz`` archives are
written with fixed zip timestamps so the same arrays always give the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np


def npy_bytes(arr: np.ndarray) -> bytes:
    """``np.save`` bytes (no pickle)."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asanyarray(arr), allow_pickle=False)
    return buf.getvalue()


def npz_bytes(arrays: dict[str, np.ndarray], compress: bool = True) -> bytes:
    """An ``np.load``-able .npz archive with fixed member timestamps (byte-for-byte reproducible)."""
    buf = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for key, arr in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            # level 1: masks are mostly runs of one value, so fast deflate loses little size
            for attr in ("_compresslevel", "compress_level"):  # the name changed in Python 3.13
                if attr in zipfile.ZipInfo.__slots__:
                    setattr(info, attr, 1)
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(arr), allow_pickle=False)
    return buf.getvalue()


def json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1, ensure_ascii=False) + "\n").encode()


class SuiteFiles:
    """Writes files below ``root`` (relative POSIX paths only), de-duplicating identical bytes."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._by_digest: dict[str, Path] = {}
        self.bytes_written = 0
        self.bytes_linked = 0

    def path(self, rel: str) -> Path:
        rel_p = Path(rel)
        if rel_p.is_absolute() or ".." in rel_p.parts:
            raise ValueError(f"suite path {rel!r} must be relative and stay inside the suite")
        return self.root / rel_p

    def write(self, rel: str, data: bytes) -> str:
        """Write ``data`` to ``rel`` (or hard-link an existing identical file); returns ``rel``."""
        dst = self.path(rel)
        dst.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(data).hexdigest()
        src = self._by_digest.get(digest)
        if dst.exists():
            dst.unlink()
        if src is not None and src != dst:
            os.link(src, dst)
            self.bytes_linked += len(data)
        else:
            dst.write_bytes(data)
            self._by_digest[digest] = dst
            self.bytes_written += len(data)
        return rel

    def link(self, src_rel: str, dst_rel: str) -> str:
        """Hard-link an already written file to a second location."""
        src, dst = self.path(src_rel), self.path(dst_rel)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists():
            dst.unlink()
        os.link(src, dst)
        self.bytes_linked += src.stat().st_size
        return dst_rel

    def npy(self, rel: str, arr: np.ndarray) -> str:
        return self.write(rel, npy_bytes(arr))

    def npz(self, rel: str, compress: bool = True, **arrays: np.ndarray) -> str:
        return self.write(rel, npz_bytes(arrays, compress))

    def json(self, rel: str, obj: Any) -> str:
        return self.write(rel, json_bytes(obj))

    def text(self, rel: str, text: str) -> str:
        return self.write(rel, text.encode())
