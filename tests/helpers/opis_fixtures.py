"""Small OPIS release layouts written by hand (no renderer): a raw.jpg, its inventory and generations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def textured(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A smooth random colour texture (uint8 RGB)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(2, h // 8), max(2, w // 8), 3), dtype=np.uint8)
    import cv2

    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


def scene_doc(case_id: str, size: tuple[int, int], objects: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    """A minimal valid ``reference_scene.json`` document."""
    return {"scene_id": case_id, "metadata": {"image_size": list(size), **meta}, "objects": objects}


def static_object(oid: str, bbox: list[float], category: str = "box", embedding: list[float] | None = None) -> dict[str, Any]:
    """An object on the static-geometry track (full mobility block)."""
    return {
        "object_id": oid, "category": category, "bbox": bbox,
        "attributes": {"color": "red", "shape": "compact"},
        "embedding": embedding if embedding is not None else [1.0, 0.0, 0.0],
        "metadata": {"mobility": {"kinematic_class": "rigid", "motion_expectation": "world_static",
                                  "evaluation_track": "static_geometry", "geometry_eligible": True,
                                  "confidence": 1.0}},
    }


def write_release(root: Path, *, cases: dict[str, str] | None = None, size: tuple[int, int] = (64, 48),
                  domains: dict[str, str] | None = None, models: tuple[str, ...] = ("m1",),
                  frames: int = 40, fps: float = 16.0) -> Path:
    """``root/final/<sub>/<case>/`` (raw.jpg, reference_scene.json, text_prompt.txt) + ``root/domains.json`` +
    ``root/generations/<model>/<case>.mp4``; ``cases`` maps case id -> subcategory."""
    from PIL import Image

    from worldrecall.formats.mp4 import write_video

    cases = cases or {"c1": "home"}
    domains = {"home": "real-world"} if domains is None else domains
    w, h = size
    for k, (cid, sub) in enumerate(sorted(cases.items())):
        d = root / "final" / sub / cid
        d.mkdir(parents=True, exist_ok=True)
        img = textured(h, w, seed=k)
        Image.fromarray(img).save(d / "raw.jpg", quality=95)
        doc = scene_doc(cid, size, [static_object("o1", [4, 4, 20, 20])])
        (d / "reference_scene.json").write_text(json.dumps(doc))
        (d / "text_prompt.txt").write_text("the camera pans right and back\n")
        (d / "conditions.json").write_text(json.dumps({"camera_task": "pan", "fps": fps}))
        for m in models:
            g = root / "generations" / m
            g.mkdir(parents=True, exist_ok=True)
            write_video(g / f"{cid}.mp4", np.stack([img] * frames), fps)
    if domains:
        (root / "domains.json").write_text(json.dumps(domains))
    return root


def write_example_folder(ex: Path) -> Path:
    """The official example artifacts' shape: two pear objects in reference_scene.json (320x200) and one
    video_observation.json window (640x400) with one detection whose embedding is close to object "a"."""
    objs = [static_object("a", [10, 10, 50, 50], "pear", [0.9, 0.1, 0.0]),
            static_object("b", [60, 10, 100, 50], "pear", [0.1, 0.9, 0.0])]
    (ex / "reference_scene.json").write_text(json.dumps(scene_doc("pear_demo", (320, 200), objs)))
    (ex / "video_observation.json").write_text(json.dumps({"video_id": "gen", "windows": [
        {"window_id": "f0", "frame_index": 0, "frame_size": [640, 400], "objects": [
            {"observed_id": "x", "category": "pear", "bbox": [20, 20, 100, 100], "embedding": [0.88, 0.12, 0.0]}]}]}))
    return ex
