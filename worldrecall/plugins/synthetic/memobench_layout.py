"""The suite in MemoBench's own layouts: the GT release (frames, poses, sheets, metadata) and model outputs.

Paths (relative to the suite root)::

    memobench/data/Synthetic_processed/{Scene}/{Scene}_{NNN}/RGB{n}/frame{n}.{k:04d}.jpg
    memobench/data/Synthetic_processed/{Scene}/{Scene}_{NNN}/{n}/poses.npy | intrinsics.npy
    memobench/data/Synthetic_processed/Synthetic_ExitReenter.xlsx (+ .csv)
    memobench/data/sam3_metadata/synthetic_metadata.csv
    memobench/output/{model}/Synthetic/{Scene}/{Scene}_{NNN}/video.mp4
    memobench/output/{model}/Synthetic/{Scene}/{Scene}_{NNN}/annotations_vipe/video_vipe_ann/...

The GT clip folder also keeps the GT instance masks (``{n}/instance_masks.npz`` + ``{n}/instances.json``) from
which the sheet's ``exits`` / ``re-enter`` were computed, and the exact GT z-depth at the sidecar resolution
(``Depth{n}/depth_metric.npy`` [G,h,w] float32 + ``Depth{n}/intrinsics.npy`` 3x3; no MemoBench metric reads it).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

SHEET_COLUMNS = ("video_folder", "exits", "re-enter", "frame_num", "skip", "prompt")
METADATA_COLUMNS = ("scene", "video_id", "subject", "exr_path", "prompt")


def clip_id(scene: str, clip: int) -> str:
    return f"{scene}_{clip:03d}"


def gt_clip_dir(scene: str, clip: int) -> str:
    return f"memobench/data/Synthetic_processed/{scene}/{clip_id(scene, clip)}"


def gt_frame_name(clip: int, k: int) -> str:
    return f"frame{clip}.{k:04d}.jpg"


def output_clip_dir(model: str, scene: str, clip: int) -> str:
    return f"memobench/output/{model}/Synthetic/{scene}/{clip_id(scene, clip)}"


def sidecar_dir(model: str, scene: str, clip: int) -> str:
    return f"{output_clip_dir(model, scene, clip)}/annotations_vipe/video_vipe_ann"


def phase_mapping(h_gt: int, r_gt: int, G: int, N: int) -> tuple[int, int]:
    """MemoBench's GT -> generated phase boundaries (divide first, Python round, then clamp)."""
    h = round(h_gt / G * N)
    h = max(2, min(h, N - 4))
    r = round(r_gt / G * N)
    r = max(h + 2, min(r, N - 1))
    return h, r


def _csv_text(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r[k] for k in columns})
    return buf.getvalue()


def write_sheets(root: Path, rows: list[dict[str, Any]]) -> list[str]:
    """``Synthetic_ExitReenter.xlsx`` and ``.csv`` with one row per clip; returns relative paths."""
    import pandas as pd

    rel_dir = "memobench/data/Synthetic_processed"
    folder = Path(root) / rel_dir
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Synthetic_ExitReenter.csv").write_text(_csv_text(SHEET_COLUMNS, rows))
    df = pd.DataFrame([{k: r[k] for k in SHEET_COLUMNS} for r in rows], columns=list(SHEET_COLUMNS))
    (folder / "Synthetic_ExitReenter.xlsx").write_bytes(reproducible_xlsx(df))
    return [f"{rel_dir}/Synthetic_ExitReenter.xlsx", f"{rel_dir}/Synthetic_ExitReenter.csv"]


def reproducible_xlsx(df: Any) -> bytes:
    """``df`` as .xlsx bytes that depend on the data only: openpyxl stamps the save time into
    ``docProps/core.xml`` and every zip entry, which made two builds of the same suite differ."""
    import io
    import re
    import zipfile

    raw = io.BytesIO()
    df.to_excel(raw, index=False, engine="openpyxl")
    src = zipfile.ZipFile(io.BytesIO(raw.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "docProps/core.xml":
                data = re.sub(rb"(<dcterms:(?:created|modified)[^>]*>)[^<]*", rb"\g<1>2000-01-01T00:00:00Z", data)
            entry = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type, entry.external_attr = zipfile.ZIP_DEFLATED, info.external_attr
            z.writestr(entry, data)
    return out.getvalue()


def write_metadata(root: Path, rows: list[dict[str, Any]]) -> str:
    """``sam3_metadata/synthetic_metadata.csv``; ``exr_path`` = first GT frame, relative as in the release."""
    rel = "memobench/data/sam3_metadata/synthetic_metadata.csv"
    p = Path(root) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(_csv_text(METADATA_COLUMNS, rows))
    return rel
