"""engine/stages/npz_read.py: an in-memory .npz read as np.load(allow_pickle=False) reads it (same names, dtypes, shapes,
bytes, memory order), on its own fast path for np.savez's archives and through np.load for anything else."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from worldrecall.engine.stages.npz_read import read_npz

ARRAYS = {
    "f8": np.arange(12, dtype=np.float64).reshape(3, 4) / 7,
    "fortran": np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4)),
    "scalar": np.array(3.5),
    "empty": np.zeros((0, 3), dtype=np.int16),
    "bool": np.array([True, False, True]),
    "big_endian": np.arange(5, dtype=">i4"),
    "unicode": np.array(["a", "béta", ""], dtype="<U7"),
    "bytes": np.array([b"ab", b"c"], dtype="S3"),
    "when": np.array(["2026-12-02T10:00"], dtype="datetime64[ns]"),
    "complex": np.array([1 + 2j, -3j], dtype=np.complex128),
    "u8": np.frombuffer(b"\x00\xff\x10", dtype=np.uint8),
}


def _saved(arrays: dict, compressed: bool = False) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def _reference(data: bytes) -> dict:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for k, w in want.items():
        g = got[k]
        assert (g.dtype, g.shape, g.tobytes(order="A")) == (w.dtype, w.shape, w.tobytes(order="A")), k
        assert (g.flags.c_contiguous, g.flags.f_contiguous) == (w.flags.c_contiguous, w.flags.f_contiguous), k
        assert g.flags.writeable and g.flags.aligned, k


def test_savez_archive_reads_as_np_load_on_the_fast_path(monkeypatch):
    data = _saved(ARRAYS)
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("fell back to np.load"))
    got = read_npz(data)
    monkeypatch.undo()
    _same(got, _reference(data))
    got["f8"][0, 0] = 99.0  # its own bytes: writing one array changes no other and not the input
    assert read_npz(data)["f8"][0, 0] == 0.0


def test_other_archives_go_through_np_load():
    structured = {"rec": np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", "<f8")]), "x": np.ones(3)}
    for data in (_saved(ARRAYS, compressed=True), _saved(structured)):
        _same(read_npz(data), _reference(data))
    buf = io.BytesIO()  # a .npy of format version 2.0 (4-byte header length), also on the fast path
    with zipfile.ZipFile(buf, "w") as z, z.open("v2.npy", "w") as f:
        np.lib.format.write_array(f, np.arange(6.0).reshape(2, 3), version=(2, 0))
    _same(read_npz(buf.getvalue()), _reference(buf.getvalue()))


def test_object_arrays_are_refused_like_np_load():
    data = _saved({"o": np.array([{"a": 1}, None], dtype=object)})
    with pytest.raises(ValueError, match="allow_pickle"):
        read_npz(data)
    with pytest.raises(ValueError):
        _reference(data)


def test_a_header_bigger_than_its_bytes_raises_without_allocating():
    import zlib

    def declaring(n: int) -> bytes:  # the archive of np.zeros(4), its header declaring n values
        data = bytearray(_saved({"a": np.zeros(4)}))
        at = data.index(b"'shape': (4,), }")
        end = data.index(b"\n", at)
        data[at:end] = f"'shape': ({n},), }}".encode().ljust(end - at)  # the header keeps its length
        start = data.index(b"\x93NUMPY")
        cd = data.index(b"PK\x01\x02")  # a consistent CRC: only the header lies
        data[cd + 16:cd + 20] = zlib.crc32(bytes(data[start:start + 128 + 32])).to_bytes(4, "little")
        return bytes(data)

    assert read_npz(declaring(4))["a"].tolist() == [0.0] * 4
    for n in (9, 10**15):  # 10**15 float64: 8 PB, never asked for
        with pytest.raises(ValueError, match="shorter than its header"):
            read_npz(declaring(n))


def test_a_changed_byte_fails_the_crc_as_in_zipfile():
    data = bytearray(_saved({"a": np.arange(4.0)}))
    data[data.index(b"\x93NUMPY") + 128] ^= 1  # a bit of the first value
    with pytest.raises(ValueError, match="CRC"):
        read_npz(bytes(data))
    with pytest.raises(Exception, match="CRC"):
        _reference(bytes(data))


def test_truncated_archives_raise():
    data = _saved(ARRAYS)
    for cut in (len(data) // 2, 10, 0):
        with pytest.raises(Exception):
            read_npz(data[:cut])


def test_measurement_cache_round_trip_uses_it(tmp_path, monkeypatch):
    from worldrecall.engine.stages import npz_read
    from worldrecall.engine.stages.measurement_memo import ProcessMeasurementCache

    used = []
    real = npz_read._read_stored
    monkeypatch.setattr(npz_read, "_read_stored", lambda data: used.append(1) or real(data))
    cache = ProcessMeasurementCache(tmp_path)
    m = {"score": 0.25, "frames": [1, 2], **{k: v for k, v in ARRAYS.items() if k != "fortran"}}
    cache.store("m", "ab" * 32, m)
    got = cache.load("m", "ab" * 32)
    assert got["score"] == 0.25 and got["frames"] == [1, 2] and cache.corrupt == 0 and used == [1]
    _same({k: got[k] for k in ARRAYS if k != "fortran"}, {k: v for k, v in ARRAYS.items() if k != "fortran"})
