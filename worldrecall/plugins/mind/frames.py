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


def ssim(pred: Any, gt: Any) -> np.ndarray:
    """Per-frame SSIM (data range 1) of ``[N, C, H, W]`` float tensors, torchmetrics' settings (module doc).

    The Gaussian window is applied separably (OpenCV, float32) and only where it lies inside the image — the
    pixels torchmetrics keeps after cropping its reflect-padded map — so the border mode never matters."""
    import cv2

    n, c, h, w = pred.shape
    if h < SSIM_KERNEL or w < SSIM_KERNEL:
        raise CaseFailure(f"frames of {w}x{h} are smaller than SSIM's {SSIM_KERNEL}x{SSIM_KERNEL} window")
    k = cv2.getGaussianKernel(SSIM_KERNEL, SSIM_SIGMA).astype(np.float32)
    r = SSIM_KERNEL // 2
    c1, c2 = (SSIM_K1 * 1.0) ** 2, (SSIM_K2 * 1.0) ** 2

    def win(z: np.ndarray) -> np.ndarray:
        return cv2.sepFilter2D(z, cv2.CV_32F, k, k, borderType=cv2.BORDER_REFLECT_101)[r:h - r, r:w - r]

    xs = np.ascontiguousarray(pred.float().numpy())
    ys = np.ascontiguousarray(gt.float().numpy())
    out = np.empty(n, np.float64)
    for i in range(n):
        total = 0.0
        for ch in range(c):
            x, y = xs[i, ch], ys[i, ch]
            mx, my = win(x), win(y)
            mx2, my2, mxy = mx * mx, my * my, mx * my
            sx2 = np.maximum(win(x * x) - mx2, 0.0)
            sy2 = np.maximum(win(y * y) - my2, 0.0)
            sxy = win(x * y) - mxy
            ssim_map = (2 * mxy + c1) * (2 * sxy + c2) / ((mx2 + my2 + c1) * (sx2 + sy2 + c2))
            total += float(ssim_map.mean(dtype=np.float64))
        out[i] = total / c   # channels hold equally many pixels: the mean of the per-channel means
    return out

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


def iter_pairs(case: Any, alignment: Any, chunk: int = CHUNK, *, as_uint8: bool = False):
    """Yield ``(generated indices, pred, partner)`` chunk by chunk at the alignment's ``frame_size``: float [0, 1]
    tensors ``[n, 3, h, w]``, or with ``as_uint8`` lists of uint8 RGB frames (what the model roles take: the
    decoded frames themselves at ``native``, the 1280 × 720 release frames rounded at ``release``)."""
    frame_size = str(alignment.info.get("frame_size", "release"))
    gen, other, mirror = pair_indices(case, alignment)
    video = case.video.frames()
    partner_video = video if mirror else case.reference.frames()
    for s in range(0, len(gen), chunk):
        gi, oi = gen[s:s + chunk], other[s:s + chunk]
        if as_uint8 and frame_size == "native":
            pred, part = list(video[gi]), list(partner_video[oi])
            _same_shape(case, mirror, frame_size, pred[0].shape[:2], part[0].shape[:2])
            yield gi, pred, part
            continue
        pred = to_unit(video[gi], frame_size)
        part = to_unit(partner_video[oi], frame_size)
        _same_shape(case, mirror, frame_size, tuple(pred.shape[2:]), tuple(part.shape[2:]))
        yield (gi, to_uint8(pred), to_uint8(part)) if as_uint8 else (gi, pred, part)


def _same_shape(case: Any, mirror: bool, frame_size: str, a: tuple, b: tuple) -> None:
    if tuple(a) != tuple(b):
        where = case.video.path if mirror else f"{case.video.path} vs {case.reference.path}"
        raise CaseFailure(f"{where}: frames of {a[1]}x{a[0]} and {b[1]}x{b[0]} cannot be compared (frame_size: "
                          f"{frame_size}; 'release' brings both to 1280x720)")
