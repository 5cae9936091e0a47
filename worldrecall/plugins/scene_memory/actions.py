"""Action programs of memory-loop rollouts and the experimental observation/revisit split (spec B.2, B.5).

An action program is read from ``<stem>_actions.json`` in one of the formats the official loader
accepts — ``actions`` + ``frames_per_action``, per-frame ``frame_actions``, or per-frame
``keyboard_condition`` / ``mouse_condition`` rows — or falls back to a named loop's default camera
itinerary. It is normalised to a JSON-able program and expanded to one *action-part set* per video frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure
from worldrecall.core.text import read_text
from worldrecall.formats.safe_json import parse_json

# Default closed itineraries of the memory-loop suite (B.2): one token per camera step.
LOOP_ITINERARIES: dict[str, list[str]] = {
    "yaw_loop_360": ["pan_right"] * 12,
    "yaw_loop_180": ["pan_right"] * 6 + ["pan_left"] * 6,
    "dolly_loop": ["push_in"] * 4 + ["pull_out"] * 4,
    "square_loop": (["push_in"] * 3 + ["pan_right"] * 3) * 4,
    "palindrome_loop": (["push_in"] * 3 + ["pan_right"] * 2 + ["push_in"] * 3
                        + ["pull_out"] * 3 + ["pan_left"] * 2 + ["pull_out"] * 3),
    "double_yaw_loop": (["pan_right"] * 6 + ["pan_left"] * 6) * 2,
}

TOKEN_INVERSE: dict[str, str] = {
    "push_in": "pull_out", "pull_out": "push_in", "move_left": "move_right", "move_right": "move_left",
    "pedestal_up": "pedestal_down", "pedestal_down": "pedestal_up", "pan_left": "pan_right",
    "pan_right": "pan_left", "tilt_up": "tilt_down", "tilt_down": "tilt_up", "roll_cw": "roll_ccw",
    "roll_ccw": "roll_cw", "orbit_left": "orbit_right", "orbit_right": "orbit_left", "fixed": "fixed",
}


def loop_name_of(case_id: str) -> str | None:
    """The memory-loop family a case id starts with (``dolly_loop_003`` -> ``dolly_loop``), if any."""
    for name in sorted(LOOP_ITINERARIES, key=len, reverse=True):
        if case_id == name or case_id.startswith((name + "_", name + "-")):
            return name
    return None


def _parts(token: Any) -> list[str]:
    """One step's action parts, sorted: "pan_right+push_in" / ["a", "b"] / {"a": 1, "b": 0} -> parts."""
    if token is None:
        return []
    if isinstance(token, str):
        return sorted({p.strip() for p in token.split("+") if p.strip()})
    if isinstance(token, dict):
        return sorted(str(k) for k, v in token.items() if v)
    if isinstance(token, (list, tuple)):
        out: set[str] = set()
        for t in token:
            out.update(_parts(t))
        return sorted(out)
    return [str(token)]


def _condition_parts(rows: Any, prefix: str, where: str, *, signed: bool) -> list[list[str]]:
    arr = np.asarray(rows, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or not np.isfinite(arr).all():
        raise CaseFailure(f"{where}: {prefix}_condition must be finite per-frame rows")
    out = []
    for row in arr:
        if signed:  # mouse deltas: direction of each axis
            out.append([f"{prefix}{j}{'+' if v > 0 else '-'}" for j, v in enumerate(row) if abs(v) > 1e-9])
        else:       # keyboard: keys held in this frame
            out.append([f"{prefix}{j}" for j, v in enumerate(row) if v > 0.5])
    return out


def normalise_program(raw: Any, where: str) -> dict[str, Any]:
    """Any accepted action JSON -> ``{"frame_actions": [[parts], ...]}`` or ``{"actions": [[parts], ...],
    "frames_per_action": k | None}`` (JSON-able). CaseFailure naming ``where`` when nothing fits."""
    if isinstance(raw, list):
        raw = {"actions": raw}
    if not isinstance(raw, dict):
        raise CaseFailure(f"{where}: expected a JSON object or list of actions")
    if "actions" in raw and isinstance(raw["actions"], dict):  # generation records nest the program
        return normalise_program(raw["actions"], where)
    out: dict[str, Any] = {}
    for key in ("loop", "loop_name", "fps"):
        if key in raw and isinstance(raw[key], (str, int, float)):
            out["loop" if key == "loop_name" else key] = raw[key]
    if "keyboard_condition" in raw or "mouse_condition" in raw:
        kb = _condition_parts(raw["keyboard_condition"], "key", where, signed=False) \
            if raw.get("keyboard_condition") is not None else []
        ms = _condition_parts(raw["mouse_condition"], "mouse", where, signed=True) \
            if raw.get("mouse_condition") is not None else []
        n = max(len(kb), len(ms))
        if n == 0:
            raise CaseFailure(f"{where}: empty keyboard/mouse condition rows")
        frames = []
        for i in range(n):
            a = kb[min(i, len(kb) - 1)] if kb else []
            b = ms[min(i, len(ms) - 1)] if ms else []
            frames.append(sorted(set(a) | set(b)))
        out["frame_actions"] = frames
        return out
    if "frame_actions" in raw:
        fa = raw["frame_actions"]
        if not isinstance(fa, list) or not fa:
            raise CaseFailure(f"{where}: frame_actions must be a non-empty list")
        out["frame_actions"] = [_parts(t) for t in fa]
        return out
    tokens = raw.get("actions", raw.get("camera_path"))
    if tokens is None and out.get("loop") in LOOP_ITINERARIES:
        tokens = LOOP_ITINERARIES[str(out["loop"])]
    if not isinstance(tokens, list) or not tokens:
        raise CaseFailure(f"{where}: no actions, frame_actions, keyboard_condition/mouse_condition or known loop")
    fpa = raw.get("frames_per_action")
    if fpa is not None and (isinstance(fpa, bool) or not isinstance(fpa, int) or fpa < 1):
        raise CaseFailure(f"{where}: frames_per_action must be a positive integer, got {fpa!r}")
    out["actions"] = [_parts(t) for t in tokens]
    out["frames_per_action"] = fpa
    return out


def read_program(path: Path) -> dict[str, Any]:
    """Read and normalise an ``<stem>_actions.json`` file."""
    text = read_text(path)  # BOM tolerated; not UTF-8 -> CaseFailure naming file and line
    try:
        raw = parse_json(text, path)  # nesting depth and integer size bounded
    except CaseFailure as e:
        raise CaseFailure(f"{path}: unreadable action JSON ({str(e).removeprefix(f'{path}: ')})") from None
    return normalise_program(raw, str(path))


def expand_program(program: dict[str, Any], n_frames: int) -> list[tuple[str, ...]]:
    """One action-part set per video frame: pad with the last value / trim to ``n_frames`` (B.5 step 1).

    ``actions`` without ``frames_per_action`` are spread evenly over the frames [ours: the official
    fallback repeats whole laps, which needs the rollout's lap count].
    """
    if n_frames < 1:
        return []
    if "frame_actions" in program:
        seq = [tuple(p) for p in program["frame_actions"]]
    else:
        acts = [tuple(p) for p in program["actions"]]
        fpa = program.get("frames_per_action")
        if fpa:
            seq = [a for a in acts for _ in range(int(fpa))]
        else:
            seq = [acts[min(len(acts) - 1, (i * len(acts)) // n_frames)] for i in range(n_frames)]
    if not seq:
        return []
    if len(seq) < n_frames:
        seq = seq + [seq[-1]] * (n_frames - len(seq))
    return seq[:n_frames]


def segments(seq: Sequence[tuple[str, ...]]) -> list[tuple[int, int]]:
    """Maximal runs of identical action sets as half-open [start, end) frame ranges (B.5 step 2)."""
    out: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(seq) + 1):
        if i == len(seq) or seq[i] != seq[start]:
            out.append((start, i))
            start = i
    return out


def action_split_row(seq: Sequence[tuple[str, ...]], n_rows: int) -> tuple[int, int]:
    """B.5 steps 3–4: (transition frame t, row index) for a per-frame action sequence and N sidecar rows.

    t = end of the first segment when there are ≥ 2 segments, else max(len // 2, 1) (errata 4); row =
    round(t·(N − 1) / len(seq)) with Python rounding, clamped to [1, N − 1].
    """
    if not seq:
        raise CaseFailure("action program: empty after expansion")
    segs = segments(seq)
    t = segs[0][1] if len(segs) >= 2 else max(len(seq) // 2, 1)
    row = round(t * (n_rows - 1) / len(seq))
    return t, int(min(max(row, 1), max(n_rows - 1, 1)))
