"""``pose_landmarks`` backend: top-down ViTPose+ through transformers (``VitPoseForPoseEstimation``).

``usyd-community/vitpose-plus-small`` is a mixture-of-experts ViTPose+: expert ``dataset_index`` 0 is
COCO (17 human keypoints), 3 is AP-10K (17 animal keypoints) — one set of weights serves both templates of
A.11.2. Boxes go in as pixel ``[x0, y0, x1, y1]`` and are converted to the processor's COCO ``[x, y, w, h]``.
A single-expert checkpoint (``num_experts == 1`` in its config) is called without ``dataset_index``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.plugins.opis.backends import hf

VITPOSE_ID = "usyd-community/vitpose-plus-small"
DEFAULTS: dict[str, Any] = {"model_id": VITPOSE_ID, "human_dataset_index": 0, "animal_dataset_index": 3}


class VitPoseLandmarks:
    """17 keypoints (pixels) and confidences per box."""

    def __init__(self, model: Any, processor: Any, opts: Mapping[str, Any]):
        self.opts = opts
        self.device = hf.device(opts)
        self.model = model.eval().to(self.device)
        self.processor = processor

    def keypoints(self, image: np.ndarray, boxes: Sequence[Sequence[float]], *,
                  template: str = "human") -> list[tuple[np.ndarray, np.ndarray]]:
        """One ``(xy [17, 2], confidence [17])`` per box (empty list for no boxes)."""
        import torch

        if not len(boxes):
            return []
        coco = [[float(b[0]), float(b[1]), float(b[2] - b[0]), float(b[3] - b[1])] for b in boxes]
        img = np.ascontiguousarray(image, dtype=np.uint8)
        inputs = self.processor(images=[img], boxes=[coco], return_tensors="pt")
        kwargs: dict[str, Any] = {}
        if int(getattr(self.model.config.backbone_config, "num_experts", 1) or 1) > 1:
            idx = int(self.opts["animal_dataset_index" if template == "animal" else "human_dataset_index"])
            kwargs["dataset_index"] = torch.full((len(coco),), idx, dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = self.model(pixel_values=inputs["pixel_values"].to(self.device), **kwargs)
        res = self.processor.post_process_pose_estimation(out, boxes=[coco])[0]
        return [(np.asarray(r["keypoints"].float().cpu().numpy(), np.float64),
                 np.asarray(r["scores"].float().cpu().numpy(), np.float64)) for r in res]


def build_vitpose(opts: Mapping[str, Any]) -> VitPoseLandmarks:
    """Factory: ``opis_vitpose_plus_small`` (``VitPoseForPoseEstimation`` + ``VitPoseImageProcessor``)."""
    o = hf.options("opis_vitpose_plus_small", opts, DEFAULTS)
    from transformers import AutoImageProcessor, VitPoseForPoseEstimation

    return VitPoseLandmarks(hf.load("opis_vitpose_plus_small", VitPoseForPoseEstimation, o),
                            hf.load("opis_vitpose_plus_small", AutoImageProcessor, o), o)
