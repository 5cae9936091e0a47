"""OPIS measurement records: the contract between the measure side and the pure scoring side.

The measure stage (frame sampling, segmentation, embeddings, input-grounded geometry, pose, VLM claims)
produces one :class:`Inventory` per case and one :class:`Window` per sampled frame. The score stage
(:func:`worldrecall.plugins.opis.score.score_case`) reads nothing else, so archived measurements can be
re-scored under any thresholds without a model.

Every record round-trips through plain JSON (``to_json``/``from_json``; arrays become nested lists) and a
whole case round-trips through the measurement cache (``case_to_measurement``/``measurement_to_case``:
arrays become top-level ``np.ndarray`` entries, everything else one JSON document; no pickle).

Coordinate conventions: reference bboxes / ``ref_px`` are pixels of the reference (input) image;
observation bboxes / ``cur_px`` / ``projected_px`` are pixels of the window's frame. Boxes are
``[x0, y0, x1, y1]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SCHEMA_VERSION = 1

#: Enum values after normalisation (A.2).
KINEMATIC_CLASSES = ("rigid", "articulated", "deformable", "unknown")
MOTION_EXPECTATIONS = ("world_static", "protocol_frozen", "independent_motion", "unknown")
#: ``unlabeled``: no mobility block and ``allow_unlabeled_geometry`` off (errata 1) -> identity only, like
#: ``excluded``.
EVALUATION_TRACKS = ("static_geometry", "dynamic_identity", "excluded", "unlabeled")
#: Where an object's mobility came from: a ``metadata.mobility`` block, the legacy ``instance_kind`` field,
#: or nothing at all (errata 1: identity-only unless ``allow_unlabeled_geometry``).
MOBILITY_SOURCES = ("mobility", "legacy", "unlabeled")
CLAIM_STATUSES = ("supported", "contradicted", "unknown")


# ----------------------------------------------------------------------------------------------------------
# array <-> JSON helpers


def _arr(v: Any, dtype: Any = np.float64) -> np.ndarray | None:
    return None if v is None else np.asarray(v, dtype=dtype)


def _enc(v: np.ndarray | None, arrays: dict[str, np.ndarray] | None) -> Any:
    """An array as JSON: inline nested list (``arrays is None``) or a reference into ``arrays``."""
    if v is None:
        return None
    a = np.asarray(v)
    if arrays is None:
        return {"__ndarray__": a.tolist(), "dtype": str(a.dtype), "shape": list(a.shape)}
    key = f"opis.arr.{len(arrays):06d}"
    arrays[key] = a
    return {"__array__": key}


def _dec(v: Any, arrays: Mapping[str, np.ndarray] | None) -> np.ndarray | None:
    if v is None:
        return None
    if isinstance(v, dict) and "__array__" in v:
        if arrays is None or v["__array__"] not in arrays:
            raise KeyError(f"OPIS measurement: array {v['__array__']!r} is missing")
        return np.asarray(arrays[v["__array__"]])
    if isinstance(v, dict) and "__ndarray__" in v:
        return np.asarray(v["__ndarray__"], dtype=v["dtype"]).reshape(v["shape"])
    return np.asarray(v)  # a plain list written by a third party


def _box(v: Any) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = (float(c) for c in v)
    return (x0, y0, x1, y1)


def _size(v: Any) -> tuple[int, int]:
    w, h = (int(c) for c in v)
    return (w, h)


# ----------------------------------------------------------------------------------------------------------
# inventory side (built once per case from the input image)


@dataclass
class InventoryObject:
    """One reference object of ``reference_scene.json`` after validation and mobility normalisation."""

    object_id: str
    category: str
    bbox: tuple[float, float, float, float]  # reference-image pixels
    embedding: np.ndarray | None = None       # [D] float
    attributes: dict[str, Any] = field(default_factory=dict)
    kinematic_class: str = "unknown"           # one of KINEMATIC_CLASSES
    motion_expectation: str = "unknown"        # one of MOTION_EXPECTATIONS
    evaluation_track: str = "excluded"         # one of EVALUATION_TRACKS
    geometry_eligible: bool = False            # True only under the static contract (A.2)
    mobility_confidence: float | None = None
    mobility_source: str = "unlabeled"         # one of MOBILITY_SOURCES
    ambiguity_group: str | None = None
    has_support: bool = True                   # non-empty support mask (False -> no queries, no projection)
    mask_path: str | None = None
    instance_kind: str | None = None           # legacy field, kept so errata-1's flag can re-apply at score time

    @property
    def static_track(self) -> bool:
        """On the static-geometry track with geometry allowed (A.6 step 1 and A.11.1 apply)."""
        return self.evaluation_track == "static_geometry" and self.geometry_eligible

    @property
    def dynamic_track(self) -> bool:
        """On the dynamic track (A.11.2 structure evidence)."""
        return self.evaluation_track == "dynamic_identity"

    def to_json(self, arrays: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """JSON-able dict (embedding inline, or as a reference into ``arrays`` when given)."""
        return {
            "object_id": self.object_id,
            "category": self.category,
            "bbox": list(self.bbox),
            "embedding": _enc(self.embedding, arrays),
            "attributes": self.attributes,
            "kinematic_class": self.kinematic_class,
            "motion_expectation": self.motion_expectation,
            "evaluation_track": self.evaluation_track,
            "geometry_eligible": self.geometry_eligible,
            "mobility_confidence": self.mobility_confidence,
            "mobility_source": self.mobility_source,
            "ambiguity_group": self.ambiguity_group,
            "has_support": self.has_support,
            "mask_path": self.mask_path,
            "instance_kind": self.instance_kind,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], arrays: Mapping[str, np.ndarray] | None = None) -> InventoryObject:
        """Inverse of :meth:`to_json`."""
        return cls(
            object_id=str(d["object_id"]),
            category=str(d.get("category", "")),
            bbox=_box(d["bbox"]),
            embedding=_dec(d.get("embedding"), arrays),
            attributes=dict(d.get("attributes") or {}),
            kinematic_class=str(d.get("kinematic_class", "unknown")),
            motion_expectation=str(d.get("motion_expectation", "unknown")),
            evaluation_track=str(d.get("evaluation_track", "excluded")),
            geometry_eligible=bool(d.get("geometry_eligible", False)),
            mobility_confidence=None if d.get("mobility_confidence") is None else float(d["mobility_confidence"]),
            mobility_source=str(d.get("mobility_source", "unlabeled")),
            ambiguity_group=None if d.get("ambiguity_group") is None else str(d["ambiguity_group"]),
            has_support=bool(d.get("has_support", True)),
            mask_path=d.get("mask_path"),
            instance_kind=d.get("instance_kind"),
        )


@dataclass
class Inventory:
    """The fixed object inventory of one case (A.1/A.2)."""

    scene_id: str
    image_size: tuple[int, int]  # (W, H) of the reference image
    objects: list[InventoryObject]
    embedding_backend: str | None = None

    def by_id(self) -> dict[str, InventoryObject]:
        """Objects keyed by ``object_id``."""
        return {o.object_id: o for o in self.objects}

    def to_json(self, arrays: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """JSON-able dict."""
        return {
            "scene_id": self.scene_id,
            "image_size": list(self.image_size),
            "embedding_backend": self.embedding_backend,
            "objects": [o.to_json(arrays) for o in self.objects],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], arrays: Mapping[str, np.ndarray] | None = None) -> Inventory:
        """Inverse of :meth:`to_json`."""
        return cls(
            scene_id=str(d["scene_id"]),
            image_size=_size(d["image_size"]),
            embedding_backend=d.get("embedding_backend"),
            objects=[InventoryObject.from_json(o, arrays) for o in d.get("objects", [])],
        )


# ----------------------------------------------------------------------------------------------------------
# per-window side


@dataclass
class Observation:
    """One detection in a sampled frame (A.4)."""

    observed_id: str
    bbox: tuple[float, float, float, float]  # frame pixels
    category: str = ""
    confidence: float = 1.0
    attributes: dict[str, Any] = field(default_factory=dict)
    embedding: np.ndarray | None = None       # [D], same backend as the inventory
    track_id: str | None = None               # tracking mode only

    def to_json(self, arrays: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """JSON-able dict."""
        return {
            "observed_id": self.observed_id,
            "bbox": list(self.bbox),
            "category": self.category,
            "confidence": self.confidence,
            "attributes": self.attributes,
            "embedding": _enc(self.embedding, arrays),
            "track_id": self.track_id,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], arrays: Mapping[str, np.ndarray] | None = None) -> Observation:
        """Inverse of :meth:`to_json`."""
        return cls(
            observed_id=str(d["observed_id"]),
            bbox=_box(d["bbox"]),
            category=str(d.get("category") or ""),
            confidence=float(d.get("confidence", 1.0)),
            attributes=dict(d.get("attributes") or {}),
            embedding=_dec(d.get("embedding"), arrays),
            track_id=None if d.get("track_id") is None else str(d["track_id"]),
        )


@dataclass
class ObjectProjection:
    """An object's reference query points projected into one frame with the background-fitted camera (A.5 step 8).

    All arrays have one entry per query point (Q >= 4 for the evidence to be used). The scorer derives
    "in view" itself (projected depth > 0 and pixel in [0, W) x [0, H) of the window's frame, as the
    released code does); ``in_view`` is informational.
    """

    object_id: str
    projected_px: np.ndarray       # [Q, 2] float, frame pixels
    projected_depth: np.ndarray    # [Q] float: camera-frame z of the reference 3-D point
    current_depth: np.ndarray      # [Q] float: current depth x scale at the projected pixel, 0 where invalid
    depth_valid: np.ndarray        # [Q] bool
    depth_confidence: np.ndarray | None = None  # [Q] float in [0, 1]; errata 2 (None = not measured)
    insufficient_baseline: bool = False
    in_view: np.ndarray | None = None           # [Q] bool, informational (see above)
    # where the reference 3-D queries come from: only "input_only" (the input image's own geometry) is
    # evidence; anything else makes the projection an evaluator failure, as in the release
    reference_source: str = "input_only"
    camera_confidence: float | None = None      # the projection's own camera confidence (None: the window's)

    @property
    def n_queries(self) -> int:
        """Number of query points."""
        return int(np.asarray(self.projected_depth).reshape(-1).shape[0])

    def to_json(self, arrays: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """JSON-able dict."""
        return {
            "object_id": self.object_id,
            "in_view": _enc(self.in_view, arrays),
            "projected_px": _enc(self.projected_px, arrays),
            "projected_depth": _enc(self.projected_depth, arrays),
            "current_depth": _enc(self.current_depth, arrays),
            "depth_valid": _enc(self.depth_valid, arrays),
            "depth_confidence": _enc(self.depth_confidence, arrays),
            "insufficient_baseline": self.insufficient_baseline,
            "reference_source": self.reference_source,
            "camera_confidence": self.camera_confidence,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], arrays: Mapping[str, np.ndarray] | None = None) -> ObjectProjection:
        """Inverse of :meth:`to_json`."""
        return cls(
            object_id=str(d["object_id"]),
            in_view=_arr(_dec(d.get("in_view"), arrays), bool),
            projected_px=_arr(_dec(d["projected_px"], arrays)).reshape(-1, 2),
            projected_depth=_arr(_dec(d["projected_depth"], arrays)),
            current_depth=_arr(_dec(d["current_depth"], arrays)),
            depth_valid=_arr(_dec(d["depth_valid"], arrays), bool),
            depth_confidence=_arr(_dec(d.get("depth_confidence"), arrays)),
            insufficient_baseline=bool(d.get("insufficient_baseline", False)),
            reference_source=str(d.get("reference_source", "input_only")),
            camera_confidence=None if d.get("camera_confidence") is None else float(d["camera_confidence"]),
        )


@dataclass
class WindowGeometry:
    """Input-grounded geometry of one frame (A.5): the background-fitted camera and what it implies."""

    scored: bool
    failure_reason: str | None = None
    camera_confidence: float | None = None   # reliability = min(train, holdout) inlier ratio (A.5 step 6)
    depth_scale: float | None = None
    moves: bool | None = None                # diagnostic camera-motion flag (A.5 step 9)
    displacement_fraction: float | None = None  # median holdout-inlier displacement / frame diagonal (step 9)
    projections: dict[str, ObjectProjection] = field(default_factory=dict)
    ref_px: np.ndarray | None = None         # [M, 2] reference-image pixels of every correspondence
    cur_px: np.ndarray | None = None         # [M, 2] frame pixels
    reproj_err: np.ndarray | None = None     # [M] px, reference 3-D point under the fitted camera (inf if invalid)
    inlier: np.ndarray | None = None         # [M] bool
    error_space: str = "source_pixels"       # unit of reproj_err; any other space cannot be scored (released rule)

    def to_json(self, arrays: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """JSON-able dict."""
        return {
            "scored": self.scored,
            "failure_reason": self.failure_reason,
            "camera_confidence": self.camera_confidence,
            "depth_scale": self.depth_scale,
            "moves": self.moves,
            "displacement_fraction": self.displacement_fraction,
            "projections": {k: p.to_json(arrays) for k, p in self.projections.items()},
            "ref_px": _enc(self.ref_px, arrays),
            "cur_px": _enc(self.cur_px, arrays),
            "reproj_err": _enc(self.reproj_err, arrays),
            "inlier": _enc(self.inlier, arrays),
            "error_space": self.error_space,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], arrays: Mapping[str, np.ndarray] | None = None) -> WindowGeometry:
        """Inverse of :meth:`to_json`."""
        ref_px = _arr(_dec(d.get("ref_px"), arrays))
        cur_px = _arr(_dec(d.get("cur_px"), arrays))
        return cls(
            scored=bool(d["scored"]),
            failure_reason=d.get("failure_reason"),
            camera_confidence=None if d.get("camera_confidence") is None else float(d["camera_confidence"]),
            depth_scale=None if d.get("depth_scale") is None else float(d["depth_scale"]),
            moves=d.get("moves"),
            displacement_fraction=None if d.get("displacement_fraction") is None else float(d["displacement_fraction"]),
            projections={str(k): ObjectProjection.from_json(p, arrays) for k, p in (d.get("projections") or {}).items()},
            ref_px=None if ref_px is None else ref_px.reshape(-1, 2),
            cur_px=None if cur_px is None else cur_px.reshape(-1, 2),
            reproj_err=_arr(_dec(d.get("reproj_err"), arrays)),
            inlier=_arr(_dec(d.get("inlier"), arrays), bool),
            error_space=str(d.get("error_space", "source_pixels")),
        )


@dataclass
class PoseRecord:
    """Pose-landmark edge lengths of one dynamic object in one window (A.11.2).

    ``reference_lengths`` / ``current_lengths`` are 3-D edge lengths, one per template edge, NaN where an
    endpoint was not lifted (low confidence, outside the box/mask, invalid or spread-out depth).
    """

    object_id: str
    template: str                          # "human" (10 COCO limb edges) or "animal" (8 AP-10K edges)
    edge_names: list[str]
    reference_lengths: np.ndarray          # [E]
    current_lengths: np.ndarray            # [E]
    # optional (additive): the current measurement's own profile / skeleton when it was recorded separately
    # (a mismatch is an error, as in the release), and the producer's reason when a side has no landmarks
    current_template: str | None = None
    current_edge_names: list[str] | None = None
    reference_reason: str | None = None
    current_reason: str | None = None

    def to_json(self, arrays: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """JSON-able dict."""
        return {
            "object_id": self.object_id,
            "template": self.template,
            "edge_names": list(self.edge_names),
            "reference_lengths": _enc(self.reference_lengths, arrays),
            "current_lengths": _enc(self.current_lengths, arrays),
            "current_template": self.current_template,
            "current_edge_names": None if self.current_edge_names is None else list(self.current_edge_names),
            "reference_reason": self.reference_reason,
            "current_reason": self.current_reason,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], arrays: Mapping[str, np.ndarray] | None = None) -> PoseRecord:
        """Inverse of :meth:`to_json`."""
        cur_edges = d.get("current_edge_names")
        return cls(
            object_id=str(d["object_id"]),
            template=str(d["template"]),
            edge_names=[str(e) for e in d.get("edge_names", [])],
            reference_lengths=_arr(_dec(d["reference_lengths"], arrays)),
            current_lengths=_arr(_dec(d["current_lengths"], arrays)),
            current_template=None if d.get("current_template") is None else str(d["current_template"]),
            current_edge_names=None if cur_edges is None else [str(e) for e in cur_edges],
            reference_reason=d.get("reference_reason"),
            current_reason=d.get("current_reason"),
        )


@dataclass
class ClaimRecord:
    """Frozen reference claims of one object and the VLM's judgments of them in one window (A.11.2).

    ``claims``: ``[{"fact_id", "family", "confidence", "text"?}]`` (the reference step, identical for every
    window and video of the case). ``judgments``: ``[{"fact_id", "status", "confidence", "visible"}]``;
    claims without a judgment count as ``unknown``.
    """

    object_id: str
    claims: list[dict[str, Any]] = field(default_factory=list)
    judgments: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self, arrays: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """JSON-able dict."""
        return {"object_id": self.object_id, "claims": list(self.claims), "judgments": list(self.judgments)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], arrays: Mapping[str, np.ndarray] | None = None) -> ClaimRecord:
        """Inverse of :meth:`to_json`."""
        return cls(
            object_id=str(d["object_id"]),
            claims=[dict(c) for c in d.get("claims", [])],
            judgments=[dict(j) for j in d.get("judgments", [])],
        )


@dataclass
class Window:
    """One sampled frame of the generated video with everything measured on it."""

    window_id: str
    frame_index: int | None                          # None: accepted (the release's windows may omit it)
    timestamp: float | None
    frame_size: tuple[int, int]                      # (W, H)
    observations: list[Observation] = field(default_factory=list)
    geometry: WindowGeometry | None = None           # None: geometry stage not run for this frame
    pose: dict[str, PoseRecord] = field(default_factory=dict)      # object_id -> pose measurement
    claims: dict[str, ClaimRecord] = field(default_factory=dict)   # object_id -> claim judgments

    def to_json(self, arrays: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """JSON-able dict."""
        return {
            "window_id": self.window_id,
            "frame_index": self.frame_index,
            "timestamp": self.timestamp,
            "frame_size": list(self.frame_size),
            "observations": [o.to_json(arrays) for o in self.observations],
            "geometry": None if self.geometry is None else self.geometry.to_json(arrays),
            "pose": {k: p.to_json(arrays) for k, p in self.pose.items()},
            "claims": {k: c.to_json(arrays) for k, c in self.claims.items()},
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], arrays: Mapping[str, np.ndarray] | None = None) -> Window:
        """Inverse of :meth:`to_json`."""
        return cls(
            window_id=str(d["window_id"]),
            frame_index=None if d.get("frame_index") is None else int(d["frame_index"]),
            timestamp=None if d.get("timestamp") is None else float(d["timestamp"]),
            frame_size=_size(d["frame_size"]),
            observations=[Observation.from_json(o, arrays) for o in d.get("observations", [])],
            geometry=None if d.get("geometry") is None else WindowGeometry.from_json(d["geometry"], arrays),
            pose={str(k): PoseRecord.from_json(p, arrays) for k, p in (d.get("pose") or {}).items()},
            claims={str(k): ClaimRecord.from_json(c, arrays) for k, c in (d.get("claims") or {}).items()},
        )


# ----------------------------------------------------------------------------------------------------------
# whole case <-> cache measurement

MEASUREMENT_KEY = "opis_case"


def case_to_measurement(inventory: Inventory, windows: list[Window]) -> dict[str, Any]:
    """One case as a cache measurement: ``{"opis_case": <JSON document>, "opis.arr.NNNNNN": ndarray, ...}``.

    Arrays are lifted out of the JSON document into top-level ``np.ndarray`` entries (the cache stores
    them in the npz); the document references them by key. No object arrays, no pickle.
    """
    arrays: dict[str, np.ndarray] = {}
    doc = {
        "schema_version": SCHEMA_VERSION,
        "inventory": inventory.to_json(arrays),
        "windows": [w.to_json(arrays) for w in windows],
    }
    # refuse non-JSON content early (the cache would fail later, further from the cause); NaN is allowed
    # as the cache allows it, the scorer refuses non-finite values where they matter
    json.dumps(doc, allow_nan=True)
    for k, a in arrays.items():
        if a.dtype == object:
            raise TypeError(f"OPIS measurement {k}: object array (not cacheable without pickle)")
    return {MEASUREMENT_KEY: doc, **arrays}


def measurement_to_case(m: Mapping[str, Any]) -> tuple[Inventory, list[Window]]:
    """Inverse of :func:`case_to_measurement`."""
    doc = m[MEASUREMENT_KEY]
    if isinstance(doc, (str, bytes)):
        doc = json.loads(doc)
    if int(doc.get("schema_version", 0)) != SCHEMA_VERSION:
        raise ValueError(f"OPIS measurement: schema_version {doc.get('schema_version')!r} != {SCHEMA_VERSION}")
    arrays = {k: v for k, v in m.items() if isinstance(v, np.ndarray)}
    inventory = Inventory.from_json(doc["inventory"], arrays)
    windows = [Window.from_json(w, arrays) for w in doc["windows"]]
    return inventory, windows
