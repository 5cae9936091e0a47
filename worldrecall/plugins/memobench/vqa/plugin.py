"""MemoBench VQA plugin: registers the ``memobench.vqa`` metric (judge-backed, cached answers)."""

from __future__ import annotations

from typing import Callable

from worldrecall.core.hookspecs import hookimpl
from worldrecall.plugins.memobench.vqa.metric import VQAMetric


@hookimpl
def register_metrics(register: Callable[..., None]) -> None:
    """Register :class:`VQAMetric` (``memobench.vqa``; judge ``gemini`` by default, a param)."""
    register(VQAMetric)
