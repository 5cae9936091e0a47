"""Find each clip's generated video in a model's output folder, in the layouts the official code accepts.

Synthetic clips (ids ``Scene_NNN``), in priority order: ``{clip}.mp4`` at the root; ``{clip}/video.mp4``;
``{clip}/`` with frames; ``{Scene}/{clip}/video.mp4``; ``{Scene}/{clip}/`` with frames. Real clips (ids
``NNN``): ``{digits}.mp4`` (or ``Real_{digits}.mp4``, any case) at the root, then folders ``{digits}`` /
``real_{digits}`` (any case) holding ``video.mp4`` or frames. A frame folder is the first of ``frames/``, ``samples-rgb/`` or the clip folder itself that
holds ``.png/.jpg/.jpeg`` files (case-insensitive). The folder is scanned once per model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from worldrecall.core.video import IMAGE_SUFFIXES

CLIP_NAME = re.compile(r"^(.+)_(\d+)$")
# ``Real_007.mp4``: the id as the README's "Real/" split names it (accepted besides the official ``007.mp4``)
_REAL_MP4 = re.compile(r"^(?:real_)?(\d+)\.mp4$", re.IGNORECASE)
_REAL_DIR = re.compile(r"^(?:real_)?(\d+)$", re.IGNORECASE)
VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".gif")
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
        if entry.is_file() and name.endswith(".mp4") and CLIP_NAME.match(name[:-4]) and not _REAL_MP4.match(name):
            found[name[:-4]] = Generation(entry, "root_mp4")
    for entry in _sorted_entries(root):
        if not entry.is_dir():
            continue
        if _REAL_DIR.match(entry.name) and entry.name[:1].lower() == "r":
            continue  # a real clip's folder (Real_007/), not the synthetic scene "Real"
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
    for entry in sorted((e for e in entries if e.is_dir()), key=lambda p: (p.name.lower().startswith("real_"), p.name)):
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


def _accepted(entry: Path, split: str) -> bool:
    """Whether ``entry``'s name is one the ``split`` index reads (a clip mp4 / clip folder)."""
    name = entry.name
    if split == "real":
        return bool(_REAL_MP4.match(name) if entry.is_file() else _REAL_DIR.match(name))
    if _REAL_MP4.match(name) or _REAL_DIR.match(name):
        return False
    return bool(CLIP_NAME.match(name[:-4] if entry.is_file() and name.endswith(".mp4") else name)) and \
        (entry.is_dir() or name.endswith(".mp4"))


def _is_sidecar(entry: Path) -> bool:
    """A ViPE sidecar folder beside the videos (``annotations_vipe/``, ``<stem>_vipe_ann/``), not a generation."""
    return entry.is_dir() and (entry.name == "annotations_vipe" or entry.name.endswith("_vipe_ann"))


def unmatched(roots: dict[str, Path]) -> list[Path]:
    """Videos and folders under the splits' ``roots`` whose names no split reads (and, one scene folder down,
    synthetic clip entries likewise): what a model wrote under a name that matches no case."""
    by_root: dict[Path, list[str]] = {}
    for split, root in roots.items():
        by_root.setdefault(Path(root), []).append(split)
    out: list[Path] = []
    for root, splits in by_root.items():
        for entry in _sorted_entries(root):
            if entry.name.startswith(".") or entry in by_root or _is_sidecar(entry):
                continue
            if not (entry.is_dir() or entry.suffix.lower() in VIDEO_SUFFIXES):
                continue  # notes, logs, JSON: not a generation
            if any(_accepted(entry, sp) for sp in splits):
                continue
            if "synthetic" in splits and entry.is_dir():  # a scene folder holding <Scene>_<NNN>/ clip folders
                subs = [e for e in _sorted_entries(entry) if not e.name.startswith(".") and not _is_sidecar(e)
                        and (e.is_dir() or e.suffix.lower() in VIDEO_SUFFIXES)]
                bad = [e for e in subs if not (e.is_dir() and CLIP_NAME.match(e.name))]
                if len(bad) < len(subs):
                    out += bad
                    continue
            out.append(entry)
    return out


def expected_names(split: str, sub: str) -> str:
    """How a clip's generation of ``split`` must be named (for the unmatched-files warning)."""
    p = f"{sub}/" if sub else ""
    if split == "synthetic":
        return f"{p}<Scene>_<NNN>.mp4 (or {p}<Scene>_<NNN>/video.mp4, a frame folder)"
    return f"{p}<NNN>.mp4 or {p}Real_<NNN>.mp4 (or {p}<NNN>/video.mp4, a frame folder)"
