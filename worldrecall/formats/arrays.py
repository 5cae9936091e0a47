"""Safe ``.npy`` / ``.npz`` reading: declared sizes are checked before anything is allocated.

``np.load`` trusts the array header: a 200-byte file declaring shape ``(10**12, 4, 4)`` asks for 128 TB
(``MemoryError`` with an empty message, or a worker killed by the OOM killer), and an ``.npz`` member is
inflated into a buffer sized from its header. Here the header is read first (``numpy.lib.format``) and
the array is refused, with one line naming the file and the limit, when

* it holds Python objects (pickled data is never loaded),
* it declares more bytes than the file (or the zip member) actually holds, or
* it declares more than the array cap for an array that would be read into memory (config
  ``inputs.max_array_bytes``, 4 GiB by default: :func:`worldrecall.core.limits.max_array_bytes`, read at each
  call; memory-mapped reads allocate nothing and are bounded by the file itself).

``.npz`` archives are also refused at open when a member is encrypted or uses a compression other than
stored/deflate (Deflate64, bzip2, lzma would fail later, when a row is read).
"""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path
from typing import IO, Any

import numpy as np

from worldrecall.core.data import CaseFailure, one_line
from worldrecall.core.limits import DEFAULT_MAX_ARRAY_BYTES, max_array_bytes

__all__ = ["MAX_ARRAY_BYTES", "check_zip_members", "load_npy", "load_npz", "npy_header", "npz_names"]

# the default cap (the run's own is inputs.max_array_bytes, read through core.limits at each call)
MAX_ARRAY_BYTES = DEFAULT_MAX_ARRAY_BYTES
_ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_LOAD_ERRORS = (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zipfile.LargeZipFile,
                NotImplementedError, RuntimeError, OverflowError)


def npy_header(fp: IO[bytes]) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header length) of the ``.npy`` stream at ``fp``'s current position (read, not loaded)."""
    start = fp.tell() if fp.seekable() else 0
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, _fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, _fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - the header parser tokenizes text: TokenError, SyntaxError, ...
        raise ValueError(f"malformed .npy header ({type(e).__name__})") from None
    return tuple(int(s) for s in shape), np.dtype(dtype), (fp.tell() if fp.seekable() else 0) - start


def _check_declared(where: str, shape: tuple[int, ...], dtype: np.dtype, available: int,
                    limit: int | None) -> None:
    if dtype.hasobject:
        raise CaseFailure(f"{where}: object array (pickled data is never loaded)")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > max(available, 0):
        raise CaseFailure(f"{where}: header declares shape {list(shape)} {dtype} ({nbytes} bytes) but only "
                          f"{max(available, 0)} bytes follow (truncated or forged header)")
    if limit is not None and limit > 0 and nbytes > limit:
        raise CaseFailure(f"{where}: array of shape {list(shape)} {dtype} is {nbytes} bytes, past the limit of "
                          f"{limit} bytes per array (inputs.max_array_bytes)")


def load_npy(path: Path | str, *, mmap: bool = False, limit: int | None = None) -> np.ndarray:
    """``np.load(path)`` (``allow_pickle=False``; ``mmap``: read-only memory map) after checking its header
    (``limit``: bytes in memory, default the run's array cap); every problem -> :class:`CaseFailure` naming
    the file."""
    path = Path(path)
    limit = max_array_bytes() if limit is None else limit
    try:
        with open(path, "rb") as f:
            shape, dtype, header = npy_header(f)
            _check_declared(str(path), shape, dtype, os.fstat(f.fileno()).st_size - header,
                            None if mmap else limit)
        return np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except CaseFailure:
        raise
    except _LOAD_ERRORS as e:  # truncated header, bad magic, unreadable file
        raise CaseFailure(f"{path}: unreadable .npy ({type(e).__name__}: {one_line(e, 200)})") from None


def check_zip_members(zf: zipfile.ZipFile, where: Path | str, *, max_member_bytes: int | None = None,
                      limit_name: str = "inputs.max_array_bytes") -> None:
    """Refuse a zip whose members are encrypted, use a method other than stored/deflate, or (with
    ``max_member_bytes``) inflate past that many bytes — at open, before any member is read."""
    for info in zf.infolist():
        if info.flag_bits & 0x1:
            raise CaseFailure(f"{where}: member {info.filename!r} is encrypted")
        if info.compress_type not in _ZIP_METHODS:
            raise CaseFailure(f"{where}: member {info.filename!r} uses zip compression method "
                              f"{info.compress_type} (supported: stored, deflate)")
        if max_member_bytes is not None and max_member_bytes > 0 and info.file_size > max_member_bytes:
            raise CaseFailure(f"{where}: member {info.filename!r} inflates to {info.file_size} bytes, past the "
                              f"limit of {max_member_bytes} bytes ({limit_name})")


def load_npz(path: Path | str, keys: tuple[str, ...] | None = None, *,
             limit: int | None = None) -> dict[str, np.ndarray]:
    """The arrays ``keys`` (default: all) of an ``.npz``, each header checked before it is inflated; a key
    that is absent is simply missing from the result. Problems -> :class:`CaseFailure` naming the file."""
    path = Path(path)
    limit = max_array_bytes() if limit is None else limit
    try:
        with zipfile.ZipFile(path) as zf:
            check_zip_members(zf, path)
            members = {n[:-4]: n for n in zf.namelist() if n.endswith(".npy")}
            wanted = list(members) if keys is None else [k for k in keys if k in members]
            for k in wanted:
                info = zf.getinfo(members[k])
                with zf.open(info) as f:
                    shape, dtype, header = npy_header(_Counting(f))
                _check_declared(f"{path}: member {k!r}", shape, dtype, info.file_size - header, limit)
        with np.load(path, allow_pickle=False) as z:
            return {k: np.asarray(z[k]) for k in wanted}
    except CaseFailure:
        raise
    except _LOAD_ERRORS as e:
        raise CaseFailure(f"{path}: unreadable .npz ({type(e).__name__}: {one_line(e, 200)})") from None


def npz_names(path: Path | str) -> list[str]:
    """The array names of an ``.npz`` (nothing inflated); an unreadable archive -> :class:`CaseFailure`."""
    try:
        with zipfile.ZipFile(path) as zf:
            return [n[:-4] for n in zf.namelist() if n.endswith(".npy")]
    except _LOAD_ERRORS as e:
        raise CaseFailure(f"{path}: unreadable .npz ({type(e).__name__}: {one_line(e, 200)})") from None


class _Counting:
    """A read-only stream wrapper that knows how many bytes were read (zip member streams cannot tell)."""

    def __init__(self, f: Any):
        self._f, self._n = f, 0

    def read(self, n: int = -1) -> bytes:
        b = self._f.read(n)
        self._n += len(b)
        return b

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._n
