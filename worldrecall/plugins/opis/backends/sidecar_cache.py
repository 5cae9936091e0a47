"""A small memo of parsed ViPE sidecars for the OPIS sidecar backends (one parse per video, not per window)."""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

_CACHE: OrderedDict[tuple, Any] = OrderedDict()
_SIZE = 4


def _stamp(path: Path) -> tuple:
    try:
        return tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(path) if e.is_file()))
    except OSError:
        return ()


def sidecar(path: Path | str) -> Any:
    """``formats.vipe.read_sidecar(path)`` with depth and instance masks, memoised by (path, file stamps)."""
    from worldrecall.formats.vipe import read_sidecar

    p = Path(path)
    key = (str(p.resolve()), _stamp(p))
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    sc = read_sidecar(p, need_depth=True, need_instances=True, validate_depth=False)
    _CACHE[key] = sc
    while len(_CACHE) > _SIZE:
        _CACHE.popitem(last=False)
    return sc
