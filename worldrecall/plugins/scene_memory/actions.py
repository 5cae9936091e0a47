"""Action programs of memory-loop rollouts and the experimental observation/revisit split (spec B.2, B.5).

An action program is read from ``<stem>_actions.json`` in one of the formats the official loader
accepts — ``actions`` + ``frames_per_action``, per-frame ``frame_actions``, or per-frame
``keyboard_condition`` / ``mouse_condition`` rows — or falls back to a named loop's default camera
itinerary. It is normalised to a JSON-able program and expanded to one *action-part set* per video frame.
"""

from __future__ import annotations

import math
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


# The release's action vocabulary (``long_horizon_diagnostics``): labels are lower-cased, "+", "-" and
# spaces become "_", known no-op words give the empty set, then every alias longer than one character
# found as a substring (longest first) adds its canonical part, and the remaining "_"-separated words
# are looked up once more (single letters like "w" only match as whole words).
NOOP_LABELS = frozenset({"", "idle", "none", "no_op", "noop", "no-op", "nomove", "stationary", "fixed"})
ACTION_ALIASES: dict[str, str] = {
    **dict.fromkeys(("w", "forward", "forwards", "move_forward"), "forward"),
    **dict.fromkeys(("backward", "backwards", "back", "s"), "back"),
    **dict.fromkeys(("a", "left", "move_left"), "left"),
    **dict.fromkeys(("d", "right", "move_right"), "right"),
    **dict.fromkeys(("j", "look_left", "turn_left", "yaw_left", "yaw-", "camera_left", "camera_l"), "camera_l"),
    **dict.fromkeys(("l", "look_right", "turn_right", "yaw_right", "yaw+", "camera_right", "camera_r"), "camera_r"),
    **dict.fromkeys(("i", "look_up", "pitch_up", "pitch+", "camera_up"), "camera_up"),
    **dict.fromkeys(("k", "look_down", "pitch_down", "pitch-", "camera_down"), "camera_down"),
}
# The memory-loop itinerary tokens as the release turns a sample's camera_path into keystroke labels
# (used only for the loop fallback, when no action file exists).
CAMERA_TOKEN_ACTIONS: dict[str, str] = {
    "fixed": "idle", "push_in": "forward", "pull_out": "back", "pan_left": "back_left_camera_l",
    "pan_right": "back_right_camera_r", "move_left": "left", "move_right": "right",
    "orbit_left": "forward_left_camera_r", "orbit_right": "forward_right_camera_l", "pedestal_up": "camera_up",
    "pedestal_down": "camera_down", "tilt_up": "camera_up", "tilt_down": "camera_down",
}
_ALIASES_LONGEST_FIRST = sorted(ACTION_ALIASES, key=len, reverse=True)  # stable: ties keep table order


def label_parts(label: Any) -> list[str]:
    """The release's canonical parts of one text label, sorted (``push_in`` -> [], ``pan_left`` -> [left])."""
    text = str("" if label is None else label).strip().lower()
    text = text.replace("+", "_").replace("-", "_").replace(" ", "_")
    if text in NOOP_LABELS:
        return []
    parts: set[str] = set()
    rest = text
    for alias in _ALIASES_LONGEST_FIRST:
        if len(alias) == 1:
            continue
        token = alias.replace("-", "_")
        if token in rest:
            parts.add(ACTION_ALIASES[alias])
            rest = rest.replace(token, "_")
    for word in rest.split("_"):
        if word in ACTION_ALIASES:
            parts.add(ACTION_ALIASES[word])
    return sorted(parts)


def _frame_parts(item: Any) -> list[str]:
    """One ``frame_actions`` entry: a dict reads its ``move``, ``view`` and ``action`` labels, else a label."""
    if isinstance(item, dict):
        return sorted(set(label_parts(item.get("move"))) | set(label_parts(item.get("view")))
                      | set(label_parts(item.get("action"))))
    return label_parts(item)


def _condition_rows(rows: Any, where: str, key: str) -> list[np.ndarray]:
    if not isinstance(rows, (list, tuple)):
        raise CaseFailure(f"{where}: {key} must be a list of per-frame rows")
    out = []
    for i, r in enumerate(rows):
        try:
            out.append(np.asarray(r or [], dtype=np.float32).reshape(-1))
        except (TypeError, ValueError):
            raise CaseFailure(f"{where}: {key} row {i} is not a list of numbers") from None
    return out


def keyboard_mouse_parts(keyboard: np.ndarray | None, mouse: np.ndarray | None) -> list[str]:
    """The release's decoding of one keyboard/mouse row (a missing row is an empty one: no action).

    Keyboard ≥ 4 columns: forward, back, left, right (> 0.5); ≥ 7 columns with none of those held:
    columns 3–6 are camera_l, camera_r, left, right. Mouse ≥ 2 columns: [0] > 1e-6 camera_up, < −1e-6
    camera_down; [1] > 1e-6 camera_r, < −1e-6 camera_l (float32 comparisons).
    """
    kb = np.zeros(0, np.float32) if keyboard is None else keyboard
    ms = np.zeros(0, np.float32) if mouse is None else mouse
    parts: set[str] = set()
    if kb.shape[0] >= 4:
        parts.update(n for n, v in zip(("forward", "back", "left", "right"), kb[:4]) if v > 0.5)
    if kb.shape[0] >= 7 and not parts:
        parts.update(n for n, v in zip(("camera_l", "camera_r", "left", "right"), kb[3:7]) if v > 0.5)
    eps = np.float32(1e-6)
    if ms.shape[0] >= 2:
        if ms[0] > eps:
            parts.add("camera_up")
        elif ms[0] < -eps:
            parts.add("camera_down")
        if ms[1] > eps:
            parts.add("camera_r")
        elif ms[1] < -eps:
            parts.add("camera_l")
    return sorted(parts)


def normalise_program(raw: Any, where: str) -> dict[str, Any]:
    """Any accepted action JSON -> a JSON-able program, parsed with the release's vocabulary.

    ``{"rows": [[parts], ...]}`` from keyboard/mouse rows (short lists padded with no-ops, up to
    ``total_frames``), ``{"frame_actions": [[parts], ...]}``, or ``{"actions": [[parts], ...],
    "frames_per_action": k | None}``. CaseFailure naming ``where`` when nothing fits.
    """
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
    kb = _condition_rows(raw.get("keyboard_condition") or [], where, "keyboard_condition")
    ms = _condition_rows(raw.get("mouse_condition") or [], where, "mouse_condition")
    if kb or ms:
        try:
            total = int(raw.get("total_frames") or 0)
        except (TypeError, ValueError):
            raise CaseFailure(f"{where}: total_frames must be an integer, got {raw.get('total_frames')!r}") from None
        n = max(len(kb), len(ms), total)
        out["rows"] = [keyboard_mouse_parts(kb[i] if i < len(kb) else None, ms[i] if i < len(ms) else None)
                       for i in range(n)]
        return out
    fa = raw.get("frame_actions")
    if isinstance(fa, list) and fa:
        out["frame_actions"] = [_frame_parts(t) for t in fa]
        return out
    tokens = [t for t in (raw.get("actions") or []) if str(t).strip()] if isinstance(raw.get("actions"), list) else []
    fpa = raw.get("frames_per_action")
    if not tokens and out.get("loop") in LOOP_ITINERARIES:  # [ours] a named loop's itinerary
        tokens = [CAMERA_TOKEN_ACTIONS.get(t, t) for t in LOOP_ITINERARIES[str(out["loop"])]]
    if not tokens:
        raise CaseFailure(f"{where}: no actions, frame_actions, keyboard_condition/mouse_condition or known loop")
    if fpa:  # the release: int(frames_per_action or ceil(frames / #actions)), at least 1 frame each
        try:
            fpa = max(int(fpa), 1)
        except (TypeError, ValueError):
            raise CaseFailure(f"{where}: frames_per_action must be an integer, got {fpa!r}") from None
    else:
        fpa = None
    out["actions"] = [label_parts(t) for t in tokens]
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
    """One action-part set per video frame (``action_parts_from_payload``), trimmed to ``n_frames``.

    Keyboard/mouse rows run to at least ``n_frames`` (missing rows are no-ops); ``frame_actions`` and
    ``actions`` are padded with their last value. ``actions`` without ``frames_per_action`` take
    ``ceil(n_frames / #actions)`` frames each. ``n_frames`` ≤ 0 gives an empty sequence.
    """
    if n_frames < 1:
        return []
    if "rows" in program:
        seq = [tuple(p) for p in program["rows"]]
        seq += [()] * (n_frames - len(seq))
        return seq[:n_frames]
    if "frame_actions" in program:
        seq = [tuple(p) for p in program["frame_actions"]]
    else:
        acts = [tuple(p) for p in program["actions"]]
        fpa = program.get("frames_per_action") or math.ceil(n_frames / max(len(acts), 1))
        seq = [a for a in acts for _ in range(max(int(fpa), 1))]
    if not seq:
        return [()] * n_frames
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
    round(t·(N − 1) / max(len(seq), 1)) with Python rounding, clamped to [1, N − 1]. An empty sequence (a
    frame count of 0) gives t = 1.
    """
    segs = segments(seq) if seq else []
    t = segs[0][1] if len(segs) >= 2 else max(len(seq) // 2, 1)
    row = round(t * (n_rows - 1) / max(len(seq), 1))
    return t, int(min(max(row, 1), max(n_rows - 1, 1)))
