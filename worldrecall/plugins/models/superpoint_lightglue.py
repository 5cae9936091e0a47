"""``superpoint_lightglue`` (role pose): transformers SuperPoint + LightGlue matches → chained rotations.

``ETH-CVG/lightglue_superpoint`` (``AutoImageProcessor`` + ``AutoModelForKeypointMatching``) matches each
consecutive frame pair; matched keypoints (normalised by the processor) are scaled back to the frame's
pixels, and ``relative_pose`` turns them into rotations with intrinsics guessed from the frame size.
Translations stay zero (not recoverable at a meaningful scale from two views).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.plugins.models.options import Options, check_rgb, inference
from worldrecall.plugins.models.relative_pose import (
    PoseTrace,
    ReportsQuality,
    chain_c2w,
    guess_intrinsics,
    relative_rotation,
)
from worldrecall.plugins.models.weights import hf_backend_folder

NAME = "superpoint_lightglue"
DEFAULTS: dict[str, Any] = {"fov_deg": 60.0, "match_threshold": 0.0, "ransac_px": 1.0, "method": "auto",
                            "min_matches": 8, "revision": None}


def matched_points(out: Any, i: int, size_hw: tuple[int, int], threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates of pair ``i``'s matches (image 0 → image 1) with score > threshold."""
    h, w = size_hw
    scale = np.array([w, h], dtype=np.float64)
    mask = out.mask[i].cpu().numpy() > 0                       # [2, K] valid keypoints
    kp = out.keypoints[i].float().cpu().numpy() * scale       # [2, K, 2] normalised -> pixels
    m0 = out.matches[i, 0].cpu().numpy()                      # [K] index into image-1 keypoints or -1
    s0 = out.matching_scores[i, 0].float().cpu().numpy()
    ok = mask[0] & (m0 > -1) & (s0 > threshold)
    idx1 = m0[ok]
    ok1 = (idx1 < kp.shape[1]) & mask[1][np.clip(idx1, 0, kp.shape[1] - 1)]
    return kp[0][ok][ok1], kp[1][idx1[ok1]]


class LightGluePose(ReportsQuality):
    """Camera-to-world rotations of a frame sequence from LightGlue matches."""

    def __init__(self, model: Any, processor: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)
        self.processor = processor
        self.trace = PoseTrace()

    def poses(self, frames: Sequence[np.ndarray], *, case: Any = None,
              indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, 4, 4]`` c2w (OpenCV axes), frame 0 = identity, zero translations."""
        o = self.opts
        self.trace = PoseTrace()
        if len(frames) == 0:
            return np.zeros((0, 4, 4))
        h, w = np.asarray(frames[0]).shape[:2]
        k = guess_intrinsics(w, h, float(o["fov_deg"]))
        pairs = [(check_rgb(frames[i]), check_rgb(frames[i + 1])) for i in range(len(frames) - 1)]
        rels = []
        for chunk in batched(pairs, o.batch_size):
            inputs = self.processor([[a, b] for a, b in chunk], return_tensors="pt")
            with inference(o.device, o.dtype):
                out = self.model(pixel_values=inputs["pixel_values"].to(o.device))
            for i in range(len(chunk)):
                p0, p1 = matched_points(out, i, (h, w), float(o["match_threshold"]))
                res = relative_rotation(p0, p1, k, method=str(o["method"]), ransac_px=float(o["ransac_px"]),
                                        min_matches=int(o["min_matches"]))
                self.trace.pairs.append(res)
                rels.append(res.rotation)
        return chain_c2w(rels)


def build(opts: Mapping[str, Any]) -> LightGluePose:
    """Factory: processor + ``LightGlueForKeypointMatching`` from the HF cache (or ``local_dir``)."""
    o, folder = hf_backend_folder(NAME, opts, DEFAULTS)
    from transformers import AutoImageProcessor, AutoModelForKeypointMatching

    return LightGluePose(AutoModelForKeypointMatching.from_pretrained(folder),
                         AutoImageProcessor.from_pretrained(folder), o)
