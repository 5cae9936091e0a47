"""Per-case artifacts of the Scene-Memory-F1 kernel: coloured PLY clouds and a PNG rendering.

Colours: observation points retained by the revisit (green) or forgotten (orange); revisit points
matched (blue) or hallucinated (magenta). The PNG shows a top-down view (x–z, OpenCV cameras have y
down) and an oblique view, each capped at a fixed number of drawn points, rasterised with OpenCV
(matplotlib's 3-D scatter cost over a second per case).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldrecall.plugins.scene_memory.f1 import KernelResult

RETAINED = (46, 160, 67)
FORGOTTEN = (245, 124, 0)
MATCHED = (30, 110, 220)
HALLUCINATED = (200, 30, 160)
_MAX_DRAWN = 15000


def write_ply(path: Path, points: np.ndarray, colors: np.ndarray) -> Path:
    """Binary little-endian PLY with float32 x,y,z and uchar red,green,blue."""
    pts = np.asarray(points, dtype="<f4").reshape(-1, 3)
    col = np.asarray(colors, dtype=np.uint8).reshape(-1, 3)
    rec = np.empty(len(pts), dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                                    ("r", "u1"), ("g", "u1"), ("b", "u1")])
    rec["x"], rec["y"], rec["z"] = pts[:, 0], pts[:, 1], pts[:, 2]
    rec["r"], rec["g"], rec["b"] = col[:, 0], col[:, 1], col[:, 2]
    header = ("ply\nformat binary_little_endian 1.0\ncomment worldrecall scene_memory\n"
              f"element vertex {len(pts)}\nproperty float x\nproperty float y\nproperty float z\n"
              "property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(header.encode("ascii"))
        f.write(rec.tobytes())
    return path


def read_ply(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read back a PLY written by :func:`write_ply` -> (points [n,3] float32, colours [n,3] uint8)."""
    raw = Path(path).read_bytes()
    end = raw.index(b"end_header\n") + len(b"end_header\n")
    n = next(int(line.split()[-1]) for line in raw[:end].decode("ascii").splitlines()
             if line.startswith("element vertex"))
    rec = np.frombuffer(raw[end:], dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                                          ("r", "u1"), ("g", "u1"), ("b", "u1")], count=n)
    return (np.stack([rec["x"], rec["y"], rec["z"]], axis=1),
            np.stack([rec["r"], rec["g"], rec["b"]], axis=1))


def _colours(flags: np.ndarray, yes: tuple[int, int, int], no: tuple[int, int, int]) -> np.ndarray:
    return np.where(flags[:, None], np.array(yes, np.uint8), np.array(no, np.uint8))


def _thin(n: int) -> np.ndarray:
    return np.arange(n) if n <= _MAX_DRAWN else np.round(np.linspace(0, n - 1, _MAX_DRAWN)).astype(np.int64)


def _rasterise(panel: np.ndarray, uv: np.ndarray, colours: np.ndarray) -> None:
    """Splat points (pixel coordinates) into ``panel`` as 2x2 squares; later points draw over earlier ones."""
    h, w = panel.shape[:2]
    u = np.clip(np.round(uv[:, 0]).astype(np.int64), 0, w - 2)
    v = np.clip(np.round(uv[:, 1]).astype(np.int64), 0, h - 2)
    for du in (0, 1):
        for dv in (0, 1):
            panel[v + dv, u + du] = colours


def _fit(xy: np.ndarray, size: int, margin: int = 12) -> np.ndarray:
    """Map 2-D coordinates into a ``size`` x ``size`` panel, equal aspect, image rows growing downwards."""
    lo, hi = np.nanmin(xy, axis=0), np.nanmax(xy, axis=0)
    scale = (size - 2 * margin) / max(float(np.max(hi - lo)), 1e-9)
    out = (xy - lo) * scale + margin
    out[:, 1] = size - out[:, 1]
    return out


def render_png(res: KernelResult, path: Path, title: str = "", size: int = 420) -> Path:
    """Two panels — top-down (x, z) and an oblique view — drawn with OpenCV (fast enough for every case)."""
    import cv2

    oc = _colours(res.retained, RETAINED, FORGOTTEN)
    vc = _colours(~res.hallucinated, MATCHED, HALLUCINATED)
    io, iv = _thin(len(res.obs)), _thin(len(res.rev))
    pts = np.concatenate([res.obs[io], res.rev[iv]]).astype(np.float64)
    cols = np.concatenate([oc[io], vc[iv]])
    a, e = np.radians(-60.0), np.radians(25.0)  # azimuth / elevation of the oblique view (OpenCV: y down)
    x, y, z = pts[:, 0], -pts[:, 1], pts[:, 2]
    xr = x * np.cos(a) - z * np.sin(a)
    zr = x * np.sin(a) + z * np.cos(a)
    views = [np.stack([x, z], axis=1), np.stack([xr, y * np.cos(e) + zr * np.sin(e)], axis=1)]
    panels = []
    for name, xy in zip(("top-down (x, z)", "oblique"), views):
        panel = np.full((size, size, 3), 255, np.uint8)
        _rasterise(panel, _fit(xy, size), cols)
        cv2.putText(panel, name, (8, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
        panels.append(panel)
    header = np.full((44, 2 * size, 3), 255, np.uint8)
    cv2.putText(header, title, (8, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    legend = (f"retained green / forgotten orange | matched blue / hallucinated magenta   "
              f"R={res.retention:.3f} P={res.precision:.3f} tau={res.tau:.4g}")
    cv2.putText(header, legend, (8, 36), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (60, 60, 60), 1, cv2.LINE_AA)
    img = np.concatenate([header, np.concatenate(panels, axis=1)], axis=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), img[..., ::-1])
    return path


def write_artifacts(res: KernelResult, out_dir: Path, *, title: str = "") -> list[Path]:
    """observation.ply, revisit_aligned.ply and clouds.png under ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    oc = _colours(res.retained, RETAINED, FORGOTTEN)
    vc = _colours(~res.hallucinated, MATCHED, HALLUCINATED)
    return [write_ply(out_dir / "observation.ply", res.obs, oc),
            write_ply(out_dir / "revisit_aligned.ply", res.rev, vc),
            render_png(res, out_dir / "clouds.png", title)]
