"""The extent of a legacy Excel ``.xls`` worksheet, read from its cell records before any reader materialises it.

xlrd (pandas' ``.xls`` engine) pads every row of a sheet to its widest one (up to 65,536 rows x 256
columns: 16.7 million cells, each a Python object in pandas), whatever the file's size. Here the first
worksheet's cell records are walked (OLE2 compound file -> ``Workbook``/``Book`` stream -> BIFF records;
a bare BIFF2-4 stream directly) and the rows x columns xlrd would build are returned. Blank cells are not
counted, as xlrd skips them unless asked for formatting. Every problem is a ``ValueError`` with a short
reason; the caller names the file.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterator

__all__ = ["xls_extent"]

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_LAST_SECTOR = 0xFFFFFFFA  # ids at or past this end a chain (end of chain, free, FAT, DIFAT)
_BOF = {0x0809, 0x0409, 0x0209, 0x0009}
_EOF = 0x000A
_BOUNDSHEET = 0x0085
# records holding one non-blank cell, row and column first (BIFF2-8 spellings); MULRK holds a run of cells
_CELLS = {0x0002, 0x0003, 0x0004, 0x0005, 0x0006, 0x00D6, 0x00FD, 0x0203, 0x0204, 0x0205, 0x0206, 0x027E, 0x0406}
_MULRK = 0x00BD


def xls_extent(buf: bytes) -> tuple[int, int]:
    """(rows, columns) xlrd would materialise for the first worksheet of the ``.xls`` bytes ``buf``."""
    stream = _ole_stream(buf, ("Workbook", "Book")) if buf[:8] == _OLE_MAGIC else buf
    return _sheet_extent(stream, _first_sheet(stream))


def _ole_stream(buf: bytes, names: tuple[str, ...]) -> bytes:
    """The first of ``names`` in an OLE2 compound file (regular or mini stream)."""
    if len(buf) < 512:
        raise ValueError("truncated compound file header")
    ssz, mssz = 1 << struct.unpack_from("<H", buf, 0x1E)[0], 1 << struct.unpack_from("<H", buf, 0x20)[0]
    if ssz not in (512, 4096) or mssz != 64:
        raise ValueError(f"unsupported compound file sector sizes {ssz}/{mssz}")
    n_fat, dir_start, _, cutoff, mini_start, _, difat_next, n_difat = struct.unpack_from("<8I", buf, 0x2C)

    def sector(i: int) -> bytes:
        off = (i + 1) * ssz
        if i >= _LAST_SECTOR or off + ssz > len(buf):
            raise ValueError(f"sector {i} past the end of the file")
        return buf[off:off + ssz]

    difat = list(struct.unpack_from("<109I", buf, 0x4C))
    for _ in range(min(n_difat, len(buf) // ssz)):  # each DIFAT sector once: a looping chain ends here
        if difat_next >= _LAST_SECTOR:
            break
        entries = struct.unpack(f"<{ssz // 4}I", sector(difat_next))
        difat += entries[:-1]
        difat_next = entries[-1]
    fat_ids = [i for i in difat if i < _LAST_SECTOR][:n_fat]
    fat = _u32s(b"".join(sector(i) for i in fat_ids))

    def chain(start: int, table: array) -> list[int]:
        out, s = [], start
        while s < _LAST_SECTOR:
            if s >= len(table) or len(out) >= len(table):
                raise ValueError("broken or looping sector chain")
            out.append(s)
            s = table[s]
        return out

    entries = b"".join(sector(i) for i in chain(dir_start, fat))
    found = {}
    for at in range(0, len(entries) - 127, 128):
        e = entries[at:at + 128]
        n = min(struct.unpack_from("<H", e, 64)[0], 64)
        name = e[:max(n - 2, 0)].decode("utf-16-le", "replace")
        kind, start, size = e[66], *struct.unpack_from("<II", e, 116)
        found.setdefault(name if kind != 5 else "\0root", (kind, start, size))
    name = next((n for n in names if n in found and found[n][0] == 2), None)
    if name is None:
        raise ValueError(f"no {' or '.join(names)} stream")
    _, start, size = found[name]
    if size >= cutoff:
        data = b"".join(sector(i) for i in chain(start, fat))
    else:  # small streams live in the root entry's mini stream, 64-byte sectors indexed by the mini FAT
        root = found.get("\0root", (5, _LAST_SECTOR, 0))
        mini = b"".join(sector(i) for i in chain(root[1], fat))
        mini_fat = _u32s(b"".join(sector(i) for i in chain(mini_start, fat))) if mini_start < _LAST_SECTOR else _u32s(b"")
        data = b"".join(mini[i * 64:(i + 1) * 64] for i in chain(start, mini_fat))
    if len(data) < size:
        raise ValueError(f"{name} stream shorter than its declared {size} bytes")
    return data[:size]


def _u32s(raw: bytes) -> array:
    """Little-endian uint32s (a sector table) at 4 bytes each."""
    out = array("I", raw[:len(raw) // 4 * 4])
    if sys.byteorder == "big":
        out.byteswap()
    return out


def _records(stream: bytes, pos: int) -> Iterator[tuple[int, bytes]]:
    while pos + 4 <= len(stream):
        rc, n = struct.unpack_from("<HH", stream, pos)
        yield rc, stream[pos + 4:pos + 4 + n]
        pos += 4 + n


def _first_sheet(stream: bytes) -> int:
    """Offset of the first worksheet's BOF: 0 for a single-sheet BIFF2-4 stream, else the first worksheet
    BOUNDSHEET of the workbook globals (xlrd's sheet 0; charts and macro sheets are not sheets to it)."""
    first = next(_records(stream, 0), None)
    if first is None or first[0] not in _BOF:
        raise ValueError("no BIFF BOF record (not an .xls workbook)")
    if len(first[1]) >= 4 and struct.unpack_from("<H", first[1], 2)[0] != 0x0005:
        return 0  # the stream is one worksheet, no workbook globals
    for rc, data in _records(stream, 0):
        if rc == _BOUNDSHEET and len(data) >= 6 and data[5] == 0:
            return struct.unpack_from("<I", data)[0]
        if rc == _EOF:
            break
    raise ValueError("workbook lists no worksheet")


def _sheet_extent(stream: bytes, at: int) -> tuple[int, int]:
    records = _records(stream, at)
    bof = next(records, None)
    if bof is None or bof[0] not in _BOF:
        raise ValueError(f"worksheet offset {at} holds no BOF record")
    rows = cols = 0
    for rc, data in records:
        if rc == _EOF:
            break
        if rc in _CELLS and len(data) >= 4:
            r, c = struct.unpack_from("<HH", data)
        elif rc == _MULRK and len(data) >= 6:
            r, c = struct.unpack_from("<H", data)[0], struct.unpack_from("<H", data, len(data) - 2)[0]
        else:
            continue
        rows, cols = max(rows, r + 1), max(cols, c + 1)
    return rows, cols
