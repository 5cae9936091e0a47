"""MIND plugin (CSU-JPG/MIND): memory and action control of interactive world models.

The MIND-Data loader, the frame-pair aligner, the LCM / mirror / DINO / visual-quality / action metrics, the
action gate, the ``Result.json`` aggregator and the benchmark's declaration. Registered through the
``worldrecall`` entry-point group exactly like a third-party plugin. docs/mind.md says what each part
reproduces and every difference from the release with its switch.
"""

from __future__ import annotations

from collections.abc import Callable

from worldrecall.core.components import Benchmark
from worldrecall.core.hookspecs import hookimpl
from worldrecall.plugins.mind.action import MindAction
from worldrecall.plugins.mind.action_gate import MindActionGate
from worldrecall.plugins.mind.aligner import MindPairs
from worldrecall.plugins.mind.dino import MindDino
from worldrecall.plugins.mind.lcm import MindLCM
from worldrecall.plugins.mind.loader import MindLoader
from worldrecall.plugins.mind.mirror import MindMirror
from worldrecall.plugins.mind.result import MindResult
from worldrecall.plugins.mind.visual_quality import MindVisualQuality

METRICS = (MindLCM, MindMirror, MindDino, MindVisualQuality, MindAction, MindActionGate)


@hookimpl
def register_loaders(register: Callable[..., None]) -> None:
    """The ``mind`` loader (MIND-Data GT + a model's outputs in the release's layout)."""
    register(MindLoader())


@hookimpl
def register_aligners(register: Callable[..., None]) -> None:
    """The ``mind.pairs`` aligner (generated i vs GT mark_time+i with the release's batching; mirror halves)."""
    register(MindPairs())


@hookimpl
def register_metrics(register: Callable[..., None]) -> None:
    """LCM, mirror test, DINO MSE, visual quality, action RPE and the action gate."""
    for cls in METRICS:
        register(cls)


@hookimpl
def register_aggregators(register: Callable[..., None]) -> None:
    """``mind.result``: the release's Result.json per clip and per perspective x test type."""
    register(MindResult())


BENCHMARK = Benchmark(
    "mind",
    headline=("mind.lcm:mse", "mind.lcm:psnr", "mind.lcm:ssim", "mind.lcm:lpips", "mind.dino:mse",
              "mind.mirror:mse", "mind.visual_quality:imaging", "mind.visual_quality:aesthetic",
              "mind.action:rpe_trans_mean", "mind.action:rpe_rot_mean_deg"),
    rank_by="mind.lcm:mse",
    gate="mind.action_gate:passed",
    labels={"mind.lcm:mse": "LCM MSE", "mind.lcm:psnr": "LCM PSNR", "mind.lcm:ssim": "LCM SSIM",
            "mind.lcm:lpips": "LCM LPIPS", "mind.dino:mse": "DINO MSE", "mind.mirror:mse": "mirror MSE",
            "mind.visual_quality:imaging": "imaging", "mind.visual_quality:aesthetic": "aesthetic",
            "mind.action:rpe_trans_mean": "RPE trans", "mind.action:rpe_rot_mean_deg": "RPE rot (deg)",
            "mind.action_gate:passed": "action gate passed"},
    titles={"gated": "mind · camera-gated view (only clips whose generated camera executed the GT action program; "
                     "ranked by LCM MSE, lower is better)",
            "all": "mind · all clips (the release's protocol; ranked by LCM MSE, lower is better)"},
    notes=(("MIND publishes no composite score: the ranking by long-context-memory MSE (its primary memory value) "
            "is worldrecall's choice, and no average across values is formed"),
           ("LCM, DINO and visual quality cover the frames the release scores (its last read batch of 100 frames is "
            "never scored: a clip of at most 100 frames has no value); the mirror MSE is over mirror_test videos, "
            "the action values over clips with >= 8 valid RPE steps")),
    description="action-conditioned world models: long-context memory (generated continuation vs GT after "
                "mark_time), mirror-path consistency, DINO patch MSE, visual quality and action RPE",
)


@hookimpl
def register_benchmarks(register: Callable[..., None]) -> None:
    """MIND's headline (LCM MSE first), ranking and action gate."""
    register(BENCHMARK)
