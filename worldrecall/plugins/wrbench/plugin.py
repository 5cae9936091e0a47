"""WRBench plugin: the manifest loader, the look-away/return aligner, D1-D6 metrics, the camera gate, the
probe-sidecar judge, the main-table aggregator and the benchmark's declaration.

Registered through the ``worldrecall`` entry-point group exactly like a third-party plugin.
"""

from __future__ import annotations

from collections.abc import Callable

from worldrecall.core.components import Benchmark
from worldrecall.core.hookspecs import hookimpl
from worldrecall.core.judges import JudgeSpec
from worldrecall.plugins.wrbench.aligner import WRBenchPhases
from worldrecall.plugins.wrbench.camera_gate import WRBenchCameraGate
from worldrecall.plugins.wrbench.camera_metrics import CamAlign, CamPrec
from worldrecall.plugins.wrbench.leaderboard import WRBenchTable
from worldrecall.plugins.wrbench.loader import WRBenchLoader
from worldrecall.plugins.wrbench.probe_metric import ProbeScores
from worldrecall.plugins.wrbench.sidecar_judge import FIX as SIDECAR_FIX
from worldrecall.plugins.wrbench.sidecar_judge import make_probe_sidecar_judge, preflight as sidecar_preflight
from worldrecall.plugins.wrbench.visual_integrity import VisualIntegrity

METRICS = (CamPrec, CamAlign, VisualIntegrity, ProbeScores, WRBenchCameraGate)


@hookimpl
def register_loaders(register: Callable[..., None]) -> None:
    """The ``wrbench`` manifest loader."""
    register(WRBenchLoader())


@hookimpl
def register_aligners(register: Callable[..., None]) -> None:
    """The ``wrbench.phases`` look-away / return aligner."""
    register(WRBenchPhases())


@hookimpl
def register_metrics(register: Callable[..., None]) -> None:
    """D1 CamPrec / CamAlign, D2, D3-D6 (+ the re-observation gate) and the camera gate."""
    for cls in METRICS:
        register(cls)


@hookimpl
def register_aggregators(register: Callable[..., None]) -> None:
    """The ``wrbench.table`` main table (with the frozen paper table beside it)."""
    register(WRBenchTable())


@hookimpl
def register_judges(register: Callable[..., None]) -> None:
    """``wrbench_probe_sidecar``: probe answers read from ``<video>.probes.json`` (kind sidecar, no model)."""
    register(JudgeSpec(name="wrbench_probe_sidecar", factory=make_probe_sidecar_judge,
                       description="WRBench probe answers precomputed beside each video (<video>.probes.json: "
                                   "{probe_id: p_yes}); a sidecar, not a VLM",
                       preflight=sidecar_preflight, fix=SIDECAR_FIX))


BENCHMARK = Benchmark(
    "wrbench",
    headline=("wrbench.probes:d6", "wrbench.probes:d5", "wrbench.probes:reobservation_support", "wrbench.probes:d3",
              "wrbench.probes:d4", "wrbench.visual_integrity:score", "wrbench.camprec:score",
              "wrbench.camalign:score"),
    rank_by="wrbench.probes:d6",
    gate="wrbench.camera_gate:passed",
    protocol_gate="wrbench.probes:reobservation_support",
    labels={"wrbench.probes:d6": "D6", "wrbench.probes:d5": "D5", "wrbench.probes:reobservation_support": "re-obs",
            "wrbench.probes:d3": "D3", "wrbench.probes:d4": "D4", "wrbench.visual_integrity:score": "D2",
            "wrbench.camprec:score": "CamPrec", "wrbench.camalign:score": "CamAlign",
            "wrbench.camera_gate:passed": "camera gate passed"},
    titles={"gated": "wrbench · camera-gated view (only videos whose camera looked away and came back as requested; "
                     "ranked by D6)",
            "all": "wrbench · all videos (the release's protocol; D5/D6 over re-observation-gated videos; ranked by D6)"},
    notes=("D5/D6 are conditional means over videos whose re-observation gate is applicable (re-obs is that "
           "rate): a model that never looks away has few or none, never a failure",
           "the paper reports a diagnostic profile, not one score: the ranking by D6 (returned event state) is "
           "worldrecall's choice"),
    description="look away and come back: camera precision (D1), visual integrity (D2), visible (D3/D4) and "
                "returned (D5/D6) spatial and event-state consistency",
)


@hookimpl
def register_benchmarks(register: Callable[..., None]) -> None:
    """WRBench's headline (D6 first), ranking, camera gate and protocol gate."""
    register(BENCHMARK)
