"""Encoding the suite's stills: JPEG frames and PNG masks (videos go through ``formats.mp4.write_video``)."""

from __future__ import annotations

import numpy as np


def encode_jpeg(rgb: np.ndarray, quality: int = 92) -> bytes:
    """JPEG bytes of a uint8 RGB frame (OpenCV's encoder is deterministic)."""
    import cv2

    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(rgb[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    return buf.tobytes()


def encode_png(gray_or_rgb: np.ndarray) -> bytes:
    """PNG bytes of a uint8 image (masks, references)."""
    import cv2

    img = gray_or_rgb if gray_or_rgb.ndim == 2 else np.ascontiguousarray(gray_or_rgb[..., ::-1])
    ok, buf = cv2.imencode(".png", img)
    if not ok:
        raise RuntimeError("PNG encoding failed")
    return buf.tobytes()
