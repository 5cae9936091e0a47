"""Checks for everything a WRBench reader takes from a user's files: manifest records, JSON Lines (the release's
variants and evidence), evidence records and pose stacks.

Every check refuses with one :class:`CaseFailure` line naming the file, the record and the field, so the loader
turns it into that one video's error: a bad record costs only its video. Three rules hold throughout:

* JSON Lines are split on ``\\n`` only (``str.splitlines`` also splits inside a string holding U+2028, U+0085 …,
  and one line would become two broken ones); a line that does not parse, or a duplicate key, is kept as a
  *problem* that fails only the videos that would have needed it;
* an integer too long for the bounded JSON reader (:data:`JSON_MAX_INT_DIGITS`) is kept as :class:`Oversize` in
  the manifest, so that one record fails, not the manifest;
* numbers are finite (``NaN``, ``±Infinity`` — which Python's JSON reader accepts — are refused where they would
  reach a score); frame annotations are integers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure
from worldrecall.core.text import read_text
from worldrecall.formats.safe_json import JSON_MAX_DEPTH, JSON_MAX_INT_DIGITS, json_depth, parse_json

# record fields that are text when present (null = absent)
TEXT_FIELDS = ("video_path", "path", "model", "camera_type", "camera", "variant_id", "world_state_prompt",
               "prompt_text", "viewpoint_condition_type", "target_pose_path", "trajectory_c2w_path", "pose_path",
               "vipe_sidecar", "evidence_path")
FRAME_FIELDS = ("look_away_frame", "return_frame")
# evidence fields the gate reads (export_runtime_v2_evidence_first.attach_evidence)
EVIDENCE_BOOLS = ("evidence_shared_oov_applicable", "shared_oov_applicable", "evidence_d5_applicable",
                  "evidence_d6_applicable")
EVIDENCE_REASONS = ("evidence_shared_oov_na_reason", "shared_oov_na_reason", "evidence_d5_na_reason",
                    "evidence_d6_na_reason")
ORTHONORMAL_ATOL = 1e-3


@dataclass(frozen=True)
class Oversize:
    """A JSON integer past :data:`JSON_MAX_INT_DIGITS` digits, kept (as its length) so its record can be refused."""

    digits: int


def _lenient_int(s: str) -> int | Oversize:
    n = len(s.lstrip("-"))
    return Oversize(n) if n > JSON_MAX_INT_DIGITS else int(s)


def read_json_records(path: Path) -> Any:
    """A JSON file as :func:`worldrecall.formats.safe_json.read_json` reads it (bounded depth; one line naming the
    file), except that an over-long integer becomes :class:`Oversize` for the record check to refuse."""
    text = read_text(path)
    try:
        value = json.loads(text, parse_int=_lenient_int)
    except RecursionError:
        raise CaseFailure(f"{path}: JSON nested too deeply (limit {JSON_MAX_DEPTH} levels)") from None
    except (ValueError, TypeError) as e:
        raise CaseFailure(f"{path}: not valid JSON ({' '.join(str(e).split())[:200]})") from None
    if json_depth(value) > JSON_MAX_DEPTH:
        raise CaseFailure(f"{path}: JSON nested too deeply (limit {JSON_MAX_DEPTH} levels)")
    return value


def json_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line) of the non-blank lines, split on ``\\n`` only."""
    return [(i, ln) for i, ln in enumerate(text.split("\n"), start=1) if ln.strip()]


@dataclass
class JsonlIndex:
    """``{key: record}`` of a JSON Lines file, and what could not be used: ``bad_lines`` (one line each, naming
    file and line) and ``bad_keys`` (key -> why: a duplicate)."""

    path: Path
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    bad_lines: list[str] = field(default_factory=list)
    bad_keys: dict[str, str] = field(default_factory=dict)

    def problem_for(self, key: str, what: str) -> str | None:
        """Why ``key`` cannot be looked up here (a duplicate; or unreadable lines when it is absent), or None."""
        if key in self.bad_keys:
            return self.bad_keys[key]
        if key not in self.records and self.bad_lines:
            more = f" (+{len(self.bad_lines) - 1} more)" if len(self.bad_lines) > 1 else ""
            return (f"{what} {key!r} not found in {self.path}, which has unreadable lines that may hold it: "
                    f"{self.bad_lines[0]}{more}")
        return None


def read_jsonl_index(path: Path, key: str) -> JsonlIndex:
    """Index a JSON Lines file by ``key``; a line that is not a JSON object with a text ``key``, or a key seen
    twice, is recorded, not raised (an unreadable file still raises, naming it)."""
    out = JsonlIndex(Path(path))
    first_line: dict[str, int] = {}
    for i, line in json_lines(read_text(path)):
        where = f"{path}:{i}"
        try:
            rec = parse_json(line, where)
        except CaseFailure as e:
            out.bad_lines.append(str(e))
            continue
        k = rec.get(key) if isinstance(rec, Mapping) else None
        if not isinstance(rec, Mapping):
            out.bad_lines.append(f"{where}: not a JSON object")
        elif not isinstance(k, str) or not k:
            out.bad_lines.append(f"{where}: {key} must be a non-empty string, got {k!r}")
        elif k in first_line:
            out.bad_keys[k] = f"{where}: duplicate {key} {k!r} (first on line {first_line[k]})"
            out.records.pop(k, None)
        elif k not in out.bad_keys:
            first_line[k] = i
            out.records[k] = dict(rec)
    return out


def _oversize_field(value: Any, name: str) -> str | None:
    stack: list[tuple[Any, str]] = [(value, name)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, Oversize):
            return at
        if isinstance(v, Mapping):
            stack.extend((c, f"{at}.{k}") for k, c in v.items())
        elif isinstance(v, list):
            stack.extend((c, f"{at}[{j}]") for j, c in enumerate(v))
    return None


def video_id(rec: Any, where: str) -> str:
    """The record's ``video_id``: a non-empty string (not null, a number or a list)."""
    if not isinstance(rec, Mapping):
        raise CaseFailure(f"{where}: not an object")
    vid = rec.get("video_id")
    if not isinstance(vid, str) or not vid.strip():
        raise CaseFailure(f"{where}: video_id must be a non-empty string, got {vid!r}")
    return vid


def finite_number(value: Any, where: str, name: str) -> float:
    """A finite int/float (a bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise CaseFailure(f"{where}: {name} must be a finite number, got {value!r}")
    return float(value)


def frame_index(value: Any, where: str, name: str) -> int:
    """A non-negative integral frame index (``12`` or ``12.0``)."""
    x = finite_number(value, where, name)
    if x != int(x) or x < 0:
        raise CaseFailure(f"{where}: {name} must be a non-negative whole frame index, got {value!r}")
    return int(x)


def label(value: Any, where: str, name: str) -> str:
    """A stratum label: text, a whole number or a finite number (never an object, a list or NaN)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise CaseFailure(f"{where}: {name} must be text or a finite number, got {type(value).__name__} "
                          f"{value!r:.60}")
    return str(value)


def check_record(rec: Mapping[str, Any], where: str) -> None:
    """Types of a manifest record's fields: text fields text, frames whole, numbers finite, flags bool,
    ``evidence`` an object; no over-long integer anywhere."""
    bad = _oversize_field(rec, "record")
    if bad is not None:
        raise CaseFailure(f"{where}: {bad.removeprefix('record.')}: integer longer than {JSON_MAX_INT_DIGITS} digits")
    for k in TEXT_FIELDS:
        v = rec.get(k)
        if v is not None and not isinstance(v, str):
            raise CaseFailure(f"{where}: {k} must be a string, got {type(v).__name__} {v!r:.60}")
    for k in FRAME_FIELDS:
        if rec.get(k) is not None:
            frame_index(rec[k], where, k)
    if rec.get("requested_yaw_deg") is not None:
        finite_number(rec["requested_yaw_deg"], where, "requested_yaw_deg")
    if "reobservation_support" in rec and not isinstance(rec["reobservation_support"], bool):
        raise CaseFailure(f"{where}: reobservation_support must be true or false")
    if rec.get("evidence") is not None:
        check_evidence(rec["evidence"], f"{where}: evidence")


def check_evidence(ev: Any, where: str) -> dict[str, Any]:
    """An evidence record: an object whose gate flags are true / false / null and whose reasons are text / null."""
    if not isinstance(ev, Mapping):
        raise CaseFailure(f"{where}: evidence must be a JSON object, got {type(ev).__name__}")
    for k in EVIDENCE_BOOLS:
        if ev.get(k) is not None and not isinstance(ev[k], bool):
            raise CaseFailure(f"{where}: {k} must be true, false or null, got {ev[k]!r:.60}")
    for k in EVIDENCE_REASONS:
        if ev.get(k) is not None and not isinstance(ev[k], str):
            raise CaseFailure(f"{where}: {k} must be a string or null, got {ev[k]!r:.60}")
    return dict(ev)


def pose_stack(arr: Any, where: str, n_frames: int | None = None) -> tuple[np.ndarray, list[str]]:
    """A c2w stack as float64 [T, 4, 4] (a [T, 3, 4] one gets its bottom row), and warnings: shape, finiteness,
    the bottom row ``[0, 0, 0, 1]`` and (when given) one pose per frame are required; a rotation block that is
    not orthonormal is a warning only (the release scores it)."""
    a = np.asarray(arr)
    if a.dtype.kind not in "fiu":
        raise CaseFailure(f"{where}: poses must be numbers, got dtype {a.dtype}")
    a = a.astype(np.float64)
    if a.ndim != 3 or a.shape[1:] not in ((4, 4), (3, 4)) or len(a) == 0:
        raise CaseFailure(f"{where}: expected a [T, 4, 4] or [T, 3, 4] c2w stack, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(a.reshape(len(a), -1)), axis=1))[0])
        raise CaseFailure(f"{where}: pose {bad} is not finite")
    if a.shape[1] == 3:
        a = np.concatenate([a, np.tile([[[0.0, 0.0, 0.0, 1.0]]], (len(a), 1, 1))], axis=1)
    rows = ~np.all(np.abs(a[:, 3, :] - [0.0, 0.0, 0.0, 1.0]) <= 1e-6, axis=1)
    if rows.any():
        raise CaseFailure(f"{where}: pose {int(np.flatnonzero(rows)[0])}: bottom row is not [0, 0, 0, 1]")
    if n_frames is not None and len(a) != int(n_frames):
        raise CaseFailure(f"{where}: {len(a)} poses for a video of {n_frames} frames (one per frame)")
    r = a[:, :3, :3]
    err = np.abs(np.einsum("tij,tkj->tik", r, r) - np.eye(3)).reshape(len(a), -1).max(axis=1)
    warnings = []
    if np.any(err > ORTHONORMAL_ATOL):
        k = int(np.argmax(err))
        warnings.append(f"{where}: {int(np.sum(err > ORTHONORMAL_ATOL))} rotation block(s) not orthonormal "
                        f"(worst: pose {k}, |R R^T - I| = {err[k]:.3g}); scored as given, as the release does")
    return a, warnings
