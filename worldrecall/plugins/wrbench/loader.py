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
file; an unreadable manifest is one error for the model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from worldrecall.core.components import Loader, LoadRequest
from worldrecall.core.data import Case, CaseError, CaseFailure
from worldrecall.core.paths import safe_join
from worldrecall.core.text import read_text
from worldrecall.core.video import Video
from worldrecall.formats.safe_json import parse_json, read_json
from worldrecall.plugins.wrbench.sidecar_judge import sidecar_path

BENCHMARK = "wrbench"
MANIFEST_NAME = "videos.json"
CAMERAS = ("static", "yaw_LR", "yaw_RL", "pan_LR", "pan_RL", "uncontrolled")
SIDECAR_FIELDS = {"target_pose_path": "target_poses", "trajectory_c2w_path": "target_poses",
                  "pose_path": "poses_npy", "vipe_sidecar": "vipe", "evidence_path": "evidence"}


def manifest_records(path: Path) -> list[Any]:
    """The records of a ``videos.json`` (a list, or ``{"records": [...]}``); CaseFailure naming the file."""
    doc = read_json(path)
    if isinstance(doc, Mapping) and isinstance(doc.get("records"), list):
        doc = doc["records"]
    if not isinstance(doc, list):
        raise CaseFailure(f"{path}: expected a JSON list of video records (or {{\"records\": [...]}})")
    return doc


def read_jsonl_by_id(path: Path, key: str) -> dict[str, dict[str, Any]]:
    """``{record[key]: record}`` of a JSONL file; a bad line or a duplicate key fails naming file and line."""
    out: dict[str, dict[str, Any]] = {}
    for i, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        rec = parse_json(line, f"{path}:{i}")
        if not isinstance(rec, Mapping) or not rec.get(key):
            raise CaseFailure(f"{path}:{i}: a record without {key}")
        k = str(rec[key])
        if k in out:
            raise CaseFailure(f"{path}:{i}: duplicate {key} {k!r}")
        out[k] = dict(rec)
    return out


def release_variants(root: Path | None) -> dict[str, dict[str, Any]]:
    """Every ``variants*.jsonl`` record of the release folder by ``variant_id`` (later files win)."""
    out: dict[str, dict[str, Any]] = {}
    if root is None or not Path(root).is_dir():
        return out
    for p in sorted(Path(root).glob("variants*.jsonl")):
        out.update(read_jsonl_by_id(p, "variant_id"))
    return out


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
        evidence: dict[str, dict[str, Any]] = {}
        if opts["evidence_jsonl"]:
            ev_path = Path(opts["evidence_jsonl"])
            if not ev_path.is_absolute() and root is not None:
                ev_path = root / ev_path
            try:
                evidence = read_jsonl_by_id(ev_path, "video_id")
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
                if shared and isinstance(rec, Mapping) and rec.get("model") not in (None, "", model):
                    continue
                vid = str(rec.get("video_id", "")) if isinstance(rec, Mapping) else ""
                try:
                    if not isinstance(rec, Mapping):
                        raise CaseFailure(f"{where}: not an object")
                    if not vid:
                        raise CaseFailure(f"{where}: no video_id")
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
              variants: Mapping[str, Mapping[str, Any]], evidence: Mapping[str, Mapping[str, Any]],
              opts: Mapping[str, Any]) -> Case:
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
        variant = variants.get(variant_id) if variant_id else None
        prompt = rec.get("world_state_prompt") or rec.get("prompt_text") or (variant or {}).get("world_state_prompt")
        if not prompt and opts["missing_prompt"] == "error":
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
        ann: dict[str, Any] = {"camera": camera, "video_id": str(rec["video_id"]), "variant_id": variant_id}
        for k in ("look_away_frame", "return_frame", "requested_yaw_deg"):
            if rec.get(k) is not None:
                v = rec[k]
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise CaseFailure(f"{where}: {k} must be a number, got {v!r}")
                ann[k] = v
        if "reobservation_support" in rec:
            if not isinstance(rec["reobservation_support"], bool):
                raise CaseFailure(f"{where}: reobservation_support must be true or false")
            ann["reobservation_support"] = rec["reobservation_support"]
        if isinstance(rec.get("evidence"), Mapping):
            ann["evidence"] = dict(rec["evidence"])
        elif "evidence" in sidecars:
            ev = read_json(sidecars["evidence"])
            if not isinstance(ev, Mapping):
                raise CaseFailure(f"{sidecars['evidence']}: evidence must be a JSON object")
            ann["evidence"] = dict(ev)
        elif str(rec["video_id"]) in evidence:
            ann["evidence"] = dict(evidence[str(rec["video_id"])])
        condition = str(rec.get("viewpoint_condition_type") or opts["default_viewpoint_condition"])
        strata = {"camera": camera, "viewpoint_condition": condition}
        for k in ("family_id", "event_delta", "reasoning_tier", "oov_gap"):
            v = rec.get(k) if rec.get(k) is not None else (variant or {}).get(k)
            if v is not None:
                strata[k] = str(v)
        video = request.pool.get(video_path) if request.pool is not None else Video(video_path)
        return Case(benchmark=BENCHMARK, case_id=str(rec["video_id"]), model=model, video=video,
                    strata=strata, prompt=str(prompt) if prompt else None, annotations=ann, sidecars=sidecars,
                    data_root=Path(request.data_root) if request.data_root else None)
