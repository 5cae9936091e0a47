"""Frames as the MIND release compares them, and its per-frame MSE / PSNR / SSIM.

Release (CSU-JPG/MIND ``src/utils/utils.py`` ``transform_image``, ``VideoStreamReader``; ``src/metrics/lcm.py``):

* every decoded frame (RGB, 0-255 as float) is brought to 720 × 1280: a 16:9 frame is resized to (720, 1280)
  (bilinear, ``antialias=False``); any other shape is resized by ``max(1280 / w, 720 / h)`` to
  ``(round(h·s), round(w·s))`` and centre-cropped to 720 × 1280 (torchvision ``center_crop``); then / 255 and
  clamped to [0, 1]. ``frame_size: native`` keeps the decoded size instead (a worldrecall switch for small
  videos; both videos of a pair must then share a size);
* MSE: the mean over pixels and channels of the squared difference on [0, 1], per frame;
* PSNR: torchmetrics ``PeakSignalNoiseRatio(data_range=1.0, reduction='none', dim=[1, 2, 3])``, i.e.
  ``10·log10(1 / MSE)`` per frame (infinite for identical frames);
* SSIM: torchmetrics ``StructuralSimilarityIndexMeasure(data_range=1.0, reduction='none')``: Gaussian window
  11 × 11, σ = 1.5, K1 = 0.01, K2 = 0.03, per channel, population (co)variances (clamped at 0, as current
  torchmetrics does), the map cropped by 5 pixels on every side (only windows inside the image), then the mean
  over channels and pixels, per frame. The separable window here equals torchmetrics' 2-D one (its outer product).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure

RELEASE_SIZE = (720, 1280)   # (height, width) of transform_image
FRAME_SIZES = ("release", "native")
SSIM_KERNEL, SSIM_SIGMA, SSIM_K1, SSIM_K2 = 11, 1.5, 0.01, 0.03


def release_geometry(h: int, w: int, size: tuple[int, int] = RELEASE_SIZE) -> tuple[tuple[int, int], tuple[int, int]]:
    """((resized h, resized w), (crop top, crop left)) of ``transform_image`` for an ``h × w`` frame."""
    th, tw = size
    if h * tw == w * th:
        return (th, tw), (0, 0)
    s = max(tw / w, th / h)
    rh, rw = round(h * s), round(w * s)
    # torchvision center_crop: int(round((H - h) / 2.0)) with Python's round
    return (rh, rw), (round((rh - th) / 2.0), round((rw - tw) / 2.0))


def to_unit(frames: np.ndarray, frame_size: str = "release") -> Any:
    """``[N, H, W, 3]`` uint8 RGB -> float32 torch ``[N, 3, h, w]`` on [0, 1] as the release reads frames."""
    import torch
    import torch.nn.functional as F

    if frame_size not in FRAME_SIZES:
        raise CaseFailure(f"frame_size {frame_size!r}: expected one of {', '.join(FRAME_SIZES)}")
    x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float()
    if frame_size == "release":
        h, w = int(x.shape[2]), int(x.shape[3])
        (rh, rw), (top, left) = release_geometry(h, w)
        if (rh, rw) != (h, w):
            x = F.interpolate(x, size=(rh, rw), mode="bilinear", align_corners=False, antialias=False)
        x = x[:, :, top:top + RELEASE_SIZE[0], left:left + RELEASE_SIZE[1]]
    return torch.clamp(x / 255.0, 0.0, 1.0)


def to_uint8(x: Any) -> list[np.ndarray]:
    """[0, 1] float ``[N, 3, H, W]`` -> uint8 RGB ``[H, W, 3]`` frames (rounded), what the model roles take."""
    import torch

    a = (x.clamp(0.0, 1.0) * 255.0).round().to(dtype=torch.uint8).permute(0, 2, 3, 1).contiguous()
    return list(a.numpy())


def mse(pred: Any, gt: Any) -> np.ndarray:
    """Per-frame MSE on [0, 1] (float32 mean over pixels and channels, as the release)."""
    d = (pred - gt) ** 2
    return d.reshape(len(d), -1).mean(dim=1).double().numpy()


def psnr_from_mse(m: np.ndarray) -> np.ndarray:
    """``10·log10(1 / MSE)`` (data range 1); +inf where MSE is 0."""
    m = np.asarray(m, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(m > 0, 10.0 * np.log10(1.0 / np.where(m > 0, m, 1.0)), math.inf)


def _gauss_1d() -> Any:
    import torch

    dist = torch.arange((1 - SSIM_KERNEL) / 2, (1 + SSIM_KERNEL) / 2, 1.0, dtype=torch.float32)
    g = torch.exp(-((dist / SSIM_SIGMA) ** 2) / 2)
    return g / g.sum()


def ssim(pred: Any, gt: Any) -> np.ndarray:
    """Per-frame SSIM (data range 1) of ``[N, C, H, W]`` float tensors, torchmetrics' settings (module doc)."""
    import torch
    import torch.nn.functional as F

    n, c, h, w = pred.shape
    if h < SSIM_KERNEL or w < SSIM_KERNEL:
        raise CaseFailure(f"frames of {w}x{h} are smaller than SSIM's {SSIM_KERNEL}x{SSIM_KERNEL} window")
    g = _gauss_1d()
    kx = g.reshape(1, 1, 1, SSIM_KERNEL).repeat(5 * c, 1, 1, 1)
    ky = g.reshape(1, 1, SSIM_KERNEL, 1).repeat(5 * c, 1, 1, 1)
    x, y = pred.float(), gt.float()
    stack = torch.cat([x, y, x * x, y * y, x * y], dim=1)              # [N, 5C, H, W]
    out = F.conv2d(F.conv2d(stack, kx, groups=5 * c), ky, groups=5 * c)  # 'valid' = torchmetrics' crop
    mx, my, exx, eyy, exy = out.split(c, dim=1)
    mx2, my2, mxy = mx * mx, my * my, mx * my
    sx2 = torch.clamp(exx - mx2, min=0.0)
    sy2 = torch.clamp(eyy - my2, min=0.0)
    sxy = exy - mxy
    c1, c2 = (SSIM_K1 * 1.0) ** 2, (SSIM_K2 * 1.0) ** 2
    num = (2 * mxy + c1) * (2 * sxy + c2)
    den = (mx2 + my2 + c1) * (sx2 + sy2 + c2)
    return (num / den).reshape(n, -1).mean(dim=1).double().numpy()


CHUNK = 16   # frame pairs held at 720 x 1280 float at once (~11 MB per frame)


def pair_indices(case: Any, alignment: Any) -> tuple[list[int], list[int], bool]:
    """(generated indices, partner indices, partner is the generated video itself) of the aligned pairs:
    memory clips pair generated ``i`` with GT ``gt_start + i`` over ``prediction``; mirror videos pair ``i`` of
    ``first`` with ``n - 1 - i`` (the time-reversed ``second`` half)."""
    ph = alignment.phases
    if alignment.info.get("mirror"):
        first, second = ph["first"], ph["second"]
        gen = list(first.indices())
        return gen, [second.end - k for k in range(len(gen))], True
    if "prediction" not in ph:
        return [], [], False
    gen = list(ph["prediction"].indices())
    start = int(alignment.info["gt_start"])
    return gen, [start + i for i in gen], False


def iter_pairs(case: Any, alignment: Any, chunk: int = CHUNK):
    """Yield ``(generated indices, pred, partner)`` float [0, 1] tensors ``[n, 3, h, w]`` chunk by chunk, at the
    alignment's ``frame_size``."""
    frame_size = str(alignment.info.get("frame_size", "release"))
    gen, other, mirror = pair_indices(case, alignment)
    video = case.video.frames()
    partner_video = video if mirror else case.reference.frames()
    for s in range(0, len(gen), chunk):
        gi, oi = gen[s:s + chunk], other[s:s + chunk]
        pred = to_unit(video[gi], frame_size)
        part = to_unit(partner_video[oi], frame_size)
        if pred.shape != part.shape:
            where = case.video.path if mirror else f"{case.video.path} vs {case.reference.path}"
            raise CaseFailure(f"{where}: frames of {pred.shape[3]}x{pred.shape[2]} and {part.shape[3]}x"
                              f"{part.shape[2]} cannot be compared (frame_size: {frame_size}; 'release' brings "
                              f"both to 1280x720)")
        yield gi, pred, part
