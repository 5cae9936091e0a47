"""Per-window observations (spec A.4): segment, filter, de-duplicate, crop, embed, describe.

The segmenter (role ``segmenter``) is prompted with each reference category string (at most 64 prompts);
detections below confidence 0.35 are dropped; masks must cover >= 64 px and >= 5e-5 of the frame and
<= 0.65 of it; duplicates (mask IoU >= 0.82, or bbox IoU >= 0.88 without masks, or containment =
intersection / smaller area >= 0.92) keep the more confident detection (ties: the earlier prompt).
Each survivor is cropped with 4 px padding, embedded with the inventory's backend, and described by the
palette colour nearest to the crop's mean RGB and a shape word from its bbox aspect ratio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from worldrecall.plugins.opis.records import Observation

CONFIDENCE_MIN = 0.35
MIN_AREA_PX = 64
MIN_AREA_FRACTION = 5e-5
MAX_AREA_FRACTION = 0.65
DEDUPE_MASK_IOU = 0.82
DEDUPE_BOX_IOU = 0.88
DEDUPE_CONTAINMENT = 0.92
CROP_PAD = 4
MAX_PROMPTS = 64
MAX_OBJECTS = 256

#: A.4 palette (name -> RGB).
PALETTE: dict[str, tuple[int, int, int]] = {
    "black": (20, 20, 20), "white": (235, 235, 235), "gray": (128, 128, 128), "red": (210, 45, 45),
    "green": (55, 160, 70), "blue": (55, 100, 210), "yellow": (220, 200, 40), "orange": (225, 125, 35),
    "brown": (125, 80, 45), "purple": (145, 80, 175),
}


def palette_colour(rgb: Sequence[float]) -> str:
    """Nearest palette colour (Euclidean in RGB; ties: palette order)."""
    c = np.asarray(rgb, np.float64)
    names = list(PALETTE)
    d = [float(np.sum((c - np.asarray(PALETTE[n], np.float64)) ** 2)) for n in names]
    return names[int(np.argmin(d))]


def shape_word(width: float, height: float) -> str:
    """"wide" if w/h > 1.35, "tall" if < 0.74, else "compact"."""
    ar = float(width) / max(float(height), 1e-9)
    return "wide" if ar > 1.35 else "tall" if ar < 0.74 else "compact"


@dataclass
class Candidate:
    """One raw detection with the prompt that produced it."""

    category: str
    mask: np.ndarray | None          # bool [H, W]
    box: tuple[float, float, float, float]
    score: float
    order: int                       # prompt order then detection order (stable tie-break)

    @property
    def area(self) -> float:
        if self.mask is not None:
            return float(self.mask.sum())
        return max(0.0, self.box[2] - self.box[0]) * max(0.0, self.box[3] - self.box[1])


def mask_box(mask: np.ndarray) -> tuple[float, float, float, float] | None:
    """Tight pixel box [x0, y0, x1, y1) of a mask (None if empty)."""
    ys, xs = np.nonzero(mask)
    if not len(xs):
        return None
    return float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)


def box_iou(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(IoU, intersection / smaller area) of two boxes."""
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    aa = max(0.0, a[2] - a[0]) * max(0.0, a[3] - a[1])
    ab = max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])
    union = aa + ab - inter
    return (inter / union if union > 0 else 0.0), (inter / min(aa, ab) if min(aa, ab) > 0 else 0.0)


def _duplicate(a: Candidate, b: Candidate) -> bool:
    if a.mask is not None and b.mask is not None:
        inter = float(np.logical_and(a.mask, b.mask).sum())
        union = float(np.logical_or(a.mask, b.mask).sum())
        iou = inter / union if union > 0 else 0.0
        contain = inter / min(a.area, b.area) if min(a.area, b.area) > 0 else 0.0
        return iou >= DEDUPE_MASK_IOU or contain >= DEDUPE_CONTAINMENT
    iou, contain = box_iou(a.box, b.box)
    return iou >= DEDUPE_BOX_IOU or contain >= DEDUPE_CONTAINMENT


def filter_candidates(cands: list[Candidate], frame_size: tuple[int, int], *,
                      confidence_min: float = CONFIDENCE_MIN) -> list[Candidate]:
    """Confidence, area and duplicate filters; survivors in (score desc, prompt order) order, <= 256."""
    W, H = frame_size
    total = float(W * H)
    kept: list[Candidate] = []
    for c in sorted(cands, key=lambda c: (-c.score, c.order)):
        if not np.isfinite(c.score) or c.score < confidence_min:
            continue
        a = c.area
        if a < MIN_AREA_PX or a < MIN_AREA_FRACTION * total or a > MAX_AREA_FRACTION * total:
            continue
        if any(_duplicate(c, k) for k in kept):
            continue
        kept.append(c)
        if len(kept) >= MAX_OBJECTS:
            break
    return kept


def crop(frame: np.ndarray, box: Sequence[float], pad: int = CROP_PAD) -> np.ndarray:
    """The box (integer pixel span) grown by ``pad`` px on each side, clipped to the frame."""
    H, W = frame.shape[:2]
    x0 = max(0, int(np.floor(box[0])) - pad)
    y0 = max(0, int(np.floor(box[1])) - pad)
    x1 = min(W, int(np.ceil(box[2])) + pad)
    y1 = min(H, int(np.ceil(box[3])) + pad)
    return frame[y0:max(y1, y0 + 1), x0:max(x1, x0 + 1)]


def describe(crop_rgb: np.ndarray, box: Sequence[float]) -> dict[str, Any]:
    """A.4 attributes of a crop: palette colour of its mean RGB, shape word, mean_rgb, aspect_ratio."""
    mean = np.asarray(crop_rgb, np.float64).reshape(-1, 3).mean(axis=0)
    w, h = float(box[2] - box[0]), float(box[3] - box[1])
    return {"color": palette_colour(mean), "shape": shape_word(w, h),
            "mean_rgb": [round(float(v), 2) for v in mean], "aspect_ratio": round(w / max(h, 1e-9), 4)}


def candidates_from_detections(per_category: list[tuple[str, list[Any]]]) -> list[Candidate]:
    """Flatten ``[(category, [Detection, ...]), ...]`` (prompt order) into candidates with boxes."""
    out: list[Candidate] = []
    for category, dets in per_category:
        for d in dets:
            mask = None if getattr(d, "mask", None) is None else np.asarray(d.mask, bool)
            box = mask_box(mask) if mask is not None else None
            if box is None and getattr(d, "box", None) is not None:
                box = tuple(float(v) for v in d.box)
            if box is None:
                continue
            out.append(Candidate(category, mask, box, float(d.score), len(out)))
    return out


def observations_for_frame(frame: np.ndarray, cands: list[Candidate], embedder: Any, window_id: str, *,
                           confidence_min: float = CONFIDENCE_MIN, pad: int = CROP_PAD) -> list[Observation]:
    """Filtered candidates of one frame as :class:`Observation` records (embedded in one batch)."""
    H, W = frame.shape[:2]
    kept = filter_candidates(cands, (W, H), confidence_min=confidence_min)
    crops = [crop(frame, c.box, pad) for c in kept]
    embs = np.asarray(embedder.embed(crops), np.float64) if crops else np.zeros((0, 0))
    out = []
    for j, (c, cr) in enumerate(zip(kept, crops)):
        out.append(Observation(observed_id=f"{window_id}_o{j:03d}", bbox=c.box, category=c.category,
                               confidence=float(c.score), attributes=describe(cr, c.box), embedding=embs[j]))
    return out
