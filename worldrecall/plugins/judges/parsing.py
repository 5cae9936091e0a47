"""Turning a judge's reply text into validated structured answers.

Extraction follows the official VQA step first (strip; when the text holds a code fence, keep what lies
between the line after the first fence and the last fence; ``json.loads``), then falls back to the
outermost JSON array/object in the text. Validation checks the reply against the Gemini-style response
schema the judge was given (``type`` OBJECT/ARRAY/STRING/INTEGER/NUMBER/BOOLEAN, ``properties``,
``required``, ``items``). ``enum`` is a decoding hint only: an answer like ``"Yes."`` is valid here and
left to the scorer to normalise or fail.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class ReplyError(ValueError):
    """A reply that is not valid JSON or does not match the response schema (one-line message)."""


def extract_json(text: str | None) -> Any:
    """The JSON value in a reply: official code-fence rule first, then the outermost bracketed span."""
    if text is None or not text.strip():
        raise ReplyError("empty reply")
    s = text.strip()
    if "```" in s:
        first = s.find("```")
        line_end = s.find("\n", first)
        last = s.rfind("```")
        if line_end != -1 and last > line_end:
            s = s[line_end + 1 : last].strip()
    try:
        return json.loads(s)
    except json.JSONDecodeError as e:
        err = e
    # models sometimes wrap the JSON in prose: take the outermost [...] or {...} span
    for open_c, close_c in (("[", "]"), ("{", "}")):
        i, j = s.find(open_c), s.rfind(close_c)
        if 0 <= i < j:
            try:
                return json.loads(s[i : j + 1])
            except json.JSONDecodeError:
                pass
    raise ReplyError(f"not valid JSON ({err.msg} at line {err.lineno} column {err.colno})")


def validate(value: Any, schema: Mapping[str, Any], where: str = "reply") -> Any:
    """Check ``value`` against a Gemini-style schema and return it (an object wrapping the expected
    list under a single key is unwrapped). Raises :class:`ReplyError` naming the first problem."""
    t = str(schema.get("type", "")).upper()
    if value is None:
        if schema.get("nullable") or t in ("STRING", "INTEGER", "NUMBER", "BOOLEAN"):
            return None  # a null leaf is kept (the scorer fails it); a null list/object is not usable
        raise ReplyError(f"{where}: null where {t or 'a value'} was expected")
    if t == "ARRAY":
        if isinstance(value, dict):
            lists = [v for v in value.values() if isinstance(v, list)]
            if len(lists) == 1:
                value = lists[0]
        if not isinstance(value, list):
            raise ReplyError(f"{where}: expected a list, got {type(value).__name__}")
        items = schema.get("items") or {}
        return [validate(v, items, f"{where}[{i}]") for i, v in enumerate(value)]
    if t == "OBJECT":
        if not isinstance(value, dict):
            raise ReplyError(f"{where}: expected an object, got {type(value).__name__}")
        missing = [k for k in schema.get("required", []) if k not in value]
        if missing:
            raise ReplyError(f"{where}: missing required field(s) {', '.join(map(repr, missing))}")
        props = schema.get("properties") or {}
        return {k: (validate(v, props[k], f"{where}.{k}") if k in props else v) for k, v in value.items()}
    if t == "STRING":
        if not isinstance(value, str):
            raise ReplyError(f"{where}: expected a string, got {type(value).__name__}")
    elif t == "INTEGER":
        ok = (
            (isinstance(value, int) and not isinstance(value, bool))
            or (isinstance(value, str) and value.strip().lstrip("-").isdigit())
            or (isinstance(value, float) and value.is_integer())
        )
        if not ok:
            raise ReplyError(f"{where}: expected an integer, got {value!r}")
    elif t == "NUMBER":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ReplyError(f"{where}: expected a number, got {value!r}")
    elif t == "BOOLEAN":
        if not isinstance(value, bool):
            raise ReplyError(f"{where}: expected a boolean, got {value!r}")
    return value


def parse_reply(text: str | None, schema: Mapping[str, Any]) -> Any:
    """``validate(extract_json(text), schema)``."""
    return validate(extract_json(text), schema)
