"""Secrets never leave the process: config values whose key names a key, token, secret or password are
replaced by ``***``, and ``key=value`` secrets inside free text (run names, override lists) are scrubbed.

Used by every output that writes the config or the command line (the meta files, Hydra's own files, MLflow).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

SECRET_WORDS = ("key", "token", "secret", "password")
REDACTED = "***"


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> ``a.b.c`` keys (lists kept as JSON strings)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = json.dumps(v) if isinstance(v, (list, tuple, Mapping)) else v
    return out


def is_secret(key: str) -> bool:
    last = key.lower().rsplit(".", 1)[-1]
    return any(w in last for w in SECRET_WORDS)


def redact(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Replace values whose (last) key names a key, token, secret or password, and scrub ``key=value``
    secrets inside other string values (a run name, an override list)."""
    return {k: (REDACTED if is_secret(k) and v not in (None, "") else scrub(v) if isinstance(v, str) else v)
            for k, v in flat.items()}


def redact_override(override: str) -> str:
    """``[+~]key=value`` with the value replaced when the key names a secret (overrides tags, run names)."""
    key, sep, _ = override.partition("=")
    return f"{key}={REDACTED}" if sep and is_secret(key.lstrip("+~")) else override


def scrub(text: str) -> str:
    """Free text (a run name, an overrides tag) with every ``secret_key=value`` token's value redacted."""
    return re.sub(r"[^\s,]+=[^\s,]*", lambda m: redact_override(m.group(0)), str(text))


def redact_tags(tags: Mapping[str, Any]) -> dict[str, str]:
    """Tag values redacted by key (``tracking.tags.api_token``) and by content (overrides in a tag)."""
    return {str(k): (REDACTED if is_secret(str(k)) and v not in (None, "") else scrub(str(v))) for k, v in tags.items()}


def redact_tree(d: Any) -> Any:
    """A nested config with secret keys' values replaced and ``key=value`` secrets scrubbed from strings."""
    if isinstance(d, Mapping):
        return {k: (REDACTED if is_secret(str(k)) and v not in (None, "") and not isinstance(v, (Mapping, list))
                    else redact_tree(v)) for k, v in d.items()}
    if isinstance(d, list):
        return [redact_tree(x) for x in d]
    if isinstance(d, str) and "=" in d:
        return scrub(d)
    return d


