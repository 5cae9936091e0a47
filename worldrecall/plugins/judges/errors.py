"""Judge errors beyond the core's :class:`~worldrecall.core.judges.JudgeError`."""

from __future__ import annotations

from worldrecall.core.judges import JudgeError
from worldrecall.core.models import BackendUnavailable


class JudgeUnavailable(JudgeError, BackendUnavailable):
    """A judge that cannot be built here (no API key, SDK not installed).

    It is both a :class:`JudgeError` and a :class:`BackendUnavailable`, so a runner that skips metrics
    whose backend is unavailable skips the judge's metrics the same way (the metric is recorded as
    skipped with this message, never silently dropped).
    """


def redact(text: str, secrets: list[str] | tuple[str, ...]) -> str:
    """``text`` with every non-empty secret replaced by ``***`` (error messages may echo requests)."""
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text
