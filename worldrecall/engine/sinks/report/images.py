"""Thumbnails for the HTML report: frames of a case's videos and the metrics' per-case PNGs, as JPEG bytes.

Thumbnails are cached in the store under the file's content digest, the frame indices and the size, so a
re-score job's report decodes no video, and a video re-rendered in place is decoded again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldrecall.core.video import Video, resize_max_side
from worldrecall.engine.cache import Store, code_digest, inputs_digest, key_of


def jpeg(img: np.ndarray, quality: int = 72) -> bytes:
    """RGB uint8 -> JPEG bytes."""
    import cv2

    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(img[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return buf.tobytes()


def _key(path: Path, *parts: object) -> str:
    return key_of({"name": "report.thumbnail", "code": code_digest(__name__)}, inputs_digest([path]), list(parts))


def image_thumb(path: Path, max_side: int, store: Store | None = None) -> bytes:
    """A PNG/JPEG file scaled down to ``max_side`` (never up), re-encoded as JPEG (cached by content)."""
    path = Path(path)
    key = _key(path, max_side, "img")
    hit = store.get_json("report_thumbs", key) if store is not None else None
    if hit is not None:
        return bytes.fromhex(hit)
    from worldrecall.core.video import VideoError, read_image

    try:  # sized from its header against the pixel cap before decoding
        rgb = read_image(path)
    except VideoError as e:
        raise ValueError(f"{path}: not a readable image ({e})") from None
    data = jpeg(resize_max_side(rgb, max_side), 68)
    if store is not None:
        store.put_json("report_thumbs", key, data.hex())
    return data


def frame_thumbs(path: Path, indices: list[int], max_side: int, store: Store | None,
                 axis_len: int | None = None) -> dict[int, bytes]:
    """JPEG thumbnails of frames ``indices`` (clipped to the video) of one video file or frame folder.

    ``axis_len``: the indices live on another video's axis of this many frames (a reference video of another
    length); each is mapped proportionally onto this video's frames.
    """
    path = Path(path)
    key = _key(path, sorted(set(indices)), max_side, axis_len)
    hit = store.get_json("report_thumbs", key) if store is not None else None
    if hit is not None:
        return {int(k): bytes.fromhex(v) for k, v in hit.items()}
    video = Video(path)
    frames = video.frames()
    n = len(frames)

    def at(i: int) -> int:
        if axis_len and axis_len > 1:
            i = round(i * (n - 1) / (axis_len - 1))
        return min(max(i, 0), n - 1)

    out = {i: jpeg(resize_max_side(frames[at(i)], max_side)) for i in set(indices)}
    video.release()
    if store is not None:
        store.put_json("report_thumbs", key, {str(k): v.hex() for k, v in out.items()})
    return out
