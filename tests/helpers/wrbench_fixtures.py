"""Small WRBench inputs written into a test's tmp folder: a release variants file and one model's videos.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.formats.mp4 import write_video


def write_clip(path: Path, n: int = 12, size: tuple[int, int] = (32, 24), seed: int = 0) -> Path:
    """A tiny textured mp4 (16 fps)."""
    rng = np.random.default_rng(seed)
    w, h = size
    base = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    frames = [np.roll(base, i, axis=1) for i in range(n)]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_video(path, frames, 16.0, preset="ultrafast", threads=1)
    return path


def write_release(root: Path, variants: list[dict[str, Any]]) -> Path:
    """``variants.local.jsonl`` under ``root`` (the release folder)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "variants.local.jsonl").write_text("".join(json.dumps(v) + "\n" for v in variants))
    return root


def write_manifest(folder: Path, records: list[Any]) -> Path:
    """``videos.json`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "videos.json"
    p.write_text(json.dumps(records))
    return p
