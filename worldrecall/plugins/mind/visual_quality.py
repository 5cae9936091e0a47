"""``mind.visual_quality``: imaging quality (MUSIQ-SPAQ / 100) and aesthetic quality (LAION linear head / 10).

Release (``src/metrics/visual_quality.py``): over the generated frames of the scored window (the same frames as
the LCM, release batching included), per frame ``imaging = MUSIQ(frame) / 100`` (pyiqa's MUSIQ with the SPAQ
checkpoint, on the [0, 1] 1280x720 frame) and ``aesthetic = Linear(768, 1)(normalize(CLIP ViT-L/14
image features)) / 10`` (LAION's ``sa_0_4_vit_l_14_linear.pth``; CLIP preprocessing: shorter side 224 bicubic
without antialiasing, centre crop 224, OpenAI mean/std); the clip's values are the means over frames.
Here the two models run behind the ``imaging_quality`` role (reference backend ``musiq_spaq``) and the
``linear_aesthetic`` role (reference backend ``laion_linear``), which return the raw per-frame scores; this
metric divides by 100 and 10. A value whose role has no backend stays null (the row says why); with neither,
the row is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Metric, MissingInput, Value
from worldrecall.core.data import Alignment, Case, CaseFailure, CaseSkip
from worldrecall.plugins.mind import frames as fr
from worldrecall.plugins.mind.lcm import (
    BENCHMARK,
    facts,
    mean_or_none,
    missing_gt,
    optional_backend,
    skip_reason,
)

IMAGING_SCALE = 100.0
AESTHETIC_SCALE = 10.0


class MindVisualQuality(Metric):
    """``mind.visual_quality``: MUSIQ-SPAQ / 100 and LAION linear aesthetic / 10 of the generated frames."""

    name: ClassVar[str] = "mind.visual_quality"
    benchmark: ClassVar[str] = BENCHMARK
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "imaging (MUSIQ-SPAQ/100) and aesthetic (LAION linear head/10) quality of the " \
                                 "generated continuation"
    primary: ClassVar[str] = "imaging"
    values: ClassVar[dict[str, Value]] = {
        "imaging": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                         description="mean per-frame MUSIQ-SPAQ / 100 (the release's avg_imaging)"),
        "aesthetic": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                           description="mean per-frame LAION linear aesthetic / 10 (avg_aesthetic)"),
        "frames": Value(higher_is_better=None, range=None, unit="frames", description="generated frames scored"),
    }
    optional_models: ClassVar[tuple[str, ...]] = ("imaging_quality", "linear_aesthetic")
    params: ClassVar[dict[str, Any]] = {}
    imports: ClassVar[tuple[str, ...]] = ("torch",)

    def optional_roles(self) -> dict[str, str]:
        return {"imaging_quality": "mind.visual_quality:imaging (MUSIQ-SPAQ)",
                "linear_aesthetic": "mind.visual_quality:aesthetic (LAION linear head)"}

    def needs_models(self, case: Case) -> bool:
        return not case.annotations.get("mirror") and not case.annotations.get("gt_missing")

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        return missing_gt(case)

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Raw per-frame MUSIQ and aesthetic scores of the generated frames of the scored window."""
        why = skip_reason(case, alignment, mirror_metric=False)
        if why:
            raise CaseSkip(why, info=facts(alignment))
        iq, iq_name = optional_backend(ctx, "imaging_quality")
        ae, ae_name = optional_backend(ctx, "linear_aesthetic")
        if iq is None and ae is None:
            raise CaseSkip(f"no imaging_quality backend ({iq_name}) and no linear_aesthetic backend ({ae_name}); "
                           "use models=reference (musiq_spaq, laion_linear)")
        imaging: list[float] = []
        aesthetic: list[float] = []
        for gi, frames, _ in fr.iter_pairs(case, alignment, as_uint8=True):
            for model, out, role in ((iq, imaging, "imaging_quality"), (ae, aesthetic, "linear_aesthetic")):
                if model is None:
                    out += [float("nan")] * len(frames)
                    continue
                s = np.asarray(model.score_frames(frames, case=case, indices=gi), dtype=np.float64).reshape(-1)
                if len(s) != len(frames):
                    raise CaseFailure(f"{role} backend returned {len(s)} scores for {len(frames)} frames")
                out += s.tolist()
        return {"imaging_raw": np.asarray(imaging, dtype=np.float64),
                "aesthetic_raw": np.asarray(aesthetic, dtype=np.float64),
                "row_info": {"imaging_backend": iq_name if iq is not None else "",
                             "aesthetic_backend": ae_name if ae is not None else "",
                             **({"imaging_unavailable": iq_name} if iq is None else {}),
                             **({"aesthetic_unavailable": ae_name} if ae is None else {})}}

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Means over frames of score / 100 (imaging) and score / 10 (aesthetic), as released."""
        im = np.asarray(measurement["imaging_raw"], dtype=np.float64) / IMAGING_SCALE
        ae = np.asarray(measurement["aesthetic_raw"], dtype=np.float64) / AESTHETIC_SCALE
        return {"imaging": mean_or_none(im), "aesthetic": mean_or_none(ae), "frames": float(im.size)}

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str | None:
        info = measurement.get("row_info") or {}
        notes = [f"{k.split('_')[0]} null: {v}" for k, v in info.items() if k.endswith("_unavailable")]
        return "; ".join(notes) or None
