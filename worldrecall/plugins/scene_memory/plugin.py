"""Scene Memory F1 plugin: registers its loader, two aligners and the memory_loop metrics through the public hooks."""

from __future__ import annotations

from collections.abc import Callable

from worldrecall.core.hookspecs import hookimpl
from worldrecall.plugins.scene_memory.aligners import ActionsAligner, TurnaroundAligner
from worldrecall.plugins.scene_memory.loader import SceneMemoryLoader
from worldrecall.plugins.scene_memory.metrics import MemorySceneF1, SceneF1
from worldrecall.plugins.scene_memory.suite import SUITE_METRICS


@hookimpl
def register_loaders(register: Callable[..., None]) -> None:
    """The memory-loop rollout loader ``scene_memory``."""
    register(SceneMemoryLoader())


@hookimpl
def register_aligners(register: Callable[..., None]) -> None:
    """``scene_memory.turnaround`` (official split) and ``scene_memory.actions`` (experimental split)."""
    register(TurnaroundAligner())
    register(ActionsAligner())


@hookimpl
def register_metrics(register: Callable[..., None]) -> None:
    """``scene_memory.memory_scene_f1`` (official), ``scene_memory.scene_f1`` (experimental) and the rest of
    the memory_loop suite (return gate, revisit fidelity, geometric closure, rendering recovery, half-life)."""
    register(MemorySceneF1)
    register(SceneF1)
    for metric in SUITE_METRICS:
        register(metric)
