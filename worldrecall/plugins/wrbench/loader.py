"""The ``wrbench`` loader: a ``videos.json`` manifest of generated videos plus the Natural-25 release index.

``videos.json`` (the release's ``wrbench eval run --manifest`` input) is a JSON list of records, or an object
with a ``records`` list. Per record (paths relative to the manifest's folder):

* ``video_id`` (required), ``video_path`` or ``path`` (required), ``model``, ``camera_type`` or ``camera``
  (``static``, ``yaw_LR``, ``yaw_RL``, ``pan_LR``, ``pan_RL``, ``uncontrolled``), ``variant_id``,
  ``world_state_prompt`` or ``prompt_text``, ``viewpoint_condition_type`` (``prompt-only`` for API
  prompt-camera models), ``reobservation_support`` (``false`` = the manifest declares no look-away);
* sidecars: ``target_pose_path`` / ``trajectory_c2w_path`` (requested OpenCV c2w ``.npy``, D1-CamPrec's
  target), ``pose_path`` (estimated c2w ``.npy``, the release's pose cache; the ``poses_npy`` backend),
  ``vipe_sidecar`` (a ViPE folder), ``evidence`` (inline) or ``evidence_path`` (one JSON record: the
  re-observation gate's evidence);
* ``look_away_frame`` / ``return_frame`` (optional phase annotations), ``requested_yaw_deg``.

``generations`` maps each model to a folder holding ``videos.json`` (every record is that model's) or to a
manifest file shared by several models (records whose ``model`` differs are another model's). ``data_root``
is the Natural-25 release folder (``releases/paper_main_20260608``): its ``variants.*.jsonl`` fill a record's
prompt from its ``variant_id``; loader option ``evidence_jsonl`` names the release's evidence output
(``evidence.jsonl``, one record per ``video_id``). Every problem of one record is a per-case error naming the
file, the record and the field (:mod:`worldrecall.plugins.wrbench.validate`); an unreadable JSON Lines line or a
duplicate id fails only the videos that would need it; an unreadable manifest is one error for the model. A
record with a target keeps its D1 certification fields (``annotations["d1_target"]``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from worldrecall.core.components import Loader, LoadRequest
from worldrecall.core.data import Case, CaseError, CaseFailure
from worldrecall.core.paths import safe_join
from worldrecall.core.video import Video
from worldrecall.formats.arrays import load_npy
from worldrecall.formats.safe_json import read_json
from worldrecall.plugins.wrbench import certification, validate
from worldrecall.plugins.wrbench.sidecar_judge import sidecar_path
from worldrecall.plugins.wrbench.validate import JsonlIndex

BENCHMARK = "wrbench"
MANIFEST_NAME = "videos.json"
CAMERAS = ("static", "yaw_LR", "yaw_RL", "pan_LR", "pan_RL", "uncontrolled")
SIDECAR_FIELDS = {"target_pose_path": "target_poses", "trajectory_c2w_path": "target_poses",
                  "pose_path": "poses_npy", "vipe_sidecar": "vipe", "evidence_path": "evidence"}


def manifest_records(path: Path) -> list[Any]:
    """The records of a ``videos.json`` (a list, or ``{"records": [...]}``); CaseFailure naming the file (an
    over-long integer stays in its record, which the record check refuses)."""
    doc = validate.read_json_records(path)
    if isinstance(doc, Mapping) and isinstance(doc.get("records"), list):
        doc = doc["records"]
    if not isinstance(doc, list):
        raise CaseFailure(f"{path}: expected a JSON list of video records (or {{\"records\": [...]}})")
    return doc


def release_variants(root: Path | None) -> list[JsonlIndex]:
    """Every ``variants*.jsonl`` of the release folder indexed by ``variant_id`` (a later file wins); a bad
    line or a duplicate id is kept as a problem for the records that need it (:func:`find_variant`)."""
    if root is None or not Path(root).is_dir():
        return []
    return [validate.read_jsonl_index(p, "variant_id") for p in sorted(Path(root).glob("variants*.jsonl"))]


def find_variant(indexes: list[JsonlIndex], variant_id: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the variant, None), or (None, why it cannot be used) when it is a duplicate or may sit on a bad line."""
    for idx in reversed(indexes):
        if variant_id in idx.records:
            return idx.records[variant_id], None
    for idx in reversed(indexes):
        why = idx.problem_for(variant_id, "variant_id")
        if why:
            return None, why
    return None, None


class WRBenchLoader(Loader):
    """Cases from ``videos.json`` manifests (one per model folder, or one shared file)."""

    name: ClassVar[str] = "wrbench"
    benchmark: ClassVar[str] = BENCHMARK
    description: ClassVar[str] = "WRBench videos.json manifests + the Natural-25 release variants"
    reads_request_paths_only: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {
        "manifest": MANIFEST_NAME,        # file name inside a model folder
        "evidence_jsonl": "",             # the release's gate evidence (video_id -> record); "" = none
        "default_viewpoint_condition": "model-inferred",
        "missing_prompt": "error",        # error | allow (a record without a prompt the release cannot fill)
    }

    def load(self, request: LoadRequest) -> Iterator[Case | CaseError]:
        """One Case per manifest record of each model (or a CaseError naming the file)."""
        opts = {**self.defaults, **dict(request.options or {})}
        root = Path(request.data_root) if request.data_root else None
        try:
            variants = release_variants(root)
        except CaseFailure as e:
            for model in request.generations:
                yield CaseError(BENCHMARK, "*", model, "load", str(e))
            return
        evidence: JsonlIndex | None = None
        if opts["evidence_jsonl"]:
            ev_path = Path(opts["evidence_jsonl"])
            if not ev_path.is_absolute() and root is not None:
                ev_path = root / ev_path
            try:
                evidence = validate.read_jsonl_index(ev_path, "video_id")
            except (CaseFailure, OSError) as e:
                for model in request.generations:
                    yield CaseError(BENCHMARK, "*", model, "load", f"{ev_path}: {e}")
                return
        for model, gen in sorted(request.generations.items()):
            path = Path(gen)
            shared = path.is_file()
            manifest = path if shared else path / str(opts["manifest"])
            try:
                records = manifest_records(manifest)
            except (CaseFailure, OSError) as e:
                yield CaseError(BENCHMARK, "*", model, "load", str(e) if str(manifest) in str(e) else f"{manifest}: {e}")
                continue
            seen: set[str] = set()
            for i, rec in enumerate(records):
                where = f"{manifest} record {i}"
                owner = rec.get("model") if isinstance(rec, Mapping) else None
                if shared and isinstance(owner, str) and owner not in ("", model):
                    continue   # another model's record (a model that is not text fails the record check)
                vid = ""
                try:
                    vid = validate.video_id(rec, where)
                    validate.check_record(rec, where)
                    if vid in seen:
                        raise CaseFailure(f"{where}: duplicate video_id {vid!r}")
                    seen.add(vid)
                    yield self._case(request, model, manifest, where, rec, variants, evidence, opts)
                except CaseFailure as e:
                    yield CaseError(BENCHMARK, vid or f"record-{i}", model, "load", str(e))
                except Exception as e:  # a reader's bug on one record fails that record only
                    yield CaseError(BENCHMARK, vid or f"record-{i}", model, "load",
                                    f"{where}: {type(e).__name__}: {e}")

    def _case(self, request: LoadRequest, model: str, manifest: Path, where: str, rec: Mapping[str, Any],
              variants: list[JsonlIndex], evidence: JsonlIndex | None, opts: Mapping[str, Any]) -> Case:
        base = manifest.parent
        rel = rec.get("video_path") or rec.get("path")
        if not rel:
            raise CaseFailure(f"{where}: no video_path")
        video_path = safe_join(base, str(rel), what=f"{where}: video_path")
        if not video_path.exists():
            raise CaseFailure(f"{video_path}: video file missing ({where})")
        camera = str(rec.get("camera_type") or rec.get("camera") or "").strip()
        if camera not in CAMERAS:
            raise CaseFailure(f"{where}: camera_type {camera!r} is not one of {', '.join(CAMERAS)}")
        variant_id = str(rec.get("variant_id") or "")
        variant, variant_problem = find_variant(variants, variant_id) if variant_id else (None, None)
        prompt = rec.get("world_state_prompt") or rec.get("prompt_text")
        if not prompt and variant is not None:
            prompt = variant.get("world_state_prompt")
            if prompt is not None and not isinstance(prompt, str):
                raise CaseFailure(f"variant_id {variant_id!r} ({where}): the release's world_state_prompt must be "
                                  f"a string, got {type(prompt).__name__}")
        if not prompt and opts["missing_prompt"] == "error":
            if variant_problem:
                raise CaseFailure(f"{where}: no world_state_prompt; {variant_problem}")
            src = f"the release variants under {request.data_root}" if variants else "no release variants loaded"
            raise CaseFailure(f"{where}: no world_state_prompt and variant_id {variant_id!r} not found ({src})")
        sidecars: dict[str, Path] = {}
        for fld, key in SIDECAR_FIELDS.items():
            if rec.get(fld):
                p = safe_join(base, str(rec[fld]), what=f"{where}: {fld}")
                if not p.exists():
                    raise CaseFailure(f"{p}: {fld} missing ({where})")
                sidecars[key] = p
        answers = sidecar_path(video_path)  # precomputed probe answers beside the video: an input of the case
        if answers.is_file():
            sidecars["probe_answers"] = answers
        vid = str(rec["video_id"])
        ann: dict[str, Any] = {"camera": camera, "video_id": vid, "variant_id": variant_id}
        for k in validate.FRAME_FIELDS:   # types checked by validate.check_record
            if rec.get(k) is not None:
                ann[k] = int(rec[k])
        if rec.get("requested_yaw_deg") is not None:
            ann["requested_yaw_deg"] = rec["requested_yaw_deg"]
        if "reobservation_support" in rec:
            ann["reobservation_support"] = rec["reobservation_support"]
        if rec.get("evidence") is not None:
            ann["evidence"] = dict(rec["evidence"])
        elif "evidence" in sidecars:
            ann["evidence"] = validate.check_evidence(read_json(sidecars["evidence"]), str(sidecars["evidence"]))
        elif evidence is not None:
            if evidence.problem_for(vid, "video_id"):
                raise CaseFailure(f"{where}: its gate evidence cannot be read: {evidence.problem_for(vid, 'video_id')}")
            if vid in evidence.records:
                ann["evidence"] = validate.check_evidence(evidence.records[vid], f"{evidence.path}: video_id {vid!r}")
        payload = certification.payload_of(rec)
        payload.pop("camera_type", None)   # ann["camera"]
        if "target_poses" in sidecars and payload:   # what D1 target certification reads (CamPrec)
            ann["d1_target"] = payload
        warnings: list[str] = []
        if "target_poses" in sidecars:   # an unusable target is CamPrec's invalid_pose, not this video's failure
            try:
                warnings.extend(validate.pose_stack(load_npy(sidecars["target_poses"]),
                                                    str(sidecars["target_poses"]))[1])
            except CaseFailure as e:
                warnings.append(f"requested trajectory unusable (CamPrec: invalid_pose): {e}")
        condition = str(rec.get("viewpoint_condition_type") or opts["default_viewpoint_condition"])
        strata = {"camera": camera, "viewpoint_condition": condition}
        for k in ("family_id", "event_delta", "reasoning_tier", "oov_gap"):
            v = rec.get(k) if rec.get(k) is not None else (variant or {}).get(k)
            if v is not None:
                strata[k] = validate.label(v, where if rec.get(k) is not None else f"variant_id {variant_id!r}", k)
        video = request.pool.get(video_path) if request.pool is not None else Video(video_path)
        return Case(benchmark=BENCHMARK, case_id=vid, model=model, video=video,
                    strata=strata, prompt=str(prompt) if prompt else None, annotations=ann, sidecars=sidecars,
                    data_root=Path(request.data_root) if request.data_root else None, warnings=warnings)
