"""``mind.action``: MIND's action accuracy — does the generated camera move as the action program moves the GT
camera? (release: ``src/metrics/action.py`` ``action_accuracy_metric`` and ``src/utils/vipe_utils.py``, read
in the copy iChubai/WorldFoundry vendors, upstream 219f458b; CSU-JPG/MIND's own ``src/`` is not in our index).

What the release does, step by step, and where it happens here:

1. **Frames.** The first ``max_frames`` (97) generated frames, and the GT frames ``mark_time …
   mark_time + 96`` (``crop_video_frames``). The action labels are those of the same GT frames
   (``extract_actions_from_json(…, mark_time, 97)``; the loader reads them, ternary or binary).
2. **Trajectories.** Generated: ViPE on the cut video — here the ``pose`` role on the generated frames (the
   ``sidecar_pose`` backend reads a ViPE sidecar as Scene Memory does; ``sift_pose`` & co. are labelled by
   the run's backend column). GT: the clip's ``images.txt`` (COLMAP, :mod:`worldrecall.formats.colmap`) when
   it holds at least ``max_frames`` images (its first ``max_frames``), else ViPE on the cut GT video — here
   the ``pose`` role on those GT frames, reading the GT's own ViPE sidecar (``<gt clip>/video_vipe_ann``)
   for a sidecar backend. ``params.gt_images_min: available`` (worldrecall's switch; official ``release``)
   accepts an ``images.txt`` that covers every GT frame there is after ``mark_time`` when the clip has fewer
   than ``max_frames`` of them — the release would run ViPE again on every call.
3. **Steps.** ``n = min(#labels, #GT poses − δ, #generated poses − δ)``; ``n <= 0`` -> no value (the release
   returns None: here a skipped row saying so). Both trajectories cut to ``n + δ`` poses.
4. **Alignment.** Umeyama Sim(3) *with scale* of the generated camera centres onto the GT's, applied to the
   generated poses (:mod:`worldrecall.numerics.trajectory`).
5. **RPE** with ``delta`` (1): per step, translation ``‖t(ΔQ⁻¹ΔP)‖`` and rotation angle in degrees.
6. **Filter** (thresholds, re-scored from the cache): a step is dropped when its rotation error exceeds
   ``max_rot_deg`` (179) or its translation error ``max_trans`` (1e9) — a threshold ``<= 0`` turns its test
   off, and a NaN error is always dropped, as in the release. Fewer than ``min_valid_steps`` (8) steps left ->
   no value (skipped row).
7. **Statistics**: count, mean and median of both errors over all kept steps (``__overall__``), per group
   (``translation`` / ``rotation`` / ``other``; emitted only where a group has a step) and per action label
   (``act:<label>``, on the row's ``info["per_action"]``, under the metric's own thresholds).

``thresholds.groups``: ``official`` groups exactly as the release's ``bucket_for_action`` does — translation
= ``w a s d forward backward left right``, rotation = ``cam_* yaw_* pitch_*`` — so MIND's own ``look_*``
labels all fall into ``other``; ``look_as_rotation`` (worldrecall's) puts the four pure ``look_*`` labels
into ``rotation``, as the dataset README describes the group. Combined labels stay ``other`` either way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import ConfigTypeError, MeasureContext, Metric, MissingInput, Value
from worldrecall.core.data import Alignment, Case, CaseFailure, CaseSkip
from worldrecall.formats import colmap
from worldrecall.gates import camera as gate
from worldrecall.numerics import trajectory as tj

GROUPS = ("translation", "rotation", "other")
GROUP_RULES = ("official", "look_as_rotation")
GT_IMAGES_RULES = ("release", "available")
TRANSLATION_LABELS = frozenset({"w", "a", "s", "d", "forward", "backward", "left", "right"})
ROTATION_LABELS = frozenset({"cam_left", "cam_right", "cam_up", "cam_down",
                             "yaw_left", "yaw_right", "pitch_up", "pitch_down"})
LOOK_LABELS = frozenset({"look_up", "look_down", "look_left", "look_right"})
STATS = ("rpe_trans_mean", "rpe_trans_median", "rpe_rot_mean_deg", "rpe_rot_median_deg", "count")


def action_group(label: str, rule: str = "official") -> str:
    """The release's bucket of one action label (``official``), or with pure ``look_*`` as rotation."""
    a = str(label).lower()
    if a in TRANSLATION_LABELS:
        return "translation"
    if a in ROTATION_LABELS or (rule == "look_as_rotation" and a in LOOK_LABELS):
        return "rotation"
    return "other"


def step_stats(te: np.ndarray, re: np.ndarray) -> dict[str, float]:
    """count, mean and median of translation and rotation errors (the release's ``compute_stats``)."""
    return {"count": float(te.size), "rpe_trans_mean": float(te.mean()), "rpe_trans_median": float(np.median(te)),
            "rpe_rot_mean_deg": float(re.mean()), "rpe_rot_median_deg": float(np.median(re))}


def kept_steps(te: np.ndarray, re: np.ndarray, max_rot_deg: float, max_trans: float) -> np.ndarray:
    """Mask of the steps the release keeps: rotation ≤ ``max_rot_deg`` and translation ≤ ``max_trans`` (a limit
    ≤ 0 is no test); NaN compares false and is dropped."""
    keep = np.ones(te.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        if max_rot_deg > 0:
            keep &= re <= max_rot_deg
        if max_trans > 0:
            keep &= te <= max_trans
    return keep


def _values() -> dict[str, Value]:
    def one(stat: str, where: str) -> Value:
        if stat == "count":
            return Value(higher_is_better=None, range=None, unit="steps",
                         description=f"RPE steps kept after the outlier filter ({where})")
        trans = stat.startswith("rpe_trans")
        kind = "mean" if stat.endswith(("mean", "mean_deg")) else "median"
        return Value(higher_is_better=False, range=None if trans else (0.0, 180.0),
                     unit="GT units" if trans else "deg",
                     description=f"{kind} relative pose error, {'translation' if trans else 'rotation'}, δ = 1 "
                                 f"step, after Sim(3) alignment to the GT camera ({where})")

    out = {s: one(s, "all steps") for s in STATS}
    for g in GROUPS:
        out.update({f"{g}_{s}": one(s, f"{g} actions") for s in STATS})
    return out


def gt_camera(case: Case, ctx: MeasureContext, mark: int, max_frames: int, max_side: int,
              gt_images_min: str = "release") -> tuple[np.ndarray, str, list[str]]:
    """The GT camera of GT frames ``mark … mark + max_frames − 1`` as c2w [n, 4, 4], where it came from, and notes.

    The clip's ``images.txt`` when it holds at least ``max_frames`` images (``gt_images_min: available``: at
    least the GT frames there are after ``mark``), its first ``max_frames``; else the ``pose`` role on those GT
    frames (a sidecar backend reads the GT's own ViPE sidecar, ``case.sidecars["gt_vipe"]``). None -> CaseSkip."""
    notes: list[str] = []
    images = case.sidecars.get("gt_images_txt")
    if images is not None:
        imgs = colmap.read_images_txt(images)
        need = max_frames
        total = case.annotations.get("total_time")
        if gt_images_min == "available" and isinstance(total, int):
            need = max(1, min(max_frames, total - mark))
        if len(imgs) >= need:
            return imgs.c2w[:max_frames], f"images.txt ({len(imgs)} images)", notes
        notes.append(f"{images}: {len(imgs)} images, fewer than {need}: the GT camera is estimated from the GT "
                     "video instead (the release runs ViPE again)")
    ref = case.reference
    if ref is None:
        raise CaseSkip(f"{case.case_id}: no GT camera (neither images.txt nor a GT video)")
    gt_vipe = case.sidecars.get("gt_vipe")
    # the pose role sees the GT clip as a case of its own: its video, and its own ViPE sidecar for a backend that
    # reads one (never the generated video's)
    view = dataclasses.replace(case, video=ref, reference=None,
                               sidecars={"vipe": gt_vipe} if gt_vipe is not None else {}, warnings=[])
    spec = ctx.models.spec_for("pose")
    if getattr(spec, "kind", "") == "sidecar":
        why = "no ViPE sidecar of the GT video" if gt_vipe is None else (
            spec.preflight(view) if spec.preflight is not None else None)
        if why:
            raise CaseSkip(f"{ref.path}: no GT camera for the {spec.name} backend ({why}): put the GT's COLMAP "
                           f"images.txt (>= {max_frames} images from mark_time) or its ViPE sidecar "
                           "(video_vipe_ann/) in the GT clip folder, or use a pose backend that reads pixels")
    frames = ref.resized(max_side) if max_side > 0 else ref.frames()
    idx = list(range(mark, min(mark + max_frames, len(frames))))
    if not idx:
        raise CaseSkip(f"{ref.path}: no GT frame at or after mark_time {mark} ({len(frames)} frames)")
    raw = np.asarray(ctx.models.get("pose").poses([frames[i] for i in idx], case=view, indices=idx),
                     dtype=np.float64)
    if raw.ndim != 3 or raw.shape[1:] not in ((4, 4), (3, 4)):
        raise CaseFailure(f"pose backend returned shape {tuple(raw.shape)} for {ref.path}, expected [N, 4, 4]")
    return tj.as_c2w(raw), f"pose role on GT frames {idx[0]}–{idx[-1]}", notes


class MindAction(Metric):
    """RPE of the generated camera against the GT camera over MIND's action program (see the module notes)."""

    name: ClassVar[str] = "mind.action"
    benchmark: ClassVar[str] = "mind"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ("Action accuracy: relative pose error (δ = 1) of the generated camera after a "
                                  "Sim(3) alignment to the GT camera, overall and per action group")
    primary: ClassVar[str] = "rpe_trans_mean"
    values: ClassVar[dict[str, Value]] = _values()
    models: ClassVar[tuple[str, ...]] = ("pose",)
    params: ClassVar[dict[str, Any]] = {"max_frames": 97, "delta": 1, "max_side": 640, "gt_images_min": "release"}
    thresholds: ClassVar[dict[str, Any]] = {"max_rot_deg": 179.0, "max_trans": 1e9, "min_valid_steps": 8,
                                           "groups": "official"}

    def __init__(self, params: Mapping[str, Any] | None = None, thresholds: Mapping[str, Any] | None = None):
        super().__init__(params, thresholds)
        if self.thresholds["groups"] not in GROUP_RULES:
            raise ConfigTypeError(f"{self.name}.thresholds.groups: expected one of {', '.join(GROUP_RULES)}, got "
                                  f"{self.thresholds['groups']!r}")
        if self.params["gt_images_min"] not in GT_IMAGES_RULES:
            raise ConfigTypeError(f"{self.name}.params.gt_images_min: expected one of {', '.join(GT_IMAGES_RULES)}, "
                                  f"got {self.params['gt_images_min']!r}")
        if int(self.params["delta"]) < 1 or int(self.params["max_frames"]) < 2:
            raise ConfigTypeError(f"{self.name}.params: delta must be >= 1 and max_frames >= 2")

    # -- applicability -------------------------------------------------------------------------------

    @staticmethod
    def not_scored(case: Case) -> str:
        """Why MIND scores no action accuracy on this case ("" when it does)."""
        ann = case.annotations
        if ann.get("mirror"):
            return "mirror test: MIND scores action accuracy on mem_test and action_space_test clips only"
        if ann.get("gt_missing"):
            return str(ann["gt_missing"])
        return ""

    def needs_models(self, case: Case) -> bool:
        return case.video is not None and not self.not_scored(case)

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        """A clip with neither a GT ``images.txt`` nor a GT video gives no GT camera (skipped, naming the files)."""
        if self.not_scored(case) or case.sidecars.get("gt_images_txt") is not None or case.reference is not None:
            return []
        where = str(case.annotations.get("gt_clip") or case.case_id)
        return [MissingInput("GT camera (images.txt or video.mp4)", where,
                             "MIND-Data ships video.mp4 per clip; an images.txt (COLMAP) beside it is used first")]

    # -- measure ---------------------------------------------------------------------------------------

    def gt_poses(self, case: Case, ctx: MeasureContext, mark: int) -> tuple[np.ndarray, str, list[str]]:
        """GT c2w [n, 4, 4] of the frames ``mark …``, where they came from, and notes for the row."""
        return gt_camera(case, ctx, mark, int(self.params["max_frames"]), int(self.params["max_side"] or 0),
                         str(self.params["gt_images_min"]))

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Per-step translation and rotation errors after the Sim(3) alignment, with the steps' action labels."""
        why = self.not_scored(case)
        if why:
            raise CaseSkip(why)
        ann = case.annotations
        if ann.get("actions_error"):
            raise CaseFailure(str(ann["actions_error"]))
        if case.video is None:
            raise CaseFailure(f"{case.case_id}: no generated video")
        max_frames, delta = int(self.params["max_frames"]), int(self.params["delta"])
        mark = ann.get("mark_time")
        if isinstance(mark, bool) or not isinstance(mark, int):
            raise CaseFailure(f"{case.sidecars.get('action_json', case.case_id)}: no integer mark_time")
        actions = [str(a) for a in (ann.get("actions") or [])][:max_frames]
        gen, quality = gate.estimate_poses_and_quality(case, ctx, int(self.params["max_side"] or 0))
        gen = tj.as_c2w(gen[:max_frames])
        gt, gt_source, notes = self.gt_poses(case, ctx, mark)
        n_steps = min(len(actions), len(gt) - delta, len(gen) - delta)
        info: dict[str, Any] = {"gt_camera": gt_source, "n_steps": int(n_steps), "gt_poses": len(gt),
                                "generated_poses": len(gen), "labels": len(actions)}
        if quality:
            info["pose_quality"] = quality
        if notes:
            info["notes"] = notes
        empty = {"trans_err": np.zeros(0), "rot_err": np.zeros(0), "actions": [], "n_steps": int(n_steps),
                 "sim3_scale": None, "row_info": info}
        if n_steps <= 0:
            return empty
        gen_use, gt_use = gen[: n_steps + delta], gt[: n_steps + delta]
        for what, arr, source in (("generated", gen_use, "the pose role"), ("GT", gt_use, gt_source)):
            if not np.isfinite(arr).all():
                raise CaseFailure(f"{case.case_id}: non-finite {what} camera pose (from {source})")
        sim = tj.umeyama_sim3(gen_use[:, :3, 3], gt_use[:, :3, 3])
        te, re = tj.relative_pose_error(gt_use, tj.apply_sim3(gen_use, sim), delta)
        info["sim3_scale"] = sim.scale
        return {"trans_err": te, "rot_err": re, "actions": actions[:n_steps], "n_steps": int(n_steps),
                "sim3_scale": sim.scale, "row_info": info}

    # -- score -----------------------------------------------------------------------------------------

    def _kept(self, m: Mapping[str, Any], th: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        te = np.asarray(m["trans_err"], dtype=np.float64)
        re = np.asarray(m["rot_err"], dtype=np.float64)
        keep = kept_steps(te, re, float(th["max_rot_deg"]), float(th["max_trans"]))
        labels = [a for a, k in zip(list(m["actions"]), keep.tolist()) if k]
        return te[keep], re[keep], labels

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Overall and per-group statistics of the kept steps; too few steps -> a skipped row saying how many."""
        th = {**type(self).thresholds, **dict(thresholds)}
        n_steps = int(measurement["n_steps"])
        info = self.row_info(measurement)
        if n_steps <= 0:
            raise CaseSkip(f"not enough steps to compare: min(labels {info.get('labels')}, GT poses "
                           f"{info.get('gt_poses')} − δ, generated poses {info.get('generated_poses')} − δ) = "
                           f"{n_steps} (the release returns no action result)", info=info)
        te, re, labels = self._kept(measurement, th)
        need = int(th["min_valid_steps"])
        if te.size < need:
            raise CaseSkip(f"{te.size} of {n_steps} RPE steps left after the outlier filter (rotation ≤ "
                           f"{th['max_rot_deg']}°, translation ≤ {th['max_trans']:g}); min_valid_steps is {need} "
                           "(the release returns no action result)", info=info)
        out: dict[str, float | None] = dict(step_stats(te, re))
        groups = [action_group(a, str(th["groups"])) for a in labels]
        for g in GROUPS:
            idx = [i for i, x in enumerate(groups) if x == g]
            stats = step_stats(te[idx], re[idx]) if idx else {s: None for s in STATS}
            out.update({f"{g}_{s}": v for s, v in stats.items()})
        return out

    def per_action(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, dict[str, float]]:
        """The release's ``act:<label>`` statistics, label by label (sorted)."""
        te, re, labels = self._kept(measurement, {**type(self).thresholds, **dict(thresholds)})
        return {a: step_stats(te[[i for i, x in enumerate(labels) if x == a]],
                              re[[i for i, x in enumerate(labels) if x == a]]) for a in sorted(set(labels))}

    def row_info(self, measurement: Mapping[str, Any]) -> dict[str, Any]:
        """The measurement's facts, and per action label the statistics under this metric's thresholds."""
        info = super().row_info(measurement)
        if isinstance(measurement, Mapping) and int(measurement.get("n_steps", 0) or 0) > 0:
            info["per_action"] = self.per_action(measurement, self.thresholds)
        return info

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str | None:
        info = self.row_info(measurement)
        return (f"{int(measurement['n_steps'])} steps against the GT camera from {info.get('gt_camera')}; Sim(3) "
                f"scale {info.get('sim3_scale') if info.get('sim3_scale') is None else round(float(info['sim3_scale']), 4)}")

