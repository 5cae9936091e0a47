"""Writing H.264 mp4 files (the synthetic suite's generations, judges' uploads, tests); reading is core.video."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_video(path: Path | str, frames: np.ndarray | list[np.ndarray], fps: float = 16.0, *,
                crf: int = 18, codec: str = "libx264", preset: str = "veryfast", threads: int | None = None) -> Path:
    """Write uint8 RGB frames as an H.264 mp4 (yuv420p) with PyAV — no system ffmpeg needed.

    Odd sizes are padded by edge replication to even ones (yuv420p needs even dimensions). ``threads=1``
    makes the bitstream byte-identical from run to run; ``preset="ultrafast"`` costs ~2.5x less CPU than
    ``veryfast`` for ~2x the bytes.
    """
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frames = [np.asarray(f, dtype=np.uint8) for f in frames]
    if not frames:
        raise ValueError(f"{path}: no frames to write")
    h, w = frames[0].shape[:2]
    ph, pw = h + (h % 2), w + (w % 2)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=int(round(fps)) if float(fps).is_integer() else fps)
        stream.width, stream.height, stream.pix_fmt = pw, ph, "yuv420p"
        opts = {"crf": str(crf), "preset": preset} if codec == "libx264" else {"crf": str(crf)}
        if threads:
            opts["threads"] = str(threads)
        stream.options = opts
        for f in frames:
            if (ph, pw) != (h, w):
                f = np.pad(f, ((0, ph - h), (0, pw - w), (0, 0)), mode="edge")
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
