"""MemoBench pixel fidelity vs the GT clip: PSNR, SSIM and LPIPS for V, D, R and ALL.

Each phase compares every generated frame with GT frames resampled over the matching GT range
(``round(gt_s + i·(gt_e-gt_s)/(n-1))`` over (0, h_gt), (h_gt, r_gt), (r_gt, G-1), (0, G-1)); GT frames are
stretched to the (640-capped) generated size with INTER_AREA. PSNR on uint8 (99 when MSE < 1e-10); SSIM on
OpenCV grayscale with an 11×11 σ=1.5 Gaussian window; LPIPS from the optional ``perceptual`` role (Alex in
the paper) — without it PSNR/SSIM are still scored and LPIPS is None. A GT index outside the GT clip fails
the case (the official code blanks all twelve values then).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.plugins.memobench import gt as gt_io
from worldrecall.plugins.memobench import rounding, sampling
from worldrecall.plugins.memobench.base import (
    MemoBenchMetric,
    batched,
    capped_frames,
    optional_model,
    phase_info,
    pick,
)

PHASES = sampling.PHASE_NAMES
MEASURES = ("PSNR", "SSIM", "LPIPS")


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR of two uint8 images over all pixels and channels; 99.0 when MSE < 1e-10."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == b.dtype == np.uint8 and a.shape == b.shape and a.ndim in (2, 3) and a.size:
        # the same MSE without float64 copies: the squared differences are integers and their sum stays
        # far below 2**53, so the float64 mean is exactly (integer sum) / n — computed here in integers
        # (|a - b|**2 <= 65025 fits uint16; summed in uint64, which no frame can overflow)
        import cv2

        d = cv2.absdiff(a, b).astype(np.uint16)
        np.multiply(d, d, out=d)
        mse = int(d.sum(dtype=np.uint64)) / d.size
    else:
        mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    if mse < 1e-10:
        return 99.0
    return float(10 * np.log10(255.0 ** 2 / mse))


def gray_stats(frame: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One frame's own SSIM terms: (x, μx, μx², σx²) of its OpenCV grayscale in float32."""
    x = _gray(frame)
    mx = _blur(x)
    mx2 = mx * mx
    sx2 = _blur(x * x)
    sx2 -= mx2
    return x, mx, mx2, sx2


def _gray(frame: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY).astype(np.float32)


def _blur(z: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.GaussianBlur(z, (11, 11), 1.5)


def ssim(a: np.ndarray, b: np.ndarray, stats_a: tuple[np.ndarray, ...] | None = None,
         stats_b: tuple[np.ndarray, ...] | None = None) -> float:
    """Grayscale SSIM (float32, Gaussian 11×11 σ=1.5, reflect-101 borders, C1=(0.01·255)², C2=(0.03·255)²).

    ``stats_a`` / ``stats_b``: the frames' :func:`gray_stats` when the caller holds them (a frame compared
    in several pairs); the inputs are never modified.
    """
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    x, mx, mx2, sx2 = gray_stats(a) if stats_a is None else stats_a
    y, my, my2, sy2 = gray_stats(b) if stats_b is None else stats_b
    # ((2·μxμy + C1)(2·σxy + C2)) / ((μx² + μy² + C1)(σx² + σy² + C2) + 1e-8), the same float32 operations
    # in the same order as the plain expression, in place on fresh arrays (fewer temporaries; bit-identical)
    mxy = mx * my
    sxy = _blur(x * y)
    sxy -= mxy
    num = np.multiply(mxy, 2, out=mxy)
    num += c1
    t = np.multiply(sxy, 2, out=sxy)
    t += c2
    num *= t
    den = mx2 + my2
    den += c1
    t = sx2 + sy2
    t += c2
    den *= t
    den += 1e-8
    num /= den
    return float(num.mean())


def pair_ssims(pairs: list[tuple[int, int]], gen_of: Mapping[Any, np.ndarray], gt_of: Mapping[Any, np.ndarray],
               keep_gt: int = 8, gt_stats_of: Callable[[int, np.ndarray], tuple[np.ndarray, ...]] | None = None,
               ) -> dict[tuple[int, int], float]:
    """:func:`ssim` of every (generated, GT) index pair, each frame's own terms computed once while it is
    in use: ``pairs`` sorted by generated index (all of one frame's pairs together), the last ``keep_gt``
    GT frames kept (the phases resample nearby GT frames). ``gt_stats_of(j, frame)``: GT frame ``j``'s
    :func:`gray_stats` from the caller (who may hold them from another case of the same GT)."""
    out: dict[tuple[int, int], float] = {}
    gen_key, gen_stats = None, None
    gt_stats: dict[int, tuple[np.ndarray, ...]] = {}
    for p in pairs:
        if p[0] != gen_key:
            gen_key, gen_stats = p[0], gray_stats(gen_of[p])
        if p[1] not in gt_stats:
            while len(gt_stats) >= keep_gt:
                gt_stats.pop(next(iter(gt_stats)))
            gt_stats[p[1]] = gray_stats(gt_of[p]) if gt_stats_of is None else gt_stats_of(p[1], gt_of[p])
        out[p] = ssim(gen_of[p], gt_of[p], gen_stats, gt_stats[p[1]])
    return out


class _GtStats:
    """The blurred terms (μ, σ²) of GT frames at one size, kept across the cases that compare the same GT
    (a worker scores a clip's models one after another, each against the same resampled GT frames), within
    ``GT_STATS_BYTES``, the oldest dropped first; x and μ² are recomputed from the frame (cheap, exact)."""

    def __init__(self) -> None:
        self.kept: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}
        self.nbytes = 0

    def of(self, gt: tuple[Any, ...], j: int, frame: np.ndarray) -> tuple[np.ndarray, ...]:
        key = (*gt, j)
        hit = self.kept.get(key)
        if hit is None:
            x, mx, mx2, sx2 = gray_stats(frame)
            self.kept[key] = (mx, sx2)
            self.nbytes += mx.nbytes + sx2.nbytes
            while self.nbytes > GT_STATS_BYTES and self.kept:
                old = self.kept.pop(next(iter(self.kept)))
                self.nbytes -= old[0].nbytes + old[1].nbytes
            return x, mx, mx2, sx2
        mx, sx2 = hit
        return _gray(frame), mx, mx * mx, sx2


GT_STATS_BYTES = 64 << 20  # a 320x240 clip's resampled GT frames; larger frames reuse what fits


class PixelFidelity(MemoBenchMetric):
    """``{V,D,R,ALL}_{PSNR,SSIM,LPIPS}`` (official 4 dp) and ``…_raw``; the leaderboard uses ``ALL_*``."""

    name: ClassVar[str] = "memobench.pixel_fidelity"
    description: ClassVar[str] = "PSNR / SSIM / LPIPS of every generated frame vs resampled GT, per phase"
    primary: ClassVar[str] = "ALL_PSNR"
    values: ClassVar[dict[str, Value]] = {
        f"{phase}_{kind}{raw}": Value(higher_is_better=better, range=bounds, unit=unit,
                                      description=f"{kind} over phase {phase}" + (" (unrounded)" if raw else ""))
        for phase in ("V", "D", "R", "ALL") for raw in ("", "_raw")
        for kind, better, bounds, unit in (("PSNR", True, None, "dB"), ("SSIM", True, (0.0, 1.0), ""),
                                           ("LPIPS", False, (0.0, 1.0), ""))
    }
    models: ClassVar[tuple[str, ...]] = ()
    optional_models: ClassVar[tuple[str, ...]] = ("perceptual",)
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "lpips": True}
    thresholds: ClassVar[dict[str, Any]] = {}

    def optional_roles(self) -> dict[str, str]:
        """LPIPS needs the perceptual role (only when ``params.lpips``); PSNR/SSIM never do."""
        return {"perceptual": "LPIPS (V/D/R/ALL_LPIPS)"} if self.params["lpips"] else {}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Per-frame PSNR / SSIM / LPIPS of every (generated, resampled GT) pair of each phase."""
        frames = capped_frames(case, self.params["max_side"])
        h, r, n = phase_info(alignment)
        info = alignment.info
        defs = sampling.pixel_phase_indices(h, r, n, int(info["h_gt"]), int(info["r_gt"]), int(info["G"]))
        gt_needed = sorted({j for _, gts in defs.values() for j in gts})
        # GT frames stretched to the generated size as they are read (one video, one frame size): a 1080p GT
        # is never held at 1080p; INTER_AREA, no crop, as the official code stretches GT
        size = (int(frames.shape[2]), int(frames.shape[1]))
        fitted = dict(zip(gt_needed, gt_io.read_gt_frames(case, gt_needed, size)))
        pairs = sorted({(i, j) for gens, gts in defs.values() for i, j in zip(gens, gts)})
        gen_of = {p: pick(frames, [p[0]])[0] for p in pairs}
        gt_of = {p: fitted[p[1]] for p in pairs}
        p_val = {p: psnr(gen_of[p], gt_of[p]) for p in pairs}
        # the same GT content at the same size gives the same terms (another model's case of this clip)
        gt = (case.reference.content_hash(), size)
        memo: _GtStats = self.__dict__.setdefault("_gt_stats", _GtStats())
        s_val = pair_ssims(pairs, gen_of, gt_of, gt_stats_of=lambda j, frame: memo.of(gt, j, frame))
        l_val: dict[tuple[int, int], float] = {}
        perceptual, backend = optional_model(ctx, "perceptual") if self.params["lpips"] else (None, None)
        if perceptual is not None:
            # LPIPS needs equal sizes within a batch; frames of one video share a size
            for chunk in batched(pairs, max(ctx.batch_size, 16)):
                d = np.asarray(perceptual.distance([gen_of[p] for p in chunk], [gt_of[p] for p in chunk]))
                if len(d) != len(chunk):
                    raise CaseFailure(f"perceptual backend returned {len(d)} distances for {len(chunk)} pairs")
                l_val.update({p: float(v) for p, v in zip(chunk, d)})
        out: dict[str, Any] = {"lpips_backend": backend or ""}
        for ph, (gens, gts) in defs.items():
            keys = list(zip(gens, gts))
            out[f"{ph}_gen"] = np.asarray(gens, dtype=np.int64)
            out[f"{ph}_gt"] = np.asarray(gts, dtype=np.int64)
            out[f"{ph}_PSNR"] = np.asarray([p_val[k] for k in keys], dtype=np.float64)
            out[f"{ph}_SSIM"] = np.asarray([s_val[k] for k in keys], dtype=np.float64)
            out[f"{ph}_LPIPS"] = np.asarray([l_val.get(k, math.nan) for k in keys], dtype=np.float64)
        return out

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Phase means rounded to 4 (``V_PSNR`` …) and unrounded (``V_PSNR_raw`` …); absent phase -> None."""
        values: dict[str, float | None] = {}
        for ph in PHASES:
            for m in MEASURES:
                arr = measurement.get(f"{ph}_{m}")
                raw = None
                if arr is not None and len(arr) and not np.isnan(np.asarray(arr)).any():
                    raw = float(np.mean(arr))
                values[f"{ph}_{m}"] = rounding.round_py(raw, 4)
                values[f"{ph}_{m}_raw"] = raw
        return values
