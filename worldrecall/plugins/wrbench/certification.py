"""D1 target certification: may a requested trajectory serve as CamPrec's target?

As the release decides it (``validate_camera_control_target`` in ``src/wrbench/eval/d1/d1_sidecar_contract.py``,
called by ``d1_camera._load_explicit_target`` for a row's own ``target_pose_path`` / ``trajectory_c2w_path``). The
payload is the manifest record (its certification fields are kept by the loader as ``annotations["d1_target"]``).

* Always: the declared convention (``target_coordinate_convention``, else ``coordinate_convention``,
  ``coordinate``, ``d1_metric_tier``, ``metric_tier``) must name OpenCV camera-to-world.
* With ``require_main_profile`` (the release's default, and its main-score profile): ``target_role``
  ``benchmark_intended_control`` (or the legacy ``canonical_intended_control``); a control direction (one of the
  five cameras, from ``control_direction`` / ``camera_type`` / ``camera`` / ``source_action``) whose family
  (``rotation`` / ``translation`` / ``static``) agrees with ``control_family`` when given; a control profile
  (``control_profile``, or the legacy ``canonical_profile``: ``yaw_go_return_60deg`` reads ``canonical_60deg``);
  an evidence level ``benchmark_intent`` or ``payload_audited`` (a ``certified`` target without one reads
  ``payload_audited``); per family, rotation: profile ``canonical_60deg`` and ``|yaw_peak_deg|`` = 60,
  translation: ``canonical_pan`` / ``canonical_translation``, static: ``canonical_static``; ``num_frames``,
  ``fps``, ``image_size``, ``fov`` and ``trajectory_sampling_rule`` present; an ``adapter_provenance``, when
  given, one of ``exact_model_payload_exported``, ``deterministic_adapter``, ``uncertified_estimate``.

The row's status is the release's: ``coordinate_mismatch`` when a note concerns the convention, else
``profile_mismatch`` (a profile note, a yaw that is not 60, a family that contradicts the direction), else
``missing_gt`` (something missing), else ``invalid_sidecar``. The release classifies by the notes' words, so the
notes keep its wording. Not read here: the release's other target sources (``<video>.d1_target.json`` and
``<video>.camera.json`` sidecars, with their artifact checks); a non-finite ``yaw_peak_deg`` is invalid here
(the release's ``float()`` lets NaN through the 60° test).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OPENCV_C2W_NAMES = frozenset({"opencv_c2w", "opencv camera-to-world, x-right y-down z-forward",
                              "opencv camera-to-world, x right y down z forward"})
OPENCV_C2W_WORDS = ("opencv", "camera to world", "x right", "y down", "z forward")
TARGET_ROLES = frozenset({"benchmark_intended_control", "canonical_intended_control"})
MAIN_ROTATION_PROFILE = "canonical_60deg"
LEGACY_MAIN_ROTATION_PROFILE = "yaw_go_return_60deg"
MAIN_EVIDENCE_LEVELS = frozenset({"benchmark_intent", "payload_audited"})
ADAPTER_PROVENANCE = frozenset({"exact_model_payload_exported", "deterministic_adapter", "uncertified_estimate"})
FAMILY_OF = {"yaw_LR": "rotation", "yaw_RL": "rotation", "pan_LR": "translation", "pan_RL": "translation",
             "static": "static"}
PROFILES_OF = {"rotation": (MAIN_ROTATION_PROFILE,), "translation": ("canonical_pan", "canonical_translation"),
               "static": ("canonical_static",)}
REQUIRED_FIELDS = ("num_frames", "fps", "image_size", "fov", "trajectory_sampling_rule")
CONVENTION_FIELDS = ("target_coordinate_convention", "coordinate_convention", "coordinate", "d1_metric_tier",
                     "metric_tier")
# what the loader keeps of a record for certification (the payload's fields)
PAYLOAD_FIELDS = (*CONVENTION_FIELDS, "target_role", "control_direction", "source_action", "control_family",
                  "control_profile", "canonical_profile", "evidence_level", "target_certification_status",
                  "yaw_peak_deg", "target_yaw_peak_deg", "adapter_provenance", *REQUIRED_FIELDS)
MODES = ("main_profile", "convention", "off")


@dataclass(frozen=True)
class Certification:
    """Whether the target may be scored, the release's status (``ok`` when it may) and the notes saying why not."""

    ok: bool
    status: str
    notes: tuple[str, ...]


def _text(value: Any) -> str:
    return str(value or "").strip()


def is_opencv_c2w(value: Any) -> bool:
    """A convention name meaning OpenCV camera-to-world (x right, y down, z forward)."""
    raw = _text(value).lower()
    spaced = raw.replace("_", " ").replace("-", " ")
    return raw in OPENCV_C2W_NAMES or all(w in spaced for w in OPENCV_C2W_WORDS)


def convention(payload: Mapping[str, Any]) -> Any:
    """The first convention field set (truthy), or None."""
    return next((payload[k] for k in CONVENTION_FIELDS if payload.get(k)), None)


def _first_key(value: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    item = next((value[k] for k in keys if value.get(k)), None)
    return None if item is None else str(item).strip()


def evidence_level(payload: Mapping[str, Any]) -> str | None:
    """``evidence_level`` (or its ``level`` / ``kind`` / ``status``); ``payload_audited`` for a certified target."""
    v = payload.get("evidence_level")
    if isinstance(v, Mapping):
        return _first_key(v, ("level", "kind", "status"))
    if v:
        return str(v).strip()
    return "payload_audited" if _text(payload.get("target_certification_status")).lower() == "certified" else None


def adapter_provenance(payload: Mapping[str, Any]) -> str | None:
    """``adapter_provenance`` (or its ``kind`` / ``type`` / ``status`` / ``provenance`` / ``mode``)."""
    v = payload.get("adapter_provenance")
    if isinstance(v, Mapping):
        return _first_key(v, ("kind", "type", "status", "provenance", "mode"))
    return None if v is None else str(v).strip()


def control_direction(payload: Mapping[str, Any]) -> str | None:
    """The first of ``control_direction``, ``camera_type``, ``camera``, ``source_action`` naming a camera."""
    for k in ("control_direction", "camera_type", "camera", "source_action"):
        v = payload.get(k)
        if isinstance(v, str) and v in FAMILY_OF:
            return v
    return None


def control_family(payload: Mapping[str, Any], direction: str | None) -> str | None:
    """``control_family`` as given, else the direction's family."""
    v = payload.get("control_family")
    if v:
        return str(v).strip()
    return FAMILY_OF.get(direction) if direction else None


def control_profile(payload: Mapping[str, Any]) -> str | None:
    """``control_profile``, else the legacy ``canonical_profile`` renamed (``yaw_go_return_<x>deg``)."""
    v = payload.get("control_profile")
    if v:
        return str(v).strip()
    legacy = payload.get("canonical_profile")
    if legacy == LEGACY_MAIN_ROTATION_PROFILE:
        return MAIN_ROTATION_PROFILE
    if isinstance(legacy, str) and legacy.startswith("yaw_go_return_") and legacy.endswith("deg"):
        return "diagnostic_" + legacy[len("yaw_go_return_"):]
    return None


def yaw_peak(payload: Mapping[str, Any]) -> float | None:
    """``yaw_peak_deg`` (else ``target_yaw_peak_deg``) as a finite float, or None."""
    v = payload.get("yaw_peak_deg")
    if v is None:
        v = payload.get("target_yaw_peak_deg")
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return x if math.isfinite(x) else None


def _status(notes: list[str]) -> str:
    # the release classifies by the notes' words, in this order
    if any("convention" in n for n in notes):
        return "coordinate_mismatch"
    if any("profile" in n or "yaw_peak_deg is not 60" in n or "control_family does not match" in n for n in notes):
        return "profile_mismatch"
    if any("is missing" in n for n in notes):
        return "missing_gt"
    return "invalid_sidecar" if notes else "ok"


def certify(payload: Any, require_main_profile: bool = True) -> Certification:
    """The release's verdict on a target payload (see the module's docstring)."""
    if not isinstance(payload, Mapping):
        return Certification(False, "invalid_sidecar", ("payload is not an object",))
    notes: list[str] = []
    conv = convention(payload)
    if not is_opencv_c2w(conv):
        notes.append(f"target convention is not OpenCV C2W: {conv}")
    if require_main_profile:
        role = payload.get("target_role")
        if not (isinstance(role, str) and role in TARGET_ROLES):
            notes.append(f"target_role is not benchmark_intended_control: {role}")
        direction = control_direction(payload)
        family = control_family(payload, direction)
        profile = control_profile(payload)
        level = evidence_level(payload)
        if direction is None:
            notes.append("control_direction is missing or invalid")
        if family not in PROFILES_OF:
            notes.append(f"control_family is missing or invalid: {family}")
        elif direction is not None and FAMILY_OF[direction] != family:
            notes.append(f"control_family does not match control_direction: {family}/{direction}")
        if profile is None:
            notes.append("control_profile is missing")
        if level is None:
            notes.append("evidence_level is missing")
        elif level not in MAIN_EVIDENCE_LEVELS:
            notes.append(f"evidence_level is not main-score eligible: {level}")
        if family in PROFILES_OF and profile not in PROFILES_OF[family]:
            notes.append(f"control_profile is not {PROFILES_OF[family][0]}: {profile}")
        if family == "rotation":
            yaw = yaw_peak(payload)
            if yaw is None:
                notes.append("yaw_peak_deg is missing or invalid")
            elif abs(abs(yaw) - 60.0) > 1e-6:
                notes.append(f"yaw_peak_deg is not 60: {yaw}")
        notes.extend(f"{k} is missing" for k in REQUIRED_FIELDS if payload.get(k) is None or payload.get(k) == "")
        prov = adapter_provenance(payload)
        if prov is not None and prov not in ADAPTER_PROVENANCE:
            notes.append(f"adapter_provenance is not recognized: {prov}")
    status = _status(notes)
    return Certification(not notes, status, tuple(notes))


def payload_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The certification fields of a manifest record (the camera as ``camera_type``), JSON values as given."""
    out = {k: record[k] for k in PAYLOAD_FIELDS if k in record}
    cam = record.get("camera_type") or record.get("camera")
    if cam is not None:
        out["camera_type"] = cam
    return out
