"""``opis_geometry`` backends: single-image metric depth + intrinsics at the image's own resolution.

* ``opis_sidecar_geometry`` (sidecar): the input image's geometry from the case's
  ``reference_geometry.npz`` (keys ``depth`` [h, w] metres, ``K`` [3, 3] at that resolution, optional
  ``valid``), a generated frame's from its ViPE sidecar row (``formats.vipe.read_sidecar``); depth is
  resampled (nearest) to the image size and K rescaled (pixel-centre convention). Exact on the synthetic suite.
* ``opis_moge2_vitl`` (reference, paper): MoGe-2 ViT-L (``Ruicheng/moge-2-vitl-normal``) through the ``moge``
  package, resolution level 5; its normalised K is converted to pixels (A.5). Unavailable without ``moge``.
* ``opis_depth_anything_v2_metric`` (reference fallback): Depth-Anything-V2 metric (indoor, small) through
  transformers, depth resized to the image; K from an assumed horizontal field of view (``fov_deg``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure, one_line
from worldrecall.core.models import BackendUnavailable
from worldrecall.formats.arrays import load_npz
from worldrecall.plugins.opis.backends import hf, sidecar_cache
from worldrecall.plugins.opis.geometry import MonoGeometry, normalized_k_to_pixels, rescale_k

DA_METRIC_ID = "depth-anything/Depth-Anything-V2-Metric-Indoor-Small-hf"
DA_DEFAULTS: dict[str, Any] = {"model_id": DA_METRIC_ID, "fov_deg": 60.0}
MOGE_ID = "Ruicheng/moge-2-vitl-normal"
MOGE_DEFAULTS: dict[str, Any] = {"model_id": MOGE_ID, "resolution_level": 5}


def resize_nearest(arr: np.ndarray, w: int, h: int) -> np.ndarray:
    """Nearest-neighbour resize (pixel-centre sampling) of a 2-D array to ``[h, w]``."""
    ah, aw = arr.shape[:2]
    if (ah, aw) == (h, w):
        return np.asarray(arr).copy()
    rows = np.minimum(((np.arange(h) + 0.5) * ah / h).astype(np.int64), ah - 1)
    cols = np.minimum(((np.arange(w) + 0.5) * aw / w).astype(np.int64), aw - 1)
    return np.asarray(arr)[rows[:, None], cols[None, :]]


def _fov_k(w: int, h: int, fov_deg: float) -> np.ndarray:
    f = 0.5 * w / np.tan(np.radians(fov_deg) / 2.0)
    return np.array([[f, 0.0, (w - 1) / 2.0], [0.0, f, (h - 1) / 2.0], [0.0, 0.0, 1.0]])


def _at_size(depth: np.ndarray, K: np.ndarray, valid: np.ndarray, w: int, h: int) -> MonoGeometry:
    dh, dw = depth.shape
    d = resize_nearest(np.asarray(depth, np.float32), w, h)
    v = resize_nearest(np.asarray(valid, bool), w, h) & np.isfinite(d) & (d > 0)
    return MonoGeometry(depth=np.where(v, d, 0.0).astype(np.float32), K=rescale_k(K, (dw, dh), (w, h)), valid=v)


class SidecarGeometry:
    """Depth + K that the dataset ships (synthetic suite: exact raycast depth)."""

    def __init__(self, opts: Mapping[str, Any]):
        self.opts = opts

    def geometry(self, image: np.ndarray, *, case: Any = None, index: int | None = None) -> MonoGeometry:
        """The input image's (``index=None``) or generated frame ``index``'s geometry at ``image``'s size."""
        h, w = np.asarray(image).shape[:2]
        if case is None:
            raise CaseFailure("opis_sidecar_geometry: needs the case (it reads the case's files)")
        if index is None:
            p = case.sidecars.get("reference_geometry")
            if p is None:
                raise CaseFailure(f"{case.case_id}: reference_geometry.npz missing (opis_sidecar_geometry)")
            try:  # member headers checked before inflating (formats.arrays)
                z = load_npz(Path(p), ("depth", "K", "valid"))
                depth, K = np.asarray(z["depth"], np.float32), np.asarray(z["K"], np.float64)
                valid = np.asarray(z["valid"], bool) if "valid" in z else None
            except (OSError, ValueError, KeyError) as e:
                raise CaseFailure(f"{p}: unreadable reference geometry ({one_line(e)})") from None
            if depth.ndim != 2 or K.shape != (3, 3):
                raise CaseFailure(f"{p}: depth must be [h, w] and K [3, 3], got {depth.shape} and {K.shape}")
            if valid is None:
                valid = np.isfinite(depth) & (depth > 0)
            return _at_size(depth, K, valid, w, h)
        d = case.sidecars.get("vipe")
        if d is None:
            raise CaseFailure(f"{case.case_id}: no ViPE sidecar (annotations_vipe/{case.case_id}_vipe_ann)")
        sc = sidecar_cache.sidecar(d)
        row = sc.row_for_frame(int(index))
        depth = np.asarray(sc.depth[row], np.float32)
        valid = np.asarray(sc.valid[row], bool) if sc.valid is not None else np.isfinite(depth) & (depth > 0)
        # reader notes (a corrupt depth frame read as NaN) go onto the rows of the metric using this depth
        _note(case, sc.notes)
        return _at_size(depth, np.asarray(sc.intrinsics[row], np.float64), valid, w, h)


def _note(case: Any, notes: list[str]) -> None:
    """Reader notes (e.g. a corrupt depth frame read as NaN) onto ``case.warnings``, whence the engine moves
    them onto the rows of the metric that used the data."""
    warnings = getattr(case, "warnings", None)
    if warnings is not None:
        warnings.extend(n for n in notes if n not in warnings)


class DepthAnythingMetricGeometry:
    """Depth-Anything-V2 metric depth; K from ``fov_deg`` (the model predicts no intrinsics)."""

    def __init__(self, model: Any, processor: Any, opts: Mapping[str, Any]):
        self.opts = opts
        self.device = hf.device(opts)
        self.model = model.eval().to(self.device)
        self.processor = processor

    def geometry(self, image: np.ndarray, *, case: Any = None, index: int | None = None) -> MonoGeometry:
        """Metric depth resized (bilinear) to the image, K from the assumed field of view."""
        import torch

        img = np.ascontiguousarray(image, dtype=np.uint8)
        h, w = img.shape[:2]
        inputs = self.processor(images=[img], return_tensors="pt")
        with torch.inference_mode():
            pred = self.model(pixel_values=inputs["pixel_values"].to(self.device)).predicted_depth
        d = torch.nn.functional.interpolate(pred[:, None].float(), size=(h, w), mode="bilinear",
                                            align_corners=False)[0, 0].cpu().numpy()
        valid = np.isfinite(d) & (d > 0)
        return MonoGeometry(depth=np.where(valid, d, 0.0).astype(np.float32), K=_fov_k(w, h, float(self.opts["fov_deg"])),
                            valid=valid)


class MogeGeometry:
    """MoGe-2: point map, depth, normalised K (converted to pixels), validity mask."""

    def __init__(self, model: Any, opts: Mapping[str, Any]):
        self.opts = opts
        self.device = hf.device(opts)
        self.model = model.eval().to(self.device)

    def geometry(self, image: np.ndarray, *, case: Any = None, index: int | None = None) -> MonoGeometry:
        """MoGe inference at ``resolution_level``; invalid pixels get depth 0."""
        import torch

        img = np.ascontiguousarray(image, dtype=np.uint8)
        h, w = img.shape[:2]
        t = torch.from_numpy(img).to(self.device).float().div(255).permute(2, 0, 1)
        with torch.inference_mode():
            out = self.model.infer(t, resolution_level=int(self.opts["resolution_level"]))
        valid = out["mask"].cpu().numpy().astype(bool)
        depth = out["depth"].float().cpu().numpy()
        valid &= np.isfinite(depth) & (depth > 0)
        return MonoGeometry(depth=np.where(valid, depth, 0.0).astype(np.float32),
                            K=normalized_k_to_pixels(out["intrinsics"].float().cpu().numpy(), w, h), valid=valid,
                            points=out["points"].float().cpu().numpy())


def build_sidecar(opts: Mapping[str, Any]) -> SidecarGeometry:
    """Factory: ``opis_sidecar_geometry``."""
    return SidecarGeometry(opts)


def build_depth_anything(opts: Mapping[str, Any]) -> DepthAnythingMetricGeometry:
    """Factory: ``opis_depth_anything_v2_metric`` (``DepthAnythingForDepthEstimation`` + its processor)."""
    o = hf.options("opis_depth_anything_v2_metric", opts, DA_DEFAULTS)
    from transformers import AutoImageProcessor, DepthAnythingForDepthEstimation

    return DepthAnythingMetricGeometry(hf.load("opis_depth_anything_v2_metric", DepthAnythingForDepthEstimation, o),
                                       hf.load("opis_depth_anything_v2_metric", AutoImageProcessor, o), o)


def build_moge(opts: Mapping[str, Any]) -> MogeGeometry:
    """Factory: ``opis_moge2_vitl`` (needs the ``moge`` package)."""
    o = hf.options("opis_moge2_vitl", opts, MOGE_DEFAULTS)
    try:
        from moge.model.v2 import MoGeModel
    except ImportError as e:
        raise BackendUnavailable(f"opis_moge2_vitl: needs the moge package ({one_line(e)}); "
                                 "use models.opis_geometry=opis_depth_anything_v2_metric") from None
    try:
        model = MoGeModel.from_pretrained(str(o.get("local_dir") or o["model_id"]))
    except (OSError, ValueError) as e:
        raise BackendUnavailable(f"opis_moge2_vitl: cannot load {o['model_id']} ({one_line(e, 200)})") from None
    return MogeGeometry(model, o)
