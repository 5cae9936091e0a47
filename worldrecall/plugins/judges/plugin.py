"""Built-in judges plugin: registers the Gemini reference judge (``gemini``)."""

from __future__ import annotations

from collections.abc import Callable

from worldrecall.core.hookspecs import hookimpl
from worldrecall.core.judges import JudgeSpec
from worldrecall.plugins.judges.gemini import DEFAULTS, make_gemini_judge


@hookimpl
def register_judges(register: Callable[..., None]) -> None:
    """Register ``gemini``: Gemini via google-genai (key from GEMINI_API_KEY / GOOGLE_API_KEY)."""
    register(
        JudgeSpec(
            name="gemini",
            factory=make_gemini_judge,
            description=(
                "Gemini through google-genai: JSON-schema answers at temperature 0, Files API for "
                "large videos, bounded retries, on-disk answer cache. Official model "
                "gemini-3.1-pro-preview; documented alternative gemini-3-flash-preview."
            ),
            defaults=dict(DEFAULTS),
            requires=("google-genai",),
            extra="vlm",
        )
    )
