"""MemoBench Object Identity Consistency: per-position patch similarity of R frames to frame 0.

Measure: patch tokens (``patch_embedder`` role; DINOv2 ViT-B/14 in the paper) of generated frame 0 and
of 9 R-phase frames, each token L2-normalised; per frame the per-position cosine clamped to [0, 1],
stored sorted in descending order. Score: keep the top ``max(1, int(P · top_fraction))`` values per
frame; Mean = mean over frames of their mean, Min = the smallest kept value over all frames;
``ObjIdentityConsistency = round(α·Mean_pct + (1-α)·Min_pct, 2)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.plugins.memobench import rounding, sampling
from worldrecall.plugins.memobench.base import MemoBenchMetric, batched, capped_frames, phase_info, pick


def sorted_patch_similarities(anchor: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """[K, P] per-position cosines of each frame's tokens [K, P, D] to the anchor [P, D], clamped, sorted desc."""
    import torch
    import torch.nn.functional as F

    p0 = F.normalize(torch.as_tensor(np.asarray(anchor), dtype=torch.float32), dim=-1)
    pk = F.normalize(torch.as_tensor(np.asarray(tokens), dtype=torch.float32), dim=-1)
    sims = (p0.unsqueeze(0) * pk).sum(dim=-1).clamp(0.0, 1.0)
    return torch.sort(sims, dim=-1, descending=True).values.numpy()


def identity_values(sorted_sims: np.ndarray, top_fraction: float) -> tuple[float, float]:
    """(Mean, Min) of the top-k similarities over frames, unrounded; (1.0, 1.0) for no frames (official)."""
    if len(sorted_sims) == 0:
        return 1.0, 1.0
    k = max(1, int(sorted_sims.shape[1] * top_fraction))
    top = np.asarray(sorted_sims[:, :k], dtype=np.float32)
    means = [float(np.mean(row, dtype=np.float32)) for row in top]  # float32 mean as the official torch .mean()
    mins = [float(row[-1]) for row in top]
    return float(np.mean(means)), float(np.min(mins))


class ObjIdentity(MemoBenchMetric):
    """``ObjIdentityConsistency`` (0-100) from ``ObjIdentityMean`` / ``ObjIdentityMin``."""

    name: ClassVar[str] = "memobench.obj_identity"
    description: ClassVar[str] = "Top-40% positional patch similarity of 9 R frames to frame 0, 0.7 mean + 0.3 min"
    primary: ClassVar[str] = "score"
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                       description="object identity consistency (official scale, x100, rounded)"),
        "score_raw": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                           description="object identity consistency unrounded"),
        "ObjIdentityMean": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                 description="mean patch similarity to frame 0"),
        "ObjIdentityMean_pct": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                                     description="mean x 100"),
        "ObjIdentityMin": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                description="min patch similarity to frame 0"),
        "ObjIdentityMin_pct": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                                    description="min x 100"),
    }
    models: ClassVar[tuple[str, ...]] = ("patch_embedder",)
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "n_sample": 9}
    thresholds: ClassVar[dict[str, Any]] = {"top_fraction": 0.4, "alpha": 0.7}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Sorted per-position similarities of the sampled R frames to frame 0."""
        frames = capped_frames(case, self.params["max_side"])
        _, r, n = phase_info(alignment)
        idx = sampling.identity_indices(r, n, self.params["n_sample"])
        model = ctx.models.get("patch_embedder")
        all_idx = [0] + idx
        toks = [np.asarray(model.patch_tokens(pick(frames, c), case=case, indices=list(c)))
                for c in batched(all_idx, ctx.batch_size)]
        tokens = np.concatenate(toks, axis=0)
        if tokens.ndim != 3 or len(tokens) != len(all_idx):
            raise CaseFailure(f"patch_embedder returned shape {tuple(tokens.shape)} for {len(all_idx)} frames")
        return {"indices": np.asarray(idx, dtype=np.int64),
                "sorted_sims": sorted_patch_similarities(tokens[0], tokens[1:])}

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Mean / Min (4 dp), their pct (1 dp) and the α-mix ``score`` (2 dp)."""
        mean, minimum = identity_values(np.asarray(measurement["sorted_sims"]), thresholds["top_fraction"])
        m4, w4 = rounding.round_py(mean, 4), rounding.round_py(minimum, 4)
        m_pct, w_pct = rounding.pct_of("ObjIdentityMean", m4), rounding.pct_of("ObjIdentityMin", w4)
        alpha = thresholds["alpha"]
        return {
            "ObjIdentityMean": m4,
            "ObjIdentityMin": w4,
            "ObjIdentityMean_pct": m_pct,
            "ObjIdentityMin_pct": w_pct,
            "score": rounding.mix(m_pct, w_pct, alpha),
            "score_raw": rounding.mix_raw(mean, minimum, alpha),
        }
