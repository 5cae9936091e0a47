"""``opis_matcher`` backends: reference-image <-> frame correspondences in source pixels.

* ``opis_sift_matcher`` (classical): OpenCV SIFT on grey images, Lowe ratio 0.8, mutual nearest neighbours.
* ``opis_superpoint_lightglue`` (reference): transformers SuperPoint + LightGlue
  (``ETH-CVG/lightglue_superpoint``); normalised keypoints scaled back to each image's pixels.

The paper's MASt3R (ViT-L 512, reciprocal descriptor matches) needs the ``mast3r`` package, which is not on
PyPI; it has no wrapper here yet, so it is not registered (a backend that can never run would only be
skipped).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from worldrecall.plugins.opis.backends import hf

SIFT_DEFAULTS: dict[str, Any] = {"ratio": 0.8, "max_features": 4000, "mutual": True}
LIGHTGLUE_ID = "ETH-CVG/lightglue_superpoint"
LIGHTGLUE_DEFAULTS: dict[str, Any] = {"model_id": LIGHTGLUE_ID, "threshold": 0.0}


def _grey(img: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.cvtColor(np.ascontiguousarray(img, dtype=np.uint8), cv2.COLOR_RGB2GRAY)


class SiftMatcher:
    """SIFT + ratio test (+ mutual check)."""

    def __init__(self, opts: Mapping[str, Any]):
        self.opts = {**SIFT_DEFAULTS, **{k: v for k, v in opts.items() if k in SIFT_DEFAULTS}}

    def match(self, ref_image: np.ndarray, frame: np.ndarray, *, case: Any = None,
              index: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(ref_px, cur_px) float64 [M, 2] of accepted matches."""
        import cv2

        sift = cv2.SIFT_create(nfeatures=int(self.opts["max_features"]))
        k0, d0 = sift.detectAndCompute(_grey(ref_image), None)
        k1, d1 = sift.detectAndCompute(_grey(frame), None)
        empty = (np.zeros((0, 2)), np.zeros((0, 2)))
        if d0 is None or d1 is None or len(k0) < 2 or len(k1) < 2:
            return empty
        bf = cv2.BFMatcher(cv2.NORM_L2)
        fwd = bf.knnMatch(d0, d1, k=2)
        good = {m.queryIdx: m.trainIdx for m, n in (p for p in fwd if len(p) == 2)
                if m.distance < float(self.opts["ratio"]) * n.distance}
        if self.opts["mutual"] and good:
            back = bf.match(d1, d0)
            best = {m.queryIdx: m.trainIdx for m in back}
            good = {q: t for q, t in good.items() if best.get(t) == q}
        if not good:
            return empty
        q = sorted(good)
        ref = np.array([k0[i].pt for i in q], np.float64)
        cur = np.array([k1[good[i]].pt for i in q], np.float64)
        return ref, cur


class LightGlueMatcher:
    """SuperPoint + LightGlue on the (reference, frame) pair."""

    def __init__(self, model: Any, processor: Any, opts: Mapping[str, Any]):
        self.opts = opts
        self.device = hf.device(opts)
        self.model = model.eval().to(self.device)
        self.processor = processor

    def match(self, ref_image: np.ndarray, frame: np.ndarray, *, case: Any = None,
              index: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Matches with score > ``threshold``, in each image's own pixels."""
        import torch

        a = np.ascontiguousarray(ref_image, dtype=np.uint8)
        b = np.ascontiguousarray(frame, dtype=np.uint8)
        inputs = self.processor([[a, b]], return_tensors="pt")
        with torch.inference_mode():
            out = self.model(pixel_values=inputs["pixel_values"].to(self.device))
        mask = out.mask[0].cpu().numpy() > 0
        kp = out.keypoints[0].float().cpu().numpy()              # [2, K, 2] normalised
        m0 = out.matches[0, 0].cpu().numpy()
        s0 = out.matching_scores[0, 0].float().cpu().numpy()
        ok = mask[0] & (m0 > -1) & (s0 > float(self.opts["threshold"]))
        idx1 = m0[ok]
        ok1 = (idx1 < kp.shape[1]) & mask[1][np.clip(idx1, 0, kp.shape[1] - 1)]
        ref = kp[0][ok][ok1] * np.array([a.shape[1], a.shape[0]], np.float64)
        cur = kp[1][idx1[ok1]] * np.array([b.shape[1], b.shape[0]], np.float64)
        return ref.astype(np.float64), cur.astype(np.float64)


def build_sift(opts: Mapping[str, Any]) -> SiftMatcher:
    """Factory: ``opis_sift_matcher``."""
    return SiftMatcher(opts)


def build_lightglue(opts: Mapping[str, Any]) -> LightGlueMatcher:
    """Factory: ``opis_superpoint_lightglue`` (``LightGlueForKeypointMatching`` + its processor)."""
    o = hf.options("opis_superpoint_lightglue", opts, LIGHTGLUE_DEFAULTS)
    from transformers import AutoImageProcessor, LightGlueForKeypointMatching

    return LightGlueMatcher(hf.load("opis_superpoint_lightglue", LightGlueForKeypointMatching, o),
                            hf.load("opis_superpoint_lightglue", AutoImageProcessor, o), o)
