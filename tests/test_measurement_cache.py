"""MeasurementCache without fsync: what a crash or power loss can leave behind is detected and recomputed."""

from __future__ import annotations

import numpy as np
import pytest

from worldrecall.core.cache import MeasurementCache


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_an_unsynced_entry_left_empty_or_torn_is_recomputed(tmp_path, damage):
    cache = MeasurementCache(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return {"per_frame": np.arange(6, dtype=np.float64), "n": 6}

    first, hit = cache.get_or_compute("m", "ab" * 32, compute)
    assert not hit and first["n"] == 6
    path = cache.path_for("m", "ab" * 32)
    raw = path.read_bytes()
    path.write_bytes(b"" if damage == "empty" else raw[: len(raw) // 2])  # what an unsynced write may leave
    again, hit = cache.get_or_compute("m", "ab" * 32, compute)
    assert not hit and cache.corrupt == 1 and len(calls) == 2
    assert np.array_equal(again["per_frame"], np.arange(6.0)) and again["n"] == 6
    third, hit = cache.get_or_compute("m", "ab" * 32, compute)  # rewritten whole: a hit now
    assert hit and len(calls) == 2 and np.array_equal(third["per_frame"], np.arange(6.0))


def test_an_entry_is_the_npz_that_savez_writes_straight_to_a_file(tmp_path):
    """The entry is assembled in memory and written at once: the same bytes as ``np.savez`` on the file, so
    entries written before and after read the same (many arrays of mixed dtypes and empty shapes)."""
    import json

    from worldrecall.core.cache import _digest

    rng = np.random.default_rng(3)
    m = {f"a{i}": rng.normal(size=(i % 5, 2)) if i % 3 else rng.random(i) > 0.5 for i in range(40)}
    m["meta"] = {"n": 3, "name": "x"}
    cache = MeasurementCache(tmp_path / "c")
    cache.store("m", "cd" * 32, m)
    arrays = {k: v for k, v in m.items() if isinstance(v, np.ndarray)}
    meta_bytes = json.dumps({"meta": m["meta"]}, sort_keys=True, allow_nan=True).encode()
    straight = tmp_path / "straight.npz"
    np.savez(straight, **arrays, __meta__=np.frombuffer(meta_bytes, dtype=np.uint8),
             __digest__=np.frombuffer(_digest(arrays, meta_bytes).encode(), dtype=np.uint8))
    assert cache.path_for("m", "cd" * 32).read_bytes() == straight.read_bytes()
    back = cache.load("m", "cd" * 32)
    assert back["meta"] == m["meta"] and all(np.array_equal(back[k], v) for k, v in arrays.items())


@pytest.mark.parametrize("whole", [True, False])
def test_an_entry_reads_the_same_whether_read_at_once_or_member_by_member(tmp_path, monkeypatch, whole):
    from worldrecall.core import cache as core_cache

    monkeypatch.setattr(core_cache, "_READ_WHOLE", 1 << 30 if whole else 0)
    cache = MeasurementCache(tmp_path)
    m = {"a": np.arange(12.0).reshape(3, 4), "b": np.array([True, False]), "n": 2, "s": "x"}
    cache.store("m", "ef" * 32, m)
    back = cache.load("m", "ef" * 32)
    assert back.keys() == m.keys() and back["n"] == 2 and back["s"] == "x"
    assert np.array_equal(back["a"], m["a"]) and back["b"].dtype == bool
    path = cache.path_for("m", "ef" * 32)
    raw = bytearray(path.read_bytes())
    raw[raw.index(np.arange(12.0).tobytes()[8:16])] ^= 1  # one flipped bit in an array's data
    path.write_bytes(bytes(raw))
    assert cache.load("m", "ef" * 32) is None and cache.corrupt == 1 and not path.exists()
