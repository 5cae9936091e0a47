"""The camera gate: did the generated camera execute the reference motion — depart and come back?

Every benchmark's gate asks the same question of the same evidence, so it lives here, once: the camera
trajectory estimated from the generated video (the ``pose`` role) against the case's *reference* — the GT
trajectory where the dataset ships one, else the instructed camera path (:func:`instructed_trajectory`).
It never looks at the target: "the object is absent" is what forgetting produces, so it can be a
diagnostic beside the gate, never a reason to pass.

Both trajectories are taken relative to their own first frame (the generated video starts from the
conditioning view, so frame 0 is where they agree). Then

* **departure**, in the motion the reference actually makes: rotation when the reference turns by at least
  ``rotation_motion_min_deg``, translation when it moves by at least ``translation_motion_min`` (reference
  units), both where both occur. The generated camera must reach ``depart_fraction`` of the reference's
  excursion in each tested motion before the return frames begin;
* **return**: over the reference's return frames (MemoBench's R phase; else the last ``return_tail`` of the
  video), the median distance of the generated pose to the *reference's pose at the same frame* — not to
  frame 0's view — must be within ``max(return_fraction × reference excursion, floor)``, in rotation always
  and in translation where the reference translates.

Monocular pose estimators recover translation only up to scale, so by default (``translation_scale:
fit``) the generated translations are scaled by the least-squares factor onto the reference's
(``as_is`` keeps them). A reference that does not move leaves nothing to test: the gate is *not
measured* (a skipped row) with that reason, never passed.

A pose backend that reports its estimate's quality (``poses_and_quality``: matches, inliers, inlier ratio and residual
over the video's frame pairs — ``sift_pose`` does) has it recorded on the row (``info["pose_quality"]``); when
its fewest inliers of any frame pair is below ``pose_min_inliers`` (one bad pair corrupts every pose chained
after it) the gate says "pose unreliable" and is *not measured*, never failed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import ConfigTypeError, MeasureContext, Metric, Value
from worldrecall.core.data import Alignment, Case, CaseFailure, CaseSkip

# Defaults every gate shares; a plugin's gate metric exposes them as its thresholds (re-scored from cache).
GATE_THRESHOLDS: dict[str, Any] = {
    "rotation_motion_min_deg": 10.0,    # the reference "rotates" when its excursion reaches this
    "translation_motion_min": 0.10,     # the reference "translates" (reference units: metres for ViPE/synthetic)
    "depart_fraction": 0.6,             # the generated camera must reach this share of the reference excursion
    "return_fraction": 0.25,            # return tolerance: this share of the reference excursion …
    "return_floor_deg": 10.0,           # … but never tighter than this (rotation)
    "return_floor_translation": 0.10,   # … or this (translation, reference units)
    "return_tail": 0.1,                 # return frames when the case has no return phase: the last 10 %
    "translation_scale": "fit",         # fit | as_is
    "pose_min_inliers": 20,             # a pose backend that reports its quality: fewest inliers of any frame
                                        # pair (a failed pair counts 0); below it the pose is unreliable and the
                                        # gate is not measured (backends without a quality report: not tested)
}

EPS = 1e-6  # degrees / reference units: arccos of a product of rotations carries rounding at a threshold

# Instructed camera tokens -> (yaw right °, pitch up °, forward, right, up) per unit of instruction.
_TOKEN_MOTION: dict[str, tuple[float, float, float, float, float]] = {
    "pan_right": (1, 0, 0, 0, 0), "pan_left": (-1, 0, 0, 0, 0),
    "tilt_up": (0, 1, 0, 0, 0), "tilt_down": (0, -1, 0, 0, 0),
    "push_in": (0, 0, 1, 0, 0), "pull_out": (0, 0, -1, 0, 0),
    "move_right": (0, 0, 0, 1, 0), "move_left": (0, 0, 0, -1, 0),
    "pedestal_up": (0, 0, 0, 0, 1), "pedestal_down": (0, 0, 0, 0, -1),
    "turn_right": (1, 0, 0, 0, 0), "turn_left": (-1, 0, 0, 0, 0),
    "forward": (0, 0, 1, 0, 0), "backward": (0, 0, -1, 0, 0),
    "fixed": (0, 0, 0, 0, 0), "static": (0, 0, 0, 0, 0), "none": (0, 0, 0, 0, 0),
}


def known_tokens() -> tuple[str, ...]:
    """Camera instruction tokens :func:`instructed_trajectory` understands."""
    return tuple(_TOKEN_MOTION)


def angles_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, the angle of the rotation between two stacks of 3x3 rotations [n, 3, 3], degrees:
    ``arccos(clip((trace(aᵀ b) - 1) / 2, -1, 1))``, the trace taken as an element-wise sum."""
    c = (np.einsum("nij,nij->n", np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)) - 1.0) / 2.0
    return np.degrees(np.arccos(np.clip(c, -1.0, 1.0)))


def relative_to_first(poses_c2w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rotations [n,3,3], translations [n,3]) of each c2w pose relative to frame 0, in frame 0's camera axes."""
    p = np.asarray(poses_c2w, dtype=np.float64)
    r0, t0 = p[0, :3, :3], p[0, :3, 3]
    rot = np.einsum("ji,njk->nik", r0, p[:, :3, :3])
    trans = (p[:, :3, 3] - t0) @ r0
    return rot, trans


def instructed_trajectory(tokens_per_frame: Sequence[Sequence[str]], deg_per_frame: float,
                          units_per_frame: float) -> np.ndarray:
    """[n, 4, 4] c2w reference path (OpenCV axes, frame 0 = identity) integrating one set of instruction
    tokens per frame: frame i's tokens move the camera from frame i to i + 1 (``deg_per_frame`` for turns,
    ``units_per_frame`` for moves; yaw right, pitch up). Unknown tokens raise ``ValueError`` naming them."""
    n = len(tokens_per_frame)
    out = np.tile(np.eye(4), (max(n, 0), 1, 1))
    yaw = pitch = 0.0
    pos = np.zeros(3)
    for i in range(1, n):
        d = np.zeros(5)
        for tok in tokens_per_frame[i - 1]:
            key = str(tok).strip().lower()
            if key not in _TOKEN_MOTION:
                raise ValueError(f"unknown camera instruction {tok!r} (known: {', '.join(sorted(_TOKEN_MOTION))})")
            d += np.asarray(_TOKEN_MOTION[key], dtype=np.float64)
        rot = _yaw_pitch(yaw, pitch)  # moves go along the heading at the start of the interval
        pos = pos + units_per_frame * (d[2] * rot[:, 2] + d[3] * rot[:, 0] - d[4] * rot[:, 1])
        yaw += d[0] * deg_per_frame
        pitch += d[1] * deg_per_frame
        out[i, :3, :3], out[i, :3, 3] = _yaw_pitch(yaw, pitch), pos
    return out


def frames_each(n_frames: int, n_tokens: int, frames_per_action: int | None) -> int:
    """Frames per instruction token: the stated count, else ``ceil(frames / tokens)`` (the release's rule)."""
    return int(frames_per_action) if frames_per_action and frames_per_action > 0 else math.ceil(n_frames / n_tokens)


def expand_tokens(tokens: Sequence[Any], n_frames: int, frames_per_action: int | None = None) -> list[list[str]]:
    """One instruction per frame: each token of ``tokens`` holds ``frames_per_action`` frames (default
    ``ceil(n_frames / len(tokens))``), the last one to the end; a token ``"a+b"`` or a list is several parts."""
    if not tokens or n_frames <= 0:
        return [[] for _ in range(max(n_frames, 0))]
    k = frames_each(n_frames, len(tokens), frames_per_action)
    out = []
    for i in range(n_frames):
        tok = tokens[min(i // k, len(tokens) - 1)]
        parts = tok if isinstance(tok, (list, tuple)) else str(tok).split("+")
        out.append([str(x).strip() for x in parts if str(x).strip()])
    return out


INSTRUCTION_PARAMS: dict[str, Any] = {
    "instruction_deg_per_step": 36.0,    # nominal turn of one instructed pan/tilt step
    "instruction_units_per_step": 1.0,   # nominal move of one instructed push/pull/truck step
}


def instruction_reference(tokens: Sequence[Any], n_frames: int, frames_per_action: int | None,
                          params: Mapping[str, Any]) -> tuple[np.ndarray | None, str]:
    """(instructed reference path, label) from per-action tokens, or (None, why not)."""
    if not tokens:
        return None, "no camera instruction"
    k = frames_each(n_frames, len(tokens), frames_per_action)
    try:
        ref = instructed_trajectory(expand_tokens(tokens, n_frames, k),
                                    float(params["instruction_deg_per_step"]) / k,
                                    float(params["instruction_units_per_step"]) / k)
    except ValueError as e:
        return None, str(e)
    return ref, f"instructed path ({len(tokens)} steps)"


def _yaw_pitch(yaw_deg: float, pitch_deg: float) -> np.ndarray:
    """Rotation (OpenCV camera axes) turned right by ``yaw_deg`` and up by ``pitch_deg``."""
    y, p = math.radians(yaw_deg), math.radians(pitch_deg)
    ry = np.array([[math.cos(y), 0, math.sin(y)], [0, 1, 0], [-math.sin(y), 0, math.cos(y)]])
    rx = np.array([[1, 0, 0], [0, math.cos(p), -math.sin(p)], [0, math.sin(p), math.cos(p)]])
    return ry @ rx


def tail_frames(n: int, fraction: float) -> list[int]:
    """The last ``fraction`` of ``n`` frames (at least one): the return frames of a case without a phase sheet."""
    k = max(1, math.ceil(n * min(max(float(fraction), 0.0), 1.0)))
    return list(range(max(0, n - k), n))


@dataclass
class GateResult:
    """The verdict (``passed`` None = not applicable), its evidence and one line saying what was tested."""

    passed: bool | None
    verdict: str
    values: dict[str, float | None] = field(default_factory=dict)

    def as_values(self) -> dict[str, float | None]:
        return {"passed": None if self.passed is None else float(self.passed), **self.values}


EVIDENCE = ("ref_rotation_deg", "gen_rotation_deg", "ref_translation", "gen_translation",
            "return_rotation_error_deg", "return_rotation_tol_deg", "return_translation_error",
            "return_translation_tol", "translation_scale", "tests_rotation", "tests_translation")


def gate_values() -> dict[str, Value]:
    """The values every camera gate emits (shared by the benchmarks' gate metrics' declarations)."""
    return {
        "passed": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                        description="the camera departed as the reference does and returned to the "
                        "reference's pose (1) or not (0); empty when not applicable"),
        "ref_rotation_deg": Value(higher_is_better=None, range=(0.0, 180.0), unit="deg",
                                  description="largest rotation of the reference from its first frame"),
        "gen_rotation_deg": Value(higher_is_better=None, range=(0.0, 180.0), unit="deg",
                                  description="largest rotation of the generated camera before the return"),
        "ref_translation": Value(higher_is_better=None, range=None, unit="ref. units",
                                 description="largest displacement of the reference from its start"),
        "gen_translation": Value(higher_is_better=None, range=None, unit="ref. units",
                                 description="largest displacement of the generated camera (scaled)"),
        "return_rotation_error_deg": Value(
            higher_is_better=False, range=(0.0, 180.0), unit="deg",
            description="median rotation from the reference pose over the return frames"),
        "return_rotation_tol_deg": Value(higher_is_better=None, range=None, unit="deg",
                                         description="return tolerance in rotation"),
        "return_translation_error": Value(
            higher_is_better=False, range=None, unit="ref. units",
            description="median distance from the reference position over the return frames"),
        "return_translation_tol": Value(higher_is_better=None, range=None, unit="ref. units",
                                        description="return tolerance in translation"),
        "translation_scale": Value(higher_is_better=None, range=None, unit="",
                                   description="scale fitted from generated to reference translations"),
        "tests_rotation": Value(higher_is_better=None, range=(0.0, 1.0), unit="",
                                description="rotation is a departure motion of the reference"),
        "tests_translation": Value(higher_is_better=None, range=(0.0, 1.0), unit="",
                                   description="translation is a departure motion of the reference"),
    }


def not_applicable(reason: str) -> GateResult:
    """A gate with nothing to test (no reference, a reference that does not move): never counted as passed."""
    return GateResult(None, f"n/a: {reason}", {k: None for k in EVIDENCE})


def evaluate(gen_c2w: np.ndarray, ref_c2w: np.ndarray, return_frames: Sequence[int],
             thresholds: Mapping[str, Any], return_label: str = "the return", instructed: bool = False) -> GateResult:
    """Gate one case: ``gen_c2w`` and ``ref_c2w`` are [n, 4, 4] (or [n, 3, 4]) on the generated frame axis.

    ``instructed``: the reference is an instruction integrated with nominal step sizes, not a measured
    trajectory. It fixes how far to turn only up to those sizes and where to end only when it closes the
    loop, so its translation return is tested only when the instructed path ends where it started."""
    th = {**GATE_THRESHOLDS, **dict(thresholds)}
    gen, ref = np.asarray(gen_c2w, dtype=np.float64), np.asarray(ref_c2w, dtype=np.float64)
    n = min(len(gen), len(ref))
    if n < 2:
        return not_applicable(f"{n} pose(s): a trajectory needs at least 2")
    if not (np.isfinite(gen[:n, :3, :4]).all() and np.isfinite(ref[:n, :3, :4]).all()):
        return not_applicable("non-finite poses")
    back = sorted({int(i) for i in return_frames if 0 < int(i) < n})
    if not back:
        return not_applicable(f"no return frame inside the video's {n} frames")
    g_rot, g_t = relative_to_first(gen[:n])
    r_rot, r_t = relative_to_first(ref[:n])
    eye = np.broadcast_to(np.eye(3), r_rot.shape)
    r_ang, g_ang = angles_deg(eye, r_rot), angles_deg(eye, g_rot)
    r_dist = np.linalg.norm(r_t, axis=1)
    ref_rot_exc, ref_tr_exc = float(r_ang.max()), float(r_dist.max())
    tests_rot = ref_rot_exc >= float(th["rotation_motion_min_deg"])
    tests_tr = ref_tr_exc >= float(th["translation_motion_min"])
    if not (tests_rot or tests_tr):
        return not_applicable(f"the reference camera does not move (turns {ref_rot_exc:.0f}°, "
                              f"moves {ref_tr_exc:.2f})")
    scale = 1.0
    if th["translation_scale"] == "fit":
        den = float(np.sum(g_t * g_t))
        scale = max(0.0, float(np.sum(g_t * r_t)) / den) if den > 1e-18 else 0.0
    elif th["translation_scale"] != "as_is":
        raise ValueError(f"translation_scale: expected 'fit' or 'as_is', got {th['translation_scale']!r}")
    g_t = g_t * scale
    g_dist = np.linalg.norm(g_t, axis=1)
    before = slice(0, back[0]) if back[0] > 0 else slice(0, n)
    gen_rot_exc = float(g_ang[before].max())
    gen_tr_exc = float(g_dist[before].max())
    rot_err = float(np.median(angles_deg(g_rot[back], r_rot[back])))
    tr_err = float(np.median([np.linalg.norm(g_t[i] - r_t[i]) for i in back]))
    closes = float(r_dist[back].max()) < float(th["translation_motion_min"])
    tests_tr_return = tests_tr and (closes or not instructed)
    rot_tol = max(float(th["return_fraction"]) * ref_rot_exc, float(th["return_floor_deg"]))
    tr_tol = max(float(th["return_fraction"]) * ref_tr_exc, float(th["return_floor_translation"]))
    frac = float(th["depart_fraction"])
    failed: list[str] = []
    said: list[str] = []
    if tests_rot:
        need = frac * ref_rot_exc
        said.append(f"departed {gen_rot_exc:.0f}° of the reference's {ref_rot_exc:.0f}° (needs ≥ {need:.0f}°)")
        if gen_rot_exc < need - EPS:
            failed.append("departure (rotation)")
    if tests_tr:
        need = frac * ref_tr_exc
        said.append(f"moved {gen_tr_exc:.2f} of the reference's {ref_tr_exc:.2f} (needs ≥ {need:.2f})")
        if gen_tr_exc < need - EPS:
            failed.append("departure (translation)")
    said.append(f"at {return_label} the camera is {rot_err:.0f}° from the reference pose (tolerance {rot_tol:.0f}°)")
    if rot_err > rot_tol + EPS:
        failed.append("return (rotation)")
    if tests_tr_return:
        said.append(f"{tr_err:.2f} away from its position (tolerance {tr_tol:.2f})")
        if tr_err > tr_tol + EPS:
            failed.append("return (translation)")
    elif tests_tr:
        said.append("position at the return not tested (the instruction does not say how far it ends)")
    passed = not failed
    verdict = ("PASS: " if passed else f"FAIL ({', '.join(failed)}): ") + "; ".join(said)
    values = {"ref_rotation_deg": ref_rot_exc, "gen_rotation_deg": gen_rot_exc, "ref_translation": ref_tr_exc,
              "gen_translation": gen_tr_exc, "return_rotation_error_deg": rot_err, "return_rotation_tol_deg": rot_tol,
              "return_translation_error": tr_err if tests_tr_return else None,
              "return_translation_tol": tr_tol if tests_tr_return else None, "translation_scale": scale,
              "tests_rotation": float(tests_rot), "tests_translation": float(tests_tr)}
    return GateResult(passed, verdict, values)


def trace(gen_c2w: np.ndarray, ref_c2w: np.ndarray, return_frames: Sequence[int], result: GateResult,
          thresholds: Mapping[str, Any]) -> dict[str, Any]:
    """The report's gate trace: per-frame rotation from frame 0 of both cameras, the return frames and the
    verdict (a ``worldrecall.trace`` JSON document)."""
    th = {**GATE_THRESHOLDS, **dict(thresholds)}
    n = min(len(gen_c2w), len(ref_c2w))
    series = []
    if n >= 1:
        for label, poses in (("generated camera", gen_c2w), ("reference camera", ref_c2w)):
            rot, _ = relative_to_first(np.asarray(poses, dtype=np.float64)[:n])
            y = angles_deg(np.broadcast_to(np.eye(3), rot.shape), rot)
            series.append({"label": label, "y": [round(float(v), 2) for v in y]})
    tol = result.values.get("return_rotation_tol_deg")
    hlines = [] if tol is None else [{"y": float(tol), "label": "return tolerance"}]
    back = [int(i) for i in return_frames if 0 <= int(i) < n]
    return {"kind": "worldrecall.trace", "verdict": "n/a" if result.passed is None else
            ("pass" if result.passed else "fail"), "title": f"camera gate {result.verdict}",
            "x_label": "generated frame", "y_label": "rotation from frame 0 (°)", "x": list(range(n)),
            "series": series, "hlines": hlines, "spans": [{"from": back[0], "to": back[-1], "label": "return frames"}]
            if back else [], "thresholds": {k: th[k] for k in GATE_THRESHOLDS}}


def estimate_poses(case: Case, ctx: MeasureContext, max_side: int) -> np.ndarray:
    """[n, 3, 4] c2w poses of all generated frames (long side capped at ``max_side``; 0 = native) from the
    ``pose`` role, in one call; a rotation-only backend's [n, 3, 3] gets zero translations."""
    return estimate_poses_and_quality(case, ctx, max_side)[0]


def estimate_poses_and_quality(case: Case, ctx: MeasureContext, max_side: int) -> tuple[np.ndarray, dict[str, Any]]:
    """:func:`estimate_poses` and the backend's report on that very estimate ({} when it gives none).

    A backend that reports quality has ``poses_and_quality`` (poses and a float vector in the order of its
    ``quality_fields``; NaN: not measured): one call returns both, so a backend's outputs cached per input
    (``engine/cache/identity.CachedOutputs``) can never pair one video's poses with another's quality."""
    if case.video is None:
        raise CaseFailure(f"{case.case_id}: no generated video")
    frames = case.video.resized(max_side) if max_side > 0 else case.video.frames()
    backend = ctx.models.get("pose")
    args, kwargs = (list(frames),), {"case": case, "indices": list(range(len(frames)))}
    quality: dict[str, Any] = {}
    fields = getattr(backend, "quality_fields", None)
    if fields and callable(getattr(backend, "poses_and_quality", None)):
        raw, values = backend.poses_and_quality(*args, **kwargs)
        quality = {str(k): (float(v) if np.isfinite(v) else None)
                   for k, v in zip(fields, np.asarray(values, dtype=np.float64).ravel())}
    else:
        raw = backend.poses(*args, **kwargs)
    poses = np.asarray(raw, dtype=np.float64)
    if poses.ndim != 3 or poses.shape[1:] not in ((4, 4), (3, 4), (3, 3)):
        raise CaseFailure(f"pose backend returned shape {tuple(poses.shape)}, expected [N, 4, 4]")
    if poses.shape[2] == 3:
        poses = np.concatenate([poses, np.zeros((len(poses), 3, 1))], axis=2)
    return poses[:, :3, :4], quality


def pose_unreliable(quality: Mapping[str, Any] | None, th: Mapping[str, Any]) -> str:
    """Why the generated poses cannot be trusted under ``th`` ("" when they can, or when no quality was reported)."""
    inliers = (quality or {}).get("inliers_min")
    need = th.get("pose_min_inliers", GATE_THRESHOLDS["pose_min_inliers"])
    if inliers is None or need is None or float(inliers) >= float(need):
        return ""
    q = quality or {}
    return (f"pose unreliable: a frame pair has {float(inliers):g} inliers (pose_min_inliers {need:g}; "
            f"{q.get('failed_pairs', 0):g} of {q.get('pairs', 0):g} pairs failed, median inlier ratio "
            f"{q.get('inlier_ratio_median')}, median residual {q.get('residual_px_median')} px)")


class CameraGateMetric(Metric):
    """Base of every benchmark's camera-gate metric: measure the generated trajectory (``pose`` role) and the
    case's reference, score with :func:`evaluate`. A subclass says where its reference comes from
    (:meth:`reference`) and, where the benchmark has one, its return phase (:meth:`return_frames`); both
    trajectories and the frames are stored, so every threshold re-scores from the cache."""

    primary: ClassVar[str] = "passed"
    models: ClassVar[tuple[str, ...]] = ("pose",)
    params: ClassVar[dict[str, Any]] = {"max_side": 640}
    thresholds: ClassVar[dict[str, Any]] = dict(GATE_THRESHOLDS)
    return_label: ClassVar[str] = "the end"

    def reference(self, case: Case, alignment: Alignment, n_frames: int) -> tuple[np.ndarray | None, str]:
        """(reference c2w [n, 3|4, 4] on the generated axis, what it is) — or (None, why there is none).
        A reference integrated from an instruction (:func:`instructed_trajectory`) is labelled
        ``"instructed …"``."""
        raise NotImplementedError

    def return_frames(self, case: Case, alignment: Alignment, n_frames: int) -> list[int] | None:
        """The reference's return frames on the generated axis; None: the last ``return_tail`` of the video."""
        return None

    def generated_poses(self, case: Case, ctx: MeasureContext) -> tuple[np.ndarray, dict[str, Any]]:
        """[n, 3, 4] c2w of every generated frame from the ``pose`` role, and the backend's quality report."""
        return estimate_poses_and_quality(case, ctx, int(self.params.get("max_side", 0) or 0))

    def needs_models(self, case: Case) -> bool:
        """A case without a generated video (precomputed observations) is not applicable and runs no model."""
        return case.video is not None

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Generated poses, the reference (or why there is none) and the return frames."""
        if case.video is None:
            return {"gen_c2w": np.zeros((0, 3, 4)), "ref_c2w": np.zeros((0, 3, 4)), "has_reference": False,
                    "reference": "no generated video to estimate the camera from", "instructed": False,
                    "return_frames": np.zeros(0, dtype=np.int64), "return_from_phase": False}
        gen, quality = self.generated_poses(case, ctx)
        ref, label = self.reference(case, alignment, len(gen))
        back = self.return_frames(case, alignment, len(gen))
        return {"gen_c2w": gen, "ref_c2w": np.zeros((0, 3, 4)) if ref is None else np.asarray(ref)[:, :3, :4],
                "has_reference": ref is not None, "reference": label, "instructed": label.startswith("instructed"),
                "return_frames": np.asarray([] if back is None else back, dtype=np.int64),
                "return_from_phase": back is not None, **({"row_info": {"pose_quality": quality}} if quality else {})}

    def __init__(self, params: Mapping[str, Any] | None = None, thresholds: Mapping[str, Any] | None = None):
        super().__init__(params, thresholds)
        if self.thresholds["translation_scale"] not in ("fit", "as_is"):  # a typo ends the run, not every case
            raise ConfigTypeError(f"{self.name}.thresholds.translation_scale: expected 'fit' or 'as_is', got "
                                  f"{self.thresholds['translation_scale']!r}")

    @staticmethod
    def _return_frames(m: Mapping[str, Any], th: Mapping[str, Any]) -> list[int]:
        """The measured return phase, else the last ``return_tail`` of the frames both trajectories have."""
        if bool(m["return_from_phase"]):
            return np.asarray(m["return_frames"]).tolist()
        return tail_frames(min(len(m["gen_c2w"]), len(m["ref_c2w"])), th["return_tail"])

    def gate(self, m: Mapping[str, Any], th: Mapping[str, Any]) -> GateResult:
        """The gate of one measurement under ``th``."""
        if not bool(m["has_reference"]):
            return not_applicable(str(m["reference"]))
        unreliable = pose_unreliable((m.get("row_info") or {}).get("pose_quality"), th)
        if unreliable:
            return not_applicable(unreliable)
        return evaluate(np.asarray(m["gen_c2w"]), np.asarray(m["ref_c2w"]), self._return_frames(m, th), th,
                        self.return_label, bool(m.get("instructed", False)))

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """``passed`` and the departure / return evidence; a gate with nothing to test (no reference, a reference
        that does not move) is *not measured*: a skip saying why, never an ``ok`` row without a value."""
        res = self.gate(measurement, thresholds)
        if res.passed is None:
            raise CaseSkip(f"camera gate not measured: {res.verdict.removeprefix('n/a: ')}",
                           info=self.row_info(measurement))
        return res.as_values()

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str:
        """One line: what was tested against which reference, and what failed."""
        res = self.gate(measurement, thresholds)
        return res.verdict if res.passed is None else f"{res.verdict} (vs the {measurement['reference']})"

    def artifacts(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any], out_dir: Path) -> list[Path]:
        """``gate_trace.json`` for the report: both cameras' rotation from frame 0, return frames, verdict."""
        res = self.gate(measurement, thresholds)
        doc = trace(np.asarray(measurement["gen_c2w"]), np.asarray(measurement["ref_c2w"]),
                    self._return_frames(measurement, thresholds), res, thresholds)
        if not bool(measurement["has_reference"]):
            doc["series"] = doc["series"][:0]
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "gate_trace.json"
        path.write_text(json.dumps(doc))
        return [path]
