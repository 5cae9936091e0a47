"""The ``sam3_metadata`` CSVs (subject, first frame, prompt per clip) and the ORS text query.

Clip ids follow the official readers: synthetic ``f"{scene}_{int(video_id):03d}"``; real
``str(video_id).zfill(3)`` (the raw string, not an int).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

# the official Step 2 phrase extraction: "sees <phrase>(subject)<motion words>" up to "." or ","
_SUBJECT_PHRASE = re.compile(r"sees (.*?\(subject\)[^.,]*)", re.IGNORECASE)


@dataclass(frozen=True)
class ClipMeta:
    """One metadata row: who the target is and how the clip was prompted."""

    clip_id: str
    subject: str
    prompt: str
    first_frame: str   # path as written in the CSV (relative to the repository root, "data/…")


def extract_subject_phrase(prompt: str | None) -> str | None:
    """The ORS query phrase of a synthetic prompt, e.g. ``"a tractor(subject) moving from the left to right"``.

    Group 1 of the case-insensitive regex, stripped, trailing dots/commas removed; None when no match.
    """
    if not prompt:
        return None
    m = _SUBJECT_PHRASE.search(prompt)
    if m:
        return m.group(1).strip().rstrip(".,")
    return None


def ors_query(split: str, subject: str | None, prompt: str | None) -> str | None:
    """Text query for the segmenter: synthetic -> the prompt's "(subject)" phrase, else the subject;
    real -> the subject column verbatim."""
    if split == "synthetic":
        return extract_subject_phrase(prompt) or subject
    return subject


def read_synthetic_metadata(path: Path) -> dict[str, ClipMeta]:
    """``scene,video_id,subject,exr_path,prompt`` -> {``Scene_NNN``: ClipMeta}; bad rows are skipped."""
    out: dict[str, ClipMeta] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            try:
                clip = f"{row['scene']}_{int(row['video_id']):03d}"
            except (KeyError, TypeError, ValueError):
                continue
            out[clip] = ClipMeta(clip, row.get("subject") or "", row.get("prompt") or "", row.get("exr_path") or "")
    return out


def read_real_metadata(path: Path) -> dict[str, ClipMeta]:
    """``video_id,subject,full_image_path,prompt`` -> {``NNN``: ClipMeta}; bad rows are skipped."""
    out: dict[str, ClipMeta] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            vid = row.get("video_id")
            if vid is None:
                continue
            clip = str(vid).zfill(3)
            out[clip] = ClipMeta(clip, row.get("subject") or "", row.get("prompt") or "",
                                 row.get("full_image_path") or "")
    return out
