"""The ``opis.opis`` metric: measure (segment, embed, input-grounded geometry) once, score from cache.

``measure`` builds the records of :mod:`worldrecall.plugins.opis.records` — the inventory (parsed from
``reference_scene.json``) and one :class:`Window` per sampled frame — and returns
``case_to_measurement(...)``. ``score`` calls :func:`worldrecall.plugins.opis.score.score_case` with the
metric's thresholds, so every threshold, parity switch and ablation re-scores archived measurements
without running a model.

A case with a precomputed ``video_observation.json`` (the official example artifacts) is scored from it
(``params.use_precomputed_observations``): no model runs, no geometry (static objects fall back to
direct-observation visibility, A.14).

Dynamic structure: pose landmarks (optional role ``pose_landmarks``) are measured for articulated
human/animal objects, VLM claims for every dynamic object when ``params.judge`` names a judge; without
them dynamic objects carry no structure evidence, which the score side counts as missing coverage
(``opis_measure_info`` records what was measured).
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Metric, Value
from worldrecall.core.data import Alignment, Case, CaseFailure, one_line
from worldrecall.core.paths import safe_join
from worldrecall.core.video import VideoError, read_image
from worldrecall.plugins.opis import geometry as geo
from worldrecall.plugins.opis import observations as obs
from worldrecall.plugins.opis.camera_motion import summarize_camera_motion
from worldrecall.plugins.opis.records import (
    Inventory,
    Window,
    case_to_measurement,
    measurement_to_case,
)
from worldrecall.plugins.opis.thresholds import DEFAULT_THRESHOLDS

log = logging.getLogger(__name__)

INFO_KEY = "opis_measure_info"

#: embedding backend names as written in reference_scene.json -> the label our embedders carry
_BACKEND_ALIASES = {
    "colorhist": "colorhist", "color_hist": "colorhist", "colour_hist": "colorhist", "color_histogram": "colorhist",
    "colour_histogram": "colorhist", "dinov3": "dinov3_vits16", "dinov3_vits16": "dinov3_vits16",
    "dinov3-vits16": "dinov3_vits16", "facebook/dinov3-vits16-pretrain-lvd1689m": "dinov3_vits16",
}


def backend_label(name: str | None) -> str | None:
    """Canonical embedding-backend label (unknown names are kept, lower-cased)."""
    if not name:
        return None
    key = str(name).strip().lower()
    return _BACKEND_ALIASES.get(key, key)


def read_rgb(path: Path) -> np.ndarray:
    """An image file as uint8 RGB, its size checked against the pixel cap before decoding (HDR/PFM saved as
    .jpg included); CaseFailure naming it when unreadable or too large."""
    try:
        return read_image(Path(path))
    except VideoError as e:
        raise CaseFailure(one_line(e)) from None


def raw_path(case: Case) -> Path:
    """The case's input image; CaseFailure when the case has none (precomputed-observation cases may not)."""
    p = case.sidecars.get("raw")
    if p is None:
        raise CaseFailure(f"{case.case_id}: raw.jpg missing (needed to measure a video)")
    return Path(p)


def load_inventory(case: Case, *, allow_unlabeled_geometry: bool = False) -> Inventory:
    """The case's ``reference_scene.json`` parsed and validated by :mod:`worldrecall.plugins.opis.inventory`."""
    from worldrecall.plugins.opis import inventory as inv_mod

    path = case.sidecars.get("reference_scene")
    if path is None:
        raise CaseFailure(f"{case.case_id}: reference_scene.json missing")
    size = case.annotations.get("image_size")
    return inv_mod.load_reference_scene(Path(path), image_size=tuple(size) if size else None,
                                        allow_unlabeled_geometry=allow_unlabeled_geometry)


def load_mask(case_dir: Path, rel: str | None, size: tuple[int, int]) -> np.ndarray | None:
    """An object's instance mask (PNG, reference resolution) as bool, or None without ``mask_path``."""
    if not rel:
        return None
    import cv2

    p = safe_join(case_dir, rel, what="reference_scene.json mask_path")
    try:  # sized from its header against the pixel cap before decoding, like every image we read
        m = cv2.cvtColor(read_image(p), cv2.COLOR_RGB2GRAY)
    except VideoError as e:
        raise CaseFailure(f"{p}: unreadable mask ({one_line(e)})") from None
    if (m.shape[1], m.shape[0]) != tuple(size):
        raise CaseFailure(f"{p}: mask is {m.shape[1]}x{m.shape[0]}, reference image is {size[0]}x{size[1]}")
    return m > 0


def object_masks(scene_path: Path, inventory: Inventory, size: tuple[int, int]) -> dict[str, np.ndarray | None]:
    """Each object's support mask as the release picks it: an inline ``mask`` first, else its mask file
    (``mask_path`` or ``metadata.mask_path``), else None (the bbox is the support)."""
    from worldrecall.core.text import read_text

    try:
        doc = json.loads(read_text(scene_path))
    except (OSError, ValueError) as e:
        raise CaseFailure(f"{scene_path}: not readable JSON ({one_line(e)})") from None
    inline = {str(o.get("object_id")): o["mask"] for o in doc.get("objects") or []
              if isinstance(o, dict) and o.get("mask") is not None}
    case_dir = Path(scene_path).parent
    out: dict[str, np.ndarray | None] = {}
    for o in inventory.objects:
        if o.object_id in inline:
            m = np.asarray(inline[o.object_id], dtype=np.float64)
            if m.shape != (size[1], size[0]):
                raise CaseFailure(f"{scene_path}: object {o.object_id} mask is {list(m.shape)}, image is {size[1]}x{size[0]}")
            out[o.object_id] = m > 0
        else:
            out[o.object_id] = load_mask(case_dir, o.mask_path, size)
    return out


class OpisMetric(Metric):
    """OPIS = 100 x (0.2 Presence + 0.4 Identity + 0.4 Structure) against the input frame's inventory."""

    name = "opis.opis"
    benchmark = "opis"
    version = "2"   # 2: release query draw, border erosion, four camera candidates, motion fraction
    description = "OPIS: object Presence / Identity / Structure against the input frame's fixed inventory"
    primary = "opis"
    values: ClassVar[dict[str, Value]] = {
        "opis": Value(higher_is_better=True, range=(0.0, 100.0), unit="points",
                      description="composite 100 x (wP P + wI I + wS S) (A.12)"),
        "presence": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                          description="strict frame presence: mean of per-window all-present flags (A.9)"),
        "identity": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                          description="mean over matched objects of max(0, cos) of crop embeddings (A.10)"),
        "structure": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                           description="Structure entering the composite (coverage-adjusted by default)"),
        "structure_coverage_adjusted": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                             description="S_cov: windows without evidence count 0"),
        "structure_raw": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                               description="S_raw: mean of valid rows per object"),
        "structure_shrunk": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                  description="S_shr: Beta(prior 0.5, strength 2) shrunk"),
        "structure_in_composite": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                        description="the Structure variant the composite used"),
        "structure_static_raw": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                      description="static-geometry track only, raw"),
        "structure_static_coverage_adjusted": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                                    description="static-geometry track only, S_cov"),
        "structure_dynamic_raw": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                       description="dynamic track only, raw"),
        "structure_dynamic_coverage_adjusted": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                                     description="dynamic track only, S_cov"),
        "opis_arithmetic": Value(higher_is_better=True, range=(0.0, 100.0), unit="points",
                                 description="100 x (0.2 P + 0.4 I + 0.4 S) (paper/README)"),
        "opis_geometric": Value(higher_is_better=True, range=(0.0, 100.0), unit="points",
                                description="100 x P^0.2 I^0.4 S^0.4 (released code's form)"),
        "core2d": Value(higher_is_better=True, range=(0.0, 100.0), unit="points",
                        description="Core-2D = 100 x sqrt(P I)"),
    }
    # every other emitted key (the released JSON's counts, rates, coverages and track copies) is a diagnostic
    other_values: ClassVar[Value | None] = Value(higher_is_better=None, range=None, unit="",
                                                 description="OPIS diagnostic (not ranked)")
    models: ClassVar[tuple[str, ...]] = ("segmenter", "opis_embedder", "opis_geometry", "opis_matcher")
    optional_models: ClassVar[tuple[str, ...]] = ("pose_landmarks",)
    _last_rows: tuple[Any, Any, tuple[Any, ...]] | None = None  # see _case_rows
    params: ClassVar[dict[str, Any]] = {
        "confidence_min": obs.CONFIDENCE_MIN,   # segmenter score threshold (A.4)
        "crop_padding": obs.CROP_PAD,
        "max_prompts": obs.MAX_PROMPTS,
        "geometry": True,                       # input-grounded geometry (A.5); false: direct observation only
        "n_queries": geo.N_QUERIES,
        "erode_px": geo.ERODE_PX,
        "erode_image_border": True,             # release: outside the image is background when eroding
        "use_precomputed_observations": True,   # score a shipped video_observation.json without models
        "allow_unlabeled_geometry": False,      # errata 1 (inventory parsing; measured, so a param)
        "judge": "",                            # VLM structure claims: judge name ("" = not measured)
    }
    thresholds: ClassVar[dict[str, Any]] = dict(DEFAULT_THRESHOLDS)
    imports: ClassVar[tuple[str, ...]] = ("scipy.optimize",)  # the Hungarian association

    # -- measure --------------------------------------------------------------------------------------
    def needs_models(self, case: Case) -> bool:
        """A case shipping ``video_observation.json`` is scored from it without any model (when allowed)."""
        return not ("video_observation" in case.sidecars
                    and (case.video is None or self.params["use_precomputed_observations"]))

    def optional_roles(self) -> dict[str, str]:
        """None: without pose landmarks no value is null (articulated objects' structure then counts as
        missing coverage, and ``opis_measure_info`` says why per case: no backend, or no such object)."""
        return {}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Inventory + per-window observations and geometry -> the records as a cache measurement."""
        p = self.params
        inventory = load_inventory(case, allow_unlabeled_geometry=bool(p["allow_unlabeled_geometry"]))
        info: dict[str, Any] = {"pose_landmarks": "not measured (precomputed observations)",
                                "vlm_claims": "not measured (precomputed observations)"}
        if "video_observation" in case.sidecars and (case.video is None or p["use_precomputed_observations"]):
            windows = self._precomputed(case, inventory)
            info.update({"source": "video_observation.json", "embedding_backend": backend_label(inventory.embedding_backend),
                         "geometry": "not measured (precomputed observations)"})
            return {**case_to_measurement(inventory, windows), INFO_KEY: info}
        if case.video is None:
            raise CaseFailure(f"{case.case_id}: no generated video")
        idx = [int(i) for i in alignment.info.get("frame_indices") or []]
        ts = [float(t) for t in alignment.info.get("timestamps") or []]
        if not idx:
            raise CaseFailure(f"{case.case_id}: the alignment has no windows")
        frames_all = case.video.frames()
        frames = [frames_all[min(i, len(frames_all) - 1)] for i in idx]
        H, W = frames[0].shape[:2]
        embedder = ctx.models.get("opis_embedder")
        label = backend_label(getattr(embedder, "backend", None))
        ref_label = backend_label(inventory.embedding_backend)
        if ref_label is not None and label != ref_label:
            raise CaseFailure(f"{case.sidecars['reference_scene']}: inventory embeddings are {ref_label!r} but the "
                              f"opis_embedder backend gives {label!r} (identity is not comparable across backends)")
        info.update({"source": "video", "embedding_backend": label})
        window_ids = [f"w{k:03d}" for k in range(len(idx))]
        cands = self._segment(case, inventory, frames, idx, ctx)
        windows = []
        for k, (i, frame) in enumerate(zip(idx, frames)):
            o = obs.observations_for_frame(frame, cands[k], embedder, window_ids[k],
                                           confidence_min=float(p["confidence_min"]), pad=int(p["crop_padding"]))
            windows.append(Window(window_id=window_ids[k], frame_index=i, timestamp=ts[k] if k < len(ts) else float("nan"),
                                  frame_size=(W, H), observations=o))
        info["vlm_claims"] = self._claims(case, inventory, frames, windows, ctx)
        if p["geometry"]:
            info["geometry"], ref_geo, cur_geos, masks = self._geometry(case, inventory, frames, idx, windows, ctx)
            info["pose_landmarks"] = self._pose(case, inventory, frames, windows, ref_geo, cur_geos, masks, ctx)
        else:
            info["geometry"] = "disabled (params.geometry=false)"
            info["pose_landmarks"] = "not measured (pose lifting needs the geometry stage)"
        return {**case_to_measurement(inventory, windows), INFO_KEY: info}

    def _segment(self, case: Case, inventory: Inventory, frames: list[np.ndarray], idx: list[int],
                 ctx: MeasureContext) -> list[list[obs.Candidate]]:
        """Prompt the segmenter with each distinct reference category (first-appearance order, <= max_prompts)."""
        seg = ctx.models.get("segmenter")
        cats: list[str] = []
        for o in inventory.objects:
            c = o.category.strip()
            if c and c.lower() not in {x.lower() for x in cats}:
                cats.append(c)
        cats = cats[: int(self.params["max_prompts"])]
        per_window: list[list[tuple[str, list[Any]]]] = [[] for _ in frames]
        for c in cats:
            dets = seg.segment(frames, c, case=case, indices=idx)
            for k, d in enumerate(dets):
                per_window[k].append((c, list(d)))
        return [obs.candidates_from_detections(pw) for pw in per_window]

    def _geometry(self, case: Case, inventory: Inventory, frames: list[np.ndarray], idx: list[int],
                  windows: list[Window], ctx: MeasureContext) -> tuple[dict[str, Any], geo.MonoGeometry,
                                                                     list[geo.MonoGeometry], dict[str, Any]]:
        """A.5: reference queries once, then one background camera per window (failures recorded per window).

        Returns the summary, the input image's geometry, each window's geometry and the instance masks.
        """
        g = ctx.models.get("opis_geometry")
        matcher = ctx.models.get("opis_matcher")
        raw_file = raw_path(case)
        raw = read_rgb(raw_file)
        size = (raw.shape[1], raw.shape[0])
        if tuple(inventory.image_size) != size:
            raise CaseFailure(f"{raw_file}: image is {size[0]}x{size[1]} but metadata.image_size is "
                              f"{list(inventory.image_size)}")
        ref_geo = g.geometry(raw, case=case, index=None)
        if not np.isfinite(np.asarray(ref_geo.depth)).all() or not np.isfinite(np.asarray(ref_geo.K)).all():
            raise CaseFailure(f"{raw_file}: non-finite reference geometry (depth or K)")
        masks = object_masks(Path(case.sidecars["reference_scene"]), inventory, size)
        objs = [(o.object_id, o.bbox, masks[o.object_id]) for o in inventory.objects]
        ref = geo.reference_queries(ref_geo, objs, n_queries=int(self.params["n_queries"]),
                                    erode_px=int(self.params["erode_px"]),
                                    erode_border=bool(self.params["erode_image_border"]))
        scored, reasons = 0, {}
        cur_geos = []
        for k, (i, frame) in enumerate(zip(idx, frames)):
            cur = g.geometry(frame, case=case, index=i)
            cur_geos.append(cur)
            ref_px, cur_px = matcher.match(raw, frame, case=case, index=i)
            wg = geo.fit_window(ref, cur, ref_px, cur_px, [o.object_id for o in inventory.objects])
            windows[k].geometry = wg
            if wg.scored:
                scored += 1
            else:
                reasons[wg.failure_reason or "?"] = reasons.get(wg.failure_reason or "?", 0) + 1
        motion = summarize_camera_motion([w.geometry for w in windows])
        summary = {"windows_scored": scored, "windows": len(windows), "failures": reasons,
                   "objects_with_queries": int(sum(ref.supported.values())),
                   "background_pixels": int(ref.background.sum()),
                   # A.5 step 9: diagnostic only, never a gate (moving frames over all frames, as released)
                   "motion_valid": motion["motion_valid"], "motion_reason": motion["reason"]}
        return summary, ref_geo, cur_geos, {oid: m for oid, _, m in objs if m is not None}

    def judge_names(self) -> tuple[str, ...]:
        """The VLM judge of the structure claims when ``params.judge`` names one (else none is needed)."""
        return (str(self.params["judge"]),) if self.params["judge"] else ()

    def _claims(self, case: Case, inventory: Inventory, frames: list[np.ndarray], windows: list[Window],
                ctx: MeasureContext) -> str | dict[str, Any]:
        """A.11.2 VLM claims of dynamic objects through the judge ``params.judge`` (none named: not measured).

        Like pose, the current-frame target is the observation the default A.7 association picks; ambiguous
        matches get no claims.
        """
        from worldrecall.plugins.opis.association import associate
        from worldrecall.plugins.opis.claims import check_claims, reference_claims
        from worldrecall.plugins.opis.records import ClaimRecord
        from worldrecall.plugins.opis.thresholds import resolve

        name = str(self.params["judge"])
        if not name:
            return "not measured (no judge configured: params.judge)"
        if ctx.judges is None:
            return "not measured (no judge hub)"
        dynamic = [o for o in inventory.objects if o.dynamic_track]
        if not dynamic:
            return "not needed (no dynamic object)"
        judge = ctx.judges.get(name)
        raw = read_rgb(raw_path(case))
        claims, status = reference_claims(judge, raw, dynamic)
        th = resolve(None)
        n = 0
        for k, w in enumerate(windows):
            assoc = associate(inventory.objects, w.observations, th)
            seen = {o.observed_id: o for o in w.observations}
            for o in dynamic:
                obs_id = assoc.pairs.get(o.object_id)
                if obs_id is None or o.object_id in assoc.ambiguous or not claims.get(o.object_id):
                    continue
                judged = check_claims(judge, raw, frames[k], o.bbox, seen[obs_id].bbox, claims[o.object_id])
                w.claims[o.object_id] = ClaimRecord(o.object_id, claims[o.object_id], judged)
                n += 1
        return {"judge": name, "model_id": str(getattr(judge, "model_id", "")), "reference": status,
                "objects": len(dynamic), "claims": int(sum(len(v) for v in claims.values())), "records": n}

    def _pose(self, case: Case, inventory: Inventory, frames: list[np.ndarray], windows: list[Window],
              ref_geo: geo.MonoGeometry, cur_geos: list[geo.MonoGeometry], masks: dict[str, Any],
              ctx: MeasureContext) -> str | dict[str, Any]:
        """A.11.2 pose landmarks of pose-routed dynamic objects (optional role ``pose_landmarks``).

        The current-frame target is the observation associated with the object under the default A.7
        association (the measure stage cannot know later threshold overrides); ambiguous matches get none.
        """
        from worldrecall.core.models import BackendUnavailable
        from worldrecall.plugins.opis.association import associate
        from worldrecall.plugins.opis.pose_lift import TEMPLATES, edge_lengths, lift_keypoints
        from worldrecall.plugins.opis.records import PoseRecord
        from worldrecall.plugins.opis.structure import pose_route
        from worldrecall.plugins.opis.thresholds import resolve

        if not getattr(ctx.models, "selection", {}).get("pose_landmarks"):
            return "not measured (no pose_landmarks backend configured)"
        targets = {o.object_id: pose_route(o.category, o.kinematic_class) for o in inventory.objects
                   if o.dynamic_track}
        targets = {k: v for k, v in targets.items() if v in TEMPLATES}
        if not targets:
            return "not needed (no articulated human/animal object)"
        try:
            model = ctx.models.get("pose_landmarks")
        except BackendUnavailable as e:
            return f"not measured ({one_line(e, 200)})"
        objs = inventory.by_id()
        raw = read_rgb(raw_path(case))
        ref_len = {}
        for oid, template in targets.items():
            (xy, conf), = model.keypoints(raw, [objs[oid].bbox], template=template)
            ref_len[oid] = edge_lengths(lift_keypoints(xy, conf, ref_geo, objs[oid].bbox, masks.get(oid)), template)
        th = resolve(None)
        n = 0
        for k, w in enumerate(windows):
            assoc = associate(inventory.objects, w.observations, th)
            seen = {o.observed_id: o for o in w.observations}
            for oid, template in targets.items():
                obs_id = assoc.pairs.get(oid)
                if obs_id is None or oid in assoc.ambiguous:
                    continue
                box = seen[obs_id].bbox
                (xy, conf), = model.keypoints(frames[k], [box], template=template)
                cur = edge_lengths(lift_keypoints(xy, conf, cur_geos[k], box), template)
                w.pose[oid] = PoseRecord(oid, template, list(TEMPLATES[template]), ref_len[oid], cur)
                n += 1
        return {"objects": len(targets), "records": n}

    def _precomputed(self, case: Case, inventory: Inventory) -> list[Window]:
        from worldrecall.plugins.opis import inventory as inv_mod

        path = Path(case.sidecars["video_observation"])
        windows = inv_mod.load_video_observation(path)
        inv_mod.check_observation_dims(inventory, windows, source=str(path))
        return windows

    # -- score ----------------------------------------------------------------------------------------
    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Pure: the records + thresholds -> OPIS, P, I, S and diagnostics (numbers only)."""
        from worldrecall.plugins.opis.score import score_case

        inventory, windows, th, built = self._case_rows(measurement, thresholds)
        res = score_case(inventory, windows, th, built=built)
        return {k: (None if v is None else float(v)) for k, v in flat_numbers(res).items()}

    def _case_rows(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> tuple[Any, ...]:
        """(inventory, windows, thresholds, rows): the engine writes a case's artifacts right after scoring
        the same measurement object with the same thresholds, so the (pure) rows are built once for both."""
        from worldrecall.plugins.opis.score import case_rows
        from worldrecall.plugins.opis.thresholds import resolve

        th = resolve(dict(thresholds))
        last = self._last_rows
        if last is not None and last[0] is measurement and last[1] == th:
            return last[2]
        inventory, windows = measurement_to_case(measurement)
        got = (inventory, windows, th, case_rows(inventory, windows, th))
        self._last_rows = (measurement, th, got)  # one entry: the measurement is kept until the next case
        return got

    def artifacts(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any], out_dir: Path) -> list[Path]:
        """``opis_rows.csv``: one row per (window, inventory object) with state and P/I/S values."""
        from worldrecall.plugins.opis.score import row_table

        inventory, windows, th, built = self._case_rows(measurement, thresholds)
        recs = [row_record(r) for r in row_table(inventory, windows, th, built=built)]
        if not recs:
            return []
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "opis_rows.csv"
        cols = sorted({k for r in recs for k in r})
        from io import StringIO

        from worldrecall.core.atomic import atomic_write_text

        buf = StringIO()
        w = csv.DictWriter(buf, fieldnames=cols)
        w.writeheader()
        w.writerows(recs)
        atomic_write_text(path, buf.getvalue())
        return [path]


def row_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row-table dict as a flat CSV record (nested values as JSON text)."""
    return {k: (json.dumps(v, default=str) if isinstance(v, (list, dict, tuple)) else v) for k, v in row.items()}


def flat_numbers(res: Mapping[str, Any], prefix: str = "") -> dict[str, float | None]:
    """Numeric leaves of a (possibly nested) score dict, nested keys joined with ``_``; text is dropped."""
    out: dict[str, float | None] = {}
    for k, v in res.items():
        key = f"{prefix}{k}"
        if isinstance(v, bool):
            out[key] = float(v)
        elif isinstance(v, (int, float)) or v is None:
            out[key] = None if v is None else float(v)
        elif isinstance(v, Mapping):
            out.update(flat_numbers(v, key + "_"))
    return out
