"""VLM judges: the interface MemoBench's VQA (and any third-party protocol) asks questions through.

A judge answers a question list about a video with validated structured answers. Judges are built
lazily, once per run, and read API keys from the environment only (never from config).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from worldrecall.core.digests import file_digest
from worldrecall.core.video import Video, VideoError

QUESTIONS_TOKEN = "{questions_json}"  # where a prompt wants the question list inserted


class JudgeError(Exception):
    """A judge call that failed for good (retries exhausted, invalid answer after repair, …)."""


def id_key(value: Any) -> str:
    """Question ids compared as text: ``3``, ``"3"`` and ``3.0`` are the same question."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


@dataclass
class JudgeResponse:
    """What a judge returns: validated answers, token usage and the raw text (for audit)."""

    answers: list[dict[str, Any]]
    usage: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    model_id: str = ""


class MissingAnswers(JudgeError):
    """The judge left questions unanswered even after a follow-up call; ``response`` holds the rest."""

    def __init__(self, message: str, response: JudgeResponse, missing: list[str]):
        super().__init__(message)
        self.response = response
        self.missing = missing


def media_digest(video: Any) -> str:
    """sha256 identifying a judge input's content (file bytes, or frame names+bytes, or pixels): the answer
    cache key, so a cache hit never needs to encode the media."""
    if isinstance(video, Video):
        return video.content_hash()
    if isinstance(video, (str, Path)):
        p = Path(video)
        if not p.exists():
            raise JudgeError(f"{p}: judge input does not exist")
        if p.is_dir():
            try:
                return Video(p).content_hash()
            except VideoError as e:
                raise JudgeError(str(e)) from None
        return file_digest(p)
    frames = as_frames(video)
    h = hashlib.sha256(str(frames.shape).encode())
    h.update(np.ascontiguousarray(frames).tobytes())
    return h.hexdigest()


def as_frames(video: Sequence[Any] | np.ndarray) -> np.ndarray:
    """In-memory judge input as a ``[N, H, W, 3]`` uint8 array, or a :class:`JudgeError` saying why not."""
    try:
        frames = (
            np.asarray(video) if isinstance(video, np.ndarray) else np.stack([np.asarray(f) for f in video])
        )
    except (TypeError, ValueError) as e:
        raise JudgeError(f"judge input frames cannot be stacked ({e})") from None
    if frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0:
        raise JudgeError(f"judge input frames must be [N,H,W,3] with N >= 1, got shape {tuple(frames.shape)}")
    if frames.dtype != np.uint8:
        raise JudgeError(f"judge input frames must be uint8 RGB, got {frames.dtype}")
    return frames


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
    preflight: Callable[[Any], str | None] | None = None  # None when it can judge the case, else why not
    fix: str = ""  # how to configure it, when preflight fails for every case (the metric is then skipped)


class JudgeHub:
    """Builds each configured judge once per run, on first use."""

    def __init__(self, specs: Mapping[str, JudgeSpec], options: Mapping[str, Mapping[str, Any]] | None = None,
                 cache_dir: Path | str | None = None):
        self.specs = dict(specs)
        self.options = {k: dict(v) for k, v in (options or {}).items()}
        self.cache_dir = cache_dir  # given to judges that declare a ``cache_dir`` option, unless configured
        self._built: dict[str, Judge] = {}

    def get(self, name: str) -> Judge:
        if name not in self._built:
            spec = self.specs.get(name)
            if spec is None:
                raise JudgeError(f"unknown judge {name!r} (registered: {', '.join(sorted(self.specs)) or 'none'})")
            opts = {**spec.defaults, **self.options.get(name, {})}
            if "cache_dir" in spec.defaults and not opts.get("cache_dir") and self.cache_dir is not None:
                opts["cache_dir"] = str(self.cache_dir)
            self._built[name] = spec.factory(opts)
        return self._built[name]
