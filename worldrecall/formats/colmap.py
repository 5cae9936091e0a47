"""COLMAP's text ``images.txt``: camera poses as the MIND release reads them (``parse_colmap_images_txt`` in
``src/utils/vipe_utils.py``), and a writer for the synthetic suite.

A COLMAP image is two lines: ``IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME`` (world-to-camera: the
rotation as a unit quaternion, scalar first, then the translation) and its 2D points (possibly empty).
Comment lines start with ``#``. Read as the release reads it:

* blank and ``#`` lines are passed over; a line of fewer than 10 fields is passed over too;
* after an image line the next line is its points line and is passed over whatever it holds (a file that
  omits the points lines therefore loses every other image, as in the release);
* the quaternion is normalised (a norm below 1e-12 gives the identity); the camera-to-world pose is
  ``R_wc = R_cwᵀ``, centre ``−R_wc t_cw``;
* images are returned sorted by ``NAME`` as a string (``frame_10`` before ``frame_2``), which is the frame
  order the release assumes.

Where the release stops with an exception (a field that is not a number, no image at all) this raises one
:class:`~worldrecall.core.data.CaseFailure` line naming the file (and the line). Bytes that are not UTF-8 are
dropped, as the release's ``errors="ignore"`` does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from worldrecall.core.data import CaseFailure
from worldrecall.numerics import exact

MAX_BYTES = 256 * 1024 * 1024  # an images.txt of a few thousand frames is kilobytes; refuse a runaway file


@dataclass(frozen=True)
class ColmapImages:
    """Images of one ``images.txt`` in name order: their names and camera-to-world poses [n, 4, 4]."""

    names: tuple[str, ...]
    c2w: np.ndarray

    def __len__(self) -> int:
        return len(self.names)


def quaternion_to_rotation(qw: float, qx: float, qy: float, qz: float) -> np.ndarray:
    """3x3 rotation of the quaternion (w, x, y, z), normalised first; a norm below 1e-12 -> identity."""
    q = np.array([qw, qx, qy, qz], dtype=np.float64)
    norm = float(np.linalg.norm(q))
    if norm < 1e-12:
        return np.eye(3)
    with np.errstate(invalid="ignore", over="ignore"):  # an infinite field gives NaN, as in the release
        w, x, y, z = q / norm
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ], dtype=np.float64)


def rotation_to_quaternion(rot: np.ndarray) -> tuple[float, float, float, float]:
    """(w, x, y, z) of a 3x3 rotation, ``w >= 0`` (the inverse of :func:`quaternion_to_rotation`). Plain IEEE
    scalar arithmetic in a fixed order, so the same rotation gives the same bits on every CPU."""
    m = [[float(v) for v in row] for row in np.asarray(rot, dtype=np.float64).tolist()]
    tr = m[0][0] + m[1][1] + m[2][2]
    if tr > 0:
        s = 2.0 * math.sqrt(tr + 1.0)
        q = [0.25 * s, (m[2][1] - m[1][2]) / s, (m[0][2] - m[2][0]) / s, (m[1][0] - m[0][1]) / s]
    else:
        i = max(range(3), key=lambda k: m[k][k])
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1.0 + m[i][i] - m[j][j] - m[k][k], 1e-300))
        q = [0.0] * 4
        q[0] = (m[k][j] - m[j][k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j][i] + m[i][j]) / s
        q[1 + k] = (m[k][i] + m[i][k]) / s
    if q[0] < 0:
        q = [-v for v in q]
    n = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    return q[0] / n, q[1] / n, q[2] / n, q[3] / n


def read_images_txt(path: Path | str) -> ColmapImages:
    """The images of a COLMAP ``images.txt`` sorted by name (see the module notes for the exact reading)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise CaseFailure(f"{p}: {size} bytes, more than an images.txt can be ({MAX_BYTES})")
        lines = p.read_bytes().decode("utf-8", errors="ignore").splitlines()
    except OSError as e:
        raise CaseFailure(f"{p}: cannot be read ({type(e).__name__}: {e.strerror or e})") from None
    entries: list[tuple[str, np.ndarray]] = []
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) < 10:
            continue
        try:
            qw, qx, qy, qz, tx, ty, tz = (float(v) for v in parts[1:8])
        except ValueError:
            raise CaseFailure(f"{p}: line {lineno}: quaternion/translation fields are not numbers "
                              f"({' '.join(parts[1:8])[:120]})") from None
        name = parts[9]
        if i < len(lines):  # the image's points line, whatever it holds
            i += 1
        r_wc = quaternion_to_rotation(qw, qx, qy, qz).T
        pose = np.eye(4)
        pose[:3, :3] = r_wc
        pose[:3, 3] = -r_wc @ np.array([tx, ty, tz], dtype=np.float64)
        entries.append((name, pose))
    if not entries:
        raise CaseFailure(f"{p}: no image line (IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME) in the file")
    entries.sort(key=lambda e: e[0])
    return ColmapImages(tuple(e[0] for e in entries), np.stack([e[1] for e in entries]))


def images_txt_text(c2w: np.ndarray, names: Sequence[str] | None = None, camera_id: int = 1) -> str:
    """``images.txt`` text for camera-to-world poses ``c2w`` [n, 4, 4] (names default ``frame_000000.png`` …,
    which sort in frame order), each image followed by an empty points line; ``%.17g`` keeps every bit."""
    poses = np.asarray(c2w, dtype=np.float64)
    if poses.ndim != 3 or poses.shape[1:] not in ((4, 4), (3, 4)):
        raise ValueError(f"images_txt_text: expected [n, 4, 4] poses, got {poses.shape}")
    n = len(poses)
    names = [f"frame_{k:06d}.png" for k in range(n)] if names is None else list(names)
    if len(names) != n:
        raise ValueError(f"images_txt_text: {len(names)} names for {n} poses")
    out = ["# Image list with two lines of data per image:",
           "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME",
           "#   POINTS2D[] as (X, Y, POINT3D_ID)",
           f"# Number of images: {n}, mean observations per image: 0"]
    for k in range(n):
        r_cw = poses[k, :3, :3].T
        t_cw = -exact.matvec(r_cw, poses[k, :3, 3])  # fixed-order sums: the suite's bytes never depend on BLAS
        q = rotation_to_quaternion(r_cw)
        vals = " ".join(f"{v:.17g}" for v in (*q, *t_cw))
        out.append(f"{k + 1} {vals} {camera_id} {names[k]}")
        out.append("")
    return "\n".join(out) + "\n"


__all__ = ["ColmapImages", "images_txt_text", "quaternion_to_rotation", "read_images_txt",
           "rotation_to_quaternion"]
