"""MemoBench plugin: registers the release loader, the V/D/R aligner, the metrics and the leaderboard.

Registered through the ``worldrecall`` entry-point group exactly like a third-party plugin. VQA lives in
the separate ``memobench_vqa`` plugin (``worldrecall.plugins.memobench.vqa``).
"""

from __future__ import annotations

from collections.abc import Callable

from worldrecall.core.components import Benchmark
from worldrecall.core.hookspecs import hookimpl
from worldrecall.plugins.memobench.aligner import PhaseAligner
from worldrecall.plugins.memobench.camera_controllability import CameraControllability
from worldrecall.plugins.memobench.camera_gate import CameraGate
from worldrecall.plugins.memobench.geo3d import Geo3D
from worldrecall.plugins.memobench.gt_revisit_sim import GTRevisitSim
from worldrecall.plugins.memobench.image_reward import ImageRewardScore
from worldrecall.plugins.memobench.leaderboard import MemoBenchLeaderboard
from worldrecall.plugins.memobench.loader import MemoBenchLoader
from worldrecall.plugins.memobench.motion_smoothness import MotionSmoothness
from worldrecall.plugins.memobench.obj_identity import ObjIdentity
from worldrecall.plugins.memobench.ors import ORS
from worldrecall.plugins.memobench.pixel_fidelity import PixelFidelity
from worldrecall.plugins.memobench.visual_quality import VisualQuality

METRICS = (VisualQuality, MotionSmoothness, ObjIdentity, Geo3D, ORS, PixelFidelity, CameraControllability,
           ImageRewardScore, GTRevisitSim, CameraGate)


@hookimpl
def register_loaders(register: Callable[..., None]) -> None:
    """The ``memobench`` release loader."""
    register(MemoBenchLoader())


@hookimpl
def register_aligners(register: Callable[..., None]) -> None:
    """The ``memobench.phases`` V/D/R aligner."""
    register(PhaseAligner())


@hookimpl
def register_metrics(register: Callable[..., None]) -> None:
    """Every MemoBench metric class (the runner instantiates them with configured params/thresholds)."""
    for cls in METRICS:
        register(cls)


@hookimpl
def register_aggregators(register: Callable[..., None]) -> None:
    """The ``memobench.leaderboard`` aggregator."""
    register(MemoBenchLeaderboard())


BENCHMARK = Benchmark(
    "memobench",
    headline=("memobench.ors:score",),
    gate="memobench.camera_gate:passed",
    labels={"memobench.ors:score": "ORS", "memobench.camera_gate:passed": "camera gate passed"},
    titles={"gated": "memobench · camera-gated view (only cases whose camera left and came back as the GT camera "
                     "does; ranked by ORS)",
            "all": "memobench · all cases (the official protocol's numbers; ranked by ORS)"},
    notes=("ORS asks whether the target object reappears in R, not in which state or place: state_reset, teleport "
           "and appearance_drift are caught by the R-phase PSNR/SSIM and ObjConsist columns, not by the ranking",),
    description="visible -> disappear -> reappear memory (ORS, camera control, pixel fidelity per phase, VQA)",
)


@hookimpl
def register_benchmarks(register: Callable[..., None]) -> None:
    """MemoBench's headline (ORS, the paper's memory score), ranking and camera gate."""
    register(BENCHMARK)
