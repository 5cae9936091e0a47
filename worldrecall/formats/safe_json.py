"""Bounded JSON reading for user-supplied files (annotations, sidecars, question banks, score cells).

Every JSON reader of a dataset or result file goes through :func:`read_json` / :func:`parse_json`, so that
hostile files fail one case with one line naming the file instead of crashing the reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from worldrecall.core.data import CaseFailure
from worldrecall.core.text import read_text

__all__ = ["JSON_MAX_DEPTH", "JSON_MAX_INT_DIGITS", "json_depth", "parse_json", "read_json"]

# JSON from user files is untrusted: a 100,000-deep array exhausts the parser's recursion guard, a 5,000-digit
# integer hits Python's digit limit and a 4,000-digit one overflows every float/int64 it meets later.
JSON_MAX_DEPTH = 64
JSON_MAX_INT_DIGITS = 20   # past the int64/uint64 range: never a frame index, id or count


def _bounded_int(s: str) -> int:
    if len(s.lstrip("-")) > JSON_MAX_INT_DIGITS:
        raise ValueError(f"integer of {len(s.lstrip('-'))} digits (limit {JSON_MAX_INT_DIGITS})")
    return int(s)


def json_depth(value: Any) -> int:
    """Nesting depth of parsed JSON (a scalar is 0), without recursion; stops counting past the limit."""
    depth, stack = 0, [(value, 1)]
    while stack and depth <= JSON_MAX_DEPTH:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            depth = max(depth, d)
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return depth


def parse_json(text: str, where: Path | str) -> Any:
    """``text`` as JSON, bounded in nesting depth and integer size; any problem -> one-line
    :class:`CaseFailure` naming ``where`` (a file, or ``file: column``)."""
    try:
        value = json.loads(text, parse_int=_bounded_int)
    except RecursionError:
        value = None  # reported as too deep below
        depth = JSON_MAX_DEPTH + 1
    except (ValueError, TypeError) as e:  # JSONDecodeError is a ValueError
        raise CaseFailure(f"{where}: not valid JSON ({' '.join(str(e).split())[:200]})") from None
    else:
        depth = json_depth(value)
    if depth > JSON_MAX_DEPTH:
        raise CaseFailure(f"{where}: JSON nested too deeply (limit {JSON_MAX_DEPTH} levels)")
    return value


def read_json(path: Path | str) -> Any:
    """A JSON file (UTF-8, BOM tolerated), bounded as :func:`parse_json`; problems name the file."""
    return parse_json(read_text(path), path)
