"""The ``wrbench.phases`` aligner: the look-away and return phases of a generated video.

WRBench asks its VLM about the whole video (the probes name the visible and the returned moments themselves);
the phases say where the camera is away and where it is back, for the camera gate's return test and the
report. In order of preference:

1. the manifest's ``look_away_frame`` / ``return_frame``: ``visible = [0, a-1]``, ``away = [a, r-1]``,
   ``returned = [r, N-1]``;
2. the requested trajectory (``target_poses`` sidecar): the away span is where the requested yaw (or, for pan
   cameras, the sideways displacement) is at least ``away_fraction`` of its peak;
3. the camera type alone: a go-and-return request is a triangle over the video, so the away span is its
   middle ``[N/4, 3N/4]`` (``away_fraction`` 0.5 of a triangle).

A ``static``, ``uncontrolled`` camera or a manifest that declares ``reobservation_support: false`` requests no
look-away: the whole video is ``visible`` and there is no ``returned`` phase (``info["look_away"] = False``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import Aligner
from worldrecall.core.data import Alignment, Case, CaseFailure, Phase
from worldrecall.formats.arrays import load_npy
from worldrecall.plugins.wrbench import d1


def requested_profile(target: np.ndarray, camera: str) -> np.ndarray:
    """Per frame, how far the requested camera is from its start: |yaw| (deg) or |sideways displacement|."""
    if camera.startswith("pan"):
        return np.abs(target[:, 0, 3] - target[0, 0, 3])
    return np.abs(d1.yaw_degrees(target))


def away_span(profile: np.ndarray, fraction: float) -> tuple[int, int] | None:
    """(first, last) frame where ``profile`` reaches ``fraction`` of its peak; None when it never moves."""
    peak = float(profile.max()) if len(profile) else 0.0
    if peak <= 1e-9:
        return None
    hit = np.flatnonzero(profile >= fraction * peak - 1e-12)
    return int(hit[0]), int(hit[-1])


def phases(n: int, a: int | None, r: int | None) -> dict[str, Phase]:
    """visible / away / returned on ``n`` frames (``a`` = first away frame, ``r`` = first returned frame)."""
    if a is None or r is None:
        return {"visible": Phase("visible", 0, n - 1)}
    a, r = max(1, min(a, n - 1)), max(1, min(r, n - 1))
    r = max(r, a + 1) if a + 1 <= n - 1 else n - 1
    out = {"visible": Phase("visible", 0, a - 1), "away": Phase("away", a, r - 1)}
    out["returned"] = Phase("returned", r, n - 1)
    return out


class WRBenchPhases(Aligner):
    """visible -> away -> returned from annotations, the requested trajectory or the camera type."""

    name: ClassVar[str] = "wrbench.phases"
    description: ClassVar[str] = "WRBench look-away / return phases (annotations, requested trajectory, or a triangle)"
    defaults: ClassVar[dict[str, Any]] = {"away_fraction": 0.5}
    min_frames: ClassVar[int] = 4

    def align(self, case: Case, params: Mapping[str, Any]) -> Alignment:
        """The case's phases and where they came from (``info["source"]``)."""
        if case.video is None:
            raise CaseFailure(f"{case.case_id}: no generated video")
        n = case.video.num_frames
        ann = case.annotations
        camera = str(ann.get("camera", ""))
        frac = float(params.get("away_fraction", self.defaults["away_fraction"]))
        info: dict[str, Any] = {"N": n, "camera": camera}
        if ann.get("reobservation_support") is False or camera in ("static", "uncontrolled"):
            why = "the manifest declares no re-observation" if ann.get("reobservation_support") is False else \
                f"camera {camera!r} requests no look-away"
            return Alignment(phases(n, None, None), {**info, "look_away": False, "source": why})
        if ann.get("look_away_frame") is not None and ann.get("return_frame") is not None:
            a, r = int(ann["look_away_frame"]), int(ann["return_frame"])
            if not 0 < a < r:
                raise CaseFailure(f"{case.case_id}: look_away_frame {a} must be > 0 and before return_frame {r}")
            if r > n - 1:   # never clamped in silence: the annotation belongs to another video
                raise CaseFailure(f"{case.video.path}: the manifest's return_frame {r} is past the video's last "
                                  f"frame {n - 1} (look_away_frame {a})")
            return Alignment(phases(n, a, r), {**info, "look_away": True, "source": "manifest", "a": a, "r": r})
        target = None
        if "target_poses" in case.sidecars:
            try:
                target = d1.expand_poses(load_npy(case.sidecars["target_poses"]))
            except (d1.PoseError, CaseFailure) as e:
                # CamPrec reports the unusable target (invalid_pose) and the loader warns on every row; the
                # phases fall back to the camera type instead of failing D2-D6, which never read the target
                info["target_unusable"] = str(e)
        if target is not None:
            span = away_span(requested_profile(target, camera), frac)
            if span is None:
                return Alignment(phases(n, None, None), {**info, "look_away": False,
                                                          "source": "the requested trajectory does not move"})
            scale = (n - 1) / max(len(target) - 1, 1)  # the request's frame axis onto the video's
            a, r = round(span[0] * scale), round(span[1] * scale) + 1
            return Alignment(phases(n, a, r), {**info, "look_away": True, "source": "requested trajectory",
                                               "a": a, "r": r})
        a, r = math.floor(n * frac / 2), math.ceil(n * (1 - frac / 2))
        return Alignment(phases(n, a, r), {**info, "look_away": True, "source": "camera type (triangle)",
                                           "a": a, "r": r})
