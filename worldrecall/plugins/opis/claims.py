"""VLM localized structural claims for the dynamic Structure track (spec A.11.2, measure side).

Two judge steps through :mod:`worldrecall.core.judges` (any registered judge, e.g. ``gemini``):

1. **Reference** (once per object, input image only): at most 12 claims about the target box, each
   ``{fact_id, family, text, reference_region, confidence}``; families allowed by the kinematic class
   (rigid/articulated: parts, connectivity, local_shape; deformable: parts, connectivity,
   material_continuity; unknown: parts, connectivity); the region must overlap the target box. The judge's
   answer cache is keyed by the media and prompt, so every video of the case is judged against the same facts.
2. **Check** (per matched, unambiguous window): input image and current frame with both boxes; per claim
   ``{status, confidence, visible, evidence, current_region}``. A known status must be visible and localised
   (region overlapping the observed box), else it becomes ``unknown``; a judge failure leaves every claim
   ``unknown`` (an outage is never a contradiction, O-A8).

The score side (``structure.claims_value``) applies the 0.7 confidence gates and the per-family means.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from worldrecall.core.judges import JudgeError, MissingAnswers

MAX_CLAIMS = 12
FAMILIES = {
    "rigid": ("parts", "connectivity", "local_shape"),
    "articulated": ("parts", "connectivity", "local_shape"),
    "deformable": ("parts", "connectivity", "material_continuity"),
    "unknown": ("parts", "connectivity"),
}
STATUSES = ("supported", "contradicted", "unknown")

REFERENCE_SYSTEM = (
    "You list checkable structural facts about one object in an image, for judging later whether a generated "
    "video preserved that object's structure. Only facts about parts, how parts connect, local shape or "
    "material continuity, as allowed per object. Never state colour or appearance, pose, canonical anatomy, or "
    "anything hidden or inferred. Boxes are normalised [x0, y0, x1, y1] in [0, 1] of the full image."
)
REFERENCE_PROMPT = (
    "For each object below, give at most 12 claims about the object inside its box. Each claim: fact_id (short "
    "unique text), family (one of the object's allowed families), text (one sentence), reference_region (a "
    "normalised box overlapping the object's box where the fact can be seen) and confidence (0 to 1).\n"
    "Objects:\n{questions_json}\n\nReply with JSON only: a list with one object per input ID holding ID and Claims."
)
CHECK_SYSTEM = (
    "You compare an object in a generated video frame (second image) with the same object in the input image "
    "(first image). For each structural claim about the input object, say whether the current object supports "
    "or contradicts it. Missing detection, occlusion, anything not observable or uncertain -> unknown. A clearly "
    "absent part, broken connection, discontinuity or extra structural part on a clearly visible object -> "
    "contradicted. Boxes are normalised [x0, y0, x1, y1] in [0, 1]."
)
CHECK_PROMPT = (
    "Input-image box of the object: {ref_box}. Current-frame box: {cur_box}.\nClaims:\n{{questions_json}}\n\n"
    "Reply with JSON only: one object per claim ID with ID, status (supported, contradicted or unknown), "
    "confidence (0 to 1), visible (true/false), evidence (one sentence) and current_region (normalised box)."
)

_REGION = {"type": "ARRAY", "items": {"type": "NUMBER"}}
REFERENCE_SCHEMA = {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {
    "ID": {"type": "INTEGER"},
    "Claims": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {
        "fact_id": {"type": "STRING"}, "family": {"type": "STRING"}, "text": {"type": "STRING"},
        "reference_region": _REGION, "confidence": {"type": "NUMBER"}},
        "required": ["fact_id", "family", "confidence"]}}},
    "required": ["ID", "Claims"]}}
CHECK_SCHEMA = {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {
    "ID": {"type": "INTEGER"}, "status": {"type": "STRING", "enum": list(STATUSES)},
    "confidence": {"type": "NUMBER"}, "visible": {"type": "BOOLEAN"}, "evidence": {"type": "STRING"},
    "current_region": _REGION},
    "required": ["ID", "status"]}}


def normalised_box(bbox: Sequence[float], size: tuple[int, int]) -> list[float]:
    """A pixel box as [x0, y0, x1, y1] fractions of the image (W, H), rounded to 4 places."""
    W, H = size
    return [round(float(bbox[0]) / W, 4), round(float(bbox[1]) / H, 4), round(float(bbox[2]) / W, 4),
            round(float(bbox[3]) / H, 4)]


def overlaps(a: Any, b: Sequence[float]) -> bool:
    """True when ``a`` is a finite 4-number box with positive-area intersection with ``b``."""
    try:
        x0, y0, x1, y1 = (float(v) for v in a)
    except (TypeError, ValueError):
        return False
    if not all(np.isfinite([x0, y0, x1, y1])):
        return False
    return min(x1, b[2]) > max(x0, b[0]) and min(y1, b[3]) > max(y0, b[1])


def _confidence(v: Any) -> float | None:
    try:
        c = float(v)
    except (TypeError, ValueError):
        return None
    return c if np.isfinite(c) and 0.0 <= c <= 1.0 else None


def _answers(judge: Any, media: Any, system: str, questions: list[dict[str, Any]], schema: Mapping[str, Any],
             prompt: str) -> dict[int, Mapping[str, Any]]:
    """ID -> answer; partial answers are kept, a failed call gives none."""
    try:
        resp = judge.ask(media, system, questions, schema, prompt=prompt)
    except MissingAnswers as e:
        resp = e.response
    answers = {}
    for a in resp.answers or []:
        if isinstance(a, Mapping):
            try:
                answers[int(a.get("ID"))] = a
            except (TypeError, ValueError):
                continue
    return answers


def reference_claims(judge: Any, image: np.ndarray, objects: Sequence[Any]) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """Step 1 for ``objects`` (InventoryObject): object_id -> validated claims, and a status line."""
    size = (image.shape[1], image.shape[0])
    questions, index = [], {}
    for k, o in enumerate(objects, start=1):
        fam = FAMILIES.get(o.kinematic_class, FAMILIES["unknown"])
        questions.append({"ID": k, "object": o.category, "box": normalised_box(o.bbox, size),
                          "kinematic_class": o.kinematic_class, "allowed_families": list(fam)})
        index[k] = o
    if not questions:
        return {}, "no dynamic objects"
    try:
        answers = _answers(judge, np.asarray(image)[None], REFERENCE_SYSTEM, questions, REFERENCE_SCHEMA,
                           REFERENCE_PROMPT)
    except JudgeError as e:
        return {}, f"reference claims failed: {' '.join(str(e).split())[:200]}"
    out: dict[str, list[dict[str, Any]]] = {}
    for k, o in index.items():
        fam = FAMILIES.get(o.kinematic_class, FAMILIES["unknown"])
        box = normalised_box(o.bbox, size)
        claims, seen = [], set()
        for c in (answers.get(k, {}).get("Claims") or [])[:MAX_CLAIMS]:
            if not isinstance(c, Mapping):
                continue
            fid, family, conf = str(c.get("fact_id", "")).strip(), str(c.get("family", "")), _confidence(c.get("confidence"))
            if not fid or fid in seen or family not in fam or conf is None:
                continue
            if c.get("reference_region") is not None and not overlaps(c["reference_region"], box):
                continue  # a fact located off the target is not about it
            seen.add(fid)
            claims.append({"fact_id": fid, "family": family, "confidence": conf, "text": str(c.get("text", ""))})
        out[o.object_id] = claims
    return out, "ok"


def check_claims(judge: Any, image: np.ndarray, frame: np.ndarray, ref_bbox: Sequence[float],
                 cur_bbox: Sequence[float], claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Step 2 for one object in one window: validated judgments (``[]`` when the judge fails: all unknown)."""
    import cv2

    if not claims:
        return []
    fh, fw = frame.shape[:2]
    ref_box = normalised_box(ref_bbox, (image.shape[1], image.shape[0]))
    cur_box = normalised_box(cur_bbox, (fw, fh))
    # both images in one frame stack at the frame's size (boxes are normalised, so resizing keeps them valid)
    ref = cv2.resize(np.ascontiguousarray(image), (fw, fh), interpolation=cv2.INTER_AREA)
    questions = [{"ID": k, "fact_id": c["fact_id"], "family": c["family"], "claim": c.get("text", "")}
                 for k, c in enumerate(claims, start=1)]
    prompt = CHECK_PROMPT.format(ref_box=json.dumps(ref_box), cur_box=json.dumps(cur_box))
    try:
        answers = _answers(judge, np.stack([ref, np.asarray(frame)]), CHECK_SYSTEM, questions, CHECK_SCHEMA, prompt)
    except JudgeError:
        return []
    out = []
    for k, c in enumerate(claims, start=1):
        a = answers.get(k)
        if a is None:
            continue  # missing judgment = unknown
        status = str(a.get("status", "unknown"))
        conf = _confidence(a.get("confidence"))
        visible = a.get("visible") is True
        if status not in STATUSES or conf is None:
            status, conf = "unknown", 0.0 if conf is None else conf
        if status != "unknown" and not (visible and overlaps(a.get("current_region"), cur_box)):
            status = "unknown"  # a known status must be visible and localised on the observed target
        out.append({"fact_id": c["fact_id"], "status": status, "confidence": conf, "visible": visible})
    return out
