"""Observation/revisit splits of a memory-loop rollout on its own sidecar rows.

* ``scene_memory.turnaround`` — the official split (spec B.4) at the pose farthest from the start, with the
  return gate, worldrecall's absolute departure floor (errata 6) and the per-leg turning points (O-B3).
* ``scene_memory.actions`` — the experimental split (B.5) at the first ground-truth action boundary, with
  the experimental return gate always computed (the metric decides whether it counts).

Both report rows (``split_row`` = first revisit row) and frame phases (inclusive video-frame ranges).
A split that leaves a leg with < 2 rows is not an error: ``split_ok`` is false and the metric reports
"not applicable" (errata 5).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import Aligner, MissingInput, merge_typed
from worldrecall.core.data import Alignment, Case, CaseFailure, CaseSkip, Phase
from worldrecall.formats.vipe import Sidecar, read_sidecar
from worldrecall.plugins.scene_memory.actions import (
    CAMERA_TOKEN_ACTIONS,
    LOOP_ITINERARIES,
    action_split_row,
    expand_program,
    label_parts,
)
from worldrecall.plugins.scene_memory.exports import (
    INTRINSICS_FILE,
    MissingExport,
    export_rows,
    is_native_layout,
)
from worldrecall.plugins.scene_memory.trajectory import (
    experimental_return_gate,
    select_diverse_pairs,
    turnaround_gate,
    turning_points,
)

PRECOMPUTED_KEYS = ("scene_memory_npz", "observation_cloud", "revisit_cloud")
POSE_STEMS = ("poses_c2w", "poses", "camera_poses")


def has_precomputed(case: Case) -> bool:
    """True when the case ships its own clouds (a scene_memory NPZ or an explicit observation/revisit pair)."""
    s = case.sidecars
    return "scene_memory_npz" in s or ("observation_cloud" in s and "revisit_cloud" in s)


def missing_vipe(case: Case) -> list[MissingInput]:
    """The ViPE sidecar every memory_loop metric reads (poses and depth), unless the case ships its own clouds:
    without it the metric is skipped on the case, naming where it was looked for and how to produce it."""
    if "vipe" in case.sidecars or has_precomputed(case):
        return []
    where = f"annotations_vipe/{case.case_id}_vipe_ann"
    if case.video is not None:
        where = str(Path(case.video.path).parent / where)
    return [MissingInput("ViPE sidecar (camera poses + depth)", where,
                         PRODUCE_SIDECAR.replace("<case>", case.case_id), kind="sidecar")]


def case_fps(case: Case, default_fps: float) -> float:
    """The rollout's fps: probed by the loader, else ``default_fps`` (16 in the official code)."""
    fps = case.annotations.get("fps")
    return float(fps) if isinstance(fps, (int, float)) and fps > 0 else float(default_fps)


def case_sidecar(case: Case, *, need_depth: bool, need_intrinsics: bool = False) -> Sidecar:
    """Read the case's ViPE sidecar (``case.sidecars["vipe"]``); CaseFailure naming the expected path.

    Without an intrinsics file the sidecar is still read (``intrinsics`` None) unless ``need_intrinsics``:
    the release drops them (``resolve_pose_track``) and scores everything but geometric closure and Scene
    Memory F1, which become not applicable.
    """
    d = case.sidecars.get("vipe")
    if d is None:
        raise CaseFailure(f"annotations_vipe/{case.case_id}_vipe_ann: ViPE sidecar missing")
    return read_sidecar(Path(d), need_depth=need_depth, need_instances=False, need_intrinsics=need_intrinsics)


def missing_intrinsics(sc: Sidecar) -> str:
    """The release's not-applicable reason for a sidecar read without intrinsics ("" when it has them)."""
    if sc.intrinsics is not None:
        return ""
    return f"{sc.source / INTRINSICS_FILE}: missing (scene memory and geometric closure need intrinsics)"


def _phases(fi: np.ndarray, split: int, ok: bool) -> dict[str, Phase]:
    if not ok:
        return {}
    return {"observation": Phase("observation", int(fi[0]), int(fi[split - 1])),
            "revisit": Phase("revisit", int(fi[split]), int(fi[-1]))}


def _precomputed_alignment(method: str) -> Alignment:
    # no poses: the clouds are already split; the gate cannot be judged
    return Alignment({}, {"method": method, "source": "precomputed", "split_ok": True, "gate": None,
                          "gate_official": None})


def _missing_alignment(method: str, reason: str) -> Alignment:
    """A file the release looks for is absent: its metrics say "not applicable" (the release's
    FileNotFoundError), not "failed"; the gate cannot be judged."""
    return Alignment({}, {"method": method, "source": "missing", "split_ok": False, "missing": True,
                          "reason": reason, "gate": None, "gate_official": None})


# how to get what a missing-input skip names (one line on the row; docs/scene_memory.md has the details)
PRODUCE_SIDECAR = ("produce it with ViPE (`vipe infer <video>`, converted or native layout in "
                   "annotations_vipe/<case>_vipe_ann/) or give precomputed clouds (<case>_scene_memory.npz); "
                   "see docs/real_outputs.md (ViPE sidecars)")
PRODUCE_ACTIONS = "write the rollout's action program as <case>_actions.json beside it; see docs/scene_memory.md"


def skip_if_missing(info: Mapping[str, Any]) -> None:
    """Raise :class:`CaseSkip` when the alignment says an input the release looks for is absent (the release's
    "not applicable"): a row without any value must say which file is missing and how to produce it."""
    if info.get("missing"):
        reason = str(info.get("reason") or "ViPE sidecar missing")
        how = PRODUCE_ACTIONS if "action program" in reason else PRODUCE_SIDECAR
        raise CaseSkip(f"{reason}; {how}")


def _missing_sidecar(case: Case) -> str | None:
    """Why the case's sidecar is missing (no folder, or a converted folder without any pose file), else None."""
    d = case.sidecars.get("vipe")
    if d is None:
        return f"annotations_vipe/{case.case_id}_vipe_ann: ViPE sidecar missing"
    d = Path(d)
    if d.is_dir() and not is_native_layout(d) and not any((d / f"{stem}.{ext}").is_file()
                                                          for stem in POSE_STEMS for ext in ("npy", "npz")):
        return f"{d}: pose directory has no supported pose file (poses_c2w/poses/camera_poses)"
    return None


class TurnaroundAligner(Aligner):
    """Official Scene-Memory-F1 split at the pose turnaround k* = argmax_j d_0j, with the return gate."""

    name = "scene_memory.turnaround"
    description = "split at the estimated-trajectory turnaround (B.4) + return gate + per-leg turning points"
    imports: ClassVar[tuple[str, ...]] = ("scipy.ndimage",)  # turning points' median filter
    defaults: ClassVar[dict[str, Any]] = {
        "rotation_weight": 1.0,      # w in d_ij = ‖t_i − t_j‖/E + w·θ_ij/180
        "revisit_radius": 0.15,      # pose distance of a revisit pair
        "departure_factor": 3.0,     # departed needs d_0k* ≥ factor × radius
        "excursion_factor": 3.0,     # a revisit pair's excursion needs ≥ factor × radius
        "min_gap_s": 1.0,            # a revisit pair is at least this far apart in time
        "default_fps": 16.0,         # when the video's fps is unknown
        "degenerate_extent": 1e-6,   # E at or below this = rotation-only trajectory
        "min_rows": 2,               # each leg needs at least this many rows
        "absolute_floor": True,      # [ours, errata 6] jitter must not pass the gate
        "floor_translation": 0.05,   # sidecar units (ViPE: ≈ metres)
        "floor_rotation_deg": 10.0,
        "leg_smoothing_s": 0.5,      # O-B3 turning points: moving-median window
        "leg_prominence": 0.5,       # O-B3: peak prominence as a fraction of max d_0j
        "max_scored_pairs": 24,      # revisit pairs the memory_loop suite measures (spread over the gaps)
    }

    def align(self, case: Case, params: Mapping[str, Any]) -> Alignment:
        """Split the case's sidecar rows at the turnaround and report the gate facts."""
        p = merge_typed(self.defaults, params, f"aligner {self.name}")
        if "vipe" not in case.sidecars and has_precomputed(case):
            return _precomputed_alignment("turnaround")
        missing = _missing_sidecar(case)
        if missing:
            return _missing_alignment("turnaround", missing)
        sc = case_sidecar(case, need_depth=False)
        fps = case_fps(case, p["default_fps"])
        if len(sc) < 2:  # the release's pose distance raises here: an error, not a failed gate
            raise CaseFailure(f"{sc.files.get('poses', sc.source)}: {len(sc)} pose row(s); the turnaround "
                              "split needs at least 2")
        g = turnaround_gate(sc.poses_c2w, fps, rotation_weight=p["rotation_weight"],
                            revisit_radius=p["revisit_radius"], departure_factor=p["departure_factor"],
                            excursion_factor=p["excursion_factor"], min_gap_s=p["min_gap_s"], degenerate_extent=p["degenerate_extent"],
                            absolute_floor=p["absolute_floor"], floor_translation=p["floor_translation"],
                            floor_rotation_deg=p["floor_rotation_deg"], min_rows=p["min_rows"])
        turns = turning_points(sc.poses_c2w, fps, rotation_weight=p["rotation_weight"],
                               degenerate_extent=p["degenerate_extent"], smoothing_s=p["leg_smoothing_s"],
                               prominence=p["leg_prominence"])
        n = len(sc)
        # leg k: observation [0, turn_k), revisit [turn_k, turn_{k+1}) — only for multi-loop programs
        legs = []
        if len(turns) >= 2:
            ends = turns[1:] + [n]
            legs = [[int(t), int(e)] for t, e in zip(turns, ends)
                    if t >= p["min_rows"] and e - t >= p["min_rows"]]
        # the suite's shared pass: the diverse revisit pairs, with their video frames (scored only when the
        # gate passes, as released)
        chosen = select_diverse_pairs(g.revisits, int(p["max_scored_pairs"])) if g.gate_official else []
        scored = [{**q.to_json(), "first_frame": int(sc.frame_indices[q.first_row]),
                   "revisit_frame": int(sc.frame_indices[q.revisit_row])} for q in chosen]
        info = {"method": "turnaround", "source": "sidecar", "split_row": g.k_star, "fps": fps,
                **g.to_json(), "turns": turns, "legs": legs, "scored_pairs": scored,
                "frame_indices": [int(sc.frame_indices[0]), int(sc.frame_indices[-1])]}
        return Alignment(_phases(sc.frame_indices, g.k_star, g.split_ok), info)


class ActionsAligner(Aligner):
    """Experimental split at the first ground-truth action-segment boundary (B.5), gate computed alongside.

    As released (``long_horizon_diagnostics._reconstruct_vipe_scene_clouds``): the split row is taken on
    min(pose rows, depth rows, mask rows) rows; a missing sidecar, pose file, depth export, intrinsics
    file or action program is "not applicable", everything else that goes wrong is an error (fewer than 2
    rows; a return gate on fewer than 3 poses is an error of the metric when it asks for the gate).
    """

    name = "scene_memory.actions"
    description = "split at the first action-segment boundary of the action program (B.5) + its return gate"
    defaults: ClassVar[dict[str, Any]] = {
        "default_fps": 16.0,
        "min_rows": 1,                   # the release scores a 1-row leg (the split row is clamped to [1, N−1])
        "departure_translation": 0.10,   # sidecar units
        "departure_rotation_deg": 45.0,
        "return_window": 0.15,           # return searched in the last 15 % of rows (never row 0)
        "return_ratio": 0.12,            # translation / max translation
        "return_rotation_deg": 8.0,
        "max_return_translation": None,  # optional absolute cap on the return translation (sidecar units)
    }

    def align(self, case: Case, params: Mapping[str, Any]) -> Alignment:
        """Split the case's sidecar rows at the action boundary and report the experimental gate."""
        p = merge_typed(self.defaults, params, f"aligner {self.name}")
        if "vipe" not in case.sidecars and has_precomputed(case):
            return _precomputed_alignment("actions")
        if case.annotations.get("actions_error"):  # a broken action file is an error, as released
            raise CaseFailure(str(case.annotations["actions_error"]))
        program = case.annotations.get("actions")
        if program is None:
            loop = case.strata.get("subcategory")
            if loop in LOOP_ITINERARIES:  # the release's fallback: the loop's own camera tokens
                program = {"actions": [label_parts(CAMERA_TOKEN_ACTIONS.get(t, t)) for t in LOOP_ITINERARIES[loop]],
                           "frames_per_action": None}
            else:
                return _missing_alignment("actions", f"{case.annotations.get('actions_file', case.case_id + '_actions.json')}: "
                                                     "action program missing")
        missing = _missing_sidecar(case)
        if missing:
            return _missing_alignment("actions", missing)
        sc = case_sidecar(case, need_depth=False)
        if is_native_layout(sc.source):
            n_dep = n_mask = len(sc)  # [ours] the reader's rows (the release reads converted folders only)
        else:
            if not (sc.source / INTRINSICS_FILE).is_file():
                return _missing_alignment("actions", f"{sc.source / INTRINSICS_FILE}: missing")
            try:
                n_dep, n_mask = export_rows(sc.source)
            except MissingExport as e:
                return _missing_alignment("actions", str(e))
        n = min(len(sc), n_dep, n_mask)
        if n <= 1:
            raise CaseFailure(f"{sc.source}: {n} usable row(s) (poses {len(sc)}, depth {n_dep}, masks {n_mask}); "
                              "the experimental split needs at least 2")
        n_frames = case.annotations.get("num_frames")
        if not isinstance(n_frames, int) or n_frames < 0:
            n_frames = case.video.num_frames if case.video is not None else int(sc.frame_indices[-1]) + 1
        seq = expand_program(program, n_frames)
        t, row = action_split_row(seq, n)
        split_ok = row >= p["min_rows"] and n - row >= p["min_rows"]
        gate_facts: dict[str, Any]
        try:
            rg = experimental_return_gate(sc.poses_c2w, departure_translation=p["departure_translation"],
                                          departure_rotation_deg=p["departure_rotation_deg"],
                                          return_window=p["return_window"], return_ratio=p["return_ratio"],
                                          return_rotation_deg=p["return_rotation_deg"],
                                          max_return_translation=p["max_return_translation"])
            gate_facts = {**rg.to_json(), "gate_official": rg.gate, "gate_error": ""}
        except ValueError as e:
            gate_facts = {"gate": None, "gate_official": None, "gate_error": f"{sc.source}: {e}"}
        info = {"method": "actions", "source": "sidecar", "split_row": row, "transition_frame": t,
                "n_action_frames": len(seq), "n_rows": n, "n_pose_rows": len(sc), "split_ok": bool(split_ok),
                "reason": "" if split_ok else f"split at row {row} of {n} leaves a leg with fewer than "
                                              f"{p['min_rows']} rows",
                **gate_facts}
        return Alignment(_phases(sc.frame_indices, row, split_ok), info)
