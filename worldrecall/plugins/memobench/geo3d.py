"""MemoBench Geometry / 3D Consistency: cosine of min-max normalised depth maps of consecutive samples.

Measure: per phase (V = [0, h], R = [r, N-1]) 3 frames (start, midpoint, end), depth from the ``depth``
role (Depth-Anything-V2-Small in the paper), each map min-max normalised ``(d - min) / (max - min + 1e-8)``,
flattened and L2-normalised; the two consecutive-pair cosines per phase are stored. A constant map is all
zeros after normalisation, so its pairs score 0 (errata 4). Score: per-phase mean and min (4 dp), then
``Mean = round((mean_V + mean_R) / 2, 4)``, ``Min = round(min(min_V, min_R), 4)``, α = 0.7 mix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.plugins.memobench import rounding, sampling
from worldrecall.plugins.memobench.base import MemoBenchMetric, batched, capped_frames, phase_info, pick

PHASES = ("V", "R")


def depth_embedding(depth: np.ndarray) -> Any:
    """Min-max normalised, flattened, L2-normalised depth map as a [1, h·w] float32 tensor."""
    import torch
    import torch.nn.functional as F

    d = torch.as_tensor(np.asarray(depth), dtype=torch.float32).squeeze()
    d = (d - d.min()) / (d.max() - d.min() + 1e-8)
    return F.normalize(d.flatten().unsqueeze(0), dim=-1)


def depth_cosine(a: Any, b: Any) -> float:
    """Cosine of two depth embeddings clipped to [0, 1]."""
    import torch.nn.functional as F

    if a.shape != b.shape:
        raise CaseFailure(f"depth backend returned maps of different sizes ({tuple(a.shape)} vs {tuple(b.shape)})")
    return float(np.clip(float(F.cosine_similarity(a, b).item()), 0.0, 1.0))


def phase_stats(cosines: np.ndarray) -> tuple[float, float]:
    """(mean, min) of a phase's pair cosines, each rounded to 4; (0.0, 0.0) without pairs (official)."""
    if len(cosines) == 0:
        return 0.0, 0.0
    return rounding.round_py(float(np.mean(cosines)), 4), rounding.round_py(float(np.min(cosines)), 4)


class Geo3D(MemoBenchMetric):
    """``Geo3DConsistency`` (0-100) from ``GeoConsistencyMean`` / ``GeoConsistencyMin``."""

    name: ClassVar[str] = "memobench.geo3d"
    description: ClassVar[str] = "Depth-map cosine of consecutive V/R samples, 0.7 mean + 0.3 min"
    primary: ClassVar[str] = "score"
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                       description="3-D geometry consistency (official scale, x100, rounded)"),
        "score_raw": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                           description="3-D geometry consistency unrounded"),
        **{k: Value(higher_is_better=True, range=(0.0, 1.0), unit="", description=k)
           for k in ("GeoConsistencyMean", "GeoConsistencyMin", "R_mean", "R_min", "V_mean", "V_min")},
        "GeoConsistencyMean_pct": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                                        description="mean x 100"),
        "GeoConsistencyMin_pct": Value(higher_is_better=True, range=(0.0, 100.0), unit="%",
                                       description="min x 100"),
    }
    models: ClassVar[tuple[str, ...]] = ("depth",)
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "n_sample": 3}
    thresholds: ClassVar[dict[str, Any]] = {"alpha": 0.7}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Consecutive-pair depth cosines of the V and R samples."""
        frames = capped_frames(case, self.params["max_side"])
        h, r, n = phase_info(alignment)
        idx = {"V": sampling.geo_phase_indices(0, h, n, self.params["n_sample"]),
               "R": sampling.geo_phase_indices(r, n - 1, n, self.params["n_sample"])}
        uniq = sorted({i for ids in idx.values() for i in ids})
        model = ctx.models.get("depth")
        emb: dict[int, Any] = {}
        for chunk in batched(uniq, ctx.batch_size):
            for i, d in zip(chunk, model.depth(pick(frames, chunk), case=case, indices=list(chunk))):
                emb[i] = depth_embedding(d)
        out: dict[str, Any] = {}
        for p, ids in idx.items():
            out[f"{p}_indices"] = np.asarray(ids, dtype=np.int64)
            out[f"{p}_cos"] = np.asarray([depth_cosine(emb[ids[k]], emb[ids[k + 1]]) for k in range(len(ids) - 1)],
                                         dtype=np.float64)
        return out

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Mean / Min (4 dp), their pct (1 dp) and the α-mix ``score`` (2 dp)."""
        (vm, vn), (rm, rn) = (phase_stats(np.asarray(measurement[f"{p}_cos"])) for p in PHASES)
        mean4, min4 = rounding.round_py((vm + rm) / 2, 4), rounding.round_py(min(vn, rn), 4)
        m_pct, w_pct = rounding.pct_of("GeoConsistencyMean", mean4), rounding.pct_of("GeoConsistencyMin", min4)
        raw = [np.asarray(measurement[f"{p}_cos"], dtype=np.float64) for p in PHASES]
        raw_mean = (sum(float(np.mean(c)) if len(c) else 0.0 for c in raw)) / 2
        raw_min = min(float(np.min(c)) if len(c) else 0.0 for c in raw)
        alpha = thresholds["alpha"]
        return {
            "GeoConsistencyMean": mean4,
            "GeoConsistencyMin": min4,
            "GeoConsistencyMean_pct": m_pct,
            "GeoConsistencyMin_pct": w_pct,
            "V_mean": vm, "V_min": vn, "R_mean": rm, "R_min": rn,
            "score": rounding.mix(m_pct, w_pct, alpha),
            "score_raw": rounding.mix_raw(raw_mean, raw_min, alpha),
        }
