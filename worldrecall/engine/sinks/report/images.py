"""The report's pictures: frames of a case's videos and the metrics' per-case figures, each kept once by content.

A picture's bytes live in the output root's blob store (``blobs/sha256/<aa>/<digest><suffix>``), named
``<digest><suffix>``: a thumbnail JPEG is written there once, a per-case figure shown at full size is its own file
(hard-linked in, not re-encoded: point clouds' small legends stay legible). The same picture in eight models'
sections, in a re-score's report or in every job of a sweep is the same blob; the page links it beside itself
(``report/assets/``) or inlines it (``report.self_contained``), see :mod:`.html`.

Thumbnails are cached in the store under the file's content digest, the frame indices and the size (the entry
names the blob), so a re-score job's report decodes no video, and a video re-rendered in place is decoded
again. Frames are read at thumbnail size (:func:`worldrecall.core.video.small_frames`): never a whole video at
its native size.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from worldrecall.core.video import VideoError, small_frames, small_image
from worldrecall.engine.cache import Store, code_digest, inputs_digest, key_of
from worldrecall.engine.cache.blobs import BlobStore

FULL_SIZE_MAX_SIDE = 4096  # a figure larger than this is shown re-encoded at this size, not as its own file
MIME = {".jpg": "image/jpeg", ".png": "image/png", ".svg": "image/svg+xml"}


@dataclass(frozen=True)
class Picture:
    """A picture in the blob store: ``name`` = ``<sha256 of its bytes><suffix>``, with its size in pixels."""

    name: str
    width: int
    height: int

    def to_json(self) -> list[object]:
        return [self.name, self.width, self.height]

    @classmethod
    def from_json(cls, v: list[object]) -> Picture:
        return cls(str(v[0]), int(v[1]), int(v[2]))  # type: ignore[call-overload]


def blob_path(blobs: BlobStore, name: str) -> Path:
    """The blob file of a picture's ``name``."""
    return blobs.path_for(name[:64], name[64:])


def jpeg(img: np.ndarray, quality: int = 72) -> bytes:
    """RGB uint8 -> JPEG bytes."""
    import cv2

    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(img[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return buf.tobytes()


def put_bytes(blobs: BlobStore, data: bytes, suffix: str) -> str:
    """``data`` as a blob (written once: equal bytes are one file); returns its picture name."""
    name = hashlib.sha256(data).hexdigest() + suffix
    dst = blob_path(blobs, name)
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f"{dst.name}.tmp{os.getpid()}")
        tmp.write_bytes(data)  # a plain file: readable as the umask says, like the blob store's copies
        os.replace(tmp, dst)
    return name


def put_jpeg(blobs: BlobStore, img: np.ndarray, quality: int = 72) -> Picture:
    """``img`` as a JPEG blob."""
    return Picture(put_bytes(blobs, jpeg(img, quality), ".jpg"), int(img.shape[1]), int(img.shape[0]))


def put_svg(blobs: BlobStore, svg: str) -> Picture:
    """An SVG chart (its root's ``width``/``height`` in px) as a blob: a chart that a sweep or a re-score draws
    again unchanged (a camera gate's trace under another ORS threshold) is the same file."""
    head = svg[: svg.index(">")]
    size = [int(float(head.split(f' {k}="', 1)[1].split('"', 1)[0])) for k in ("width", "height")]
    return Picture(put_bytes(blobs, svg.encode("utf-8"), ".svg"), size[0], size[1])


def _blobs(store: Store | None, blobs: BlobStore | None) -> BlobStore:
    """``blobs``, else the blob store beside the cache (the output root's with the default ``cache_dir``)."""
    if blobs is not None:
        return blobs
    if store is None:
        raise ValueError("report pictures need a blob store (or a cache beside one)")
    return BlobStore(Path(store.root).parent / "blobs")


def _key(path: Path, *parts: object) -> str:
    # the file's content, not its name: a video linked under each benchmark's layout is drawn once
    return key_of({"name": "report.thumbnail", "code": code_digest(__name__)}, inputs_digest([path])[0][1],
                  list(parts))


def _cached(store: Store | None, blobs: BlobStore | None, key: str) -> object | None:
    """A cached entry whose pictures are all still in the blob store (a blob cleaned up: draw it again)."""
    hit = store.get_json("report_thumbs", key) if store is not None else None
    if hit is None:
        return None
    blobs = _blobs(store, blobs)
    pics = hit.values() if isinstance(hit, dict) else [hit]
    return hit if all(blob_path(blobs, str(p[0])).is_file() for p in pics) else None


def image_thumb(path: Path, max_side: int, store: Store | None = None, blobs: BlobStore | None = None) -> Picture:
    """A PNG/JPEG file scaled down to ``max_side`` (never up), re-encoded as JPEG (cached by content)."""
    path = Path(path)
    key = _key(path, max_side, "img")
    hit = _cached(store, blobs, key)
    if hit is not None:
        return Picture.from_json(hit)  # type: ignore[arg-type]
    try:  # sized from its header against the pixel cap; a JPEG decoded at a reduced scale
        rgb = small_image(path, max_side)
    except VideoError as e:
        raise ValueError(f"{path}: not a readable image ({e})") from None
    pic = put_jpeg(_blobs(store, blobs), rgb, 68)
    if store is not None:
        store.put_json("report_thumbs", key, pic.to_json())
    return pic


def full_image(path: Path, store: Store | None = None, blobs: BlobStore | None = None) -> Picture:
    """A per-case figure at its own size: the file itself, stored once (hard-linked from the content-addressed
    cache), PNG stays PNG. One over :data:`FULL_SIZE_MAX_SIDE` or of another type is re-encoded smaller."""
    from PIL import Image

    path = Path(path)
    suffix = {".jpeg": ".jpg"}.get(path.suffix.lower(), path.suffix.lower())
    try:
        with Image.open(path) as im:  # the header only
            w, h, fmt = int(im.size[0]), int(im.size[1]), im.format
    except Exception as e:  # noqa: BLE001  (not an image PIL can size: shown re-encoded, or its error)
        w = h = 0
        fmt = type(e).__name__
    if suffix not in MIME or fmt not in ("PNG", "JPEG") or {"PNG": ".png", "JPEG": ".jpg"}[fmt] != suffix \
            or not 0 < max(w, h) <= FULL_SIZE_MAX_SIDE:
        return image_thumb(path, FULL_SIZE_MAX_SIDE, store, blobs)
    digest, _ = _blobs(store, blobs).put(path, link=True)  # per-case files are never rewritten in place
    return Picture(digest + suffix, w, h)


def frame_thumbs(path: Path, indices: list[int], max_side: int, store: Store | None,
                 axis_len: int | None = None, blobs: BlobStore | None = None,
                 together: Iterable[int] = ()) -> dict[int, Picture]:
    """JPEG thumbnails of frames ``indices`` (clipped to the video) of one video file or frame folder, each
    cached by itself (video content, index, size, axis).

    ``axis_len``: the indices live on another video's axis of this many frames (a reference video of another
    length); each is mapped proportionally onto this video's frames. ``together``: other indices of the same
    video and axis that will be asked for (other pages' strips): those not cached are drawn in the same read,
    since a container is read whole for any frame of it.
    """
    path, blobs = Path(path), _blobs(store, blobs)
    out: dict[int, Picture] = {}
    keys = {i: _key(path, "frame", i, max_side, axis_len) for i in sorted(set(indices))}
    for i, key in keys.items():
        hit = _cached(store, blobs, key)
        if isinstance(hit, list):
            out[i] = Picture.from_json(hit)
    if len(out) == len(keys):
        return out
    for i in sorted(set(together) - set(keys)):
        key = _key(path, "frame", i, max_side, axis_len)
        if not isinstance(_cached(store, blobs, key), list):
            keys[i] = key
    missing = sorted(i for i in keys if i not in out)
    for i, img in small_frames(path, missing, max_side, axis_len=axis_len).items():
        pic = put_jpeg(blobs, img)
        if store is not None:
            store.put_json("report_thumbs", keys[i], pic.to_json())
        if i in indices:
            out[i] = pic
    return out
