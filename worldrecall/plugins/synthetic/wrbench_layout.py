"""The suite in WRBench's layout: ``videos.json`` manifests, a Natural-25-style variants file and sidecars.

Paths (relative to the suite root; every video and pose file is a hard link to the MemoBench copy)::

    wrbench/release/variants.synthetic.jsonl            {"variant_id": <case>, "world_state_prompt": …}
    wrbench/videos/{model}/videos.json                  one record per case (below)
    wrbench/videos/{model}/{case}.mp4
    wrbench/videos/{model}/{case}.probes.json           the answers a perfect viewer gives (judge sidecar)
    wrbench/videos/{model}/{case}.target_c2w.npy        the requested trajectory (the oracle's camera)
    wrbench/videos/{model}/{case}_vipe/…                the generation's ViPE sidecar (estimated poses)

A record names ``video_id``, ``video_path``, ``camera_type`` (from the requested trajectory: a yaw of at least
10° -> ``yaw_LR``/``yaw_RL`` by the sign of its peak, else a sideways move of at least 0.1 -> ``pan_LR``/
``pan_RL``, else ``uncontrolled``: tilt and dolly programs are outside WRBench's camera grammar),
``variant_id`` (the prompt comes from the variants file), the look-away / return frames (MemoBench's h, r on
the generated axis), the pose sidecars and the re-observation ``evidence`` a perfect viewer reports.

Truth of the probe answers (0.95 for yes, 0.05 for no): D3/D4 ask about the visible phase, which every
counterfactual renders truly; the gate is applicable when the target's region leaves the view and returns —
also when the target is gone on return (a visible failure is judgeable), never for the frozen camera
(``no_oov``); D5's position holds when the returned target is within 0.1 of its true place; D6's state
holds when it is present with the true colour and size and, for a target whose change is a move, in place.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.plugins.synthetic.files import SuiteFiles
from worldrecall.plugins.synthetic.sidecars import SIDECAR_FILES

YES, NO = 0.95, 0.05
POSITION_TOL = 0.1
VARIANTS = "wrbench/release/variants.synthetic.jsonl"


def model_dir(model: str) -> str:
    return f"wrbench/videos/{model}"


def camera_type(c2w: np.ndarray) -> str:
    """WRBench's camera type of a requested c2w trajectory (first-frame relative yaw, then sideways move)."""
    p = np.asarray(c2w, dtype=np.float64)
    rel = np.einsum("ij,njk->nik", np.linalg.inv(p[0]), p)
    yaw = np.degrees(np.arctan2(rel[:, 0, 2], rel[:, 0, 0]))
    peak = float(yaw[int(np.argmax(np.abs(yaw)))])
    if abs(peak) >= 10.0:
        return "yaw_RL" if peak > 0 else "yaw_LR"
    side = p[:, 0, 3] - p[0, 0, 3]
    s = float(side[int(np.argmax(np.abs(side)))])
    if abs(s) >= 0.1:
        return "pan_RL" if s > 0 else "pan_LR"
    return "uncontrolled"


def truth(record: dict[str, Any], model: str) -> tuple[dict[str, Any], dict[str, float]]:
    """(evidence record, probe answers) a perfect viewer reports for ``model``'s video of this case."""
    cfs = record["counterfactuals"]
    f, oracle = cfs[model]["facts"], cfs["oracle"]["facts"]
    present = bool(f["target_present_at_return"])
    region_back = bool(f["target_leaves_and_returns"]) or (
        not present and bool(f["follows_program"]) and bool(oracle["target_leaves_and_returns"]))
    if region_back:
        evidence = {"evidence_shared_oov_applicable": True, "evidence_shared_oov_na_reason": None}
    else:
        evidence = {"evidence_shared_oov_applicable": False,
                    "evidence_shared_oov_na_reason": "no_oov" if not f["camera_moves"] else "no_return"}
    tgt = record["target"]
    moves = math.dist(tgt["position_before"], tgt["position_after"]) > POSITION_TOL
    placed = present and f.get("dist_to_true_position", math.inf) <= POSITION_TOL
    same_look = present and f.get("colour_at_return") == oracle.get("colour_at_return") and \
        abs(float(f.get("scale_at_return", 0.0)) - float(oracle.get("scale_at_return", 0.0))) <= 0.05 and \
        not f.get("appearance_drifts", False)
    state_ok = same_look and (placed or not moves)

    def yn(b: bool) -> float:
        return YES if b else NO

    answers = {
        "D3_POSITION_RELATION": YES, "D3_STATIC_ANCHORS": YES, "D3_NEG_WRONG_SPATIAL": NO,
        "D4_ACTION_STATE": YES, "D4_TEMPORAL_PROGRESS": YES, "D4_NEG_ABSENT_FREEZE": NO,
        "D5_GATE_HIDDEN": yn(region_back or bool(f["camera_moves"])), "D5_GATE_RETURN": yn(region_back),
        "D5_GATE_UNIDENTIFIABLE": NO, "D5_RETURN_POSITION": yn(placed), "D5_NEG_VANISH_RESET": yn(not placed),
        "D6_GATE_HIDDEN": yn(region_back or bool(f["camera_moves"])), "D6_GATE_RETURN": yn(region_back),
        "D6_GATE_UNIDENTIFIABLE": NO, "D6_HIDDEN_PROGRESS": yn(state_ok), "D6_NEG_FREEZE_RESET": yn(not state_ok),
        "OOV_EVER_UNJUDGEABLE": yn(region_back or bool(f["camera_moves"])), "OOV_RETURN_JUDGEABLE": yn(region_back),
    }
    return evidence, answers


def write_layout(root: Path, records: list[dict[str, Any]]) -> list[str]:
    """Every model's manifest, links and sidecars, and the variants file; returns the suite-wide files."""
    files = SuiteFiles(Path(root))
    variants = [{"variant_id": r["case_id"], "family_id": r["scene"].lower(), "world_state_prompt": r["prompt"]}
                for r in records]
    files.text(VARIANTS, "".join(json.dumps(v, sort_keys=True) + "\n" for v in variants))
    manifests: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        cid, gens = r["case_id"], r["paths"]["generations"]
        target_src = f"{gens['oracle']['sidecars']}/poses_c2w.npy"
        cam = camera_type(np.load(files.path(target_src), allow_pickle=False))
        for model, paths in gens.items():
            d = model_dir(model)
            files.link(paths["video"], f"{d}/{cid}.mp4")
            files.link(target_src, f"{d}/{cid}.target_c2w.npy")
            for name in SIDECAR_FILES:
                files.link(f"{paths['sidecars']}/{name}", f"{d}/{cid}_vipe/{name}")
            evidence, answers = truth(r, model)
            files.json(f"{d}/{cid}.probes.json", answers)
            ann = r["annotations"]
            manifests.setdefault(model, []).append({
                "video_id": cid, "video_path": f"{cid}.mp4", "model": model, "camera_type": cam,
                "variant_id": cid, "target_pose_path": f"{cid}.target_c2w.npy",
                "pose_path": f"{cid}_vipe/poses_c2w.npy", "vipe_sidecar": f"{cid}_vipe",
                "look_away_frame": int(ann["gen_h"]), "return_frame": int(ann["gen_r"]), "evidence": evidence})
    out = [VARIANTS]
    for model, recs in sorted(manifests.items()):
        out.append(files.json(f"{model_dir(model)}/videos.json", recs))
    return out
