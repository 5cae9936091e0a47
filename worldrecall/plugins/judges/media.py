"""What a judge is shown: a video file, a frame folder or in-memory frames, turned into one media file.

Frame folders and frame arrays are encoded to H.264 mp4 (``core.video.write_video``), at 24 fps when
there are more than 100 frames and 16 fps otherwise (the official VQA step re-encodes image folders
with the same rule, with OpenCV's mp4v codec). The digest that keys the answer cache is taken from the
*source* (file bytes or frame pixels), so a cache hit never needs the encoder.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from worldrecall.core.data import file_digest
from worldrecall.core.judges import JudgeError
from worldrecall.core.video import IMAGE_SUFFIXES, VIDEO_SUFFIXES, Video, VideoError, write_video

MIME_TYPES = {
    ".mp4": "video/mp4",
    ".webm": "video/webm",
    ".avi": "video/x-msvideo",
    ".mov": "video/quicktime",
    ".mkv": "video/x-matroska",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
}


def official_fps(num_frames: int) -> int:
    """The frame rate the official VQA step uses when it re-encodes a frame folder."""
    return 24 if num_frames > 100 else 16


@dataclass
class Media:
    """A judge input resolved to one file: its path, MIME type and source digest."""

    path: Path
    mime_type: str
    digest: str
    encoded: bool = False  # True when we wrote the file (a temp file the caller deletes)
    size: int = -1

    def __post_init__(self) -> None:
        if self.size < 0:
            self.size = self.path.stat().st_size


def media_digest(video: Any) -> str:
    """sha256 identifying the judge input's content (file bytes, or frame names+bytes, or pixels)."""
    if isinstance(video, Video):
        return video.content_hash()
    if isinstance(video, (str, Path)):
        p = Path(video)
        if not p.exists():
            raise JudgeError(f"{p}: judge input does not exist")
        if p.is_dir():
            try:
                return Video(p).content_hash()
            except VideoError as e:
                raise JudgeError(str(e)) from None
        return file_digest(p)
    frames = _as_frames(video)
    h = hashlib.sha256(str(frames.shape).encode())
    h.update(np.ascontiguousarray(frames).tobytes())
    return h.hexdigest()


def prepare_media(video: Any, tmp_dir: Path) -> Media:
    """Resolve a judge input to one file, encoding frames to mp4 under ``tmp_dir`` when needed."""
    digest = media_digest(video)
    if isinstance(video, Video):
        video = video.path
    if isinstance(video, (str, Path)):
        p = Path(video)
        if p.is_file():
            suffix = p.suffix.lower()
            if suffix not in VIDEO_SUFFIXES | IMAGE_SUFFIXES:
                raise JudgeError(f"{p}: unsupported judge input type {suffix!r}")
            return Media(p, MIME_TYPES[suffix], digest)
        try:
            frames = Video(p).frames()
        except VideoError as e:
            raise JudgeError(str(e)) from None
    else:
        frames = _as_frames(video)
    out = Path(tmp_dir) / f"{digest[:16]}.mp4"
    write_video(out, frames, official_fps(len(frames)))
    return Media(out, "video/mp4", digest, encoded=True)


def _as_frames(video: Sequence[Any] | np.ndarray) -> np.ndarray:
    try:
        frames = (
            np.asarray(video) if isinstance(video, np.ndarray) else np.stack([np.asarray(f) for f in video])
        )
    except (TypeError, ValueError) as e:
        raise JudgeError(f"judge input frames cannot be stacked ({e})") from None
    if frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0:
        raise JudgeError(f"judge input frames must be [N,H,W,3] with N >= 1, got shape {tuple(frames.shape)}")
    if frames.dtype != np.uint8:
        raise JudgeError(f"judge input frames must be uint8 RGB, got {frames.dtype}")
    return frames
