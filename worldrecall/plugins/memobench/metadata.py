"""The ``sam3_metadata`` CSVs (subject, first frame, prompt per clip) and the ORS text query.

Clip ids follow the official readers: synthetic ``f"{scene}_{int(video_id):03d}"``; real
``str(video_id).zfill(3)`` (the raw string, not an int).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from worldrecall.core.text import read_csv_numbered

log = logging.getLogger(__name__)

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
    """``scene,video_id,subject,exr_path,prompt`` -> {``Scene_NNN``: ClipMeta}.

    Read as UTF-8 with an optional BOM (a BOM once hid the ``scene`` column and so every subject); bytes that
    are not UTF-8 raise :class:`CaseFailure` naming the file and line. A row without a usable
    scene/video_id is logged as a warning naming the file and line (it cannot belong to any clip).
    """
    out: dict[str, ClipMeta] = {}
    for line, row in read_csv_numbered(path):
        try:
            clip = f"{row['scene']}_{int(row['video_id']):03d}"
        except (KeyError, TypeError, ValueError):
            log.warning("%s: line %d: no usable scene/video_id (%r, %r); row ignored", path, line,
                        row.get("scene"), row.get("video_id"))
            continue
        if clip in out:
            log.warning("%s: line %d: second row for clip %s; the later row wins (as the official reader)",
                        path, line, clip)
        out[clip] = ClipMeta(clip, row.get("subject") or "", row.get("prompt") or "", row.get("exr_path") or "")
    return out


def read_real_metadata(path: Path) -> dict[str, ClipMeta]:
    """``video_id,subject,full_image_path,prompt`` -> {``NNN``: ClipMeta} (UTF-8, BOM tolerated, as above)."""
    out: dict[str, ClipMeta] = {}
    for line, row in read_csv_numbered(path):
        vid = row.get("video_id")
        if vid is None or not str(vid).strip():
            log.warning("%s: line %d: no video_id; row ignored", path, line)
            continue
        clip = str(vid).zfill(3)
        if clip in out:
            log.warning("%s: line %d: second row for clip %s; the later row wins (as the official reader)",
                        path, line, clip)
        out[clip] = ClipMeta(clip, row.get("subject") or "", row.get("prompt") or "",
                             row.get("full_image_path") or "")
    return out
