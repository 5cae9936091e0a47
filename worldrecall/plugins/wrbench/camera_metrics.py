"""D1 metrics: ``wrbench.camprec`` (requested-camera precision) and ``wrbench.camalign`` (prompt-camera alignment).

Both read the camera trajectory estimated from the generated video through the ``pose`` role (the release's
VGGT-Omega is one backend among others; ``poses_npy`` reads its pose cache, ``sidecar_pose`` a ViPE folder)
and store it, so every threshold re-scores from the cache. CamPrec needs the requested OpenCV c2w trajectory
(``target_pose_path``); without one the row is null with the release's status ``missing_target_pose``. A
status other than ``ok`` is a null value with that status as its reason (the contract's required-status rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Metric, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.formats.arrays import load_npy
from worldrecall.gates.camera import estimate_poses
from worldrecall.plugins.wrbench import certification, d1, validate

BENCHMARK = "wrbench"


def out_camera(case: Case) -> str:
    """The case's camera type as the manifest gave it."""
    return str(case.annotations.get("camera", ""))


def full_poses(case: Case, ctx: MeasureContext, max_side: int) -> np.ndarray:
    """[N, 4, 4] c2w of every generated frame from the ``pose`` role."""
    p = estimate_poses(case, ctx, max_side)
    bottom = np.tile(np.array([[[0.0, 0.0, 0.0, 1.0]]]), (len(p), 1, 1))
    return np.concatenate([p, bottom], axis=1)


class CamPrec(Metric):
    """D1-CamPrec: ``score`` = the release's ``d1_camera_accuracy`` (None unless the D1 status is ok)."""

    name: ClassVar[str] = "wrbench.camprec"
    benchmark: ClassVar[str] = BENCHMARK
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ("Requested-camera precision: exp(-(rot err/45 + shape err)) gated by direction "
                                  "(yaw/pan) or all-or-nothing stillness (static)")
    primary: ClassVar[str] = "score"
    models: ClassVar[tuple[str, ...]] = ("pose",)
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                       description="D1-CamPrec (d1_camera_accuracy); null unless d1_status is ok"),
        "pose_reward": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                             description="exp(-(mean rotation error/rot_scale + shape error/trans_scale))"),
        "rot_error_deg": Value(higher_is_better=False, range=(0.0, 180.0), unit="deg",
                               description="mean rotation error after first-pose alignment"),
        "trans_shape_error": Value(higher_is_better=False, range=None, unit="",
                                   description="scale-fitted relative-position RMSE over the target's RMS excursion"),
        "direction_correct": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                   description="yaw/pan sign agrees (or the static camera stayed still)"),
        "status_ok": Value(higher_is_better=None, range=(0.0, 1.0), unit="",
                           description="diagnostic: d1_status == ok (0: the score is null, see the verdict)"),
    }
    params: ClassVar[dict[str, Any]] = {"max_side": 640}
    # target_certification: main_profile (the release: validate_camera_control_target, main-score profile) |
    # convention (only the OpenCV c2w declaration) | off (default: any requested trajectory is a target; the
    # synthetic suite's targets carry no certification fields)
    thresholds: ClassVar[dict[str, Any]] = {**d1.CAMPREC_DEFAULTS, "target_certification": "off"}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Estimated poses and the requested trajectory (or why there is none)."""
        pred = full_poses(case, ctx, int(self.params["max_side"]))
        target = case.sidecars.get("target_poses")
        out = {"pred_c2w": pred, "camera": str(case.annotations.get("camera", "")), "has_target": target is not None,
               "target_c2w": np.zeros((0, 4, 4)), "target_problem": "",
               "target_payload": {**dict(case.annotations.get("d1_target") or {}), "camera_type": out_camera(case)}}
        if target is not None:
            try:
                out["target_c2w"] = validate.pose_stack(load_npy(target), str(target))[0]
            except CaseFailure as e:   # the release's invalid_pose on this row, not a failed video
                out["target_problem"] = str(e)
        return out

    def _row(self, m: Mapping[str, Any], th: Mapping[str, Any]) -> dict[str, Any]:
        camera = str(m["camera"]).strip()
        if camera == "uncontrolled" or camera not in d1.ELIGIBLE_CAMERAS:
            # the release decides the camera grammar before it looks for a target (score_d1_row)
            return d1.camprec(np.eye(4)[None], np.eye(4)[None], camera, th)
        mode = str(th.get("target_certification", "off"))
        if mode not in certification.MODES:
            raise CaseFailure(f"wrbench.camprec.thresholds.target_certification: expected one of "
                              f"{', '.join(certification.MODES)}, got {mode!r}")
        if bool(m["has_target"]) and mode != "off":
            # the release certifies a row's own target before it reads the file (d1_camera._load_explicit_target)
            cert = certification.certify(dict(m.get("target_payload") or {}), mode == "main_profile")
            if not cert.ok:
                return {"status": cert.status, "score": None, "pose_reward": None, "rot_error_deg": None,
                        "trans_shape_error": None, "direction_correct": None, "flags": list(cert.notes)}
        if m.get("target_problem"):
            return {"status": "invalid_pose", "score": None, "pose_reward": None, "rot_error_deg": None,
                    "trans_shape_error": None, "direction_correct": None,
                    "flags": [f"invalid_pose: {m['target_problem']}"]}
        if not bool(m["has_target"]):
            return {"status": "missing_target_pose", "score": None, "pose_reward": None, "rot_error_deg": None,
                    "trans_shape_error": None, "direction_correct": None,
                    "flags": ["no requested trajectory for this video: save the requested c2w poses ([N,4,4] "
                              "OpenCV, .npy) beside it and name the file in videos.json target_pose_path "
                              "(docs/real_outputs.md)"]}
        return d1.camprec(np.asarray(m["target_c2w"]), np.asarray(m["pred_c2w"]), str(m["camera"]), th)

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """The D1 row's values; the score null with the status when the row does not count."""
        r = self._row(measurement, thresholds)
        dc = r.get("direction_correct")
        return {"score": r["score"], "pose_reward": r["pose_reward"], "rot_error_deg": r["rot_error_deg"],
                "trans_shape_error": r["trans_shape_error"], "direction_correct": None if dc is None else float(dc),
                "status_ok": float(r["status"] == "ok")}

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str:
        """``d1_status`` and the flags (why a row scored 0 or is null)."""
        r = self._row(measurement, thresholds)
        return f"d1_status={r['status']}" + (f" ({'; '.join(r['flags'])})" if r.get("flags") else "")


class CamAlign(Metric):
    """D1-CamAlign (v1 intent score): ``score`` counts by the ``denominator`` switch (the release: status ok)."""

    name: ClassVar[str] = "wrbench.camalign"
    benchmark: ClassVar[str] = BENCHMARK
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ("Prompt-camera alignment: yaw direction then magnitude (2 -> 30 deg), "
                                  "static hold 1 - max(rot/5deg, trans/0.1)")
    primary: ClassVar[str] = "score"
    models: ClassVar[tuple[str, ...]] = ("pose",)
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                       description="D1-CamAlign (d1_camalign_score) as it counts in the table (see denominator)"),
        "raw_score": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                           description="the intent score whatever its status"),
        "common_yaw": Value(higher_is_better=None, range=(0.0, 1.0), unit="",
                            description="diagnostic: the row is in the common-yaw scope (1) or static-hold (0)"),
        "magnitude": Value(higher_is_better=None, range=None, unit="deg | motion",
                           description="observed |yaw peak| (yaw intents) or normalised motion (static)"),
    }
    params: ClassVar[dict[str, Any]] = {"max_side": 640}
    thresholds: ClassVar[dict[str, Any]] = {**d1.CAMALIGN_DEFAULTS, "denominator": "status_ok"}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Estimated poses and the requested intent."""
        return {"pred_c2w": full_poses(case, ctx, int(self.params["max_side"])),
                "intent": str(case.annotations.get("camera", ""))}

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """The intent score, counted as the ``denominator`` switch says."""
        r = d1.camalign(np.asarray(measurement["pred_c2w"]), str(measurement["intent"]), thresholds)
        scope = {"common_yaw": 1.0, "static_hold": 0.0}.get(r["scope"])
        return {"score": d1.camalign_counts(r, str(thresholds["denominator"])), "raw_score": r["score"],
                "common_yaw": scope, "magnitude": r["magnitude"]}

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str:
        """``d1_camalign_status`` and the observed direction."""
        r = d1.camalign(np.asarray(measurement["pred_c2w"]), str(measurement["intent"]), thresholds)
        return f"d1_camalign_status={r['status']} (intent {measurement['intent']}, observed {r['direction']})"
