"""``mind.lcm``: long-context memory — the generated continuation against the GT after ``mark_time``.

Release (CSU-JPG/MIND ``src/metrics/lcm.py``, loop in ``src/process.py``): per frame pair (the ``mind.pairs``
aligner's) MSE, PSNR and SSIM on [0, 1] frames (data range 1; :mod:`worldrecall.plugins.mind.frames`) and
LPIPS-Alex on the frames mapped to [-1, 1] (``lpips.LPIPS(net='alex')`` here through the ``perceptual`` role:
``lpips_alex``); each value is the plain mean over the scored frames (``avg_mse`` …, unrounded). LPIPS is
optional: without a perceptual backend (the classical set, or no weights offline) ``lpips`` stays null and
the run says so once; MSE, PSNR and SSIM are still scored. A PSNR over identical frames is infinite in the
release; here ``psnr`` is then null with the reason on the row. Mirror-test videos are ``mind.mirror``'s
(skipped here with that reason); a clip the release does not score (its GT missing, too short for its
batching) is a skipped row with the aligner's reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Metric, MissingInput, Value
from worldrecall.core.data import Alignment, Case, CaseFailure, CaseSkip
from worldrecall.core.models import BackendUnavailable
from worldrecall.plugins.mind import frames as fr

BENCHMARK = "mind"
PAIR_VALUES: dict[str, Value] = {
    "mse": Value(higher_is_better=False, range=(0.0, 1.0), unit="",
                 description="mean per-frame MSE of [0,1] RGB (the release's avg_mse)"),
    "psnr": Value(higher_is_better=True, range=None, unit="dB",
                  description="mean per-frame PSNR, data range 1 (avg_psnr)"),
    "ssim": Value(higher_is_better=True, range=(-1.0, 1.0), unit="",
                  description="mean per-frame SSIM, data range 1, Gaussian 11x11 sigma 1.5 (avg_ssim)"),
    "lpips": Value(higher_is_better=False, range=(0.0, 1.0), unit="",
                   description="mean per-frame LPIPS-Alex on [-1,1] (avg_lpips); null without a perceptual backend"),
    "frames": Value(higher_is_better=None, range=None, unit="frames",
                    description="frame pairs scored (the release's lcm.length)"),
}


def optional_backend(ctx: MeasureContext, role: str) -> tuple[Any | None, str]:
    """(model, backend name) for an optional role; (None, why not) when unset or unavailable."""
    try:
        return ctx.models.get(role), str(ctx.models.selection.get(role, ""))
    except BackendUnavailable as e:
        return None, str(e)


def missing_gt(case: Case) -> list[MissingInput]:
    """The GT clip folder a memory clip lacks (``missing_gt: skip``): said by ``worldrecall check`` and on the row."""
    if case.annotations.get("mirror") or not case.annotations.get("gt_missing"):
        return []
    return [MissingInput("GT clip folder (MIND-Data: video.mp4 + action.json)", str(case.annotations.get(
        "gt_expected", "")), "the release does not score a clip without its GT; put the clip under data_root, or "
        "set loader_options.missing_gt=error to fail such clips", kind="file")]


def skip_reason(case: Case, alignment: Alignment, *, mirror_metric: bool) -> str | None:
    """Why this metric does not score this case (None: it does)."""
    is_mirror = bool(case.annotations.get("mirror"))
    if is_mirror != mirror_metric:
        return ("a mirror-test video (scored by mind.mirror)" if is_mirror else
                "a memory clip (the mirror test scores mirror_test videos only)")
    if alignment.info.get("skip"):
        return str(alignment.info["skip"])
    return None


def facts(alignment: Alignment) -> dict[str, Any]:
    """The clip facts the release's Result.json carries (mark_time, total_time, sample_frames) where known."""
    return {k: alignment.info[k] for k in ("mark_time", "total_time", "sample_frames") if k in alignment.info}


def mean_or_none(a: np.ndarray) -> float | None:
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0 or np.isnan(a).any():
        return None
    m = float(a.mean())
    return m if math.isfinite(m) else None


class PairFidelity(Metric):
    """MSE / PSNR / SSIM / LPIPS of the aligned frame pairs (the release's ``lcm_metric``)."""

    benchmark: ClassVar[str] = BENCHMARK
    primary: ClassVar[str] = "mse"
    values: ClassVar[dict[str, Value]] = PAIR_VALUES
    optional_models: ClassVar[tuple[str, ...]] = ("perceptual",)
    params: ClassVar[dict[str, Any]] = {"lpips": True}
    imports: ClassVar[tuple[str, ...]] = ("torch",)
    mirror_metric: ClassVar[bool] = False

    def optional_roles(self) -> dict[str, str]:
        """LPIPS needs the perceptual role (when ``params.lpips``); MSE/PSNR/SSIM never do."""
        return {"perceptual": f"LPIPS ({self.name}:lpips)"} if self.params["lpips"] else {}

    def needs_models(self, case: Case) -> bool:
        return bool(self.params["lpips"]) and bool(case.annotations.get("mirror")) == self.mirror_metric

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        return [] if self.mirror_metric else missing_gt(case)

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Per-frame MSE, PSNR, SSIM and (with a perceptual backend) LPIPS of every aligned pair."""
        why = skip_reason(case, alignment, mirror_metric=self.mirror_metric)
        if why:
            raise CaseSkip(why, info=facts(alignment))
        lp, lp_backend = optional_backend(ctx, "perceptual") if self.params["lpips"] else (None, "lpips: false")
        out: dict[str, list[float]] = {"mse": [], "psnr": [], "ssim": [], "lpips": []}
        size: list[int] = []
        for _, pred, part in fr.iter_pairs(case, alignment):
            m = fr.mse(pred, part)
            out["mse"] += m.tolist()
            out["psnr"] += fr.psnr_from_mse(m).tolist()
            out["ssim"] += fr.ssim(pred, part).tolist()
            if lp is not None:
                d = np.asarray(lp.distance(fr.to_uint8(pred), fr.to_uint8(part)), dtype=np.float64).reshape(-1)
                if len(d) != len(m):
                    raise CaseFailure(f"perceptual backend returned {len(d)} distances for {len(m)} pairs")
                out["lpips"] += d.tolist()
            else:
                out["lpips"] += [math.nan] * len(m)
            size = [int(pred.shape[2]), int(pred.shape[3])]
        meas: dict[str, Any] = {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
        meas["row_info"] = {"frame_size": size, "lpips_backend": lp_backend if lp is not None else "",
                            **({"lpips_unavailable": lp_backend} if lp is None else {}),
                            "scored_frames": len(out["mse"]), **facts(alignment)}
        return meas

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Plain means over the scored frames (the release's ``avg_*``)."""
        n = int(np.asarray(measurement["mse"]).size)
        return {"mse": mean_or_none(measurement["mse"]), "psnr": mean_or_none(measurement["psnr"]),
                "ssim": mean_or_none(measurement["ssim"]), "lpips": mean_or_none(measurement["lpips"]),
                "frames": float(n)}

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str | None:
        notes = []
        if np.isinf(np.asarray(measurement["psnr"], dtype=np.float64)).any():
            notes.append("identical frame pair(s): PSNR is infinite (the release's avg_psnr would be inf), so psnr "
                         "is null")
        if np.isnan(np.asarray(measurement["lpips"], dtype=np.float64)).any():
            notes.append("lpips null: no perceptual backend")
        return "; ".join(notes) or None


class MindLCM(PairFidelity):
    """``mind.lcm``: generated frame ``i`` vs GT frame ``mark_time + i``."""

    name: ClassVar[str] = "mind.lcm"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "long-context memory: MSE/PSNR/SSIM/LPIPS of the continuation vs GT after " \
                                 "mark_time (the release's lcm)"
