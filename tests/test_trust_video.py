"""Issue 11: per-frame pixel cap and per-video frame cap, checked from headers before any decoding."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from worldrecall.core import video as video_mod
from worldrecall.core.video import (
    DEFAULT_MAX_FRAMES,
    DEFAULT_MAX_PIXELS,
    Video,
    VideoError,
    VideoLimitError,
    VideoPool,
)
from worldrecall.formats.mp4 import write_video


def _png_claiming(path: Path, width: int, height: int) -> Path:
    """A real 4x4 PNG whose IHDR is patched (CRC recomputed) to claim ``width`` x ``height``."""
    _, buf = cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))
    data = bytearray(buf.tobytes())
    assert data[12:16] == b"IHDR"
    data[16:20], data[20:24] = struct.pack(">I", width), struct.pack(">I", height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])) & 0xFFFFFFFF)   # type + 13 data bytes
    path.write_bytes(bytes(data))
    return path


def _no_decode(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("decoded although the header was over the limit")
    monkeypatch.setattr(cv2, "imread", boom)
    monkeypatch.setattr(video_mod, "_decode_cv2", boom)
    monkeypatch.setattr(video_mod, "_decode_pyav", boom)


def test_defaults_are_safe():
    assert (DEFAULT_MAX_PIXELS, DEFAULT_MAX_FRAMES) == (40_000_000, 100_000)
    v = Video("x.mp4")
    assert (v.max_pixels, v.max_frames) == (DEFAULT_MAX_PIXELS, DEFAULT_MAX_FRAMES)


def test_20000x20000_png_is_refused_from_its_header(tmp_path, monkeypatch):
    d = tmp_path / "frames"
    d.mkdir()
    cv2.imwrite(str(d / "00000.png"), np.zeros((4, 4, 3), np.uint8))
    _png_claiming(d / "00001.png", 20000, 20000)
    _no_decode(monkeypatch)
    with pytest.raises(VideoLimitError) as ei:
        Video(d).frames()
    # 20000 × 20000 = 400 Mpx > 40 Mpx; the message names the file
    assert str(ei.value) == (f"{d / '00001.png'}: frame size 20000x20000 (400.0 Mpx) exceeds the limit of 40 Mpx "
                             "per frame (video.max_pixels)")
    assert isinstance(ei.value, VideoError)          # the runner's per-case error path


def test_frame_folder_over_the_frame_cap(tmp_path, monkeypatch):
    d = tmp_path / "frames"
    d.mkdir()
    for i in range(5):
        cv2.imwrite(str(d / f"{i:05d}.png"), np.zeros((4, 4, 3), np.uint8))
    assert Video(d, max_frames=5).frames().shape[0] == 5          # at the limit: fine
    _no_decode(monkeypatch)
    with pytest.raises(VideoLimitError, match=r"frames: 5 frame files exceed the limit of 4 frames per video"):
        Video(d, max_frames=4).frames()


def test_mp4_caps_from_container_metadata(tmp_path, monkeypatch):
    p = write_video(tmp_path / "v.mp4", [np.full((48, 64, 3), 10 * i, np.uint8) for i in range(5)], fps=10)
    assert Video(p, max_frames=5, max_pixels=64 * 48).frames().shape == (5, 48, 64, 3)
    pool = VideoPool(max_frames=3)
    _no_decode(monkeypatch)
    with pytest.raises(VideoLimitError, match=r"v.mp4: 5 declared frames exceed the limit of 3 frames per video"):
        pool.get(p).frames()
    with pytest.raises(VideoLimitError, match=r"v.mp4: frame size 64x48 \(0.0 Mpx\) exceeds the limit of 0.003 Mpx"):
        Video(p, max_pixels=3000).frames()                        # 64 × 48 = 3072 > 3000


def test_under_declared_container_stops_at_the_cap(tmp_path, monkeypatch):
    # a container whose header claims fewer frames than it holds: the decoder stops once past the cap
    p = write_video(tmp_path / "v.mp4", [np.full((16, 16, 3), 10 * i, np.uint8) for i in range(6)], fps=10)
    monkeypatch.setattr(video_mod, "_check_container", lambda path, limits: None)   # header says nothing
    with pytest.raises(VideoLimitError, match=r"4 decoded frames \(or more\) exceed the limit of 3"):
        Video(p, max_frames=3).frames()
