"""Parse and validate OPIS ``reference_scene.json`` (A.2, errata 1) and the official ``video_observation.json``.

Every problem is a :class:`~worldrecall.core.data.CaseFailure` with one line naming the file and the field.
Unknown enum values are *normalised* (to ``unknown`` / ``excluded``), never a failure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure
from worldrecall.core.paths import safe_join
from worldrecall.formats.safe_json import read_json
from worldrecall.plugins.opis.records import (
    EVALUATION_TRACKS,
    KINEMATIC_CLASSES,
    MOTION_EXPECTATIONS,
    Inventory,
    InventoryObject,
    Observation,
    Window,
)

STATIC_MOTIONS = ("world_static", "protocol_frozen")
LEGACY_STATIC_KINDS = ("static", "rigid")
LEGACY_DYNAMIC_KINDS = ("articulated", "deformable")
LEGACY_CONFIDENCE = 0.5


# ----------------------------------------------------------------------------------------------------------
# small validators


def _finite_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def _find_non_finite(v: Any, path: str) -> str | None:
    """Path of the first non-finite float inside nested lists/dicts, or None."""
    if isinstance(v, float) and not math.isfinite(v):
        return path
    if isinstance(v, Mapping):
        for k, x in v.items():
            hit = _find_non_finite(x, f"{path}.{k}")
            if hit:
                return hit
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            hit = _find_non_finite(x, f"{path}[{i}]")
            if hit:
                return hit
    return None


def _read_json(path: Path) -> Any:
    # core.text.read_json: one line naming the file for missing/undecodable/invalid JSON, and bounded nesting
    # depth and integer size (a 100,000-deep array or a 5,000-digit frame_index is refused, not a crash)
    return read_json(path)


def _box(v: Any, where: str) -> tuple[float, float, float, float]:
    if not isinstance(v, (list, tuple)) or len(v) != 4 or not all(_finite_number(c) for c in v):
        raise CaseFailure(f"{where}: must be 4 finite numbers [x0, y0, x1, y1], got {v!r}"[:300])
    x0, y0, x1, y1 = (float(c) for c in v)
    return (x0, y0, x1, y1)


def _vector(v: Any, where: str) -> np.ndarray | None:
    if v is None:
        return None
    if not isinstance(v, (list, tuple)) or not v:
        raise CaseFailure(f"{where}: must be a non-empty list of numbers")
    if not all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in v):
        raise CaseFailure(f"{where}: must contain numbers only")
    a = np.asarray(v, dtype=np.float64)
    if not np.isfinite(a).all():
        raise CaseFailure(f"{where}: has non-finite values")
    return a


# ----------------------------------------------------------------------------------------------------------
# mobility (A.2)


def mobility_confidence(value: Any) -> float | None:
    """The release's reading of ``mobility.confidence``: anything ``float()`` accepts (numbers, numeric
    strings), clipped to [0, 1]; non-finite or unreadable -> None."""
    if value is None:
        return None
    try:
        conf = float(value)
    except (TypeError, ValueError):
        return None
    return min(1.0, max(0.0, conf)) if math.isfinite(conf) else None


def legacy_kind(obj: Mapping[str, Any], meta: Mapping[str, Any]) -> Any:
    """The legacy kind of an object without a mobility block: top-level ``instance_kind`` (ours), else the
    release's ``metadata.instance_kind``, else its older ``metadata.kind``."""
    if obj.get("instance_kind") is not None:
        return obj["instance_kind"]
    if meta.get("instance_kind") is not None:
        return meta["instance_kind"]
    return meta.get("kind")


def normalise_mobility(mobility: Mapping[str, Any] | None, instance_kind: str | None = None, *,
                       allow_unlabeled_geometry: bool = False) -> dict[str, Any]:
    """Normalised mobility fields of one object.

    With a ``mobility`` block: unknown enum values -> ``unknown`` (kinematics, motion) / ``excluded``
    (track). Geometry only under the static contract (rigid, world_static/protocol_frozen,
    static_geometry track, ``geometry_eligible`` true); otherwise geometry_eligible = False and: unknown
    kinematics -> excluded; articulated/deformable or independent/unknown motion -> dynamic_identity unless
    explicitly excluded; anything else keeps its declared track (identity only).
    Without one (legacy / unlabeled): ``instance_kind`` articulated/deformable -> dynamic_identity;
    static/rigid -> static_geometry with confidence 0.5 only when ``allow_unlabeled_geometry`` (errata 1),
    else track ``unlabeled`` (identity only).
    """
    if isinstance(mobility, Mapping):
        kin = str(mobility.get("kinematic_class", "unknown")).strip().lower()
        kin = kin if kin in KINEMATIC_CLASSES else "unknown"
        motion = str(mobility.get("motion_expectation", "unknown")).strip().lower()
        motion = motion if motion in MOTION_EXPECTATIONS else "unknown"
        track = str(mobility.get("evaluation_track", "excluded")).strip().lower()
        track = track if track in EVALUATION_TRACKS and track != "unlabeled" else "excluded"
        eligible = bool(mobility.get("geometry_eligible", False))   # truthy, as the release reads it
        conf = mobility_confidence(mobility.get("confidence"))
        static_contract = kin == "rigid" and motion in STATIC_MOTIONS and track == "static_geometry" and eligible
        if not static_contract:
            eligible = False
            if track != "excluded":
                if kin == "unknown":
                    track = "excluded"
                elif kin in LEGACY_DYNAMIC_KINDS or motion in ("independent_motion", "unknown"):
                    track = "dynamic_identity"
        return {"kinematic_class": kin, "motion_expectation": motion, "evaluation_track": track,
                "geometry_eligible": eligible, "mobility_confidence": conf, "mobility_source": "mobility"}
    kind = str(instance_kind or "").strip().lower()
    if kind in LEGACY_DYNAMIC_KINDS:
        return {"kinematic_class": kind, "motion_expectation": "unknown", "evaluation_track": "dynamic_identity",
                "geometry_eligible": False, "mobility_confidence": LEGACY_CONFIDENCE, "mobility_source": "legacy"}
    if kind in LEGACY_STATIC_KINDS and allow_unlabeled_geometry:
        return {"kinematic_class": "rigid", "motion_expectation": "world_static", "evaluation_track": "static_geometry",
                "geometry_eligible": True, "mobility_confidence": LEGACY_CONFIDENCE, "mobility_source": "legacy"}
    return {"kinematic_class": "rigid" if kind in LEGACY_STATIC_KINDS else "unknown",
            "motion_expectation": "unknown", "evaluation_track": "unlabeled", "geometry_eligible": False,
            "mobility_confidence": None, "mobility_source": "unlabeled"}


# ----------------------------------------------------------------------------------------------------------
# reference_scene.json


def object_mask_path(obj: Mapping[str, Any]) -> str | None:
    """The object's mask file: ``mask_path``, else ``metadata.mask_path`` (the release reads both)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    mp = obj.get("mask_path") or meta.get("mask_path")
    return None if not mp else str(mp)


def _mask_support(obj: Mapping[str, Any], where: str, image_size: tuple[int, int],
                  base_dir: Path | None) -> bool | None:
    """True/False = the instance mask has pixels; None = no mask given (bbox is the support).

    An inline ``mask`` must be a 2-D 0/1 list of shape [H, W]; a ``mask_path`` PNG is read when
    ``base_dir`` is given. A mask of the wrong size or with no pixel is a CaseFailure.
    """
    w, h = image_size
    if obj.get("mask") is not None:
        m = obj["mask"]
        try:
            arr = np.asarray(m, dtype=np.float64)
        except (TypeError, ValueError):
            raise CaseFailure(f"{where}.mask: not a 2-D numeric array (RLE masks are not supported)") from None
        if arr.shape != (h, w):
            raise CaseFailure(f"{where}.mask: shape {list(arr.shape)} != image [H, W] {[h, w]}")
        if not np.isfinite(arr).all():
            raise CaseFailure(f"{where}.mask: has non-finite values")
        if not (arr > 0).any():
            raise CaseFailure(f"{where}.mask: is empty")
        return True
    mp = object_mask_path(obj)
    if not mp:
        return None
    if base_dir is None:
        return None
    p = safe_join(base_dir, str(mp), what=f"{where}.mask_path")
    if not p.is_file():
        raise CaseFailure(f"{where}.mask_path: {mp} not found")
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(p) as im:
            arr = np.asarray(im.convert("L"))
    except (OSError, UnidentifiedImageError):
        raise CaseFailure(f"{where}.mask_path: {mp} is not a readable image") from None
    if arr.shape != (h, w):
        raise CaseFailure(f"{where}.mask_path: {mp} is {arr.shape[1]}x{arr.shape[0]}, image is {w}x{h}")
    if not (arr > 0).any():
        raise CaseFailure(f"{where}.mask_path: {mp} is empty")
    return True


def parse_reference_scene(
    doc: Any,
    *,
    source: str = "reference_scene.json",
    image_size: tuple[int, int] | Sequence[int] | None = None,
    base_dir: Path | str | None = None,
    allow_unlabeled_geometry: bool = False,
) -> Inventory:
    """Validate a parsed ``reference_scene.json`` and build the :class:`Inventory`.

    ``image_size``: the actual (W, H) of ``raw.jpg``; ``metadata.image_size`` must equal it. ``base_dir``:
    the case folder, to check ``mask_path`` files (safe join). Embeddings must all have one dimension.
    """
    scene_id, wh, backend, objects_doc = _scene_header(doc, source, image_size)
    base = None if base_dir is None else Path(base_dir)
    dims: set[int] = set()
    seen: set[str] = set()
    objects = [_parse_object(k, od, source, wh, base, dims, seen, allow_unlabeled_geometry)
               for k, od in enumerate(objects_doc)]
    return Inventory(scene_id=str(scene_id), image_size=wh, objects=objects,
                     embedding_backend=None if backend is None else str(backend))


def _scene_header(doc: Any, source: str,
                  image_size: tuple[int, int] | Sequence[int] | None) -> tuple[Any, tuple[int, int], Any, list]:
    """scene_id, metadata.image_size (W, H), the embedding backend and the objects list, each checked."""
    if not isinstance(doc, Mapping):
        raise CaseFailure(f"{source}: top level must be a JSON object")
    scene_id = doc.get("scene_id")
    if not isinstance(scene_id, (str, int)) or str(scene_id).strip() == "":
        raise CaseFailure(f"{source}: scene_id missing or empty")
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        raise CaseFailure(f"{source}: metadata missing (metadata.image_size [W, H] is required)")
    size = meta.get("image_size")
    if (not isinstance(size, (list, tuple)) or len(size) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 and float(v).is_integer() for v in size)):
        raise CaseFailure(f"{source}: metadata.image_size must be [W, H] positive integers, got {size!r}"[:300])
    wh = (int(size[0]), int(size[1]))
    if image_size is not None and tuple(int(v) for v in image_size) != wh:
        raise CaseFailure(f"{source}: metadata.image_size {list(wh)} != reference image size {list(image_size)}")
    prep = meta.get("preprocessing")
    backend = prep.get("embedding_backend") if isinstance(prep, Mapping) else None
    objects_doc = doc.get("objects")
    if not isinstance(objects_doc, list) or not objects_doc:
        raise CaseFailure(f"{source}: objects must be a non-empty list")
    return scene_id, wh, backend, objects_doc


def _parse_object(k: int, od: Any, source: str, wh: tuple[int, int], base: Path | None, dims: set[int],
                  seen: set[str], allow_unlabeled_geometry: bool) -> InventoryObject:
    """``objects[k]`` as an :class:`InventoryObject`; ``seen`` (object ids) and ``dims`` (embedding sizes)
    collect what earlier objects had, so duplicates and mixed dimensions are refused."""
    w, h = wh
    where = f"{source}: objects[{k}]"
    if not isinstance(od, Mapping):
        raise CaseFailure(f"{where}: must be a JSON object")
    oid = od.get("object_id")
    if not isinstance(oid, (str, int)) or str(oid).strip() == "":
        raise CaseFailure(f"{where}.object_id: missing or empty")
    oid = str(oid)
    where = f"{source}: object {oid}"
    if oid in seen:
        raise CaseFailure(f"{where}: duplicate object_id")
    seen.add(oid)
    bad = _find_non_finite(dict(od), "")
    if bad:
        raise CaseFailure(f"{where}: non-finite value at {bad.lstrip('.')}")
    bbox = _box(od.get("bbox"), f"{where}.bbox")
    x0, y0, x1, y1 = bbox
    if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
        raise CaseFailure(f"{where}.bbox {list(bbox)} is empty or outside the {w}x{h} image")
    emb = _vector(od.get("embedding"), f"{where}.embedding")
    if emb is not None:
        if float(np.linalg.norm(emb)) <= 1e-12:
            raise CaseFailure(f"{where}.embedding: is all zeros")
        dims.add(int(emb.size))
        if len(dims) > 1:
            raise CaseFailure(f"{where}.embedding: dimension {emb.size} differs from other objects' {sorted(dims - {emb.size})}")
    attrs = od.get("attributes") or {}
    if not isinstance(attrs, Mapping):
        raise CaseFailure(f"{where}.attributes: must be a JSON object")
    support = _mask_support(od, where, wh, base)
    ometa = od.get("metadata") if isinstance(od.get("metadata"), Mapping) else {}
    kind = legacy_kind(od, ometa)
    mob = normalise_mobility(
        ometa.get("mobility") if isinstance(ometa.get("mobility"), Mapping) else None,
        kind, allow_unlabeled_geometry=allow_unlabeled_geometry,
    )
    group = ometa.get("ambiguity_group", od.get("ambiguity_group"))
    if isinstance(group, (list, tuple)):
        # a set of interchangeable look-alikes: name the group by its sorted members
        group = "|".join(sorted(str(g) for g in group)) if group else None
    return InventoryObject(
        object_id=oid,
        category=str(od.get("category") or ""),
        bbox=bbox,
        embedding=emb,
        attributes=dict(attrs),
        ambiguity_group=None if group in (None, "") else str(group),
        has_support=support is not False,
        mask_path=object_mask_path(od),
        instance_kind=None if kind is None else str(kind),
        **mob,
    )


def load_reference_scene(path: Path | str, *, image_size: tuple[int, int] | Sequence[int] | None = None,
                         allow_unlabeled_geometry: bool = False, check_masks: bool = True) -> Inventory:
    """Read and validate ``reference_scene.json`` (mask files checked relative to its folder)."""
    p = Path(path)
    return parse_reference_scene(
        _read_json(p), source=str(p), image_size=image_size,
        base_dir=p.parent if check_masks else None, allow_unlabeled_geometry=allow_unlabeled_geometry,
    )


def apply_unlabeled_geometry(inventory: Inventory, allow: bool) -> Inventory:
    """The inventory with errata 1's ``allow_unlabeled_geometry`` applied at score time.

    Objects parsed without a mobility block and with a legacy static/rigid ``instance_kind`` become
    static-track (confidence 0.5) when ``allow`` is on, so the switch re-scores archived measurements.
    """
    if not allow:
        return inventory
    objects = []
    for o in inventory.objects:
        if o.mobility_source == "unlabeled":
            mob = normalise_mobility(None, o.instance_kind, allow_unlabeled_geometry=True)
            o = replace(o, **mob)
        objects.append(o)
    return replace(inventory, objects=objects)


def embedding_dim(inventory: Inventory) -> int | None:
    """The inventory's embedding dimension (None when no object has an embedding)."""
    for o in inventory.objects:
        if o.embedding is not None:
            return int(np.asarray(o.embedding).size)
    return None


def check_embedding_backend(inventory: Inventory, backend: str | None, dim: int | None, *, source: str = "observations") -> None:
    """Refuse observations from another embedding backend or of another dimension than the inventory's."""
    ref_dim = embedding_dim(inventory)
    if backend and inventory.embedding_backend and str(backend) != str(inventory.embedding_backend):
        raise CaseFailure(f"{source}: embedding backend {backend!r} != reference_scene's {inventory.embedding_backend!r}")
    if dim is not None and ref_dim is not None and int(dim) != ref_dim:
        raise CaseFailure(f"{source}: embedding dimension {dim} != reference_scene's {ref_dim}")


def check_observation_dims(inventory: Inventory, windows: Sequence[Window], *, source: str = "observations") -> None:
    """Every observation embedding must be finite and have the inventory's dimension."""
    ref_dim = embedding_dim(inventory)
    for w in windows:
        for o in w.observations:
            if o.embedding is None:
                continue
            e = np.asarray(o.embedding, dtype=np.float64).reshape(-1)
            if not np.isfinite(e).all():
                raise CaseFailure(f"{source}: window {w.window_id} observation {o.observed_id} embedding has non-finite values")
            if ref_dim is not None and e.size != ref_dim:
                raise CaseFailure(
                    f"{source}: window {w.window_id} observation {o.observed_id} embedding dimension {e.size} != reference_scene's {ref_dim}")


# ----------------------------------------------------------------------------------------------------------
# video_observation.json (official example shape)


def parse_video_observation(doc: Any, *, source: str = "video_observation.json") -> list[Window]:
    """Windows and detections of the official ``video_observation.json`` (no geometry, pose or claims)."""
    if not isinstance(doc, Mapping):
        raise CaseFailure(f"{source}: top level must be a JSON object")
    wins = doc.get("windows")
    if not isinstance(wins, list) or not wins:
        raise CaseFailure(f"{source}: windows must be a non-empty list")
    out: list[Window] = []
    seen: set[str] = set()
    for k, wd in enumerate(wins):
        where = f"{source}: windows[{k}]"
        if not isinstance(wd, Mapping):
            raise CaseFailure(f"{where}: must be a JSON object")
        # the release's default id: the frame index, else "window" (two such windows are a duplicate)
        wid = str(wd.get("window_id", wd.get("frame_index", "window")))
        if wid in seen:
            raise CaseFailure(f"{where}.window_id {wid!r} is duplicated")
        seen.add(wid)
        fs = wd.get("frame_size")
        if not isinstance(fs, (list, tuple)) or len(fs) != 2 or not all(_finite_number(v) and v > 0 for v in fs):
            raise CaseFailure(f"{where}.frame_size must be [W, H] positive numbers, got {fs!r}"[:300])
        fi = wd.get("frame_index")
        ts = wd.get("timestamp")
        if (fi is not None and not _finite_number(fi)) or (ts is not None and not _finite_number(ts)):
            raise CaseFailure(f"{where}: frame_index / timestamp must be finite numbers or null")
        objs = wd.get("objects") or []
        if not isinstance(objs, list):
            raise CaseFailure(f"{where}.objects must be a list")
        observations: list[Observation] = []
        ids: set[str] = set()
        for j, od in enumerate(objs):
            ow = f"{where}.objects[{j}]"
            if not isinstance(od, Mapping):
                raise CaseFailure(f"{ow}: must be a JSON object")
            obs_id = str(od.get("observed_id", j))
            if obs_id in ids:
                raise CaseFailure(f"{ow}.observed_id {obs_id!r} is duplicated in the window")
            ids.add(obs_id)
            conf = od.get("confidence", 1.0)
            if not _finite_number(conf):
                raise CaseFailure(f"{ow}.confidence must be a finite number")
            attrs = od.get("attributes") or {}
            if not isinstance(attrs, Mapping):
                raise CaseFailure(f"{ow}.attributes must be a JSON object")
            observations.append(Observation(
                observed_id=obs_id,
                bbox=_box(od.get("bbox"), f"{ow}.bbox"),
                category=str(od.get("category") or ""),
                confidence=float(conf),
                attributes=dict(attrs),
                embedding=_vector(od.get("embedding"), f"{ow}.embedding"),
                track_id=None if od.get("track_id") is None else str(od["track_id"]),
            ))
        out.append(Window(window_id=wid, frame_index=None if fi is None else int(fi),
                          timestamp=None if ts is None else float(ts),
                          frame_size=(int(fs[0]), int(fs[1])), observations=observations))
    return out


def load_video_observation(path: Path | str) -> list[Window]:
    """Read and validate a ``video_observation.json``."""
    p = Path(path)
    return parse_video_observation(_read_json(p), source=str(p))
