"""Scene Memory F1 plugin: registers its loader, two aligners and the memory_loop metrics through the public hooks."""

from __future__ import annotations

from collections.abc import Callable

from worldrecall.core.components import Benchmark
from worldrecall.core.hookspecs import hookimpl
from worldrecall.plugins.scene_memory.aligners import ActionsAligner, TurnaroundAligner
from worldrecall.plugins.scene_memory.camera_gate import SceneCameraGate
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
    register(SceneCameraGate)


BENCHMARK = Benchmark(
    "scene_memory",
    headline=("scene_memory.memory_scene_f1:f1", "scene_memory.memory_scene_f1:retention",
              "scene_memory.memory_scene_f1:precision"),
    rank_by="scene_memory.memory_scene_f1:f1",
    gate="scene_memory.camera_gate:passed",
    protocol_gate="scene_memory.memory_scene_f1:gate",
    labels={"scene_memory.memory_scene_f1:f1": "SceneF1", "scene_memory.memory_scene_f1:retention": "Retention",
            "scene_memory.memory_scene_f1:precision": "Precision",
            "scene_memory.camera_gate:passed": "camera gate passed",
            "scene_memory.memory_scene_f1:gate": "return gate passed (official)"},
    titles={"gated": "scene_memory · camera-gated view (only cases whose camera executed its action program)",
            "all": "scene_memory · all cases (the official number: F1 where the official return gate passed)"},
    notes=("Scene Memory F1 compares static geometry before and after the loop: it cannot see what happens to a "
           "moving target (forgetful, state_reset, teleport, appearance_drift) when the target is small in the "
           "cloud",),
    description="point-cloud retention vs hallucination across a camera loop (WorldArena memory_loop)",
)


@hookimpl
def register_benchmarks(register: Callable[..., None]) -> None:
    """Scene Memory F1's headline, ranking, camera gate and the protocol's own return gate."""
    register(BENCHMARK)
