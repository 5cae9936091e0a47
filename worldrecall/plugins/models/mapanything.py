"""``mapanything`` (role pose): MapAnything multi-view reconstruction, MemoBench's camera-pose estimator.

Only available when the ``mapanything`` package (facebookresearch/map-anything, not on PyPI) is
importable; otherwise the factory raises :class:`BackendUnavailable` saying so. Settings follow
MemoBench: ``MapAnything.from_pretrained("facebook/map-anything-apache")``; all N frames are written as
PNGs and read back with ``mapanything.utils.image.load_images`` defaults (518 px ``fixed_mapping``,
DINOv2 normalisation, patch 14); one ``infer`` call with ``memory_efficient_inference=True,
minibatch_size=1, use_amp=True, amp_dtype="bf16", apply_mask=True, mask_edges=True``; pose i =
``outputs[i]["camera_poses"][0]`` (4×4 c2w, OpenCV axes, with MapAnything's metric translation).
Memory grows with N (all views in one call), as in the official code.
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.models import BackendUnavailable
from worldrecall.plugins.models.manifest import entry
from worldrecall.plugins.models.options import Options, check_rgb, parse_options
from worldrecall.plugins.models.weights import ensure_weights, hf_dir, required_hf_files

NAME = "mapanything"
DEFAULTS: dict[str, Any] = {"memory_efficient_inference": True, "minibatch_size": 1, "amp_dtype": "bf16",
                            "apply_mask": True, "mask_edges": True, "revision": None}


class MapAnythingPose:
    """Camera-to-world poses of all frames from one MapAnything inference."""

    def __init__(self, model: Any, load_images: Any, options: Options):
        self.opts = options
        self.model = model
        self.load_images = load_images

    def poses(self, frames: Sequence[np.ndarray], *, case: Any = None,
              indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, 4, 4]`` float64 c2w (OpenCV axes, metric translation)."""
        from PIL import Image

        o = self.opts
        if len(frames) == 0:
            return np.zeros((0, 4, 4))
        on_cuda = str(o.device).startswith("cuda")
        with tempfile.TemporaryDirectory(prefix="wr-mapanything-") as tmp:
            paths = []
            for i, f in enumerate(frames):
                p = Path(tmp) / f"{i:06d}.png"
                Image.fromarray(check_rgb(f)).save(p)
                paths.append(str(p))
            views = self.load_images(paths)
            outputs = self.model.infer(
                views, memory_efficient_inference=bool(o["memory_efficient_inference"]),
                minibatch_size=int(o["minibatch_size"]), use_amp=on_cuda, amp_dtype=str(o["amp_dtype"]),
                apply_mask=bool(o["apply_mask"]), mask_edges=bool(o["mask_edges"]))
        poses = [np.asarray(out["camera_poses"][0].float().cpu().numpy(), dtype=np.float64) for out in outputs]
        return np.stack(poses)


def build(opts: Mapping[str, Any]) -> MapAnythingPose:
    """Factory: needs the ``mapanything`` package and the ``facebook/map-anything-apache`` weights."""
    o = parse_options(NAME, opts, DEFAULTS)
    if importlib.util.find_spec("mapanything") is None:
        raise BackendUnavailable(
            f"{NAME}: the mapanything package is not installed (it is not on PyPI; install "
            "facebookresearch/map-anything from source) — use pose backend superpoint_lightglue, sift_pose "
            "or sidecar_pose instead")
    e = entry(NAME)
    ensure_weights(NAME, e.weights, local_dir=o.local_dir, revision=o["revision"])
    folder = hf_dir(NAME, e.model_id, revision=o["revision"], local_dir=o.local_dir,
                    required=required_hf_files(e.weights, e.model_id))
    try:
        from mapanything.models import MapAnything
        from mapanything.utils.image import load_images
    except Exception as ex:
        raise BackendUnavailable(f"{NAME}: mapanything failed to import: {type(ex).__name__}: {ex}") from ex
    model = MapAnything.from_pretrained(str(folder)).to(o.device).eval()
    return MapAnythingPose(model, load_images, o)
