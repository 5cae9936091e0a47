"""The synthetic suite's MIND layout: GT clips, action programs, model folders and mirror paths, read back through
the ``mind`` loader and scored by ``mind.action`` / ``mind.action_gate`` (tiny suite, four cases)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from worldrecall.core.components import LoadRequest, MeasureContext
from worldrecall.core.data import Alignment, Case, CaseSkip
from worldrecall.core.models import ModelHub, ModelSpec
from worldrecall.core.video import Video
from worldrecall.formats import colmap

pytest.importorskip("open3d")  # the suite's renderer

TINY = {"n_cases": 4, "width": 96, "height": 72, "gt_frames": 24, "gen_frames": 20}


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    from worldrecall.plugins.synthetic import build

    root = build.ensure_suite(tmp_path_factory.mktemp("mind-synthetic") / "suite", workers=1, **TINY)
    return root, json.loads((root / "manifest.json").read_text())


@pytest.fixture(scope="module")
def cases(suite):
    from worldrecall.plugins.mind.loader import MindLoader

    root, _ = suite
    gens = {p.name: p for p in sorted((root / "mind/generations").iterdir())}
    return list(MindLoader().load(LoadRequest(root / "mind/MIND-Data", gens)))


def ctx():
    from worldrecall.plugins.models import sidecar as sidecar_backend

    spec = ModelSpec("sidecar_pose", "pose", "sidecar", factory=sidecar_backend.build_pose)
    return MeasureContext(models=ModelHub({"sidecar_pose": spec}, {"pose": "sidecar_pose"}))


def test_gt_clips_follow_the_release_layout(suite):
    from worldrecall.plugins.mind import records
    from worldrecall.plugins.synthetic.mind_layout import CONTEXT_FRAMES, placement

    root, manifest = suite
    assert manifest["layouts"]["mind_data"] == "mind/MIND-Data"
    assert manifest["params"]["generator_version"] == "5"
    seen = set()
    for r in manifest["cases"]:
        m = r["mind"]
        assert (m["perspective"], m["test_type"]) == placement(r["index"])
        seen.add((m["perspective"], m["test_type"]))
        gt = root / m["gt_clip"]
        rec = records.read_action_json(gt / "action.json")
        assert (rec.mark_time, rec.total_time) == (CONTEXT_FRAMES, CONTEXT_FRAMES + TINY["gen_frames"])
        assert len(rec.frames) == rec.total_time == Video(gt / "video.mp4").num_frames
        # the GT camera from mark_time on is the oracle's camera (the oracle's sidecar poses)
        oracle = np.load(root / r["paths"]["generations"]["oracle"]["sidecars"] / "poses_c2w.npy")
        imgs = colmap.read_images_txt(gt / "images.txt")
        assert len(imgs) == TINY["gen_frames"]
        np.testing.assert_allclose(imgs.c2w, oracle, atol=1e-6)
        labels = records.frame_labels(rec, scheme="ternary")
        # the program's own words: pan_right/left -> look_right/left, tilt_up/down -> look_up/down, push_in /
        # pull_out -> forward / backward, fixed -> no_op (u_turn moves while it turns: forward+look_*)
        words = {"pan_right": "look_right", "pan_left": "look_left", "tilt_up": "look_up",
                 "tilt_down": "look_down", "push_in": "forward", "pull_out": "backward", "fixed": "no_op"}
        if r["program"] == "u_turn":
            assert set(labels) - {"no_op", "forward"} in ({"forward+look_right"}, {"forward+look_left"})
        else:
            assert set(labels) == {words[t] for t in r["actions"]}
    assert seen == {("1st_data", "mem_test"), ("3rd_data", "mem_test"), ("1st_data", "action_space_test"),
                    ("3rd_data", "action_space_test")}


def test_the_gt_continuation_is_the_oracle_re_encoded(suite):
    root, manifest = suite
    r = manifest["cases"][0]
    gt = Video(root / r["mind"]["gt_clip"] / "video.mp4").frames()[r["mind"]["mark_time"]:].astype(np.float64)
    oracle = Video(root / r["paths"]["generations"]["oracle"]["video"]).frames().astype(np.float64)
    frozen = Video(root / r["paths"]["generations"]["frozen_camera"]["video"]).frames().astype(np.float64)
    psnr = 10 * np.log10(255.0 ** 2 / np.mean((gt - oracle) ** 2))
    assert 35.0 < psnr < 80.0  # one re-encoding apart, never identical
    assert np.mean((gt - frozen) ** 2) > 4 * np.mean((gt - oracle) ** 2)


def test_model_folders_are_hard_links_and_mirror_paths_are_palindromes(suite):
    root, manifest = suite
    for r in manifest["cases"]:
        m = r["mind"]
        for model, paths in r["paths"]["generations"].items():
            d = root / "mind/generations" / model / m["perspective"]
            src = root / paths["video"]
            assert os.path.samefile(d / m["test_type"] / r["case_id"] / "video.mp4", src)
            mirror = d / "mirror_test" / r["case_id"] / "path-1.mp4"
            assert mirror.exists() == (r["program"] in ("pan", "tilt")) == m["mirror"]
            if m["mirror"]:
                assert os.path.samefile(mirror, src)
                assert f"{m['perspective']}/mirror_test/{r['case_id']}/path-1" in m["case_ids"]


def test_the_loader_reads_every_case(suite, cases):
    _, manifest = suite
    errors = [c for c in cases if not isinstance(c, Case)]
    assert not errors, errors[:3]
    n_models = len(manifest["models"])
    n_mirror = sum(1 for r in manifest["cases"] if r["mind"]["mirror"])
    assert len(cases) == n_models * (len(manifest["cases"]) + n_mirror)
    clip = next(c for c in cases if c.model == "oracle" and not c.annotations.get("mirror"))
    assert {"vipe", "gt_images_txt", "gt_vipe", "action_json"} <= set(clip.sidecars)
    assert len(clip.annotations["actions"]) == TINY["gen_frames"]


def test_action_and_gate_rank_the_oracle_above_the_frozen_camera(cases):
    from worldrecall.plugins.mind.action import MindAction
    from worldrecall.plugins.mind.action_gate import MindActionGate

    c = ctx()
    action, gate = MindAction(), MindActionGate()
    by = {(x.model, x.case_id): x for x in cases if isinstance(x, Case) and not x.annotations.get("mirror")}
    clips = sorted({cid for _, cid in by})
    for cid in clips:
        oracle = action.score(action.measure(by[("oracle", cid)], Alignment(), c), action.thresholds)
        frozen = action.score(action.measure(by[("frozen_camera", cid)], Alignment(), c), action.thresholds)
        # the oracle's camera is the GT camera: its RPE is float32 rounding (arccos near 1 magnifies it)
        assert oracle["rpe_trans_mean"] < 1e-5 and oracle["rpe_rot_mean_deg"] < 0.1
        assert frozen["rpe_trans_mean"] + frozen["rpe_rot_mean_deg"] > oracle["rpe_trans_mean"] + \
            oracle["rpe_rot_mean_deg"]
        g_or = gate.measure(by[("oracle", cid)], Alignment(), c)
        g_fr = gate.measure(by[("frozen_camera", cid)], Alignment(), c)
        assert gate.score(g_or, gate.thresholds)["passed"] == 1.0
        assert gate.score(g_fr, gate.thresholds)["passed"] == 0.0
        # a true-camera failure (the target vanishes) leaves the camera as the oracle's: same gate, same RPE
        forgetful = action.score(action.measure(by[("forgetful", cid)], Alignment(), c), action.thresholds)
        assert forgetful["rpe_trans_mean"] == oracle["rpe_trans_mean"]
    mirror = next(x for x in cases if isinstance(x, Case) and x.annotations.get("mirror"))
    with pytest.raises(CaseSkip, match="mirror test"):
        gate.score(gate.measure(mirror, Alignment(), c), gate.thresholds)


def test_undefined_pairs_reach_the_mind_case_ids(suite):
    from worldrecall.plugins.synthetic.validity import undefined_from_manifest

    root, manifest = suite
    undefined = undefined_from_manifest(root / "manifest.json")
    for r in manifest["cases"]:
        for cf, info in r["counterfactuals"].items():
            if not info["defined"]:
                assert set(r["mind"]["case_ids"]) <= undefined[cf]
