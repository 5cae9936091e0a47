"""The suite in OPIS's case layout: conditioning image, object inventory, prompt, camera task.

    opis/final/{subcategory}/{case_id}/raw.jpg            (the GT first frame; hard link)
    opis/final/{subcategory}/{case_id}/reference_scene.json
    opis/final/{subcategory}/{case_id}/masks/{object_id}.png
    opis/final/{subcategory}/{case_id}/text_prompt.txt
    opis/final/{subcategory}/{case_id}/conditions.json
    opis/final/{subcategory}/{case_id}/reference_geometry.npz  (GT z-depth + K of raw.jpg: sidecar geometry)
    opis/final/domains.json                                (subcategory -> domain, all "synthetic")
    opis/generations/{model}/{case_id}.mp4                 (hard links)
    opis/generations/{model}/annotations_vipe/{case_id}_vipe_ann/  (the generation's sidecar, hard links)

The inventory lists every instance visible in the first frame with its bbox, mask, palette colour, shape
word and an 8-bin-per-channel colour histogram embedding (the OPIS quick-start ``colorhist`` backend: crop
with 4 px padding, resized to 64x64, per-channel counts over [0, 255], concatenated, L2-normalised).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from worldrecall.numerics import exact
from worldrecall.plugins.synthetic.files import SuiteFiles
from worldrecall.plugins.synthetic.render import TARGET_ID
from worldrecall.plugins.synthetic.scene import nearest_colour
from worldrecall.plugins.synthetic.video_io import encode_png

HIST_BINS = 8
CROP_PAD = 4
CROP_SIZE = 64
MIN_PIXELS = 16
DOMAIN = "synthetic"


def case_dir(subcategory: str, case: str) -> str:
    return f"opis/final/{subcategory}/{case}"


def generation_path(model: str, case: str) -> str:
    return f"opis/generations/{model}/{case}.mp4"


def sidecar_dir(model: str, case: str) -> str:
    return f"opis/generations/{model}/annotations_vipe/{case}_vipe_ann"


def link_generation(files: SuiteFiles, model: str, case: str, video_rel: str, sidecar_rel: str) -> str:
    """Link one generation and its sidecar folder (read by the OPIS sidecar backends) into the layout."""
    from worldrecall.plugins.synthetic.sidecars import SIDECAR_FILES

    for name in SIDECAR_FILES:
        files.link(f"{sidecar_rel}/{name}", f"{sidecar_dir(model, case)}/{name}")
    return files.link(video_rel, generation_path(model, case))


def write_domains(files: SuiteFiles, subcategories: list[str]) -> str:
    """``opis/final/domains.json``: every subcategory of the suite belongs to the domain "synthetic"."""
    return files.json("opis/final/domains.json", {s: DOMAIN for s in sorted(set(subcategories))})


def colour_histogram(crop: np.ndarray, bins: int = HIST_BINS) -> list[float]:
    """8-bin-per-channel RGB histogram of a crop resized to 64x64, concatenated and L2-normalised."""
    from PIL import Image

    arr = np.asarray(
        Image.fromarray(np.ascontiguousarray(crop)).convert("RGB").resize((CROP_SIZE, CROP_SIZE)),
        dtype=np.float32,
    )
    feats = np.concatenate([np.histogram(arr[..., c], bins=bins, range=(0.0, 255.0))[0] for c in range(3)])
    vec = feats.astype(np.float64)
    norm = exact.norm(vec)
    return [float(v) for v in (vec / norm if norm > 0 else vec)]


def _shape_word(w: int, h: int) -> str:
    ar = w / max(h, 1)
    return "wide" if ar > 1.35 else "tall" if ar < 0.74 else "compact"


def _mobility(role: str, moves_or_changes: bool) -> dict[str, Any]:
    common = {
        "confidence": 1.0,
        "provenance": "worldrecall.synthetic",
        "annotator": "generator",
        "annotation_version": "1",
        "human_review_required": False,
    }
    if role == "target" and moves_or_changes:
        return {
            "kinematic_class": "rigid",
            "motion_expectation": "independent_motion",
            "evaluation_track": "dynamic_identity",
            "geometry_eligible": False,
            "evidence_reason": "scripted subject: moves or changes state while out of view",
            **common,
        }
    return {
        "kinematic_class": "rigid",
        "motion_expectation": "world_static",
        "evaluation_track": "static_geometry",
        "geometry_eligible": True,
        "evidence_reason": "static prop of the synthetic room",
        **common,
    }


def reference_scene(
    case: str,
    subcategory: str,
    image: np.ndarray,
    ids: np.ndarray,
    instances: dict[int, str],
    *,
    target_changes: bool,
    texture: dict[int, str],
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The ``reference_scene.json`` dict and the per-object binary masks (object_id -> uint8 0/255)."""
    h, w = ids.shape
    objects, masks = [], {}
    for iid in sorted(int(v) for v in np.unique(ids) if v != 0):
        m = ids == iid
        if m.sum() < MIN_PIXELS or iid not in instances:
            continue
        ys, xs = np.nonzero(m)
        x0, x1, y0, y1 = int(xs.min()), int(xs.max()) + 1, int(ys.min()), int(ys.max()) + 1
        crop = image[
            max(0, y0 - CROP_PAD) : min(h, y1 + CROP_PAD), max(0, x0 - CROP_PAD) : min(w, x1 + CROP_PAD)
        ]
        mean_rgb = image[m].mean(axis=0)
        oid = f"obj{iid:02d}"
        role = "target" if iid == TARGET_ID else "prop"
        objects.append(
            {
                "object_id": oid,
                "category": instances[iid],
                "bbox": [x0, y0, x1, y1],
                "center": [round((x0 + x1) / 2.0, 2), round((y0 + y1) / 2.0, 2)],
                "attributes": {
                    "color": nearest_colour(mean_rgb),
                    "shape": _shape_word(x1 - x0, y1 - y0),
                    "texture": texture.get(iid, "plain"),
                    "mean_rgb": [round(float(c), 2) for c in mean_rgb],
                    "aspect_ratio": round((x1 - x0) / max(y1 - y0, 1), 4),
                },
                "embedding": colour_histogram(crop),
                "size_signature": {
                    "aspect_ratio": round((x1 - x0) / max(y1 - y0, 1), 4),
                    "area_px": int(m.sum()),
                    "area_fraction": round(float(m.sum()) / (w * h), 6),
                },
                "mask_path": f"masks/{oid}.png",
                "metadata": {"mobility": _mobility(role, target_changes), "instance_id": iid, "role": role},
            }
        )
        masks[oid] = m.astype(np.uint8) * 255
    scene = {
        "scene_id": case,
        "metadata": {
            "image_size": [int(w), int(h)],
            "domain": DOMAIN,
            "subcategory": subcategory,
            "source": "worldrecall synthetic revisit suite",
            "preprocessing": {
                "embedding_backend": "colorhist",
                "color_hist_bins": HIST_BINS,
                "crop_padding_px": CROP_PAD,
                "crop_resize": [CROP_SIZE, CROP_SIZE],
            },
        },
        "objects": objects,
    }
    return scene, masks


def write_case(
    files: SuiteFiles,
    *,
    case: str,
    subcategory: str,
    raw_jpg_rel: str,
    image: np.ndarray,
    ids: np.ndarray,
    instances: dict[int, str],
    target_changes: bool,
    texture: dict[int, str],
    prompt: str,
    conditions: dict[str, Any],
    depth: np.ndarray | None = None,
    K_depth: np.ndarray | None = None,
    c2w: np.ndarray | None = None,
) -> dict[str, str]:
    """Write one OPIS case folder; ``image`` is the decoded ``raw.jpg`` (what the evaluator will read).

    ``depth`` / ``K_depth`` / ``c2w``: the first frame's GT z-depth, its K (depth resolution) and camera pose,
    written with the instance ids as ``reference_geometry.npz`` for the OPIS sidecar geometry/matcher backends.
    """
    d = case_dir(subcategory, case)
    files.link(raw_jpg_rel, f"{d}/raw.jpg")
    if depth is not None and K_depth is not None:
        z = np.asarray(depth, np.float32)
        valid = np.isfinite(z) & (z > 0)
        extra = {} if c2w is None else {"c2w": np.asarray(c2w, np.float64)}
        files.npz(f"{d}/reference_geometry.npz", depth=np.where(valid, z, 0.0).astype(np.float32),
                  K=np.asarray(K_depth, np.float64), valid=valid, ids=np.asarray(ids, np.uint8), **extra)
    scene, masks = reference_scene(
        case, subcategory, image, ids, instances, target_changes=target_changes, texture=texture
    )
    for oid, m in masks.items():
        files.write(f"{d}/masks/{oid}.png", encode_png(m))
    files.json(f"{d}/reference_scene.json", scene)
    files.text(f"{d}/text_prompt.txt", prompt + "\n")
    files.json(f"{d}/conditions.json", conditions)
    return {"case_dir": d, "reference_scene": f"{d}/reference_scene.json"}
