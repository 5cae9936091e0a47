"""``mind.action_gate``: the shared camera gate with the GT camera (from ``mark_time``) as the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from worldrecall.core.components import MeasureContext
from worldrecall.core.data import Alignment, Case, CaseSkip
from worldrecall.core.models import ModelHub, ModelSpec
from worldrecall.core.video import Video
from worldrecall.formats import colmap
from worldrecall.formats.mp4 import write_video
from worldrecall.plugins.mind.action_gate import MindActionGate
from worldrecall.plugins.models import sidecar as sidecar_backend

PAN = [0, 10, 20, 30, 40, 30, 20, 10, 0, 0]  # the GT camera turns right 40° and back (10 frames)


def yaw_path(degrees) -> np.ndarray:
    out = np.tile(np.eye(4), (len(degrees), 1, 1))
    for i, d in enumerate(degrees):
        a = math.radians(d)
        out[i, :3, :3] = [[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]]
    return out


def _sidecar(d, c2w):
    d.mkdir(parents=True, exist_ok=True)
    np.save(d / "poses_c2w.npy", np.asarray(c2w, dtype=np.float64))
    np.save(d / "intrinsics.npy", np.tile(np.array([[20.0, 0, 16], [0, 20.0, 12], [0, 0, 1]]), (len(c2w), 1, 1)))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("mind-gate")
    frames = np.random.default_rng(1).integers(0, 255, (13, 24, 32, 3), dtype=np.uint8)
    write_video(root / "gen" / "video.mp4", frames[:10], 24.0)
    write_video(root / "gt" / "video.mp4", frames, 24.0)
    # the GT clip's images.txt holds the 10 GT frames from mark_time 3 on
    (root / "gt" / "images.txt").write_text(colmap.images_txt_text(yaw_path(PAN)))
    (root / "still").mkdir()
    (root / "still" / "images.txt").write_text(colmap.images_txt_text(yaw_path([0] * 10)))
    for name, degrees in {"oracle": PAN, "frozen": [0] * 10, "half": [a / 2 for a in PAN],
                          "away": [0, 10, 20, 30, 40, 40, 40, 40, 40, 40]}.items():
        _sidecar(root / name, yaw_path(degrees))
    return root


def make_case(root, model="oracle", images="gt", **ann):
    sidecars = {"vipe": root / model, "gt_images_txt": root / images / "images.txt"}
    return Case("mind", "1st_data/mem_test/data-1", model, Video(root / "gen" / "video.mp4"),
                reference=Video(root / "gt" / "video.mp4"), annotations={"mark_time": 3, "total_time": 13, **ann},
                sidecars=sidecars)


def gate_row(case, **params):
    spec = ModelSpec("sidecar_pose", "pose", "sidecar", factory=sidecar_backend.build_pose)
    metric = MindActionGate({"max_frames": 10, **params})
    m = metric.measure(case, Alignment(), MeasureContext(models=ModelHub({"sidecar_pose": spec},
                                                                         {"pose": "sidecar_pose"})))
    return metric, m


def test_the_gt_path_passes_and_a_frozen_camera_fails(root):
    metric, m = gate_row(make_case(root))
    s = metric.score(m, metric.thresholds)
    assert s["passed"] == 1.0 and s["ref_rotation_deg"] == pytest.approx(40.0)
    assert "vs the GT camera (images.txt (10 images))" in metric.verdict(m, metric.thresholds)
    metric, m = gate_row(make_case(root, "frozen"))
    s = metric.score(m, metric.thresholds)
    assert s["passed"] == 0.0 and s["gen_rotation_deg"] == 0.0
    assert metric.verdict(m, metric.thresholds).startswith("FAIL (departure (rotation))")


def test_half_a_turn_and_no_return_fail(root):
    # half: 20° of the GT's 40° (needs 0.6 x 40 = 24°); away: turns 40° and stays (40° from the GT at the end,
    # tolerance max(0.25 x 40, 10) = 10°)
    metric, m = gate_row(make_case(root, "half"))
    assert metric.score(m, metric.thresholds)["passed"] == 0.0
    metric, m = gate_row(make_case(root, "away"))
    s = metric.score(m, metric.thresholds)
    assert s["passed"] == 0.0 and s["return_rotation_error_deg"] == pytest.approx(40.0)
    assert "return (rotation)" in metric.verdict(m, metric.thresholds)


def test_not_measured_is_a_skip_never_a_pass(root):
    metric, m = gate_row(make_case(root, images="still"))
    with pytest.raises(CaseSkip, match="camera gate not measured: the reference camera does not move"):
        metric.score(m, metric.thresholds)
    metric, m = gate_row(make_case(root, mirror=True))
    with pytest.raises(CaseSkip, match="camera gate not measured: mirror test"):
        metric.score(m, metric.thresholds)
    assert not metric.needs_models(make_case(root, mirror=True))
    # no images.txt and no GT sidecar for the sidecar backend: not measured, naming the fix
    case = make_case(root)
    del case.sidecars["gt_images_txt"]
    metric, m = gate_row(case)
    with pytest.raises(CaseSkip, match="no GT camera for the sidecar_pose backend"):
        metric.score(m, metric.thresholds)
