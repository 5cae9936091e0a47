"""MemoBench phase sheets (exit / re-enter frames per clip) and the optional real-clip availability list.

Sheets come as ``.xlsx`` (the release) or ``.csv`` (same columns). Parsing follows the official loaders:
rows whose ``skip`` column (header matched case-insensitively) equals "yes" case-insensitively — without
stripping whitespace — are dropped; boundary values are parsed with ``int(float(x))`` and a row that does
not parse is dropped; a later row with the same clip id wins.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SYNTHETIC_SHEET = "Synthetic_ExitReenter"
REAL_SHEET = "Real_ExitReenter"


class SheetError(Exception):
    """A sheet that exists but cannot be read at all (message names the file)."""


@dataclass(frozen=True)
class PhaseRow:
    """One clip's GT phase boundaries as annotated, plus what else the sheet says about it."""

    clip_id: str
    h_gt: int
    r_gt: int
    prompt: str | None = None          # the sheet's prompt cell as the official Step 1 reads it
    frame_num: int | None = None


def find_sheet(folder: Path, stem: str, prefer: str = "auto") -> Path | None:
    """The sheet ``folder/stem.xlsx`` or ``folder/stem.csv`` (``prefer``: auto = xlsx first, or xlsx/csv)."""
    order = {"auto": ("xlsx", "csv"), "xlsx": ("xlsx",), "csv": ("csv",)}.get(prefer)
    if order is None:
        raise ValueError(f"sheet_format must be auto, xlsx or csv, got {prefer!r}")
    for ext in order:
        p = Path(folder) / f"{stem}.{ext}"
        if p.is_file():
            return p
    return None


def read_table(path: Path) -> Any:
    """Read an xlsx/xls/csv sheet into a DataFrame; unreadable files raise :class:`SheetError`."""
    import pandas as pd

    try:
        if path.suffix.lower() == ".csv":
            return pd.read_csv(path)
        return pd.read_excel(path)
    except Exception as e:  # openpyxl/xlrd/csv errors are many; all mean "this sheet is unreadable"
        raise SheetError(f"{path}: cannot be read ({type(e).__name__}: {str(e).splitlines()[0][:160]})") from None


def _int(x: Any) -> int:
    return int(float(x))


def parse_synthetic_sheet(df: Any) -> dict[str, PhaseRow]:
    """``video_folder, exits, re-enter, frame_num, skip, prompt`` rows -> {clip id: PhaseRow}."""
    skip_cols = [c for c in df.columns if str(c).lower() == "skip"]
    if skip_cols:
        df = df[df[skip_cols[0]].astype(str).str.lower() != "yes"]
    out: dict[str, PhaseRow] = {}
    for _, row in df.iterrows():
        try:
            clip = str(row["video_folder"]).strip()
            h, r = _int(row["exits"]), _int(row["re-enter"])
        except (ValueError, TypeError, KeyError):
            continue
        try:
            frame_num = _int(row["frame_num"]) if "frame_num" in row else None
        except (ValueError, TypeError):
            frame_num = None
        # str() of an empty cell is "nan": the official Step 1 then scores the prompt "nan"
        prompt = str(row.get("prompt", "")).strip()
        out[clip] = PhaseRow(clip, h, r, prompt=prompt, frame_num=frame_num)
    return out


def parse_real_sheet(df: Any) -> dict[str, PhaseRow]:
    """``id, exit, reenter`` rows -> {zero-padded id: PhaseRow} (no prompt column in the real sheet)."""
    out: dict[str, PhaseRow] = {}
    for _, row in df.iterrows():
        try:
            clip = str(_int(row["id"])).zfill(3)
            h, r = _int(row["exit"]), _int(row["reenter"])
        except (ValueError, TypeError, KeyError):
            continue
        out[clip] = PhaseRow(clip, h, r, prompt=None)
    return out


def parse_real_selection(df: Any) -> set[str]:
    """``ID, Availability`` -> ids whose Availability is "yes" (stripped, case-insensitive)."""
    keep = df[df["Availability"].astype(str).str.strip().str.lower() == "yes"]
    ids: set[str] = set()
    for v in keep["ID"]:
        try:
            ids.add(str(_int(v)).zfill(3))
        except (ValueError, TypeError):
            continue
    return ids


def find_real_selection(data_root: Path) -> Path | None:
    """The optional availability filter ``Real_Selected.{xls,xlsx,csv}`` at the data root."""
    for ext in ("xls", "xlsx", "csv"):
        p = Path(data_root) / f"Real_Selected.{ext}"
        if p.is_file():
            return p
    return None
