"""A small OpenEXR codec for ViPE depth: single-part scanline files, NONE/RLE/ZIPS/ZIP compression,
HALF/FLOAT/UINT channels — what ViPE writes. OpenCV wheels are built without OpenEXR, so it lives here.

Every problem is a :class:`~worldrecall.core.data.CaseFailure` with a one-line reason.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from worldrecall.core.data import CaseFailure, one_line
from worldrecall.core.video import DEFAULT_MAX_PIXELS

__all__ = ["MAX_EXR_BYTES", "MAX_EXR_BYTES_PER_PIXEL", "MAX_EXR_PIXELS", "ExrLimitError", "decode_exr", "encode_exr"]

# the per-frame pixel cap of video input (core.video.DEFAULT_MAX_PIXELS, config video.max_pixels' default):
# a forged data window (2^31 x 2^31) is refused before the output array is allocated
MAX_EXR_PIXELS = DEFAULT_MAX_PIXELS
MAX_EXR_BYTES = MAX_EXR_PIXELS * 4 + 2**20  # one float32 channel (ViPE's Z) at the cap, plus header/offsets
# what a frame's data window may decode to, every channel together, per pixel of the cap: two 32-bit channels
# (ViPE writes one). A header declaring many channels over a window under the pixel cap is refused before any
# chunk is inflated; with chunks inflated to their declared size at most, decoding stays within ~3x this.
MAX_EXR_BYTES_PER_PIXEL = 8


class ExrLimitError(CaseFailure):
    """An EXR whose declared size passes a limit (never decoded)."""


# ------------------------------------------------------------------------------------------------------
# EXR codec (single-part scanline; NONE / RLE / ZIPS / ZIP)
# ------------------------------------------------------------------------------------------------------
_EXR_MAGIC = 20000630
_EXR_TYPES = {0: ("uint32", 4), 1: ("float16", 2), 2: ("float32", 4)}
_EXR_LINES = {0: 1, 1: 1, 2: 1, 3: 16}  # scanlines per chunk for the supported compressions
_EXR_COMPRESSION = {"none": 0, "rle": 1, "zips": 2, "zip": 3}


def _exr_header(buf: bytes) -> tuple[dict[str, tuple[str, bytes]], int]:
    if len(buf) < 8:
        raise CaseFailure("truncated EXR (no header)")
    magic, version = struct.unpack_from("<ii", buf, 0)
    if magic != _EXR_MAGIC:
        raise CaseFailure("not an EXR file (bad magic number)")
    flags = version >> 8
    if flags & 0x02:
        raise CaseFailure("unsupported EXR: tiled image")
    if flags & 0x18:
        raise CaseFailure("unsupported EXR: multi-part or deep data")
    pos, attrs = 8, {}
    while True:
        end = buf.find(b"\0", pos)
        if end < 0:
            raise CaseFailure("truncated EXR header")
        nm = buf[pos:end].decode("latin-1")
        pos = end + 1
        if not nm:
            return attrs, pos
        end = buf.find(b"\0", pos)
        if end < 0 or end + 5 > len(buf):
            raise CaseFailure("truncated EXR header")
        typ = buf[pos:end].decode("latin-1")
        (size,) = struct.unpack_from("<i", buf, end + 1)
        pos = end + 5
        if size < 0 or pos + size > len(buf):
            raise CaseFailure("truncated EXR header")
        attrs[nm] = (typ, buf[pos:pos + size])
        pos += size


def _exr_channels(raw: bytes) -> list[tuple[str, int]]:
    out, pos = [], 0
    while pos < len(raw) and raw[pos] != 0:
        end = raw.index(b"\0", pos)
        nm = raw[pos:end].decode("latin-1")
        ptype, _plin, xs, ys = struct.unpack_from("<iB3xii", raw, end + 1)
        if xs != 1 or ys != 1:
            raise CaseFailure(f"unsupported EXR: subsampled channel {nm!r}")
        if ptype not in _EXR_TYPES:
            raise CaseFailure(f"unsupported EXR: pixel type {ptype} of channel {nm!r}")
        out.append((nm, ptype))
        pos = end + 1 + 16
    return out


def _undo_predictor(data: bytes) -> bytes:
    """Reverse the EXR zip/rle byte predictor and the even/odd byte split.

    Byte arithmetic wraps modulo 256 in uint8 itself (the predictor's own arithmetic), so the chunk is never
    widened: a 160 MB chunk needs ~3 copies of itself, not 8 bytes per byte."""
    d = np.frombuffer(data, dtype=np.uint8).copy()
    if d.size == 0:
        return b""
    d[1:] -= np.uint8(128)
    t = np.cumsum(d, dtype=np.uint8)
    half = (t.size + 1) // 2
    out = np.empty_like(t)
    out[0::2] = t[:half]
    out[1::2] = t[half:]
    return out.tobytes()


def _apply_predictor(raw: bytes) -> bytes:
    t = np.frombuffer(raw, dtype=np.uint8)
    t = np.concatenate([t[0::2], t[1::2]]).astype(np.int64)
    d = t.copy()
    d[1:] = (t[1:] - t[:-1] + 128) & 0xFF
    return d.astype(np.uint8).tobytes()


def _rle_decode(data: bytes, expected: int) -> bytes:
    out = bytearray()
    i = 0
    while i < len(data) and len(out) < expected:
        c = struct.unpack_from("b", data, i)[0]
        i += 1
        if c < 0:
            if i - c > len(data):
                raise CaseFailure(f"corrupt EXR chunk (RLE literal run of {-c} bytes past the chunk's end)")
            out += data[i:i - c]
            i -= c
        else:
            if i >= len(data):
                raise CaseFailure("corrupt EXR chunk (RLE repeat without its byte)")
            out += bytes([data[i]]) * (c + 1)
            i += 1
    return bytes(out)


def _chunk_bytes(data: bytes, comp: int, expected: int) -> bytes:
    """A chunk's pixel bytes (``expected`` of them: its scanlines), undone from its compression. A chunk is
    inflated to one byte past that at most, so one that would inflate further (a zip bomb) is corrupt."""
    if len(data) == expected or comp == 0:
        raw = data
    elif comp == 1:
        raw = _rle_decode(data, expected)
    else:
        try:
            raw = zlib.decompressobj().decompress(data, expected + 1)
        except zlib.error as e:
            raise CaseFailure(f"corrupt EXR chunk ({one_line(e, 200)})") from None
        if len(raw) > expected:
            raise CaseFailure(f"corrupt EXR chunk (inflates past the {expected} bytes of its scanlines)")
    if len(raw) != expected:
        raise CaseFailure(f"corrupt EXR chunk ({len(raw)} bytes, expected {expected})")
    return raw if raw is data else _undo_predictor(raw)


def decode_exr(buf: bytes, channel: str = "Z", *, max_pixels: int = MAX_EXR_PIXELS) -> np.ndarray:
    """Decode one channel of a scanline EXR into an ``[H, W]`` float32 array (CaseFailure when unreadable).

    Supports NONE, RLE, ZIPS and ZIP compression with HALF/FLOAT/UINT channels; other compressions raise
    a CaseFailure whose message contains "unsupported". A data window past ``max_pixels`` raises
    :class:`ExrLimitError` before anything is allocated; an offset table that leaves a scanline unwritten
    (one chunk listed twice) is corrupt, never an array with garbage rows.
    """
    attrs, pos = _exr_header(buf)
    try:
        comp = attrs["compression"][1][0]
        xmin, ymin, xmax, ymax = struct.unpack("<iiii", attrs["dataWindow"][1])
        chans = _exr_channels(attrs["channels"][1])
    except KeyError as e:
        raise CaseFailure(f"EXR header lacks the {e.args[0]!r} attribute") from None
    except (struct.error, ValueError, IndexError):
        raise CaseFailure("EXR header attribute of the wrong size") from None
    if comp not in _EXR_LINES:
        raise CaseFailure(f"unsupported EXR compression {comp} (supported: none, rle, zips, zip)")
    names = [c[0] for c in chans]
    if channel not in names:
        raise CaseFailure(f"EXR has no channel {channel!r} (channels: {', '.join(names) or 'none'})")
    width, height = xmax - xmin + 1, ymax - ymin + 1
    if width <= 0 or height <= 0:
        raise CaseFailure(f"EXR data window of size {width}x{height}")
    if width * height > max_pixels > 0:
        raise ExrLimitError(f"EXR data window {width}x{height} ({width * height / 1e6:.1f} Mpx) exceeds the limit "
                            f"of {max_pixels / 1e6:g} Mpx per frame (video.max_pixels)")
    lines = _EXR_LINES[comp]
    n_chunks = (height + lines - 1) // lines
    if pos + 8 * n_chunks > len(buf):
        raise CaseFailure("truncated EXR (offset table)")
    offsets = struct.unpack_from(f"<{n_chunks}Q", buf, pos)
    sizes = [_EXR_TYPES[t][1] for _, t in chans]
    line_bytes = width * sum(sizes)
    if max_pixels > 0 and height * line_bytes > max_pixels * MAX_EXR_BYTES_PER_PIXEL:
        raise ExrLimitError(f"EXR data window {width}x{height} with {len(chans)} channel(s) decodes to "
                            f"{height * line_bytes} bytes, past the limit of {max_pixels * MAX_EXR_BYTES_PER_PIXEL} "
                            f"bytes per frame ({MAX_EXR_BYTES_PER_PIXEL} bytes per pixel at video.max_pixels = "
                            f"{max_pixels / 1e6:g} Mpx)")
    ci = names.index(channel)
    dtype, csize = _EXR_TYPES[chans[ci][1]]
    col0 = width * sum(sizes[:ci])
    out = np.empty((height, width), dtype=np.float32)
    filled = np.zeros(height, dtype=bool)
    for off in offsets:
        if off + 8 > len(buf):
            raise CaseFailure("truncated EXR (chunk offset past the end)")
        y, size = struct.unpack_from("<ii", buf, off)
        data = buf[off + 8: off + 8 + size]
        if len(data) != size or size < 0:
            raise CaseFailure("truncated EXR (chunk data)")
        row0 = y - ymin
        nl = min(lines, height - row0)
        if row0 < 0 or nl <= 0:
            raise CaseFailure(f"EXR chunk at scanline {y} outside the data window")
        raw = _chunk_bytes(data, comp, nl * line_bytes)
        block = np.frombuffer(raw, dtype=np.uint8).reshape(nl, line_bytes)
        vals = np.ascontiguousarray(block[:, col0: col0 + width * csize]).view(np.dtype(dtype).newbyteorder("<"))
        if filled[row0: row0 + nl].any():
            raise CaseFailure(f"corrupt EXR (scanline {y} stored twice in the offset table)")
        filled[row0: row0 + nl] = True
        out[row0: row0 + nl] = vals.astype(np.float32)
    if not filled.all():  # np.empty rows never written would read as garbage
        raise CaseFailure(f"corrupt EXR (scanline {ymin + int(np.flatnonzero(~filled)[0])} missing)")
    return out


def encode_exr(z: np.ndarray, *, channel: str = "Z", compression: str = "zip", half: bool = True) -> bytes:
    """Encode an ``[H, W]`` array as a single-channel scanline EXR (what ViPE writes for depth)."""
    z = np.asarray(z)
    if z.ndim != 2:
        raise ValueError(f"encode_exr expects [H, W], got {list(z.shape)}")
    comp = _EXR_COMPRESSION[compression]
    if comp == 1:
        raise ValueError("encode_exr writes none/zips/zip only")
    h, w = z.shape
    vals = z.astype("<f2" if half else "<f4")

    def attr(name: str, typ: str, value: bytes) -> bytes:
        return name.encode() + b"\0" + typ.encode() + b"\0" + struct.pack("<i", len(value)) + value

    chlist = channel.encode() + b"\0" + struct.pack("<iB3xii", 1 if half else 2, 0, 1, 1) + b"\0"
    header = struct.pack("<ii", _EXR_MAGIC, 2) + b"".join([
        attr("channels", "chlist", chlist),
        attr("compression", "compression", bytes([comp])),
        attr("dataWindow", "box2i", struct.pack("<iiii", 0, 0, w - 1, h - 1)),
        attr("displayWindow", "box2i", struct.pack("<iiii", 0, 0, w - 1, h - 1)),
        attr("lineOrder", "lineOrder", bytes([0])),
        attr("pixelAspectRatio", "float", struct.pack("<f", 1.0)),
        attr("screenWindowCenter", "v2f", struct.pack("<ff", 0.0, 0.0)),
        attr("screenWindowWidth", "float", struct.pack("<f", 1.0)),
    ]) + b"\0"
    lines = _EXR_LINES[comp]
    chunks = []
    for y in range(0, h, lines):
        raw = vals[y:y + lines].tobytes()
        if comp in (2, 3):
            packed = zlib.compress(_apply_predictor(raw))
            data = packed if len(packed) < len(raw) else raw
        else:
            data = raw
        chunks.append(struct.pack("<ii", y, len(data)) + data)
    table_at = len(header)
    offsets, pos = [], table_at + 8 * len(chunks)
    for c in chunks:
        offsets.append(pos)
        pos += len(c)
    return header + struct.pack(f"<{len(chunks)}Q", *offsets) + b"".join(chunks)
