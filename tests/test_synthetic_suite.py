"""The built synthetic suite (tiny mode): layouts, annotations, counterfactual properties, idempotence."""

from __future__ import annotations

import csv
import json
import os
import re
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("open3d")
pytest.importorskip("av")

from worldrecall.core.paths import safe_join
from worldrecall.core.video import Video
from worldrecall.plugins.synthetic import build
from worldrecall.plugins.synthetic.annotate import exit_reenter, visibility
from worldrecall.plugins.synthetic.case import GEN_FPS, depth_size
from worldrecall.plugins.synthetic.counterfactuals import MODELS
from worldrecall.plugins.synthetic.memobench_layout import phase_mapping
from worldrecall.plugins.synthetic.programs import rotation_angle_deg
from worldrecall.plugins.synthetic.sidecars import SIDECAR_FILES

TINY = {"n_cases": 2, "width": 96, "height": 72, "gt_frames": 24, "gen_frames": 20}
W, H, G, N = 96, 72, 24, 20


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """Two threads ask for the same suite at once: one builds, the other waits and reuses it."""
    root = tmp_path_factory.mktemp("synthetic") / "suite"
    calls = []
    real_build = build._build

    def counting_build(*a, **k):
        calls.append(1)
        return real_build(*a, **k)

    build._build = counting_build
    try:
        results: list[Path] = []
        threads = [
            threading.Thread(target=lambda: results.append(build.ensure_suite(root, workers=1, **TINY)))
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        build._build = real_build
    assert len(results) == 2 and results[0] == results[1] == root.absolute()
    assert len(calls) == 1, "the second caller must wait on the lock and reuse the finished suite"
    manifest = json.loads((root / "manifest.json").read_text())
    return root, manifest


def _load(p: Path, key: str | None = None) -> np.ndarray:
    if p.suffix == ".npz":
        with np.load(p, allow_pickle=False) as z:
            return z[key]
    return np.load(p, allow_pickle=False)


def _side(root: Path, case: dict, model: str) -> Path:
    return root / case["paths"]["generations"][model]["sidecars"]


def _ids(root: Path, case: dict, model: str) -> np.ndarray:
    return _load(_side(root, case, model) / "instance_masks.npz", "ids")


# -- layouts ------------------------------------------------------------------------------------------
def test_manifest_lists_cases_programs_and_counterfactuals(suite):
    root, m = suite
    assert m["params"]["n_cases"] == 2 and len(m["cases"]) == 2
    assert m["models"] == list(MODELS)
    assert [c["program"] for c in m["cases"]] == ["pan", "tilt"]
    for c in m["cases"]:
        assert set(c["counterfactuals"]) == set(MODELS)
        assert c["target"]["phrase"] and c["change"]["kind"]
        assert all(isinstance(v["defined"], bool) for v in c["counterfactuals"].values())
    assert (root / "COMPLETE").read_text().strip() == m["params_digest"]


def test_manifest_paths_never_escape_root(suite):
    root, m = suite

    def strings(x):
        if isinstance(x, str):
            yield x
        elif isinstance(x, dict):
            for v in x.values():
                yield from strings(v)
        elif isinstance(x, list):
            for v in x:
                yield from strings(v)

    paths = list(strings([c["paths"] for c in m["cases"]])) + m["files"]
    assert len(paths) > 50
    for rel in paths:
        if rel.startswith("data/"):  # the release-relative exr_path form, relative to memobench/
            rel = "memobench/" + rel
        assert not Path(rel).is_absolute() and ".." not in Path(rel).parts
        assert safe_join(root, rel).exists(), rel


def test_memobench_release_layout(suite):
    root, m = suite
    base = root / "memobench/data"
    for c in m["cases"]:
        n = c["clip"]
        clip = base / f"Synthetic_processed/{c['scene']}/{c['case_id']}"
        assert len(sorted((clip / f"RGB{n}").glob("*.jpg"))) == G
        poses = _load(clip / f"{n}/poses.npy")
        intr = _load(clip / f"{n}/intrinsics.npy")
        assert poses.shape == (G, 4, 4) and intr.shape == (G, 4)
        assert np.allclose(intr[:, 2:], [(W - 1) / 2, (H - 1) / 2])
        assert np.allclose(poses[:, :3, :3] @ poses[:, :3, :3].transpose(0, 2, 1), np.eye(3), atol=1e-9)
        depth = _load(clip / f"Depth{n}/depth_metric.npy")
        assert depth.shape == (G, *depth_size(W, H)[::-1]) and (depth > 0).all()
        # frame 0 of the GT and of the oracle video show the same instant: same depth
        assert np.array_equal(depth[0], _load(_side(root, c, "oracle") / "depth_metric.npy")[0])
    import pandas as pd

    for sheet in (
        pd.read_excel(base / "Synthetic_processed/Synthetic_ExitReenter.xlsx"),
        pd.read_csv(base / "Synthetic_processed/Synthetic_ExitReenter.csv"),
    ):
        assert list(sheet.columns) == ["video_folder", "exits", "re-enter", "frame_num", "skip", "prompt"]
        assert list(sheet["video_folder"]) == [c["case_id"] for c in m["cases"]]
        assert set(sheet["frame_num"]) == {G} and set(sheet["skip"]) == {"no"}
    meta = list(csv.DictReader((base / "sam3_metadata/synthetic_metadata.csv").read_text().splitlines()))
    assert list(meta[0]) == ["scene", "video_id", "subject", "exr_path", "prompt"]
    for row, c in zip(meta, m["cases"]):
        assert (root / "memobench" / row["exr_path"]).is_file()
        # the official ORS text-query regex must find the subject phrase
        q = re.search(r"sees (.*?\(subject\)[^.,]*)", row["prompt"], flags=re.IGNORECASE)
        assert q and c["target"]["phrase"] in q.group(1) and row["subject"] == c["target"]["phrase"]


def test_generated_layouts_and_hard_links(suite):
    root, m = suite
    for c in m["cases"]:
        for model in MODELS:
            g = c["paths"]["generations"][model]
            video = root / g["video"]
            assert video.name == "video.mp4" and video.parent.name == c["case_id"]
            assert f"memobench/output/{model}/Synthetic/{c['scene']}/" in g["video"]
            side = root / g["sidecars"]
            assert side.as_posix().endswith(f"{c['case_id']}/annotations_vipe/video_vipe_ann")
            sm_side = root / f"scene_memory/{model}/annotations_vipe/{c['case_id']}_vipe_ann"
            for name in SIDECAR_FILES:
                assert os.path.samefile(side / name, sm_side / name)  # hard links, no duplicate bytes
            assert os.path.samefile(video, root / f"scene_memory/{model}/{c['case_id']}.mp4")
            assert os.path.samefile(video, root / f"opis/generations/{model}/{c['case_id']}.mp4")
            actions = json.loads((root / f"scene_memory/{model}/{c['case_id']}_actions.json").read_text())
            assert actions["actions"] == c["actions"] and len(actions["actions"]) == 12
            assert set(actions["actions"]) <= {
                "fixed",
                "pan_left",
                "pan_right",
                "tilt_up",
                "tilt_down",
                "push_in",
                "pull_out",
            }


def test_mp4s_decode_to_the_right_frame_count(suite):
    root, m = suite
    for c in m["cases"]:
        for model in MODELS:
            v = Video(root / c["paths"]["generations"][model]["video"])
            assert v.num_frames == N and v.size == (W, H)


def test_sidecar_files(suite):
    root, m = suite
    c = m["cases"][0]
    side = _side(root, c, "oracle")
    c2w, w2c = _load(side / "poses_c2w.npy"), _load(side / "poses_w2c.npy")
    K, depth = _load(side / "intrinsics.npy"), _load(side / "depth_metric.npy")
    assert c2w.dtype == np.float32 and c2w.shape == (N, 4, 4)
    assert np.allclose(c2w @ w2c, np.eye(4), atol=1e-4)
    dw, dh = depth_size(W, H)
    assert K.shape == (N, 3, 3) and K.dtype == np.float32 and depth.shape == (N, dh, dw)
    assert np.allclose(K[0], [[K[0, 0, 0], 0, (dw - 1) / 2], [0, K[0, 0, 0], (dh - 1) / 2], [0, 0, 1]])
    assert np.isfinite(depth).all() and (depth > 0).all()
    assert _load(side / "depth_valid_mask.npz", "mask").all()
    assert _load(side / "frame_indices.npy").tolist() == list(range(N))
    assert np.allclose(_load(side / "timestamps.npy"), np.arange(N) / GEN_FPS)
    ids = _load(side / "instance_masks.npz", "ids")
    assert ids.shape == (N, H, W) and ids.dtype == np.uint8
    inst = json.loads((side / "instances.json").read_text())
    assert inst["target"] == 1 and inst["instances"]["1"] == c["target"]["phrase"]
    assert set(np.unique(ids)) - {0} <= {int(k) for k in inst["instances"]}


# -- annotations --------------------------------------------------------------------------------------
def test_sheet_annotations_come_from_the_gt_masks(suite):
    root, m = suite
    rows = {
        r["video_folder"]: r
        for r in csv.DictReader(
            (root / "memobench/data/Synthetic_processed/Synthetic_ExitReenter.csv").read_text().splitlines()
        )
    }
    for c in m["cases"]:
        ids = _load(root / c["paths"]["gt_masks"], "ids")
        assert ids.shape == (G, H, W)
        ann = exit_reenter(visibility(ids))
        row = rows[c["case_id"]]
        assert (int(row["exits"]), int(row["re-enter"])) == (ann.exits, ann.re_enter)
        e, r = ann.exits, ann.re_enter
        tgt = ids == 1
        assert tgt[e - 1].any() and not tgt[e].any()  # fully out from `exits` on
        full = tgt[r] & ~np.pad(np.ones((H - 2, W - 2), bool), 1)
        assert tgt[r].any() and not full.any()  # fully in view (not touching the border)
        assert not tgt[e : ann.back].any()
        # the change happens while the target is out of view
        t_a, t_b = c["change"]["window_gt"]
        assert e <= t_a < t_b < ann.back


# -- counterfactuals ----------------------------------------------------------------------------------
def _r_gen(c: dict) -> int:
    return phase_mapping(c["annotations"]["exits"], c["annotations"]["re_enter"], G, N)[1]


def test_oracle_matches_the_gt_program(suite):
    root, m = suite
    for c in m["cases"]:
        gt_poses = _load(root / c["paths"]["gt_poses"])
        poses = _load(_side(root, c, "oracle") / "poses_c2w.npy")
        assert np.allclose(poses[0], gt_poses[0], atol=1e-5) and np.allclose(
            poses[-1], gt_poses[-1], atol=1e-5
        )
        # frame 0 shows GT time 0: the decoded video matches the GT jpg closely
        gt0 = Video(root / c["paths"]["gt_frames"]).frame(0).astype(float)
        v0 = Video(root / c["paths"]["generations"]["oracle"]["video"]).frame(0).astype(float)
        assert 10 * np.log10(255**2 / np.mean((gt0 - v0) ** 2)) > 28


def test_frozen_camera_poses_are_static_but_the_world_moves(suite):
    root, m = suite
    for c in m["cases"]:
        poses = _load(_side(root, c, "frozen_camera") / "poses_c2w.npy")
        assert np.allclose(poses, poses[0])
        oracle = _load(_side(root, c, "oracle") / "poses_c2w.npy")
        assert max(rotation_angle_deg(oracle[0], p) for p in oracle.astype(float)) > 60
        ids = _ids(root, c, "frozen_camera")
        assert (ids == 1).any(axis=(1, 2)).all()  # the target never leaves the frozen view
        assert not c["counterfactuals"]["frozen_camera"]["facts"]["camera_moves"]


def test_forgetful_has_no_target_after_the_return(suite):
    root, m = suite
    for c in m["cases"]:
        ids, oracle = _ids(root, c, "forgetful"), _ids(root, c, "oracle")
        r = _r_gen(c)
        assert not (ids[r:] == 1).any()
        assert (oracle[r:] == 1).any() and (ids[0] == 1).any()


def test_state_reset_returns_the_target_as_it_left(suite):
    root, m = suite
    for c in m["cases"]:  # pan and tilt end where they started: the reset target looks like frame 0
        gt0 = _load(root / c["paths"]["gt_masks"], "ids")[0]
        ids = _ids(root, c, "state_reset")
        a, b = ids[-1] == 1, gt0 == 1
        assert (a & b).sum() / (a | b).sum() > 0.97
        oracle = _ids(root, c, "oracle")
        frames = Video(root / c["paths"]["generations"]["state_reset"]["video"]).frames()
        ofr = Video(root / c["paths"]["generations"]["oracle"]["video"]).frames()
        gt_first = Video(root / c["paths"]["gt_frames"]).frame(0)
        mean_reset = frames[-1][ids[-1] == 1].mean(0)
        assert np.abs(mean_reset - gt_first[gt0 == 1].mean(0)).max() < 12
        kind = c["change"]["kind"]
        if "move" in kind or kind == "resize":
            assert not np.array_equal(oracle[-1] == 1, ids[-1] == 1)
        if "recolour" in kind:
            assert np.abs(ofr[-1][oracle[-1] == 1].mean(0) - mean_reset).max() > 25


def _centroid(mask: np.ndarray) -> np.ndarray:
    ys, xs = np.nonzero(mask)
    return np.array([xs.mean(), ys.mean()])


def test_teleport_target_reappears_elsewhere(suite):
    root, m = suite
    for c in m["cases"]:
        tel, oracle = _ids(root, c, "teleport")[-1] == 1, _ids(root, c, "oracle")[-1] == 1
        assert tel.any() and oracle.any()
        assert np.linalg.norm(_centroid(tel) - _centroid(oracle)) > 3.0


def test_hallucinated_background_changes_props_after_the_return(suite):
    root, m = suite
    for c in m["cases"]:
        assert c["counterfactuals"]["hallucinated_background"]["defined"]
        hal, oracle = _ids(root, c, "hallucinated_background"), _ids(root, c, "oracle")
        t_ret = c["annotations"]["re_enter"]
        times = np.arange(N) * (G - 1) / (N - 1)
        before = times < t_ret
        assert np.array_equal(hal[before], oracle[before])
        assert not np.array_equal(hal[-1], oracle[-1])
        assert np.array_equal(hal[-1] == 1, oracle[-1] == 1)  # the target itself is untouched
        assert c["counterfactuals"]["hallucinated_background"]["facts"]["props_moved"]


def test_appearance_drift_changes_colour_not_geometry(suite):
    root, m = suite
    for c in m["cases"]:
        side_d, side_o = _side(root, c, "appearance_drift"), _side(root, c, "oracle")
        assert os.path.samefile(
            side_d / "depth_metric.npy", side_o / "depth_metric.npy"
        )  # same bytes, linked
        ids = _ids(root, c, "appearance_drift")
        assert np.array_equal(ids, _ids(root, c, "oracle"))
        fd = Video(root / c["paths"]["generations"]["appearance_drift"]["video"]).frames()
        fo = Video(root / c["paths"]["generations"]["oracle"]["video"]).frames()
        tgt = ids[-1] == 1
        assert np.abs(fd[-1][tgt].mean(0) - fo[-1][tgt].mean(0)).max() > 25
        assert np.abs(fd[-1][~tgt].astype(int) - fo[-1][~tgt]).mean() < 2


def test_wrong_trajectory_turns_a_different_amount(suite):
    root, m = suite
    for c in m["cases"]:
        wrong = _load(_side(root, c, "wrong_trajectory") / "poses_c2w.npy").astype(float)
        oracle = _load(_side(root, c, "oracle") / "poses_c2w.npy").astype(float)
        turn_w = max(rotation_angle_deg(wrong[0], p) for p in wrong)
        turn_o = max(rotation_angle_deg(oracle[0], p) for p in oracle)
        assert abs(turn_w - turn_o) > 0.2 * turn_o
        assert not c["counterfactuals"]["wrong_trajectory"]["facts"]["follows_program"]


# -- VQA ----------------------------------------------------------------------------------------------
def _cm_score(bank: list[dict], truth: dict[str, str]) -> float:
    """The official per-dimension VQA score (Positive passes on Yes, Negative on No)."""
    qs = [q for q in bank if q["Dimension"] == "Continuity of Memory"]
    ok = sum((truth[str(q["ID"])] == "Yes") == (q["Dimension Polarity"] == "Positive") for q in qs)
    return ok / len(qs)


def test_vqa_banks_and_truth_rank_oracle_above_forgetting(suite):
    root, m = suite
    with open(root / "memobench/data/vqa_questions/failure-cases.csv") as f:
        failures = list(csv.DictReader(f))
    assert [r["folder"] for r in failures] == [c["case_id"] for c in m["cases"]]
    for c in m["cases"]:
        with open(root / c["paths"]["vqa_bank"]) as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 1 and list(rows[0]) == [
            "scene",
            "video_id",
            "Start Questions",
            "Evaluation on ground truth",
            "Evaluation on failure",
            "Revised Evaluation on failure",
            "Final questions",
        ]
        final = json.loads(rows[0]["Final questions"])
        gt_eval = json.loads(rows[0]["Evaluation on ground truth"])
        assert all(e["Verdict"] == "Pass" for e in gt_eval)
        for dim in (
            "Instruction Following",
            "Object and Background",
            "Continuity of Memory",
            "Physics Adherence",
        ):
            pol = {q["Dimension Polarity"] for q in final if q["Dimension"] == dim}
            assert pol == {"Positive", "Negative"}, dim
        assert set(final[0]) == {"ID", "Dimension", "Dimension Polarity", "Question"}
        truth = {
            mo: json.loads((root / c["paths"]["generations"][mo]["vqa_truth"]).read_text()) for mo in MODELS
        }
        assert set(truth["oracle"]) == {str(q["ID"]) for q in final}
        cm = {mo: _cm_score(final, t) for mo, t in truth.items()}
        assert cm["oracle"] == 1.0
        assert cm["forgetful"] < cm["oracle"] and cm["state_reset"] < cm["oracle"]


# -- OPIS ---------------------------------------------------------------------------------------------
def test_opis_case_layout(suite):
    root, m = suite
    for c in m["cases"]:
        d = root / c["paths"]["opis_case"]
        assert d.parent.name == c["scene"].lower() and d.name == c["case_id"]
        assert os.path.samefile(d / "raw.jpg", root / c["paths"]["first_frame"])
        assert (d / "text_prompt.txt").read_text().strip() == c["prompt"]
        cond = json.loads((d / "conditions.json").read_text())
        assert cond["camera_path"] == c["actions"] and cond["image_size"] == [W, H]
        ref = json.loads((d / "reference_scene.json").read_text())
        assert ref["scene_id"] == c["case_id"] and ref["metadata"]["image_size"] == [W, H]
        objs = {o["metadata"]["instance_id"]: o for o in ref["objects"]}
        assert 1 in objs
        import cv2

        gt0 = _load(root / c["paths"]["gt_masks"], "ids")[0]
        for iid, o in objs.items():
            assert {
                "object_id",
                "category",
                "bbox",
                "attributes",
                "embedding",
                "mask_path",
                "metadata",
            } <= set(o)
            assert len(o["embedding"]) == 24 and abs(np.linalg.norm(o["embedding"]) - 1.0) < 1e-6
            mask = cv2.imread(str(d / o["mask_path"]), cv2.IMREAD_GRAYSCALE) > 0
            assert np.array_equal(mask, gt0 == iid)
            x0, y0, x1, y1 = o["bbox"]
            ys, xs = np.nonzero(mask)
            assert (x0, y0, x1, y1) == (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
            mob = o["metadata"]["mobility"]
            assert {"kinematic_class", "motion_expectation", "evaluation_track", "geometry_eligible"} <= set(
                mob
            )
        assert objs[1]["metadata"]["mobility"]["evaluation_track"] == "dynamic_identity"


# -- idempotence --------------------------------------------------------------------------------------
def test_second_call_does_nothing(suite, monkeypatch):
    root, _m = suite
    before = (root / "manifest.json").stat().st_mtime_ns

    def boom(*a, **k):
        raise AssertionError("ensure_suite rebuilt a complete suite")

    monkeypatch.setattr(build, "_build", boom)
    assert build.ensure_suite(root, **TINY) == root.absolute()
    assert (root / "manifest.json").stat().st_mtime_ns == before
    assert not [p for p in root.parent.iterdir() if ".building-" in p.name or ".stale-" in p.name]


def test_a_second_build_has_the_same_content_digest(suite, tmp_path):
    """The suite is its content: a rebuild elsewhere, later and with two render workers, gives the same bytes
    (openpyxl's save time in the sheet made two builds differ before)."""
    import time

    root, manifest = suite
    time.sleep(2.1)  # zip entries keep time at 2 s resolution: a rebuild must not fall into the same slot
    again = build.ensure_suite(tmp_path / "again", workers=2, **TINY)
    assert json.loads((again / "manifest.json").read_text())["content_digest"] == manifest["content_digest"]
    assert build.content_digest(again) == build.content_digest(root) == manifest["content_digest"]
