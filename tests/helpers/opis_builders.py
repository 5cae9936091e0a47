"""Builders of OPIS records for the scoring tests: inventory objects, observations, projections, windows."""

from __future__ import annotations

import numpy as np

from worldrecall.plugins.opis.records import (
    Inventory,
    InventoryObject,
    ObjectProjection,
    Observation,
    Window,
    WindowGeometry,
)

FRAME = (100, 100)


def obj(oid: str, emb, *, track: str = "excluded", bbox=(10.0, 10.0, 30.0, 30.0), category: str = "cup",
        kin: str = "rigid", group: str | None = None, attrs=None) -> InventoryObject:
    static = track == "static_geometry"
    return InventoryObject(
        object_id=oid, category=category, bbox=bbox, embedding=None if emb is None else np.asarray(emb, float),
        attributes=dict(attrs or {}), kinematic_class=kin,
        motion_expectation="world_static" if static else "independent_motion",
        evaluation_track=track, geometry_eligible=static, mobility_source="mobility", ambiguity_group=group,
    )


def det(oid: str, emb, bbox=(10.0, 10.0, 30.0, 30.0), *, category: str = "cup", track_id=None, attrs=None) -> Observation:
    return Observation(observed_id=oid, bbox=bbox, category=category, confidence=0.9, attributes=dict(attrs or {}),
                       embedding=None if emb is None else np.asarray(emb, float), track_id=track_id)


def proj(oid: str, *, n: int = 10, x0: float = 20.0, spread: float = 20.0, inside: int | None = None,
         valid: int | None = None, occluded: int = 0, conf=None, baseline=False) -> ObjectProjection:
    """n query points on a diagonal-ish grid inside [x0, x0+spread]^2; the first ``n - inside`` pushed out of
    the frame; the last ``n - valid`` without depth; ``occluded`` valid points with a nearer current depth."""
    rng = np.linspace(0.0, 1.0, n)
    px = np.stack([x0 + spread * rng, x0 + spread * ((rng * 7) % 1.0)], axis=1)
    inside = n if inside is None else inside
    px[: n - inside, 0] = -50.0
    depth = np.full(n, 2.0)
    cur = np.full(n, 2.0)
    dvalid = np.ones(n, bool)
    valid = n if valid is None else valid
    dvalid[valid:] = False
    cur[valid:] = 0.0
    idx = [i for i in range(n) if dvalid[i]][:occluded]
    cur[idx] = 1.0  # 1.0 < 2.0 x 0.95 -> occluded
    return ObjectProjection(object_id=oid, projected_px=px, projected_depth=depth, current_depth=cur,
                            depth_valid=dvalid, depth_confidence=None if conf is None else np.asarray(conf, float),
                            insufficient_baseline=baseline)


def geometry(projections: dict, *, scored=True, camera_confidence=0.9, ref_px=None, cur_px=None, err=None) -> WindowGeometry:
    return WindowGeometry(
        scored=scored, camera_confidence=camera_confidence, projections=projections,
        ref_px=None if ref_px is None else np.asarray(ref_px, float),
        cur_px=None if cur_px is None else np.asarray(cur_px, float),
        reproj_err=None if err is None else np.asarray(err, float),
        inlier=None if err is None else np.asarray(err, float) <= 8.0,
    )


def win(wid: str, observations, geo=None, *, pose=None, claims=None, ordinal: int = 0) -> Window:
    return Window(window_id=wid, frame_index=24 + 8 * ordinal, timestamp=1.0 + ordinal / 3.0, frame_size=FRAME,
                  observations=list(observations), geometry=geo, pose=dict(pose or {}), claims=dict(claims or {}))


def inv(*objects) -> Inventory:
    return Inventory(scene_id="case", image_size=(100, 100), objects=list(objects), embedding_backend="colorhist")


E1, E2, E3 = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
