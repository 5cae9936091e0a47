"""Video input: containers, frame folders, clamping, resized views, hashing, decode-once pool, write_video."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from worldrecall.core.video import (
    FrameIndexError,
    Video,
    VideoError,
    VideoLimitError,
    VideoPool,
    resize_max_side,
)
from worldrecall.formats.mp4 import write_video


def _frames(n=6, h=48, w=64):
    yy, xx = np.mgrid[0:h, 0:w]
    # smooth content: yuv420p halves chroma resolution, so pixel noise would not survive the round trip
    base = np.stack([xx * 255 // w, yy * 255 // h, (xx + yy) * 127 // (w + h) + 64], axis=-1).astype(np.uint8)
    return np.stack([np.roll(base, 2 * i, axis=1) for i in range(n)])


def test_mp4_roundtrip_and_fps(tmp_path):
    p = write_video(tmp_path / "a.mp4", _frames(), fps=12, crf=0)
    v = Video(p)
    assert v.frames().shape == (6, 48, 64, 3) and v.frames().dtype == np.uint8
    assert v.fps == 12 and v.size == (64, 48)
    assert np.abs(v.frames().astype(int) - _frames().astype(int)).mean() < 3  # near-lossless


def test_avi_and_webm_are_read(tmp_path):
    fr = _frames()
    avi = tmp_path / "a.avi"
    w = cv2.VideoWriter(str(avi), cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48))
    for f in fr:
        w.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    w.release()
    assert Video(avi).num_frames == 6
    webm = write_video(tmp_path / "a.webm", fr, fps=10, codec="libvpx-vp9")
    assert Video(webm).num_frames == 6


def test_frame_folder_sorted_lexicographically(tmp_path):
    fr = _frames(3)
    for i, f in zip([10, 2, 1], fr):  # lexicographic: 0001, 0002, 0010
        cv2.imwrite(str(tmp_path / f"{i:04d}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    (tmp_path / "notes.txt").write_text("ignored")
    v = Video(tmp_path)
    np.testing.assert_array_equal(v.frames()[0], fr[2])
    np.testing.assert_array_equal(v.frames()[2], fr[0])
    assert v.frame(-5) is v.frames()[0] or np.array_equal(v.frame(-5), v.frames()[0])
    np.testing.assert_array_equal(v.frame(99), v.frames()[-1])  # clamped like the official readers


@pytest.mark.parametrize("content,needle", [(b"", "empty file"), (b"\x00" * 100, "")])
def test_corrupt_files_raise_video_error_naming_the_file(tmp_path, content, needle):
    p = tmp_path / "bad.mp4"
    p.write_bytes(content)
    with pytest.raises(VideoError) as e:
        Video(p).frames()
    assert "bad.mp4" in str(e.value) and needle in str(e.value)


def test_resize_rule_matches_official_reader():
    f = np.zeros((1080, 1920, 3), np.uint8)
    assert resize_max_side(f, 640).shape == (360, 640, 3)       # s = 640/1920; round(1080 s) = 360
    g = np.zeros((1001, 1335, 3), np.uint8)
    assert resize_max_side(g, 640).shape == (480, 640, 3)       # round(1001*0.4794) = round(479.9) = 480
    assert resize_max_side(f[:300, :400], 640).shape == (300, 400, 3)  # never upscales


def test_pool_shares_one_video_and_counts_decodes(tmp_path):
    p = write_video(tmp_path / "a.mp4", _frames())
    pool = VideoPool()
    a, b = pool.get(p), pool.get(str(p))
    assert a is b
    a.frames(), b.frames(), a.resized(32), b.resized(32)
    assert pool.decode_counts == {str(p.resolve()): 1}
    assert a.resized(32) is b.resized(32) and a.resized(32).shape[2] == 32


def test_pool_budget_releases_least_recently_used(tmp_path):
    paths = [write_video(tmp_path / f"{n}.mp4", _frames()) for n in "abc"]
    one = _frames().nbytes  # 6 x 48 x 64 x 3 = 55296 bytes decoded
    pool = VideoPool(max_bytes=int(2.5 * one))
    v1, v2, v3 = (pool.get(p) for p in paths)
    v1.frames()
    v2.frames()
    v1.frames()  # used again: now the most recent
    v3.frames()  # 3 videos = 165888 bytes > 138240: the least recently used (v2) goes
    assert (v1.nbytes, v2.nbytes, v3.nbytes) == (one, 0, one) and pool.held_bytes == 2 * one


def test_a_video_over_the_budget_fails_before_it_is_decoded(tmp_path):
    p = write_video(tmp_path / "a.mp4", _frames())
    pool = VideoPool(max_bytes=_frames().nbytes - 1)
    with pytest.raises(VideoLimitError) as e:
        pool.get(p).frames()
    # 6 frames x 64 x 48 x 3 bytes = 54.0 KiB = 0.05 MiB, one byte over the budget
    assert str(e.value) == (f"{p}: decoding 6 declared frames of 64x48 needs 0.1 MiB, over the per-worker frame "
                            f"budget of 0.1 MiB (video.max_bytes=55295); raise video.max_bytes (and run fewer "
                            f"workers if memory is short)")
    assert pool.decode_counts == {}
    folder = tmp_path / "frames"
    folder.mkdir()
    for i, f in enumerate(_frames()):
        cv2.imwrite(str(folder / f"{i:03d}.png"), f)
    with pytest.raises(VideoLimitError, match=r"decoding 6 frame files of 64x48 needs .*video.max_bytes=55295"):
        pool.get(folder).frames()


@pytest.mark.parametrize("kind", ["folder", "mp4"])
def test_frames_at_reads_only_the_asked_frames_at_the_compared_size(tmp_path, kind):
    frames = _frames()
    if kind == "folder":
        src = tmp_path / "gt"
        src.mkdir()
        for i, f in enumerate(frames):
            cv2.imwrite(str(src / f"frame.{i:04d}.jpg"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    else:
        src = write_video(tmp_path / "gt.mp4", frames)
    whole = Video(src).frames()  # what the whole decode gives: the reference pixels
    pool = VideoPool()
    v = pool.get(src)
    got = v.frames_at([4, 1, 4], size=(32, 20))
    want = [cv2.resize(whole[i], (32, 20), interpolation=cv2.INTER_AREA) for i in (4, 1, 4)]
    assert all(np.array_equal(a, b) for a, b in zip(got, want))  # byte-identical to resizing native frames
    if kind == "folder":  # only the two asked files were read, and are held at the compared size only
        assert v._frames is None and v.nbytes == 2 * 32 * 20 * 3 and pool.decode_counts == {}
    else:  # a video is decoded whole, once; the resized frames come on top
        assert v.nbytes == whole.nbytes + 2 * 32 * 20 * 3 and pool.decode_counts == {str(src.resolve()): 1}
    native = v.frames_at([2])
    assert np.array_equal(native[0], whole[2])
    with pytest.raises(FrameIndexError) as e:
        v.frames_at([6])
    assert (e.value.index, e.value.count, e.value.decodable) == (6, 6, kind == "mp4")
    assert str(e.value) == f"{src}: frame 6 out of range (6 {'decodable ' * (kind == 'mp4')}frames)"
    v.release()
    assert v.nbytes == 0 and pool.held_bytes == 0


def test_content_hash_changes_with_bytes(tmp_path):
    p = write_video(tmp_path / "a.mp4", _frames())
    h1 = Video(p).content_hash()
    write_video(p, _frames()[::-1])
    assert Video(p).content_hash() != h1


def test_a_frame_folder_that_cannot_be_listed_is_one_line(tmp_path, monkeypatch):
    import errno
    import os

    import worldrecall.core.video as video_mod

    d = tmp_path / "frames"
    d.mkdir()
    for i in range(3):
        cv2.imwrite(str(d / f"{i:05d}.png"), np.full((6, 8, 3), 40 * i, np.uint8))
    (d / "notes").symlink_to(d / "notes")          # not a frame: its type is never asked
    assert Video(d).frames().shape == (3, 6, 8, 3)
    for target, why in ((d / "00003.png", "Too many levels of symbolic links"),   # a link to itself
                        (d / ("x" * 300), "File name too long")):
        link = d / "00003.png"
        link.symlink_to(target)
        for read in (lambda: Video(d).frames(), lambda: Video(d).content_hash(), lambda: Video(d).frames_at([0])):
            with pytest.raises(VideoError) as e:
                read()
            assert str(e.value) == f"{link}: frame file cannot be read ({why})"
        link.unlink()

    def refused(path):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
    monkeypatch.setattr(video_mod.os, "scandir", refused)   # root lists any folder: refuse it as EACCES would
    with pytest.raises(VideoError) as e:
        Video(d).frames()
    assert str(e.value) == f"{d}: cannot list the frame folder (Permission denied)"
