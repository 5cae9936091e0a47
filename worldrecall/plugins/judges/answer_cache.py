"""On-disk JSON cache of judge answers, so a rerun (or a rebuilt question bank) costs no API calls.

One file per request, named by the sha256 of everything that decides the answer: the media digest
(video content), the model id, the system prompt and the user prompt (which embed the prompt version
and the question list, hence the bank), the response schema and the generation settings. Entries are
plain JSON written atomically; an unreadable entry is treated as a miss and rewritten. Nothing secret
goes into a key or an entry (the API key never reaches this module).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worldrecall.core.atomic import atomic_write_text

log = logging.getLogger(__name__)


def request_key(parts: Mapping[str, Any]) -> str:
    """Stable sha256 of a JSON-able request description."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class AnswerCache:
    """``get(key)`` / ``put(key, entry)`` over ``root/<key[:2]>/<key>.json``; ``root=None`` disables it."""

    def __init__(self, root: Path | str | None):
        self.root = Path(root) if root else None
        self.hits = 0
        self.misses = 0

    def path_for(self, key: str) -> Path:
        """Where the entry for ``key`` lives."""
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached entry for ``key``, or None (disabled, absent or unreadable)."""
        if self.root is None:
            return None
        p = self.path_for(key)
        try:
            entry = json.loads(p.read_text(encoding="utf-8"))
            if not isinstance(entry, dict) or entry.get("key") != key:
                raise ValueError("not an entry for this key")
        except FileNotFoundError:
            self.misses += 1
            return None
        except (OSError, ValueError) as e:  # truncated or edited file: recompute
            log.warning("judge answer cache entry %s is unreadable (%s); asking again", p, e)
            self.misses += 1
            return None
        self.hits += 1
        return entry

    def put(self, key: str, entry: Mapping[str, Any]) -> None:
        """Store ``entry`` for ``key`` atomically (no-op when disabled)."""
        if self.root is None:
            return
        data = json.dumps({**entry, "key": key}, ensure_ascii=False, indent=1, sort_keys=True)
        atomic_write_text(self.path_for(key), data)
