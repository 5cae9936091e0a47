"""One case of the synthetic suite, end to end: plan -> render GT -> check -> render counterfactuals -> write.

:func:`build_case` is what the builder's worker processes run; it returns the case's manifest record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.formats.mp4 import write_video
from worldrecall.plugins.synthetic import memobench_layout as mb
from worldrecall.plugins.synthetic import opis_layout, scene_memory_layout, vqa_bank
from worldrecall.plugins.synthetic.annotate import ExitReenter, Visibility, exit_reenter, visibility
from worldrecall.plugins.synthetic.counterfactuals import COUNTERFACTUALS, MODELS, observed_facts
from worldrecall.plugins.synthetic.files import SuiteFiles
from worldrecall.plugins.synthetic.render import TARGET_ID, Renderer, detail_texture
from worldrecall.plugins.synthetic.scene import RoomLayout
from worldrecall.plugins.synthetic.sidecars import write_sidecars
from worldrecall.plugins.synthetic.story import CaseStory, PlanRejected, plan_case
from worldrecall.plugins.synthetic.video_io import encode_jpeg

GEN_FPS = 16.0
MAX_ATTEMPTS = 60
# which failure video each bank's "Evaluation on failure" column answers (rotates over cases)
FAILURE_ROTATION = (
    "forgetful",
    "state_reset",
    "teleport",
    "appearance_drift",
    "hallucinated_background",
    "wrong_trajectory",
    "frozen_camera",
)


def depth_size(width: int, height: int) -> tuple[int, int]:
    """Sidecar depth resolution: the video size divided by the largest odd factor <= 5 that divides both
    sides (64x48 for 320x240, 32x24 for 96x72), else about a fifth of it."""
    for k in (5, 3):
        if width % k == 0 and height % k == 0 and width // k >= 16:
            return width // k, height // k
    w = max(16, round(width / 5))
    return w, max(12, round(height * w / width))


@dataclass
class GTRender:
    frames: np.ndarray  # [G, H, W, 3] uint8
    ids: np.ndarray  # [G, H, W] uint8
    poses: np.ndarray  # [G, 4, 4] float64
    depth: np.ndarray  # [G, h, w] float32 z-depth at the sidecar resolution


def make_renderer(story: CaseStory, params: dict, texture: np.ndarray, nthreads: int = 0) -> Renderer:
    """A renderer for the story's target with its two static scene variants (base, hallucinated)."""
    r = Renderer(
        params["width"],
        params["height"],
        depth_size(params["width"], params["height"]),
        story.target.spec,
        texture,
        nthreads=nthreads,
    )
    r.add_layout("base", RoomLayout(story.scene, story.props), story.offsets)
    r.add_layout("hallucinated", RoomLayout(story.scene, story.props_moved), story.offsets)
    return r


def render_gt(story: CaseStory, renderer: Renderer) -> GTRender:
    """The GT clip: every GT frame at its integer time."""
    G = story.gt_frames
    poses = story.program.poses(np.arange(G, dtype=np.float64))
    frames, ids, depth = [], [], []
    for g in range(G):
        look = story.target.look(float(g))
        f, i = renderer.frame("base", poses[g], look)
        frames.append(f)
        ids.append(i)
        depth.append(renderer.depth("base", poses[g], look))
    return GTRender(np.stack(frames), np.stack(ids), poses, np.stack(depth))


def check_gt(story: CaseStory, renderer: Renderer, gt: GTRender) -> tuple[Visibility, ExitReenter]:
    """Annotations from the GT masks; PlanRejected when they do not give a clean revisit."""
    G = story.gt_frames
    vis = visibility(gt.ids)
    ann = exit_reenter(vis)
    tl = story.target
    if not (vis.full[0] and vis.full[-1]):
        raise PlanRejected("target not fully in view in the first and last GT frames")
    for g in (0, G - 1):
        if vis.pixels[g] != renderer.visible_target_pixels(tl.look(float(g)), gt.poses[g]):
            raise PlanRejected("target occluded in the first or last GT frame")
    if not ann.complete:
        raise PlanRejected("target does not leave and fully re-enter the view")
    if ann.exits > math.floor(tl.t_a) or math.ceil(tl.t_b) >= ann.back:
        raise PlanRejected("target visible while it changes")
    if ann.re_enter > G - 3:
        raise PlanRejected("re-entry too late")
    return vis, ann


def render_models(story: CaseStory, renderer: Renderer, models: tuple[str, ...] = MODELS) -> dict[str, dict]:
    """Frames, masks, depth and poses of every counterfactual (pose-major so backgrounds are shared)."""
    times = story.gen_times()
    cams = {m: COUNTERFACTUALS[m].camera(story) for m in models}
    # lists of (often shared, memoised) per-frame arrays: frames only stream into the encoder
    out: dict[str, dict[str, list]] = {m: {"frames": [], "ids": [], "depth": [], "poses": []} for m in models}
    for t in times:
        for m in models:
            cf = COUNTERFACTUALS[m]
            pose = cams[m].pose(t)
            key, look = cf.layout(story, t), cf.look(story, t)
            o = out[m]
            frame, ids = renderer.frame(key, pose, look)
            o["frames"].append(frame)
            o["ids"].append(ids)
            o["depth"].append(renderer.depth(key, pose, look))
            o["poses"].append(pose)
    return {
        m: {
            "frames": o["frames"],
            "ids": np.stack(o["ids"]),
            "depth": np.stack(o["depth"]),
            "poses": np.stack(o["poses"]),
        }
        for m, o in out.items()
    }


def plan_and_render(index: int, params: dict, nthreads: int = 0):
    """The first attempt whose GT clip has a clean exit and re-entry: (story, renderer, gt, vis, ann)."""
    W, H, G, N, seed = (params[k] for k in ("width", "height", "gt_frames", "gen_frames", "seed"))
    texture = detail_texture(seed)
    reasons: dict[str, int] = {}
    for attempt in range(MAX_ATTEMPTS):
        try:
            story = plan_case(index, seed, attempt, width=W, height=H, gt_frames=G, gen_frames=N)
            renderer = make_renderer(story, params, texture, nthreads)
            gt = render_gt(story, renderer)
            vis, ann = check_gt(story, renderer, gt)
        except PlanRejected as e:
            reasons[str(e)] = reasons.get(str(e), 0) + 1
            continue
        story.t_return = float(ann.re_enter)
        return story, renderer, gt, vis, ann
    raise RuntimeError(f"synthetic case {index}: no usable draw in {MAX_ATTEMPTS} attempts ({reasons})")


def _write_gt(files: SuiteFiles, story: CaseStory, renderer: Renderer, gt: GTRender) -> dict[str, Any]:
    """The GT clip in the MemoBench release layout: frames, poses, intrinsics, plus GT masks and the GT
    z-depth (``Depth{n}/``, sidecar resolution, with the 3x3 K of that resolution)."""
    scene, clip, G = story.scene, story.clip, story.gt_frames
    gdir = mb.gt_clip_dir(scene, clip)
    jpgs = [
        files.write(f"{gdir}/RGB{clip}/{mb.gt_frame_name(clip, k)}", encode_jpeg(f))
        for k, f in enumerate(gt.frames)
    ]
    K = renderer.K["full"]
    intr_rows = np.tile([K[0, 0], K[1, 1], K[0, 2], K[1, 2]], (G, 1)).astype(np.float64)
    return {
        "memobench_gt": gdir,
        "gt_frames": f"{gdir}/RGB{clip}",
        "gt_poses": files.npy(f"{gdir}/{clip}/poses.npy", gt.poses),
        "gt_intrinsics": files.npy(f"{gdir}/{clip}/intrinsics.npy", intr_rows),
        "gt_masks": files.npz(f"{gdir}/{clip}/instance_masks.npz", ids=gt.ids),
        "gt_depth": files.npy(f"{gdir}/Depth{clip}/depth_metric.npy", gt.depth.astype(np.float32)),
        "gt_depth_intrinsics": files.npy(f"{gdir}/Depth{clip}/intrinsics.npy", renderer.K["depth"]),
        "gt_instances": files.json(
            f"{gdir}/{clip}/instances.json",
            {"instances": {str(k): v for k, v in sorted(story.instances().items())}, "target": TARGET_ID},
        ),
        "first_frame": jpgs[0],
        # the metadata CSV's exr_path form: relative to the MemoBench folder, starting with data/
        "first_frame_release": "data/" + jpgs[0].split("memobench/data/", 1)[1],
    }


def _write_generations(
    files: SuiteFiles, story: CaseStory, renderer: Renderer, r_gen: int
) -> tuple[dict[str, dict], dict[str, dict]]:
    """Every counterfactual's mp4 + sidecars, linked into the Scene Memory and OPIS layouts; returns
    (paths per model, observed facts per model)."""
    scene, clip, cid, N = story.scene, story.clip, story.case_id, story.gen_frames
    W, H = renderer.size["full"]
    renders = render_models(story, renderer)
    facts, paths = {}, {}
    for m in MODELS:
        o = renders.pop(m)
        video = files.path(f"{mb.output_clip_dir(m, scene, clip)}/video.mp4")
        video_rel = video.relative_to(files.root).as_posix()
        # one encoder thread: byte-identical output from run to run (the suite is content-addressed)
        write_video(video, o["frames"], GEN_FPS, preset="ultrafast", threads=1)
        side_rel = mb.sidecar_dir(m, scene, clip)
        write_sidecars(
            files,
            side_rel,
            c2w=o["poses"],
            K_depth=renderer.K["depth"],
            depth=o["depth"],
            ids=o["ids"],
            instances=story.instances(),
            target_id=TARGET_ID,
            fps=GEN_FPS,
            video_size=(W, H),
            provenance={
                "counterfactual": m,
                "case_id": cid,
                "gt_time_per_frame": (story.gt_frames - 1) / (N - 1),
            },
        )
        sm = scene_memory_layout.link_generation(files, m, cid, video_rel, side_rel, story.program.tokens, N)
        vis = visibility(o["ids"])
        facts[m] = observed_facts(story, COUNTERFACTUALS[m], o["poses"], vis.present, vis.full, r_gen)
        paths[m] = {
            "video": video_rel,
            "sidecars": side_rel,
            "scene_memory_video": sm["video"],
            "scene_memory_sidecars": sm["sidecars"],
            "scene_memory_actions": sm["actions"],
            "opis_video": opis_layout.link_generation(files, m, cid, video_rel, side_rel),
        }
    return paths, facts


def _write_opis(
    files: SuiteFiles, story: CaseStory, renderer: Renderer, gt: GTRender, first_jpg: str
) -> dict:
    """The OPIS case folder; the inventory is read off the GT first frame as the evaluator will decode it."""
    import cv2

    W, H = renderer.size["full"]
    raw = cv2.cvtColor(cv2.imread(str(files.path(first_jpg)), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    N = story.gen_frames
    conditions = {
        "camera_task": story.program.name,
        "camera_path": story.program.tokens,
        "frames_per_action": max(1, round(N / len(story.program.tokens))),
        "num_frames": N,
        "fps": GEN_FPS,
        "image_size": [W, H],
        "intrinsics": np.round(renderer.K["full"], 6).tolist(),
        "camera_poses_c2w": np.round(story.program.poses(story.gen_times()), 6).tolist(),
    }
    return opis_layout.write_case(
        files,
        case=story.case_id,
        subcategory=story.scene.lower(),
        raw_jpg_rel=first_jpg,
        image=raw,
        ids=gt.ids[0],
        instances=story.instances(),
        target_changes=True,
        texture={TARGET_ID: story.target.spec.pattern},
        prompt=story.prompt(),
        conditions=conditions,
        depth=gt.depth[0],
        K_depth=renderer.K["depth"],
        c2w=gt.poses[0],
    )


def _visible(ids: np.ndarray, candidates) -> list[int]:
    """Instance ids among ``candidates`` with enough pixels in ``ids``, largest first."""
    counts = {int(i): int((ids == i).sum()) for i in candidates}
    return [i for i in sorted(counts, key=lambda k: -counts[k]) if counts[i] >= opis_layout.MIN_PIXELS]


def build_case(root: str, index: int, params: dict, nthreads: int = 0) -> dict[str, Any]:
    """Plan, render and write case ``index`` below ``root``; returns its manifest record."""
    story, renderer, gt, gt_vis, ann = plan_and_render(index, params, nthreads)
    files = SuiteFiles(Path(root))
    G, N, cid = story.gt_frames, story.gen_frames, story.case_id
    instances, tl = story.instances(), story.target
    gt_paths = _write_gt(files, story, renderer, gt)
    h_gen, r_gen = mb.phase_mapping(ann.exits, ann.re_enter, G, N)
    gen_paths, facts = _write_generations(files, story, renderer, r_gen)
    opis = _write_opis(files, story, renderer, gt, gt_paths["first_frame"])

    # VQA bank and the perfect answers on every counterfactual
    opening = _visible(gt.ids[0], [i for i in instances if i != TARGET_ID])
    moved_visible = _visible(gt.ids[-1], story.moved_ids)
    questions = vqa_bank.build_questions(story, [instances[i] for i in (moved_visible or opening)])
    failure_model = FAILURE_ROTATION[index % len(FAILURE_ROTATION)]
    row = vqa_bank.bank_row(story, questions, facts, failure_model)
    bank_rel = files.text(
        vqa_bank.bank_path(story.scene, story.clip), vqa_bank.csv_text(vqa_bank.BANK_COLUMNS, [row])
    )
    final = [q for q in questions if q.passes(facts["oracle"])]
    for m in MODELS:
        gen_paths[m]["vqa_truth"] = files.json(vqa_bank.truth_path(m, cid), vqa_bank.answers(final, facts[m]))

    defined = {m: COUNTERFACTUALS[m].defined(story) for m in MODELS}
    # a hallucinated background only shows when a moved prop is on screen after the return
    defined["hallucinated_background"] = bool(moved_visible)
    return {
        "case_id": cid,
        "scene": story.scene,
        "clip": story.clip,
        "index": index,
        "attempt": story.attempt,
        "program": story.program.name,
        "actions": story.program.tokens,
        "wrong_trajectory_factor": story.wrong_factor,
        "prompt": story.prompt(),
        "target": {
            "instance_id": TARGET_ID,
            "phrase": tl.spec.phrase,
            "noun": tl.spec.noun,
            "description": story.description(),
            "shape": tl.spec.shape,
            "pattern": tl.spec.pattern,
            "colour_before": tl.colour0,
            "colour_after": tl.colour1,
            "scale_before": tl.scale0,
            "scale_after": tl.scale1,
            "position_before": list(tl.p0),
            "position_after": list(tl.p1),
            "teleport_position": list(tl.teleport),
        },
        "change": {
            "kind": tl.kind,
            "window_gt": [round(tl.t_a, 4), round(tl.t_b, 4)],
            "sentence": story.change_sentence(),
        },
        "annotations": {
            "exits": ann.exits,
            "back": ann.back,
            "re_enter": ann.re_enter,
            "frame_num": G,
            "gen_h": h_gen,
            "gen_r": r_gen,
            "gt_target_pixels_first": int(gt_vis.pixels[0]),
        },
        "instances": {str(k): v for k, v in sorted(instances.items())},
        "opening_props": [instances[i] for i in opening],
        "hallucinated_props": [instances[i] for i in moved_visible],
        "counterfactuals": {
            m: {"defined": bool(defined[m]), "description": COUNTERFACTUALS[m].description, "facts": facts[m]}
            for m in MODELS
        },
        "vqa": {
            "bank": bank_rel,
            "questions": len(questions),
            "final_questions": len(final),
            "failure_model": failure_model,
            "failure_hint": COUNTERFACTUALS[failure_model].hint,
        },
        "paths": {
            **gt_paths,
            "generations": gen_paths,
            "opis_case": opis["case_dir"],
            "opis_reference_scene": opis["reference_scene"],
            "vqa_bank": bank_rel,
        },
    }
