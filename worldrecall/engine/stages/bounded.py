"""The engine's per-process memos are plain dicts bounded by entry count: the oldest entries go first."""

from __future__ import annotations

from typing import Any


def remember(memo: dict[Any, Any], key: Any, value: Any, limit: int) -> Any:
    """``memo[key] = value``, then drop the oldest entries past ``limit``; returns ``value``."""
    memo[key] = value
    while len(memo) > limit:
        memo.pop(next(iter(memo)))
    return value
