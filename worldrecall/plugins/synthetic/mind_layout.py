"""The suite in MIND's layout: MIND-Data GT clips (video, ``action.json``, ``images.txt``) and every counterfactual's
outputs as a model folder, including mirror-test videos.

Paths (relative to the suite root)::

    mind/MIND-Data/{1st_data,3rd_data}/test/{mem_test,action_space_test}/<case>/video.mp4
    mind/MIND-Data/…/<case>/action.json            mark_time, total_time, caption, per-frame ws/ad/ud/lr (ternary)
    mind/MIND-Data/…/<case>/images.txt             the GT camera of frames mark_time … (COLMAP text)
    mind/MIND-Data/…/<case>/video_vipe_ann/        the GT camera of every GT frame (a pose-only ViPE sidecar)
    mind/generations/{model}/{persp}/{test_type}/<case>/video.mp4                  (hard link, no new bytes)
    mind/generations/{model}/{persp}/{test_type}/<case>/annotations_vipe/video_vipe_ann/…   (hard links)
    mind/generations/{model}/{persp}/mirror_test/<case>/path-1.mp4                 (hard link; pan/tilt cases)

How a synthetic case becomes a MIND clip. MIND gives a model the GT frames ``0 … mark_time − 1`` as its memory
context and the actions from ``mark_time`` on, and compares generated frame ``i`` with GT frame
``mark_time + i``. Here the context is ``CONTEXT_FRAMES`` GT frames of the case, evenly spaced over its look /
away / return (the room the model has seen), and the GT continuation is the oracle's own 72 generated frames
re-encoded once — so every counterfactual's existing video *is* its prediction, frame for frame, and the oracle
differs from the GT only by one re-encoding (its LCM PSNR is finite, about 44 dB). ``mark_time`` is
``CONTEXT_FRAMES`` and ``total_time`` ``CONTEXT_FRAMES + gen_frames``.

Cases are dealt round-robin over perspective × test type (case ``i``: ``1st_data`` for even ``i``, ``3rd_data`` for
odd; ``mem_test`` for ``i // 2`` even, else ``action_space_test``). The renderer has one camera, so third person is
a label on the same first-person renders (the perspective only stratifies the tables); the two test types are the
same kind of clip too (MIND's ``action_space_test`` varies the action space's speeds, which the suite's programs
do per program, not per test type).

Action labels come from the GT camera itself: between GT frames ``j`` and ``j + 1`` a move along the camera's
forward of more than ``MOVE_EPS`` gives ``ws`` 1 (2 backward), a change of heading right / left of more than
``TURN_EPS_DEG`` ``lr`` 2 / 1, of elevation up / down ``ud`` 1 / 2 (the ternary codes of the WorldFoundry-
vendored release); the suite's programs never strafe (``ad`` 0). The last frame repeats the one before it.

Mirror test: a pan or tilt program's path is a palindrome (it turns away and back through the same poses), so a
generated video of it is already a mirror-test video — its second half, time-reversed, should show what the
first half showed. Each model's video of such a case is linked as ``mirror_test/<case>/path-1.mp4``. The suite's
world is not static (the target changes while unseen), so the oracle's halves differ too where the target is in
view; the mirror test compares a model with itself, not with a GT.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.formats import colmap
from worldrecall.plugins.synthetic.files import SuiteFiles
from worldrecall.plugins.synthetic.sidecars import SIDECAR_FILES

DATA = "mind/MIND-Data"
GENERATIONS = "mind/generations"
PERSPECTIVES = ("1st_data", "3rd_data")
TEST_TYPES = ("mem_test", "action_space_test")
MIRROR = "mirror_test"
MIRROR_PROGRAMS = ("pan", "tilt")  # palindromic camera paths: out and back through the same poses
CONTEXT_FRAMES = 8
TURN_EPS_DEG = 0.05
MOVE_EPS = 1e-4
GT_FPS = 16.0


def placement(index: int) -> tuple[str, str]:
    """(perspective, test type) of case ``index``: round-robin over the four combinations."""
    return PERSPECTIVES[index % 2], TEST_TYPES[(index // 2) % 2]


def gt_dir(persp: str, test_type: str, case: str) -> str:
    return f"{DATA}/{persp}/test/{test_type}/{case}"


def model_dir(model: str) -> str:
    return f"{GENERATIONS}/{model}"


def step_codes(c2w: np.ndarray) -> list[dict[str, int]]:
    """Ternary ws/ad/ud/lr codes of each frame's move to the next (the last frame repeats the one before).

    Read in the suite's world (Y up; a c2w's third column is the camera's forward): the heading
    ``atan2(−f_x, f_z)`` (right positive, as ``programs.heading``) and elevation ``asin(f_y)`` of the forward
    vector, and the move along the forward vector — scalar ``math`` in a fixed order, so the codes never depend
    on which SIMD kernels numpy picked."""
    p = np.asarray(c2w, dtype=np.float64).tolist()
    fwd = [(row[0][2], row[1][2], row[2][2]) for row in p]
    pos = [(row[0][3], row[1][3], row[2][3]) for row in p]
    yaw = [math.degrees(math.atan2(-f[0], f[2])) for f in fwd]
    pitch = [math.degrees(math.asin(min(1.0, max(-1.0, f[1])))) for f in fwd]
    out: list[dict[str, int]] = []
    for j in range(len(p)):
        a, b = (j, j + 1) if j + 1 < len(p) else (max(j - 1, 0), j)
        dyaw = (yaw[b] - yaw[a] + 180.0) % 360.0 - 180.0
        dpitch = pitch[b] - pitch[a]
        move = sum((pos[b][i] - pos[a][i]) * fwd[a][i] for i in range(3))
        out.append({
            "ws": 1 if move > MOVE_EPS else 2 if move < -MOVE_EPS else 0,
            "ad": 0,
            "ud": 1 if dpitch > TURN_EPS_DEG else 2 if dpitch < -TURN_EPS_DEG else 0,
            "lr": 2 if dyaw > TURN_EPS_DEG else 1 if dyaw < -TURN_EPS_DEG else 0,
        })
    return out


def _decode(path: Path) -> np.ndarray:
    from worldrecall.core.video import Video

    return Video(path).frames()


def _jpeg(path: Path) -> np.ndarray:
    import cv2

    return cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def write_gt(files: SuiteFiles, record: dict[str, Any], persp: str, test_type: str) -> dict[str, Any]:
    """One MIND-Data clip: context + the oracle's frames re-encoded, action.json, images.txt, the GT sidecar."""
    from worldrecall.formats.mp4 import write_video
    from worldrecall.plugins.synthetic import memobench_layout as mb

    cid, paths = record["case_id"], record["paths"]
    oracle = paths["generations"]["oracle"]
    gt_poses = np.load(files.path(paths["gt_poses"]), allow_pickle=False)
    G = len(gt_poses)
    ctx_idx = np.round(np.linspace(0, G - 1, CONTEXT_FRAMES)).astype(int)
    context = [_jpeg(files.path(f"{paths['gt_frames']}/{mb.gt_frame_name(record['clip'], int(k))}")) for k in ctx_idx]
    pred = _decode(files.path(oracle["video"]))
    oracle_c2w = np.load(files.path(f"{oracle['sidecars']}/poses_c2w.npy"), allow_pickle=False).astype(np.float64)
    c2w = np.concatenate([gt_poses[ctx_idx].astype(np.float32).astype(np.float64), oracle_c2w])
    d = gt_dir(persp, test_type, cid)
    video = files.path(f"{d}/video.mp4")
    write_video(video, [*context, *pred], GT_FPS, preset="ultrafast", threads=1)
    files.bytes_written += video.stat().st_size
    total = len(c2w)
    codes = step_codes(c2w)
    doc = {"mark_time": CONTEXT_FRAMES, "total_time": total, "caption": record["prompt"],
           "data": [{"time": j, **codes[j]} for j in range(total)]}
    out = [files.json(f"{d}/action.json", doc),
           files.text(f"{d}/images.txt", colmap.images_txt_text(oracle_c2w))]
    side = f"{d}/video_vipe_ann"
    k0 = np.load(files.path(f"{oracle['sidecars']}/intrinsics.npy"), allow_pickle=False)[0]
    out += [files.npy(f"{side}/poses_c2w.npy", c2w.astype(np.float32)),
            files.npy(f"{side}/intrinsics.npy", np.tile(k0, (total, 1, 1))),
            files.link(f"{oracle['sidecars']}/camera_model.json", f"{side}/camera_model.json")]
    return {"gt": d, "mark_time": CONTEXT_FRAMES, "total_time": total, "files": out}


def write_layout(root: Path, records: list[dict[str, Any]]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Every GT clip and every model's folder; returns (the suite-wide files, per case its MIND facts)."""
    files = SuiteFiles(Path(root))
    facts: dict[str, dict[str, Any]] = {}
    for r in records:
        cid = r["case_id"]
        persp, test_type = placement(int(r["index"]))
        gt = write_gt(files, r, persp, test_type)
        # an odd frame count is an error in MIND's mirror test: only even-length palindromes are linked
        mirror = r["program"] in MIRROR_PROGRAMS and (gt["total_time"] - gt["mark_time"]) % 2 == 0
        for model, paths in r["paths"]["generations"].items():
            d = f"{model_dir(model)}/{persp}/{test_type}/{cid}"
            files.link(paths["video"], f"{d}/video.mp4")
            for name in SIDECAR_FILES:
                files.link(f"{paths['sidecars']}/{name}", f"{d}/annotations_vipe/video_vipe_ann/{name}")
            if mirror:
                files.link(paths["video"], f"{model_dir(model)}/{persp}/{MIRROR}/{cid}/path-1.mp4")
        facts[cid] = {"perspective": persp, "test_type": test_type, "gt_clip": gt["gt"],
                      "mark_time": gt["mark_time"], "total_time": gt["total_time"], "mirror": bool(mirror),
                      # the MIND loader's case ids of this case (the validity matrix maps undefined pairs by them)
                      "case_ids": [f"{persp}/{test_type}/{cid}"] + ([f"{persp}/{MIRROR}/{cid}/path-1"] if mirror
                                                                     else [])}
    index = f"{DATA}/synthetic_clips.json"
    files.text(index, json.dumps(facts, indent=1, sort_keys=True) + "\n")
    return [index], facts
