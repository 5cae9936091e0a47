"""Built-in judges plugin: registers the Gemini reference judge (``gemini``) and the local log-probability
Qwen-VL judge (``qwen_vl_logprob``)."""

from __future__ import annotations

from collections.abc import Callable

from worldrecall.core.hookspecs import hookimpl
from worldrecall.core.judges import JudgeSpec
from worldrecall.plugins.judges.gemini import DEFAULTS, make_gemini_judge
from worldrecall.plugins.judges.qwen_vl_logprob import DEFAULTS as QWEN_DEFAULTS
from worldrecall.plugins.judges.qwen_vl_logprob import make_qwen_vl_logprob_judge


@hookimpl
def register_judges(register: Callable[..., None]) -> None:
    """Register ``gemini`` (google-genai; key from GEMINI_API_KEY / GOOGLE_API_KEY) and ``qwen_vl_logprob``."""
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
    register(
        JudgeSpec(
            name="qwen_vl_logprob",
            factory=make_qwen_vl_logprob_judge,
            description=(
                "local Qwen-VL (transformers) yes/no judge: P(Yes | Yes or No) from next-token logits, one "
                "forward pass per question; bfloat16 + flash-attention 2 on CUDA, float32 + SDPA elsewhere "
                "(recorded on every answer)"
            ),
            defaults=dict(QWEN_DEFAULTS),
            requires=("torch", "transformers"),
        )
    )
