"""A stable digest of JSON-able parts (for names that must not change between runs, e.g. a results folder).

Everything the engine caches is keyed by its one recipe (``worldrecall.engine.cache.keys``) and kept in its
one store; this helper is only the canonical JSON hash both build on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def cache_key(parts: Mapping[str, Any]) -> str:
    """Stable sha256 of a JSON-able mapping."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
