"""Find each clip's generated video in a model's output folder, in the layouts the official code accepts.

Synthetic clips (ids ``Scene_NNN``), in priority order: ``{clip}.mp4`` at the root; ``{clip}/video.mp4``;
``{clip}/`` with frames; ``{Scene}/{clip}/video.mp4``; ``{Scene}/{clip}/`` with frames. Real clips (ids
``NNN``): ``{digits}.mp4`` at the root, then folders ``{digits}`` / ``real_{digits}`` holding ``video.mp4``
or frames. A frame folder is the first of ``frames/``, ``samples-rgb/`` or the clip folder itself that
holds ``.png/.jpg/.jpeg`` files (case-insensitive). The folder is scanned once per model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from worldrecall.core.video import IMAGE_SUFFIXES

CLIP_NAME = re.compile(r"^(.+)_(\d+)$")
_REAL_MP4 = re.compile(r"^(\d+)\.mp4$")
_REAL_DIR = re.compile(r"^(?:real_)?(\d+)$")
FRAME_SUBDIRS = ("frames", "samples-rgb")


@dataclass(frozen=True)
class Generation:
    """Where one clip's generated frames are and which layout they came in."""

    path: Path      # an mp4 file or a folder of frames
    layout: str     # root_mp4 | clip_video | clip_frames | nested_video | nested_frames


def _has_images(folder: Path) -> bool:
    try:
        return any(p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES for p in folder.iterdir())
    except OSError:
        return False


def find_frames_dir(clip_dir: Path) -> Path | None:
    """``frames/``, then ``samples-rgb/``, then the clip folder itself — the first that holds images."""
    for sub in FRAME_SUBDIRS:
        d = clip_dir / sub
        if d.is_dir() and _has_images(d):
            return d
    return clip_dir if _has_images(clip_dir) else None


def _clip_dir_generation(clip_dir: Path, kind: str) -> Generation | None:
    video = clip_dir / "video.mp4"
    if video.is_file():
        return Generation(video, f"{kind}_video")
    frames = find_frames_dir(clip_dir)
    return Generation(frames, f"{kind}_frames") if frames is not None else None


def _sorted_entries(root: Path) -> list[Path]:
    try:
        return sorted(root.iterdir(), key=lambda p: p.name)
    except OSError:
        return []


def index_synthetic(root: Path) -> dict[str, Generation]:
    """{clip id: Generation} for every synthetic clip found under ``root``."""
    root = Path(root)
    found: dict[str, Generation] = {}
    nested: dict[str, Generation] = {}
    for entry in _sorted_entries(root):
        name = entry.name
        if entry.is_file() and name.endswith(".mp4") and CLIP_NAME.match(name[:-4]):
            found[name[:-4]] = Generation(entry, "root_mp4")
    for entry in _sorted_entries(root):
        if not entry.is_dir():
            continue
        if CLIP_NAME.match(entry.name):
            if entry.name in found:  # a same-named root mp4 wins over the folder
                continue
            g = _clip_dir_generation(entry, "clip")
            if g is not None:
                found[entry.name] = g
        else:  # a scene folder holding clip folders
            for sub in _sorted_entries(entry):
                if sub.is_dir() and CLIP_NAME.match(sub.name) and sub.name not in nested:
                    g = _clip_dir_generation(sub, "nested")
                    if g is not None:
                        nested[sub.name] = g
    for clip, g in nested.items():
        found.setdefault(clip, g)
    return found


def index_real(root: Path) -> dict[str, Generation]:
    """{zero-padded id: Generation} for every real clip found under ``root``."""
    root = Path(root)
    found: dict[str, Generation] = {}
    entries = _sorted_entries(root)
    for entry in entries:
        m = _REAL_MP4.match(entry.name)
        if m and entry.is_file():
            found.setdefault(m.group(1).zfill(3), Generation(entry, "root_mp4"))
    # plain "{digits}" folders before "real_{digits}" ones
    for entry in sorted((e for e in entries if e.is_dir()), key=lambda p: (p.name.startswith("real_"), p.name)):
        m = _REAL_DIR.match(entry.name)
        if not m:
            continue
        clip = m.group(1).zfill(3)
        if clip in found:
            continue
        g = _clip_dir_generation(entry, "clip")
        if g is not None:
            found[clip] = g
    return found


def expected_locations(split: str, clip_id: str, root: Path) -> str:
    """One-line description of where a clip's generation was looked for (for CaseError reasons)."""
    if split == "synthetic":
        return (f"{root}/{clip_id}.mp4, {clip_id}/video.mp4, {clip_id}/[frames|samples-rgb]/*.png|jpg "
                f"or <Scene>/{clip_id}/… ")
    return f"{root}/{clip_id}.mp4, {clip_id}/ or real_{clip_id}/ with video.mp4 or frames"
