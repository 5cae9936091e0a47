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
