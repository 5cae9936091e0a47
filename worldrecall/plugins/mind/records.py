"""MIND-Data's files as the release reads them: ``action.json`` (``mark_time``, ``total_time``, per-frame actions)
and the layout's names. Shared by the loader, the aligner and the action metric.

The release (CSU-JPG/MIND ``src/utils/utils.py``: ``load_time_from_json``, ``extract_actions_from_json``) reads
``mark_time`` and ``total_time`` from ``action.json`` and turns the frames ``mark_time .. mark_time + 97`` of its
``data`` list into labels such as ``forward``, ``forward+look_right`` or ``no_op``. Two encodings exist:

* ``ternary`` (the release as vendored by WorldFoundry, upstream 219f458b, and the dataset README since then):
  each of ``ws``/``ad``/``ud``/``lr`` is 0 (none), 1 (forward / left / look_up / look_left) or 2 (backward /
  right / look_down / look_right);
* ``binary`` (the README of the first release, 8f9c59c's era): 0 is the first of the pair and 1 the second; any
  other value is read as none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall.core.data import CaseFailure
from worldrecall.core.digests import code_memo
from worldrecall.formats.safe_json import read_json

PERSPECTIVES = ("1st_data", "3rd_data")
TEST_TYPES = ("mem_test", "action_space_test")   # cases with a GT clip (LCM, DINO, visual quality, action)
MIRROR = "mirror_test"                           # generated-only: first half vs time-reversed second half
GT_TEST_DIR = "test"                             # MIND-Data/{perspective}/test/{test_type}/<clip>/
ACTION_FILE = "action.json"
VIDEO_FILE = "video.mp4"
IMAGES_FILE = "images.txt"                       # the GT camera (COLMAP text), read by the action metric
ACTION_MAX_FRAMES = 97                           # the release's extract_actions_from_json(..., 97)
LABEL_SCHEMES = ("ternary", "binary")
# (field, (first label, second label)) in the release's order of concatenation
AXES = (("ws", ("forward", "backward")), ("ad", ("left", "right")), ("ud", ("look_up", "look_down")),
        ("lr", ("look_left", "look_right")))
NO_OP = "no_op"


@dataclass(frozen=True)
class ActionRecord:
    """One ``action.json``: the divider ``mark_time``, the GT length ``total_time`` and the per-frame records."""

    path: Path
    mark_time: int
    total_time: int
    frames: list[dict[str, Any]] = field(default_factory=list)
    caption: str = ""


def _int_field(doc: dict[str, Any], key: str, path: Path) -> int:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        raise CaseFailure(f"{path}: {key!r} must be an integer frame index (got {v!r})")
    return v


def read_action_json(path: Path | str) -> ActionRecord:
    """``action.json`` checked: ``mark_time``/``total_time`` integers with 0 <= mark_time <= total_time, ``data`` a
    list of objects. Any problem is one :class:`CaseFailure` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise CaseFailure(f"{path}: missing")
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise CaseFailure(f"{path}: expected a JSON object with mark_time, total_time and data")
    mark, total = _int_field(doc, "mark_time", path), _int_field(doc, "total_time", path)
    if mark < 0 or total < 0:
        raise CaseFailure(f"{path}: mark_time {mark} and total_time {total} must be >= 0")
    if mark > total:
        raise CaseFailure(f"{path}: mark_time {mark} is past total_time {total}")
    data = doc.get("data", [])
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise CaseFailure(f"{path}: 'data' must be a list of per-frame objects")
    caption = doc.get("caption", "")
    return ActionRecord(path, mark, total, data, caption if isinstance(caption, str) else "")


def _axis_value(frame: dict[str, Any], key: str, path: Path | str, i: int) -> int:
    v = frame.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise CaseFailure(f"{path}: data[{i}].{key} must be an integer action code (got {v!r})")
    return int(v)


def frame_label(frame: dict[str, Any], scheme: str = "ternary", *, path: Path | str = "action.json",
                index: int = 0) -> str:
    """One frame's action label: the active parts joined by ``+`` in ws, ad, ud, lr order, or ``no_op``."""
    if scheme not in LABEL_SCHEMES:
        raise CaseFailure(f"action_labels {scheme!r}: expected one of {', '.join(LABEL_SCHEMES)}")
    parts = []
    codes = (1, 2) if scheme == "ternary" else (0, 1)
    for key, (first, second) in AXES:
        v = _axis_value(frame, key, path, index)  # the path is only formatted into an error (a clip has ~70 frames)
        if v == codes[0]:
            parts.append(first)
        elif v == codes[1]:
            parts.append(second)
    return "+".join(parts) if parts else NO_OP


def frame_labels(record: ActionRecord, start: int | None = None, count: int = ACTION_MAX_FRAMES,
                 scheme: str = "ternary") -> list[str]:
    """Labels of ``data[start : min(start + count, len(data))]`` (``start`` defaults to ``mark_time``), as the
    release's ``extract_actions_from_json`` (a ``data`` list shorter than that gives fewer labels)."""
    start = record.mark_time if start is None else int(start)
    end = min(start + int(count), len(record.frames))
    return [frame_label(record.frames[i], scheme, path=record.path, index=i) for i in range(start, end)]


def action_facts(path: Path | str, scheme: str = "ternary") -> dict[str, Any]:
    """What the loader takes from an ``action.json``: ``mark_time``, ``total_time``, ``n_frames`` and the labels of
    the frames from ``mark_time`` on (:func:`frame_labels`; None when a frame's code is not an action code: read
    the file for the message). Kept between runs under the file's content and this module's code
    (:func:`~worldrecall.core.digests.code_memo`): every model's case of a clip reads the same GT file. A file
    that cannot be read raises :class:`CaseFailure` every time (never kept)."""
    path = Path(path)

    def read() -> dict[str, Any]:
        record = read_action_json(path)
        try:
            labels: list[str] | None = frame_labels(record, record.mark_time, ACTION_MAX_FRAMES, scheme)
        except CaseFailure:  # its message names the file: said by the caller, from the file
            labels = None
        return {"mark_time": record.mark_time, "total_time": record.total_time, "n_frames": len(record.frames),
                "labels": labels}

    if not path.is_file():
        return read()  # raises the missing file's one line
    try:
        return code_memo(path, f"mind.action_facts.{scheme}", __name__, read)
    except OSError:  # gone or unreadable since: the reader says so in its own words
        return read()


def gt_clip_dir(data_root: Path, perspective: str, test_type: str, clip: str) -> Path:
    """``{data_root}/{perspective}/test/{test_type}/{clip}`` (the release's layout); where the ``test`` level is
    absent, ``{data_root}/{perspective}/{test_type}/{clip}``."""
    with_test = Path(data_root) / perspective / GT_TEST_DIR / test_type / clip
    if with_test.is_dir() or not (Path(data_root) / perspective / test_type).is_dir():
        return with_test
    return Path(data_root) / perspective / test_type / clip
