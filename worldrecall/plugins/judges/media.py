"""What a judge is shown: a video file, a frame folder or in-memory frames, turned into one media file.

Frame folders and frame arrays are encoded to H.264 mp4 (``formats.mp4.write_video``), at 24 fps when
there are more than 100 frames and 16 fps otherwise (the official VQA step re-encodes image folders
with the same rule, with OpenCV's mp4v codec). The digest that keys the answer cache is taken from the
*source* (file bytes or frame pixels), so a cache hit never needs the encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldrecall.core.judges import JudgeError, as_frames, media_digest
from worldrecall.core.video import IMAGE_SUFFIXES, VIDEO_SUFFIXES, Video, VideoError
from worldrecall.formats.mp4 import write_video

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
        frames = as_frames(video)
    out = Path(tmp_dir) / f"{digest[:16]}.mp4"
    write_video(out, frames, official_fps(len(frames)))
    return Media(out, "video/mp4", digest, encoded=True)
