"""Thumbnails for the HTML report: frames of a case's videos and the metrics' per-case PNGs, as JPEG bytes.

Frame thumbnails are memoised per (video file, size, mtime, frame indices, width) under the cache folder,
so a re-score job's report decodes no video.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from worldrecall.core.atomic import atomic_write_text
from worldrecall.core.video import Video, resize_max_side


def jpeg(img: np.ndarray, quality: int = 72) -> bytes:
    """RGB uint8 -> JPEG bytes."""
    import cv2

    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(img[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return buf.tobytes()


def _memo_path(memo_dir: Path | None, parts: list) -> Path | None:
    if memo_dir is None:
        return None
    key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]
    return memo_dir / key[:2] / key


def image_thumb(path: Path, max_side: int, memo_dir: Path | None = None) -> bytes:
    """A PNG/JPEG file scaled down to ``max_side`` (never up), re-encoded as JPEG (memoised per file state)."""

    path = Path(path)
    st = path.stat()
    memo = _memo_path(memo_dir, [str(path.resolve()), st.st_size, st.st_mtime_ns, max_side, "img"])
    if memo is not None and memo.exists():
        return memo.read_bytes()
    from worldrecall.core.video import VideoError, read_image

    try:  # sized from its header against the pixel cap before decoding
        rgb = read_image(path)
    except VideoError as e:
        raise ValueError(f"{path}: not a readable image ({e})") from None
    data = jpeg(resize_max_side(rgb, max_side), 68)
    if memo is not None:
        from worldrecall.core.atomic import atomic_write

        atomic_write(memo, lambda f: f.write(data))
    return data


def frame_thumbs(path: Path, indices: list[int], max_side: int, memo_dir: Path | None,
                 axis_len: int | None = None) -> dict[int, bytes]:
    """JPEG thumbnails of frames ``indices`` (clipped to the video) of one video file or frame folder.

    ``axis_len``: the indices live on another video's axis of this many frames (a reference video of another
    length); each is mapped proportionally onto this video's frames.
    """
    path = Path(path)
    st = path.stat()
    key = hashlib.sha256(json.dumps([str(path.resolve()), st.st_size, st.st_mtime_ns, sorted(set(indices)),
                                     max_side, axis_len]).encode()).hexdigest()[:32]
    memo = memo_dir / key[:2] / f"{key}.json" if memo_dir is not None else None
    if memo is not None and memo.exists():
        try:
            return {int(k): bytes.fromhex(v) for k, v in json.loads(memo.read_text()).items()}
        except (ValueError, TypeError):
            pass  # damaged memo: decode again
    video = Video(path)
    frames = video.frames()
    n = len(frames)

    def at(i: int) -> int:
        if axis_len and axis_len > 1:
            i = round(i * (n - 1) / (axis_len - 1))
        return min(max(i, 0), n - 1)

    out = {i: jpeg(resize_max_side(frames[at(i)], max_side)) for i in set(indices)}
    video.release()
    if memo is not None:
        memo.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(memo, json.dumps({str(k): v.hex() for k, v in out.items()}))
    return out
