"""The measurement cache of :mod:`worldrecall.core.cache`, with the entries this process read kept in memory
for its later jobs: a sweep's re-score jobs score the same measurements again and again.

A kept entry is handed out as a load would give it — fresh arrays, fresh JSON values — and only while its file
is as it was when read or written (its state: mtime, size, inode); otherwise it is read, and its digest
checked, again. Bounded by bytes; the oldest entries go first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from worldrecall.core.cache import MeasurementCache, split_measurement
from worldrecall.core.digests import file_state
from worldrecall.engine.stages.npz_read import read_npz

WHOLE_BYTES = 32 << 20  # an entry up to this size is read at once and parsed in memory
MEMO_BYTES = 128 << 20  # a default run's re-scored metric needs a few MB
_OWNER = os.getpid()  # forked workers keep nothing: their memory is the frames' (``video.max_bytes``)
# entry file -> (its state, meta as JSON text, arrays, their bytes)
_MEMO: dict[str, tuple[Any, str, dict[str, np.ndarray], int]] = {}
_BYTES = [0]


class ProcessMeasurementCache(MeasurementCache):
    """:class:`MeasurementCache` whose verified entries are remembered for the process."""

    def load(self, metric: str, key: str) -> dict[str, Any] | None:
        path = str(self.path_for(metric, key))
        known = _MEMO.get(path)
        if known is not None and known[0] == file_state(path):
            return {**json.loads(known[1]), **{k: a.copy() for k, a in known[2].items()}}
        got = super().load(metric, key)
        if got is not None:
            _remember(path, got)
        return got

    def _arrays(self, p: Any, size: int) -> dict[str, np.ndarray]:
        """Parsed in memory (:mod:`.npz_read`: what ``np.load`` gives, in a quarter of its time) up to
        ``WHOLE_BYTES``; a larger entry through ``np.load`` from the file."""
        return read_npz(p.read_bytes()) if size <= WHOLE_BYTES else super()._arrays(p, size)



def _remember(path: str, measurement: Mapping[str, Any]) -> None:
    state = file_state(path)
    if state is None or os.getpid() != _OWNER:
        return
    arrays, meta = split_measurement(measurement)
    kept = {k: np.array(a, copy=True) for k, a in arrays.items()}
    size = sum(a.nbytes for a in kept.values())
    if size > MEMO_BYTES // 4:
        return  # one huge entry would push out everything else
    _forget(path)
    _MEMO[path] = (state, json.dumps(meta, allow_nan=True), kept, size)
    _BYTES[0] += size
    while _BYTES[0] > MEMO_BYTES and _MEMO:
        _forget(next(iter(_MEMO)))


def _forget(path: str) -> None:
    old = _MEMO.pop(path, None)
    if old is not None:
        _BYTES[0] -= old[3]
