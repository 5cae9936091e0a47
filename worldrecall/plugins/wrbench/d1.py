"""D1: requested-camera precision (CamPrec) and prompt-camera alignment (CamAlign), as the release scores them.

CamPrec (``wrbench.eval.d1.d1_camera`` + ``pose.score_trajectory_pose``): the predicted c2w stack is expressed
in the target's convention, aligned to the target's first pose (``target[0] @ inv(pred[0])`` on the left), and
``pose_reward = exp(-(mean rotation error / rot_scale + translation shape error / trans_scale))`` clamped to
[0, 1], where the shape error is the RMSE of the first-frame-relative positions after a non-negative
least-squares scale, over the target's RMS excursion + 1e-8. The camera type then decides: yaw cameras need
both peaks above ``yaw_weak_threshold_deg`` and of the same sign (else 0), pan cameras the same on the world-x
displacement (``pan_weak_threshold``), a static camera scores 1 when the predicted camera turns at most
``static_rot_threshold_deg`` and moves at most ``static_trans_threshold``, else 0; any other camera 0.

CamAlign (``wrbench.eval.d1.camera_intent``, v1): yaw intents need an observed yaw peak of at least 2° in the
requested direction (positive peak = ``yaw_RL``) and score ``clip((|peak| - 2) / (30 - 2), 0, 1)``; the static
intent scores ``clip(1 - max(rot / 5°, trans / 0.10), 0, 1)`` with status ``ok`` only at 1.0. The release's
table builder counts only status-``ok`` rows (so weak, mismatched and moving rows leave the mean).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

# the release's runtime example config (eval.scorers.extra_paths d1_*)
CAMPREC_DEFAULTS: dict[str, Any] = {
    "rot_scale_deg": 45.0,
    "trans_scale": 1.0,
    "yaw_weak_threshold_deg": 2.0,
    "pan_weak_threshold": 0.0001,
    "static_rot_threshold_deg": 2.0,
    "static_trans_threshold": 0.05,
    "predicted_pose_type": "c2w",
    "predicted_camera_convention": "opencv",
    "target_camera_convention": "opencv",
}
CAMALIGN_DEFAULTS: dict[str, Any] = {
    "yaw_weak_threshold_deg": 2.0,
    "yaw_full_score_deg": 30.0,
    "static_rot_obvious_deg": 5.0,
    "static_trans_obvious": 0.10,
}
ELIGIBLE_CAMERAS = frozenset({"static", "yaw_LR", "yaw_RL", "pan_LR", "pan_RL"})
CAMALIGN_INTENTS = frozenset({"yaw_LR", "yaw_RL", "static"})


class PoseError(ValueError):
    """A pose stack the release refuses (its ``invalid_pose`` status)."""


def expand_poses(poses: Any) -> np.ndarray:
    """[T, 4, 4] float64 from [T, 4, 4], [T, 3, 4] or one pose; PoseError as the release's ``_expand_poses``
    (empty, non-finite, bad bottom row (atol 1e-6), |det R| <= 1e-8)."""
    raw = np.asarray(poses)
    if raw.dtype.kind not in "fiub":   # text, complex, objects: the release's ValueError -> invalid_pose
        raise PoseError(f"poses must be real numbers, got dtype {raw.dtype}")
    arr = raw.astype(np.float64)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.shape[-2:] == (3, 4):
        bottom = np.zeros((*arr.shape[:-2], 1, 4))
        bottom[..., 0, 3] = 1.0
        arr = np.concatenate([arr, bottom], axis=-2)
    if arr.ndim != 3 or arr.shape[-2:] != (4, 4):
        raise PoseError(f"expected pose shape T x 4 x 4 or T x 3 x 4, got {arr.shape}")
    if len(arr) == 0:
        raise PoseError("pose stack is empty")
    if not np.all(np.isfinite(arr)):
        raise PoseError("pose contains non-finite values")
    if not np.allclose(arr[:, 3, :], [0.0, 0.0, 0.0, 1.0], atol=1e-6):
        raise PoseError("pose homogeneous bottom row is invalid")
    det = np.linalg.det(arr[:, :3, :3])
    if not np.all(np.isfinite(det)) or np.any(np.abs(det) <= 1e-8):
        raise PoseError("pose rotation/extrinsic block is singular")
    return arr


def _basis(convention: str) -> np.ndarray:
    c = str(convention).lower()
    if c == "opencv":
        return np.eye(4)
    if c == "opengl":
        return np.diag([1.0, -1.0, -1.0, 1.0])
    raise PoseError(f"unknown camera convention: {convention}")


def normalize_predicted(predicted: Any, pose_type: str, source: str, target: str) -> np.ndarray:
    """Predicted poses as c2w in the target's camera convention (``w2c`` inverted, basis changed on the right)."""
    p = expand_poses(predicted)
    kind = str(pose_type).lower()
    if kind == "w2c":
        p = np.linalg.inv(p)
    elif kind != "c2w":
        raise PoseError(f"unknown predicted pose type: {pose_type}")
    return p @ np.linalg.inv(_basis(source)) @ _basis(target)


def rotation_angle_deg(r: np.ndarray) -> float:
    """Angle of one 3x3 rotation, degrees: ``acos(clip((trace - 1) / 2, -1, 1))``."""
    return math.degrees(math.acos(float(np.clip((np.trace(r) - 1.0) * 0.5, -1.0, 1.0))))


def translation_shape_error(target: np.ndarray, predicted: np.ndarray) -> float:
    """RMSE of first-frame-relative positions after a non-negative LSQ scale, over target RMS excursion + 1e-8."""
    t = target[:, :3, 3] - target[0, :3, 3]
    p = predicted[:, :3, 3] - predicted[0, :3, 3]
    with np.errstate(over="ignore", invalid="ignore"):   # overflow reads non-finite; camprec refuses it
        den = float(np.sum(p * p))
        if den > 1e-12:
            p = p * max(float(np.sum(t * p)) / den, 0.0)
        scale = math.sqrt(float(np.mean(np.sum(t * t, axis=1)))) + 1e-8
        return math.sqrt(float(np.mean(np.sum((t - p) ** 2, axis=1)))) / scale


def align_to_target(target: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """``target[0] @ inv(predicted[0]) @ predicted``: the predicted stack started at the target's first pose."""
    return target[0] @ np.linalg.inv(predicted[0]) @ predicted


def pose_reward(target: np.ndarray, predicted: np.ndarray, rot_scale_deg: float, trans_scale: float
                ) -> tuple[float, float, float]:
    """(reward in [0, 1], mean rotation error °, translation shape error) of aligned same-length stacks."""
    rot = float(np.mean([rotation_angle_deg(target[i, :3, :3].T @ predicted[i, :3, :3]) for i in range(len(target))]))
    trans = translation_shape_error(target, predicted)
    reward = math.exp(-(rot / max(float(rot_scale_deg), 1e-8) + trans / max(float(trans_scale), 1e-8)))
    return (max(0.0, min(1.0, reward)) if math.isfinite(reward) else math.nan), rot, trans


def yaw_degrees(poses: np.ndarray) -> np.ndarray:
    """Per frame, yaw of the pose relative to frame 0: ``atan2(R[0,2], R[0,0])`` (positive = turned right)."""
    rel = np.linalg.inv(poses[0]) @ poses
    return np.degrees(np.arctan2(rel[:, 0, 2], rel[:, 0, 0]))


def peak_signed(values: np.ndarray) -> float:
    """The value of largest magnitude (its sign kept); 0 for an empty series."""
    return float(values[int(np.argmax(np.abs(values)))]) if len(values) else 0.0


def _same_sign(a: float, b: float, eps: float) -> bool:
    return abs(a) > eps and abs(b) > eps and (a > 0.0) == (b > 0.0)


def camprec(target_c2w: Any, predicted: Any, camera: str, cfg: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One row of D1-CamPrec: ``{"status", "score", "pose_reward", "rot_error_deg", "trans_shape_error",
    "direction_correct", "flags"}``; ``score`` is None unless ``status == "ok"``."""
    c = {**CAMPREC_DEFAULTS, **dict(cfg or {})}
    camera = str(camera or "").strip()
    empty = {"score": None, "pose_reward": None, "rot_error_deg": None, "trans_shape_error": None,
             "direction_correct": None}
    if camera == "uncontrolled":
        return {**empty, "status": "excluded_uncontrolled", "flags": ["excluded_uncontrolled"]}
    if camera not in ELIGIBLE_CAMERAS:
        return {**empty, "status": "unsupported_camera_type", "flags": ["unsupported_camera_type"]}
    try:
        target = expand_poses(target_c2w)
        pred = normalize_predicted(predicted, c["predicted_pose_type"], c["predicted_camera_convention"],
                                   c["target_camera_convention"])
    except PoseError as e:
        return {**empty, "status": "invalid_pose", "flags": [f"invalid_pose: {e}"]}
    if len(target) != len(pred):
        return {**empty, "status": "length_mismatch",
                "flags": [f"length_mismatch: target {len(target)} poses, predicted {len(pred)}"]}
    try:
        pred = align_to_target(target, pred)
        # the release hands the aligned stack to score_trajectory_pose, which normalises it again (declared
        # c2w/opencv -> the target convention) and aligns it again: kept, so an OpenGL target scores as there
        scored = align_to_target(target, normalize_predicted(pred, "c2w", "opencv", c["target_camera_convention"]))
    except (np.linalg.LinAlgError, PoseError):
        return {**empty, "status": "invalid_pose", "flags": ["invalid_pose"]}
    reward, rot_err, trans_err = pose_reward(target, scored, c["rot_scale_deg"], c["trans_scale"])
    if not all(math.isfinite(x) for x in (reward, rot_err, trans_err)):
        # e.g. translations so large the shape error overflows: the clamp would turn its NaN into 1.0
        return {**empty, "status": "invalid_pose",
                "flags": [f"invalid_pose: non-finite pose error (rotation {rot_err}, shape {trans_err})"]}
    flags: list[str] = []
    accuracy, direction = reward, True
    if camera in ("yaw_LR", "yaw_RL"):
        thr = float(c["yaw_weak_threshold_deg"])
        pt, pp = peak_signed(yaw_degrees(target)), peak_signed(yaw_degrees(pred))
        direction = _same_sign(pt, pp, thr)
        if abs(pt) < thr or abs(pp) < thr:
            flags.append("weak_yaw_motion")
            accuracy = 0.0
        elif not direction:
            flags.append("yaw_direction_mismatch")
            accuracy = 0.0
    elif camera in ("pan_LR", "pan_RL"):
        thr = float(c["pan_weak_threshold"])
        pt = peak_signed(target[:, 0, 3] - target[0, 0, 3])
        pp = peak_signed(pred[:, 0, 3] - pred[0, 0, 3])
        direction = _same_sign(pt, pp, thr)
        if abs(pt) < thr or abs(pp) < thr:
            flags.append("weak_pan_motion")
            accuracy = 0.0
        elif not direction:
            flags.append("pan_direction_mismatch")
            accuracy = 0.0
    else:  # static
        rel = np.linalg.inv(pred[0]) @ pred
        rot = max(rotation_angle_deg(p[:3, :3]) for p in rel)
        d = pred[:, :3, 3] - pred[0, :3, 3]
        trans = math.sqrt(float(np.max(np.sum(d * d, axis=1))))
        direction = rot <= float(c["static_rot_threshold_deg"]) and trans <= float(c["static_trans_threshold"])
        accuracy = 1.0 if direction else 0.0
        if not direction:
            flags.append("static_motion_detected")
    return {"status": "ok", "score": max(0.0, min(1.0, float(accuracy))), "pose_reward": reward,
            "rot_error_deg": rot_err, "trans_shape_error": trans_err, "direction_correct": bool(direction),
            "flags": flags}


def camalign(poses_c2w: Any, intent: str, cfg: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One row of D1-CamAlign (v1): ``{"status", "score", "direction", "magnitude", "scope"}``; ``scope`` is
    ``common_yaw`` / ``static_hold`` / ``unsupported``. ``score`` may be set with a status other than ``ok``
    (weak, mismatched, moving): the release's table drops those rows; :func:`camalign_counts` decides."""
    c = {**CAMALIGN_DEFAULTS, **dict(cfg or {})}
    intent = str(intent or "").strip()
    scope = "common_yaw" if intent in ("yaw_LR", "yaw_RL") else "static_hold" if intent == "static" else "unsupported"
    out = {"status": "", "score": None, "direction": None, "magnitude": None, "scope": scope}
    if intent not in CAMALIGN_INTENTS:
        return {**out, "status": "unsupported_intent"}
    try:
        raw = np.asarray(poses_c2w)
        if raw.dtype.kind not in "fiub":   # complex (its imaginary part would be dropped), text, objects
            return {**out, "status": "invalid_pose"}
        poses = raw.astype(np.float64)
    except (TypeError, ValueError):
        return {**out, "status": "invalid_pose"}
    if (poses.ndim != 3 or poses.shape[1:] != (4, 4) or len(poses) < 2 or not np.all(np.isfinite(poses))
            or not np.allclose(poses[:, 3, :], [0.0, 0.0, 0.0, 1.0], atol=1e-6)):
        return {**out, "status": "invalid_pose"}
    try:
        rel = np.linalg.inv(poses[0]) @ poses
    except np.linalg.LinAlgError:
        return {**out, "status": "invalid_pose"}
    peak = peak_signed(np.degrees(np.arctan2(rel[:, 0, 2], rel[:, 0, 0])))
    mag = abs(peak)
    rot = max((rotation_angle_deg(p[:3, :3]) for p in rel), default=0.0)
    t = rel[:, :3, 3]
    trans = math.sqrt(float(np.max(np.sum(t * t, axis=1)))) if len(t) else 0.0
    if scope == "common_yaw":
        weak = float(c["yaw_weak_threshold_deg"])
        observed = "static" if mag < weak else ("yaw_RL" if peak > 0.0 else "yaw_LR")
        if observed == "static":
            return {**out, "status": "weak_motion", "score": 0.0, "direction": observed, "magnitude": mag}
        if observed != intent:
            return {**out, "status": "direction_mismatch", "score": 0.0, "direction": observed, "magnitude": mag}
        den = max(float(c["yaw_full_score_deg"]) - weak, 1e-6)
        return {**out, "status": "ok", "score": float(np.clip((mag - weak) / den, 0.0, 1.0)), "direction": observed,
                "magnitude": mag}
    motion = max(rot / max(float(c["static_rot_obvious_deg"]), 1e-6), trans / max(float(c["static_trans_obvious"]), 1e-12))
    score = float(np.clip(1.0 - motion, 0.0, 1.0))
    return {**out, "status": "ok" if score >= 1.0 else "motion_detected", "score": score, "direction": "static",
            "magnitude": float(motion)}


def camalign_counts(row: Mapping[str, Any], denominator: str) -> float | None:
    """The value a CamAlign row adds to its model's mean: ``status_ok`` (the release's table builder: only rows
    whose status is ``ok``) or ``all_scored`` (every row with a score, weak/mismatched yaw and moving static
    rows included as the scores they carry)."""
    if denominator == "status_ok":
        return row.get("score") if row.get("status") == "ok" else None
    if denominator == "all_scored":
        return row.get("score")
    raise ValueError(f"camalign denominator: expected 'status_ok' or 'all_scored', got {denominator!r}")
