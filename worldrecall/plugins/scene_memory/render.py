"""Per-case artifacts of the Scene-Memory-F1 kernel: coloured PLY clouds and a PNG rendering.

Colours: observation points retained by the revisit (green) or forgotten (orange); revisit points
matched (blue) or hallucinated (magenta). The PNG shows a top-down view (x–z, OpenCV cameras have y
down) and an oblique perspective view, each capped at a fixed number of drawn points.
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


def write_artifacts(res: KernelResult, out_dir: Path, *, title: str = "") -> list[Path]:
    """observation.ply, revisit_aligned.ply and clouds.png under ``out_dir``; returns their paths."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    oc = _colours(res.retained, RETAINED, FORGOTTEN)
    vc = _colours(~res.hallucinated, MATCHED, HALLUCINATED)
    paths = [write_ply(out_dir / "observation.ply", res.obs, oc),
             write_ply(out_dir / "revisit_aligned.ply", res.rev, vc)]

    fig = Figure(figsize=(11, 5), dpi=100)
    FigureCanvasAgg(fig)
    io, iv = _thin(len(res.obs)), _thin(len(res.rev))
    ax = fig.add_subplot(1, 2, 1)
    ax.scatter(res.obs[io, 0], res.obs[io, 2], s=0.5, c=oc[io] / 255.0, linewidths=0)
    ax.scatter(res.rev[iv, 0], res.rev[iv, 2], s=0.5, c=vc[iv] / 255.0, linewidths=0)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x")
    ax.set_ylabel("z")
    ax.set_title("top-down")
    ax3 = fig.add_subplot(1, 2, 2, projection="3d")
    # OpenCV world: y points down; plot -y as "up"
    ax3.scatter(res.obs[io, 0], res.obs[io, 2], -res.obs[io, 1], s=0.3, c=oc[io] / 255.0, linewidths=0)
    ax3.scatter(res.rev[iv, 0], res.rev[iv, 2], -res.rev[iv, 1], s=0.3, c=vc[iv] / 255.0, linewidths=0)
    ax3.view_init(elev=25, azim=-60)
    ax3.set_title("perspective")
    fig.suptitle(f"{title}\nretained (green) / forgotten (orange) · matched (blue) / hallucinated (magenta)  "
                 f"R={res.retention:.3f} P={res.precision:.3f} τ={res.tau:.4g}", fontsize=9)
    png = out_dir / "clouds.png"
    fig.savefig(png)
    paths.append(png)
    return paths
