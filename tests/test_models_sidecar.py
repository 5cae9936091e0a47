"""Sidecar backends read the case's ViPE sidecar folder (written here with numpy) instead of pixels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from worldrecall.core.data import Case, CaseFailure
from worldrecall.plugins.models import plugin, sidecar

SPECS = {s.name: s for s in plugin.specs()}
H, W = 8, 12          # video frames
DH, DW = 4, 6         # depth maps


def make(name: str, **opts):
    return SPECS[name].factory({**SPECS[name].defaults, **opts})


def write_sidecar(d: Path, *, frame_indices=(0, 2, 4), with_instances: bool = True) -> Path:
    """Converted ViPE layout: 3 rows for video frames 0, 2, 4; target id 2 ("red car"), id 5 ("dog")."""
    d.mkdir(parents=True, exist_ok=True)
    n = len(frame_indices)
    poses = np.repeat(np.eye(4, dtype=np.float32)[None], n, axis=0)
    poses[:, 0, 3] = np.arange(n, dtype=np.float32)          # x translation = row number
    np.save(d / "poses_c2w.npy", poses)
    k = np.array([[5.0, 0, DW / 2], [0, 5.0, DH / 2], [0, 0, 1]], np.float32)
    np.save(d / "intrinsics.npy", np.repeat(k[None], n, axis=0))
    depth = np.stack([np.full((DH, DW), 2.0 + r, np.float32) for r in range(n)])
    valid = np.ones_like(depth, dtype=bool)
    depth[1, 0, 0] = 0.0                                     # invalid pixel, masked out
    valid[1, 0, 0] = False
    np.save(d / "depth_metric.npy", depth)
    np.savez(d / "depth_valid_mask.npz", mask=valid)
    np.save(d / "frame_indices.npy", np.asarray(frame_indices, np.int32))
    np.save(d / "timestamps.npy", np.asarray(frame_indices, np.float64) / 16)
    if with_instances:
        ids = np.zeros((n, H, W), np.uint8)
        ids[0, 1:3, 2:5] = 2                                 # target in row 0
        ids[0, 5:7, 8:10] = 5                                # dog in row 0
        ids[1, 0:2, 0:2] = 5                                 # only the dog in row 1; row 2 empty
        np.savez(d / "instance_masks.npz", ids=ids)
        (d / "instances.json").write_text(json.dumps({"instances": {"2": "a red car", "5": "the dog"}, "target": 2}))
    return d


@pytest.fixture
def case(tmp_path):
    sidecar.clear_cache()
    d = write_sidecar(tmp_path / "annotations_vipe" / "video_vipe_ann")
    return Case(benchmark="memobench", case_id="c1", model="m", video=None, sidecars={"vipe": d})


def blank(n: int, h: int = H, w: int = W) -> list[np.ndarray]:
    return [np.zeros((h, w, 3), np.uint8)] * n


def test_sidecar_depth_maps_frames_to_rows(case):
    maps = make("sidecar_depth").depth(blank(2), case=case, indices=[4, 2])
    # frame 4 -> row 2 (depth 2 + 2 = 4.0); frame 2 -> row 1 (3.0) with its invalid pixel set to 0
    assert [m.shape for m in maps] == [(DH, DW), (DH, DW)] and maps[0].dtype == np.float32
    assert np.all(maps[0] == 4.0)
    assert maps[1][0, 0] == 0.0 and np.all(maps[1].ravel()[1:] == 3.0)
    inv = make("sidecar_depth", output="inverse").depth(blank(1), case=case, indices=[2])[0]
    assert inv[0, 0] == 0.0 and np.isclose(inv[0, 1], 1 / 3)
    with pytest.raises(CaseFailure, match="no sidecar row for video frame 3"):
        make("sidecar_depth").depth(blank(1), case=case, indices=[3])


def test_sidecar_pose_returns_c2w_rows(case):
    poses = make("sidecar_pose").poses(blank(3), case=case, indices=[0, 2, 4])
    assert poses.shape == (3, 4, 4) and poses.dtype == np.float64
    assert poses[:, 0, 3].tolist() == [0.0, 1.0, 2.0]


def test_sidecar_backends_need_a_sidecar(tmp_path):
    bare = Case(benchmark="memobench", case_id="c2", model="m", video=None)
    with pytest.raises(CaseFailure, match="no sidecar folder"):
        make("sidecar_pose").poses(blank(1), case=bare, indices=[0])
    with pytest.raises(CaseFailure, match="needs the case"):
        make("sidecar_depth").depth(blank(1), case=None, indices=[0])
    broken = Case(benchmark="memobench", case_id="c3", model="m", video=None, sidecars={"vipe": tmp_path / "nope"})
    with pytest.raises(CaseFailure, match="does not exist"):
        make("sidecar_pose").poses(blank(1), case=broken, indices=[0])


def test_sidecar_segmenter_masks_match_the_written_ids(case):
    seg = make("sidecar_segmenter")
    dets = seg.segment(blank(3), "another red car(subject) moving left", case=case, indices=[0, 2, 4])
    assert [len(d) for d in dets] == [1, 0, 0]               # only the target matches; absent in rows 1-2
    (target,) = dets[0]
    expected = np.zeros((H, W), bool)
    expected[1:3, 2:5] = True
    assert target.score == 1.0 and np.array_equal(target.mask, expected)
    assert target.box == (2.0, 1.0, 5.0, 3.0)
    # a query that names the dog also returns the dog instance; the target always comes first
    both = seg.segment(blank(2), "a dog chasing the red car", case=case, indices=[0, 2])
    assert [len(d) for d in both] == [2, 1]
    assert both[0][1].mask[5:7, 8:10].all() and both[0][1].mask.sum() == 4
    assert both[1][0].mask[0:2, 0:2].all()


def test_sidecar_segmenter_upsamples_nearest_to_the_frame_size(case):
    (dets,) = make("sidecar_segmenter").segment(blank(1, 2 * H, 3 * W), "car", case=case, indices=[0])
    m = dets[0].mask
    assert m.shape == (2 * H, 3 * W)
    # every id pixel becomes a 2x3 block: rows 2..5, cols 6..14
    expected = np.zeros((2 * H, 3 * W), bool)
    expected[2:6, 6:15] = True
    assert np.array_equal(m, expected)
    assert np.array_equal(sidecar.upsample_nearest(m, H, W)[1:3, 2:5], np.ones((2, 3), bool))


def test_sidecar_segmenter_without_instance_files_fails_the_case(tmp_path):
    sidecar.clear_cache()
    d = write_sidecar(tmp_path / "sc", with_instances=False)
    c = Case(benchmark="memobench", case_id="c", model="m", video=None, sidecars={"vipe": d})
    with pytest.raises(CaseFailure, match="instance_masks.npz: missing"):
        make("sidecar_segmenter").segment(blank(1), "car", case=c, indices=[0])


def test_query_word_matching():
    inst = {"instances": {"1": "a tractor", "3": "the red barn", "4": "tree"}, "target": 1}
    assert sidecar.matching_instances(inst, "a tractor(subject) driving toward the barn") == [1]
    assert sidecar.matching_instances(inst, "the red barn and a tree") == [1, 3, 4]
    assert sidecar.words("Another person(subject) crossing") == {"person", "crossing"}


def test_parsed_sidecars_are_memoised_and_refreshed_on_change(case, monkeypatch):
    import worldrecall.formats.vipe as core_sidecars

    calls = []
    real = core_sidecars.read_sidecar
    monkeypatch.setattr(core_sidecars, "read_sidecar", lambda p, **k: calls.append(k) or real(p, **k))
    depth, pose = make("sidecar_depth"), make("sidecar_pose")
    depth.depth(blank(1), case=case, indices=[0])
    pose.poses(blank(1), case=case, indices=[0])              # served by the depth-bearing parse
    depth.depth(blank(1), case=case, indices=[2])
    assert calls == [{"need_depth": True}]
    d = case.sidecars["vipe"]
    poses = np.load(d / "poses_c2w.npy")
    poses[:, 1, 3] = 7.0
    np.save(d / "poses_c2w.npy", poses)
    assert make("sidecar_pose").poses(blank(1), case=case, indices=[0])[0, 1, 3] == 7.0
    assert len(calls) == 2


def test_sidecar_found_next_to_the_video_when_not_named(tmp_path):
    from worldrecall.core.video import Video

    sidecar.clear_cache()
    write_sidecar(tmp_path / "annotations_vipe" / "video_vipe_ann")
    (tmp_path / "video.mp4").write_bytes(b"")
    c = Case(benchmark="memobench", case_id="c", model="m", video=Video(tmp_path / "video.mp4"))
    assert make("sidecar_pose").poses(blank(1), case=c, indices=[4])[0, 0, 3] == 2.0
