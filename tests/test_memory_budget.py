"""Memory proportional to what is compared: videos leave memory with their last case; a video that cannot fit
the per-worker budget (`video.max_bytes`) fails its case with the reason, the others complete; the report's
thumbnails read only the frames they show, at thumbnail size. The peak RSS of every process of a release-size
run is measured by benchmarks/memory.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_config

from worldrecall.engine.stages.runner import Runner
from worldrecall.formats.mp4 import write_video
from worldrecall.registry.host import load_plugins


@pytest.fixture()
def host():
    return load_plugins(extra=[toy_plugin], fresh=True)


def test_each_video_is_released_after_its_last_case_and_decoded_once(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0, 10, 20], "bad": [40, 50, 60]})
    runner = Runner(toy_config(tmp_path, ds, workers=1), host)
    res = runner.run()
    assert all(r.status == "ok" for r in res.rows) and len(res.rows) == 6
    assert set(res.decode_counts.values()) == {1} and len(res.decode_counts) == 6
    assert runner.pool.held_bytes == 0  # nothing kept once no later case reads it


def test_a_video_over_the_budget_fails_its_case_with_the_reason(tmp_path, host):
    ds = make_dataset(tmp_path, {"m": [0, 10, 20]})  # 8 frames of 48x32: 36864 bytes decoded each
    big = Path(ds["generations"]) / "m" / "big.mp4"
    write_video(big, np.full((40, 32, 48, 3), 90, np.uint8), fps=8)  # 40 frames: 184320 bytes
    data = Path(ds["data_root"])
    cases = json.loads((data / "cases.json").read_text())["cases"]
    (data / "cases.json").write_text(json.dumps({"cases": [*cases, {"id": "big", "video": "big.mp4"}]}))
    res = Runner(toy_config(tmp_path, ds, workers=1, video={"max_bytes": 100_000}), host).run()
    by = {r.case_id: r for r in res.rows}
    assert all(by[f"c{i}"].status == "ok" for i in range(3))
    assert by["big"].status == "failed"
    assert "decoding 40 declared frames of 48x32 needs 0.2 MiB, over the per-worker frame budget of 0.1 MiB " \
           "(video.max_bytes=100000)" in by["big"].reason
    assert str(big.resolve()) not in res.decode_counts  # refused from the header, never decoded


# -- the report's thumbnails: read at thumbnail size, never a whole video at native size ---------------------

def test_thumbnails_of_a_frame_folder_read_only_the_frames_shown(tmp_path):
    """Only the frame files asked for are opened: every other file of the folder may be anything."""
    import cv2

    from worldrecall.core.video import VideoError, small_frames

    folder = tmp_path / "RGB1"
    folder.mkdir()
    for i in range(40):
        if i in (0, 13, 39):
            cv2.imwrite(str(folder / f"frame1.{i:04d}.jpg"), np.full((1080, 1920, 3), 10 * i % 250, np.uint8))
        else:
            (folder / f"frame1.{i:04d}.jpg").write_bytes(b"not read")
    got = small_frames(folder, [0, 13, 39, 99], 96)  # 99: clamped to the last frame
    assert {i: a.shape for i, a in got.items()} == {0: (54, 96, 3), 13: (54, 96, 3), 39: (54, 96, 3), 99: (54, 96, 3)}
    assert int(got[13].mean()) == 130 and np.array_equal(got[99], got[39])
    # indices on another video's axis of 79 frames map proportionally: 39 * 39 / 78 = 19.5 -> frame 20
    with pytest.raises(VideoError, match=r"frame1\.0020\.jpg"):
        small_frames(folder, [39], 96, axis_len=79)


def test_a_jpeg_frame_is_decoded_at_a_reduced_scale(tmp_path, monkeypatch):
    """A 1920x1080 JPEG for a 96-px thumbnail is decoded by libjpeg at 1/8 scale (240x135), never at full size;
    the thumbnail looks like the one drawn from the full-size frame."""
    import cv2

    from worldrecall.core.video import resize_max_side, small_image

    img = np.zeros((1080, 1920, 3), np.uint8)
    img[:, :960] = (200, 40, 40)
    img[300:700, 1200:1700] = (30, 180, 60)
    cv2.imwrite(str(tmp_path / "f.jpg"), img)
    flags: list[int] = []
    real = cv2.imread
    monkeypatch.setattr(cv2, "imread", lambda p, flag=cv2.IMREAD_COLOR: flags.append(flag) or real(p, flag))
    thumb = small_image(tmp_path / "f.jpg", 96)
    assert flags == [cv2.IMREAD_REDUCED_COLOR_8] and thumb.shape == (54, 96, 3)
    full = resize_max_side(cv2.cvtColor(real(str(tmp_path / "f.jpg")), cv2.COLOR_BGR2RGB), 96)
    assert np.abs(thumb.astype(int) - full.astype(int)).mean() < 4


def test_thumbnails_of_a_video_hold_one_frame_at_a_time(tmp_path):
    """An mp4's thumbnails are the pixels of the full decode resized, and reading them allocates about one
    native frame, not the video (40 frames of 640x480: 37 MB decoded whole)."""
    import tracemalloc

    from worldrecall.core.video import Video, resize_max_side, small_frames

    rng = np.random.default_rng(0)
    fr = rng.integers(0, 255, (40, 480, 640, 3), dtype=np.uint8)
    write_video(tmp_path / "v.mp4", fr, fps=8)
    tracemalloc.start()
    got = small_frames(tmp_path / "v.mp4", [0, 17, 39, 50], 64)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    whole = Video(tmp_path / "v.mp4").frames()
    assert peak < 4 * whole[0].nbytes < whole.nbytes / 8
    for i, a in got.items():
        assert np.array_equal(a, resize_max_side(whole[min(i, 39)], 64))
    # on a reference axis of 20 frames: 10 -> round(10 * 39 / 19) = 21
    assert np.array_equal(small_frames(tmp_path / "v.mp4", [10], 64, axis_len=20)[10], resize_max_side(whole[21], 64))
