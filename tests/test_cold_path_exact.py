"""Issue 19 (cold path): every speed-up gives exactly what the plain code gave.

Each faster routine is compared with a straightforward reference written here (the code it replaced) on
random inputs with ``==`` / ``array_equal``, plus a hand-computed value where one exists.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from worldrecall.core import video as video_mod
from worldrecall.core.video import VideoError
from worldrecall.formats.mp4 import write_video


# -- video decoding into one preallocated array ------------------------------------------------------------

def _decode_reference(p: Path) -> np.ndarray:
    """The plain decoder: a list of RGB conversions, stacked at the end."""
    cap = cv2.VideoCapture(str(p))
    out = []
    while True:
        ok, fr = cap.read()
        if not ok:
            break
        out.append(cv2.cvtColor(fr, cv2.COLOR_BGR2RGB))
    cap.release()
    return np.stack(out)


class _Declaring:
    """cv2.VideoCapture whose header declares ``n`` frames (to drive the under/over-declared paths)."""

    def __init__(self, n: int):
        self.n, self.real = n, cv2.VideoCapture

    def __call__(self, path: str):
        cap, n = self.real(path), self.n

        class Cap:
            def __getattr__(self, a):
                return getattr(cap, a)

            def get(self, prop):
                return float(n) if prop == cv2.CAP_PROP_FRAME_COUNT else cap.get(prop)

        return Cap()


@pytest.fixture
def random_video(tmp_path):
    rng = np.random.default_rng(7)
    frames = [rng.integers(0, 256, (24, 32, 3), dtype=np.uint8) for _ in range(9)]
    return write_video(tmp_path / "v.mp4", frames, fps=8, threads=1)


@pytest.mark.parametrize("declared", [None, 1, 4, 9, 500])
def test_decode_equals_the_plain_decoder(random_video, monkeypatch, declared):
    want = _decode_reference(random_video)
    assert want.shape == (9, 24, 32, 3)
    if declared is not None:  # header under-declares (grown by doubling) or over-declares (trimmed copy)
        monkeypatch.setattr(cv2, "VideoCapture", _Declaring(declared))
    got = video_mod._decode_cv2(random_video)
    assert got.shape == want.shape and got.dtype == np.uint8 and got.flags.c_contiguous
    assert np.array_equal(got, want)
    assert got.base is None or got.base.shape == got.shape  # a trimmed result holds no spare frames


def test_decode_frame_cap_still_counts_every_decoded_frame(random_video, monkeypatch):
    monkeypatch.setattr(cv2, "VideoCapture", _Declaring(2))  # under-declared: the cap, not the header, stops it
    with pytest.raises(video_mod.VideoLimitError, match=r"v.mp4: 6 decoded frames \(or more\) exceed the limit of 5"):
        video_mod._decode_cv2(random_video, video_mod._Limits(0, 5))


def test_decode_unreadable_file_is_one_line(tmp_path):
    p = tmp_path / "bad.mp4"
    p.write_bytes(b"\x00" * 64)
    with pytest.raises(VideoError, match=r"bad.mp4: "):
        video_mod._decode_cv2(p)
