"""``mind.dino``: DINO patch-token MSE between the generated continuation and the GT.

Release (``src/metrics/dino.py``, ``src/utils/dino_utils.py``): DINOv3 ViT-B/16 (``AutoModel`` +
``AutoImageProcessor`` from the weights folder) on each frame of a pair; the tokens are
``last_hidden_state[:, 5:]`` (the CLS token and the 4 register tokens dropped), L2-normalised per token; the
per-frame value is the mean over tokens and channels of the squared difference, and the clip's value the mean
over frames (``avg_dino_mse``). Same pairs as the LCM (``mind.pairs``, release batching included). Here the
model runs behind the ``patch_tokens`` role (reference backend ``dinov3_vitb16``, which drops CLS + registers
and applies the release's processor call, double rescale included — its option ``input_range``); this
metric L2-normalises and averages. Frames reach the role as the 1280x720 release frames rounded to uint8.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Metric, MissingInput, Value
from worldrecall.core.data import Alignment, Case, CaseFailure, CaseSkip
from worldrecall.plugins.mind import frames as fr
from worldrecall.plugins.mind.lcm import BENCHMARK, facts, mean_or_none, missing_gt, skip_reason


def token_mse(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-frame mean squared difference of L2-normalised tokens (``[N, P, D]`` each; eps 1e-12 as torch)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 3:
        raise CaseFailure(f"patch_tokens backend returned tokens of shapes {a.shape} and {b.shape}")
    an = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    bn = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    return ((an - bn) ** 2).reshape(len(a), -1).mean(axis=1)


class MindDino(Metric):
    """``mind.dino``: DINOv3 patch-token MSE of generated vs GT frames."""

    name: ClassVar[str] = "mind.dino"
    benchmark: ClassVar[str] = BENCHMARK
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "MSE of L2-normalised DINOv3 patch tokens, generated vs GT after mark_time"
    primary: ClassVar[str] = "mse"
    values: ClassVar[dict[str, Value]] = {
        "mse": Value(higher_is_better=False, range=(0.0, 4.0), unit="",
                     description="mean per-frame MSE of L2-normalised patch tokens (the release's avg_dino_mse)"),
        "frames": Value(higher_is_better=None, range=None, unit="frames", description="frame pairs scored"),
    }
    models: ClassVar[tuple[str, ...]] = ("patch_tokens",)
    params: ClassVar[dict[str, Any]] = {}
    imports: ClassVar[tuple[str, ...]] = ("torch",)

    def needs_models(self, case: Case) -> bool:
        return not case.annotations.get("mirror") and not case.annotations.get("gt_missing")

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        return missing_gt(case)

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Per-frame token MSE of every aligned (generated, GT) pair."""
        why = skip_reason(case, alignment, mirror_metric=False)
        if why:
            raise CaseSkip(why, info=facts(alignment))
        model = ctx.models.get("patch_tokens")
        vals: list[float] = []
        for gi, pred, part in fr.iter_pairs(case, alignment, as_uint8=True):
            ta = np.asarray(model.patch_tokens(pred, case=case, indices=gi))
            tb = np.asarray(model.patch_tokens(part, case=case, indices=None))
            vals += token_mse(ta, tb).tolist()
        return {"mse": np.asarray(vals, dtype=np.float64)}

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """The mean over frames (the release's ``avg_dino_mse``)."""
        m = np.asarray(measurement["mse"])
        return {"mse": mean_or_none(m), "frames": float(m.size)}
