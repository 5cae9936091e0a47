"""JSON of results: numpy scalars and arrays and paths as plain JSON (rows, alignments, meta files).

The rows' files themselves (append-only JSONL per shard) are the engine's:
:mod:`worldrecall.engine.stages.row_store`.
"""

from __future__ import annotations

from pathlib import Path


def json_default(o: object) -> object:
    """JSON for numpy scalars/arrays and paths (rows, alignments, meta files); anything else is an error."""
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")
