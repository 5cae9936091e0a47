"""OPIS plugin: registers the ``opis`` loader, the ``opis.windows`` aligner, the ``opis.opis`` metric, the
perception roles OPIS declares (``opis_geometry``, ``opis_matcher``, ``opis_embedder``, ``pose_landmarks``)
and their backends. Importing this module loads no torch, transformers or OpenCV (factories import lazily).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from worldrecall.core.components import Benchmark
from worldrecall.core.hookspecs import hookimpl
from worldrecall.core.models import ModelSpec, Role
from worldrecall.plugins.opis.backends import embedders, geometry, matchers, pose, sidecar_matcher
from worldrecall.plugins.opis.camera_gate import OpisCameraGate
from worldrecall.plugins.opis.loader import OpisLoader
from worldrecall.plugins.opis.metric import OpisMetric
from worldrecall.plugins.opis.windows import WindowsAligner

OURS = "Apache-2.0 (worldrecall)"


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def roles() -> list[Role]:
    """The roles OPIS declares, each with its classical/sidecar and reference default backend.

    Reference defaults follow A.5 where we can: MoGe-2 when its package is importable, else Depth-Anything-V2
    metric depth; SuperPoint+LightGlue (transformers) for correspondences (no MASt3R wrapper yet).
    """
    ref_geometry = "opis_moge2_vitl" if _importable("moge") else "opis_depth_anything_v2_metric"
    ref_matcher = "opis_superpoint_lightglue"
    return [
        Role("opis_geometry", "single-image metric depth + pixel K of an image (input image or a frame)",
             {"classical": "opis_sidecar_geometry", "reference": ref_geometry}),
        Role("opis_matcher", "input-image <-> frame pixel correspondences",
             {"classical": "opis_sidecar_matcher", "reference": ref_matcher}),
        Role("opis_embedder", "crop embeddings, same backend as the OPIS inventory",
             {"classical": "opis_colorhist", "reference": "opis_dinov3_vits16"}),
        Role("pose_landmarks", "17 pose keypoints per box (COCO human / AP-10K animal)",
             {"reference": "opis_vitpose_plus_small"}),
    ]


SIDECAR_FIX = ("the OPIS sidecar backends read reference_geometry.npz next to raw.jpg and the generation's ViPE "
               "sidecar (annotations_vipe/<case>_vipe_ann), which only the synthetic suite ships: run with "
               "models=reference, or e.g. models.opis_geometry=opis_depth_anything_v2_metric "
               "models.opis_matcher=opis_superpoint_lightglue")


def sidecar_preflight(case: Any) -> str | None:
    """None when the case can be served by the OPIS sidecar backends (or needs no model), else why not."""
    sidecars = getattr(case, "sidecars", {}) or {}
    if "video_observation" in sidecars and getattr(case, "video", None) is None:
        return None  # precomputed observations: no model runs
    missing = [k for k in ("reference_geometry", "vipe") if k not in sidecars]
    if missing:
        names = {"reference_geometry": "reference_geometry.npz", "vipe": "annotations_vipe/<case>_vipe_ann"}
        return f"{getattr(case, 'case_id', '?')}: no {' and no '.join(names[m] for m in missing)}"
    return None


def _spec(name: str, role: str, kind: str, factory: Callable[..., Any], description: str, *, model_id: str = "",
          requires: tuple[str, ...] = (), licence: str = OURS) -> ModelSpec:
    sidecar = kind == "sidecar"
    return ModelSpec(name=name, role=role, kind=kind, factory=factory, description=description,
                     model_id=model_id or name, revision="", licence=licence, requires=requires,
                     preflight=sidecar_preflight if sidecar else None, fix=SIDECAR_FIX if sidecar else "")


def specs() -> list[ModelSpec]:
    """Every OPIS backend (revisions left empty: not pinned to a verified commit)."""
    HF = ("torch", "transformers")
    return [
        _spec("opis_colorhist", "opis_embedder", "classical", embedders.build_colorhist,
              "OPIS quick-start colour histogram: 64x64 crop, 8 bins per channel, L2 (label colorhist)"),
        _spec("opis_dinov3_vits16", "opis_embedder", "reference", embedders.build_dinov3,
              "DINOv3 ViT-S/16 pooled CLS at 224 px, L2 (label dinov3_vits16)", model_id=embedders.DINOV3_ID,
              requires=HF, licence="DINOv3 License"),
        _spec("opis_sidecar_geometry", "opis_geometry", "sidecar", geometry.build_sidecar,
              "reference_geometry.npz for the input image, the ViPE sidecar row for a frame"),
        _spec("opis_depth_anything_v2_metric", "opis_geometry", "reference", geometry.build_depth_anything,
              "Depth-Anything-V2 metric (indoor, small) depth; K from fov_deg", model_id=geometry.DA_METRIC_ID,
              requires=HF, licence="Apache-2.0"),
        _spec("opis_moge2_vitl", "opis_geometry", "reference", geometry.build_moge,
              "MoGe-2 ViT-L point map, depth, K (resolution level 5); needs the moge package",
              model_id=geometry.MOGE_ID, requires=("torch", "moge"), licence="MIT"),
        _spec("opis_sift_matcher", "opis_matcher", "classical", matchers.build_sift,
              "OpenCV SIFT, ratio 0.8, mutual nearest neighbours", requires=("cv2",)),
        _spec("opis_sidecar_matcher", "opis_matcher", "sidecar", sidecar_matcher.build_sidecar_matcher,
              "exact correspondences from shipped depth/poses/instance masks (synthetic suite)"),
        _spec("opis_superpoint_lightglue", "opis_matcher", "reference", matchers.build_lightglue,
              "SuperPoint + LightGlue (transformers) on the (input image, frame) pair",
              model_id=matchers.LIGHTGLUE_ID, requires=HF, licence="Apache-2.0 (LightGlue) / SuperPoint licence"),
        _spec("opis_vitpose_plus_small", "pose_landmarks", "reference", pose.build_vitpose,
              "ViTPose+-S (COCO expert 0 for humans, AP-10K expert 3 for animals)", model_id=pose.VITPOSE_ID,
              requires=HF, licence="Apache-2.0"),
    ]


@hookimpl
def register_loaders(register: Callable[..., None]) -> None:
    """The ``opis`` release-layout loader."""
    register(OpisLoader())


@hookimpl
def register_aligners(register: Callable[..., None]) -> None:
    """``opis.windows``: skip 1 s, stride 8, at most 64 windows (A.3)."""
    register(WindowsAligner())


@hookimpl
def register_metrics(register: Callable[..., None]) -> None:
    """``opis.opis``: Presence, Identity, Structure and the composite."""
    register(OpisMetric)
    register(OpisCameraGate)


BENCHMARK = Benchmark(
    "opis",
    headline=("opis.opis:opis", "opis.opis:presence", "opis.opis:identity", "opis.opis:structure"),
    rank_by="opis.opis:opis",
    gate="opis.camera_gate:passed",
    levels=("subcategory", "domain"),
    labels={"opis.opis:opis": "OPIS", "opis.opis:presence": "Presence", "opis.opis:identity": "Identity",
            "opis.opis:structure": "Structure"},
    titles={"gated": "opis · camera-gated view (only cases whose camera executed the conditions' camera path)",
            "all": "opis · all cases (the released evaluator's number)"},
    notes=("OPIS builds its inventory from the input frame, so it cannot see a target that returns in its old "
           "state (state_reset) or place (teleport): those score like the oracle; and a moving target that vanished "
           "(forgetful) leaves no Presence evidence for a dynamic object, so OPIS cannot see it either",),
    description="Object Presence / Identity / Structure against the input frame's inventory (SSStarain/OPIS V3)",
)


@hookimpl
def register_benchmarks(register: Callable[..., None]) -> None:
    """OPIS's headline (the composite and its three parts), ranking and camera gate."""
    register(BENCHMARK)


@hookimpl
def register_models(register: Callable[..., None]) -> None:
    """The OPIS roles (see :func:`roles`) and backends (see :func:`specs`)."""
    for role in roles():
        register(role)
    for spec in specs():
        register(spec)
