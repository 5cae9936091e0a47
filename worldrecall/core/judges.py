"""VLM judges: the interface MemoBench's VQA (and any third-party protocol) asks questions through.

A judge answers a question list about a video with validated structured answers. Judges are built
lazily, once per run, and read API keys from the environment only (never from config).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable


class JudgeError(Exception):
    """A judge call that failed for good (retries exhausted, invalid answer after repair, …)."""


@dataclass
class JudgeResponse:
    """What a judge returns: validated answers, token usage and the raw text (for audit)."""

    answers: list[dict[str, Any]]
    usage: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    model_id: str = ""


@runtime_checkable
class Judge(Protocol):
    model_id: str

    def ask(self, video: Path | Sequence[Any], system_prompt: str, questions: Sequence[Mapping[str, Any]],
            schema: Mapping[str, Any], *, prompt: str = "") -> JudgeResponse:
        """Answer ``questions`` about ``video`` (a file, or frames) under ``schema``."""


@dataclass
class JudgeSpec:
    """A judge registered through ``register_judges``."""

    name: str
    factory: Callable[[Mapping[str, Any]], Judge]
    description: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    extra: str | None = None


class JudgeHub:
    """Builds each configured judge once per run, on first use."""

    def __init__(self, specs: Mapping[str, JudgeSpec], options: Mapping[str, Mapping[str, Any]] | None = None):
        self.specs = dict(specs)
        self.options = {k: dict(v) for k, v in (options or {}).items()}
        self._built: dict[str, Judge] = {}

    def get(self, name: str) -> Judge:
        if name not in self._built:
            spec = self.specs.get(name)
            if spec is None:
                raise JudgeError(f"unknown judge {name!r} (registered: {', '.join(sorted(self.specs)) or 'none'})")
            self._built[name] = spec.factory({**spec.defaults, **self.options.get(name, {})})
        return self._built[name]
