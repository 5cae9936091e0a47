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

    def __call__(self, path: str, *args):
        cap, n = self.real(path, *args), self.n

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


def test_decode_uses_one_decoder_thread(random_video, monkeypatch):
    want = _decode_reference(random_video)
    threads = []
    real = cv2.VideoCapture

    def opening(*a):
        cap = real(*a)
        threads.append(cap.get(cv2.CAP_PROP_N_THREADS))  # FFmpeg's decoder threads for this capture
        return cap

    monkeypatch.setattr(cv2, "VideoCapture", opening)
    assert np.array_equal(video_mod._decode_cv2(random_video), want)
    assert threads == [1.0]


def test_decode_frame_cap_still_counts_every_decoded_frame(random_video, monkeypatch):
    monkeypatch.setattr(cv2, "VideoCapture", _Declaring(2))  # under-declared: the cap, not the header, stops it
    with pytest.raises(video_mod.VideoLimitError, match=r"v.mp4: 6 decoded frames \(or more\) exceed the limit of 5"):
        video_mod._decode_cv2(random_video, video_mod._Limits(0, 5))


def test_an_under_declaring_header_never_grows_the_frames_past_the_byte_budget(random_video, monkeypatch):
    """A header that declares 1 frame: the frame array grows as frames arrive, never past what the byte budget
    allows (plus the one frame that fails it), and the decode fails with the budget's reason."""
    monkeypatch.setattr(cv2, "VideoCapture", _Declaring(1))
    sizes: list[int] = []
    real = np.empty
    monkeypatch.setattr(video_mod.np, "empty", lambda shape, *a, **k: sizes.append(shape[0]) or real(shape, *a, **k))
    frame = 24 * 32 * 3
    with pytest.raises(video_mod.VideoLimitError, match=r"decoding 6 decoded frames \(or more\) of 32x24"):
        video_mod._decode_cv2(random_video, video_mod._Limits(0, 0, 5 * frame))
    assert sizes and max(sizes) <= 6  # 5 frames fit the budget; the 6th fails it
    sizes.clear()
    assert np.array_equal(video_mod._decode_cv2(random_video, video_mod._Limits(0, 0, 9 * frame)),
                          _decode_reference(random_video)) and max(sizes) <= 10


def test_decode_unreadable_file_is_one_line(tmp_path):
    p = tmp_path / "bad.mp4"
    p.write_bytes(b"\x00" * 64)
    with pytest.raises(VideoError, match=r"bad.mp4: "):
        video_mod._decode_cv2(p)


# -- Scene Memory F1: one kernel run for every case of a clip with the same clouds -------------------------

def test_kernel_memo_reuses_equal_clouds_across_cases(monkeypatch):
    from worldrecall.plugins.scene_memory import metrics as sm

    m = sm.MemorySceneF1()
    th = dict(m.thresholds)
    runs = []
    real = sm.MemorySceneF1._kernel
    monkeypatch.setattr(sm.MemorySceneF1, "_kernel", staticmethod(lambda o, r, t: runs.append(1) or real(o, r, t)))
    # O: the 8 corners of the unit cube; V: the same shifted by 0.001 along x. Every revisit point is
    # 0.001 from its observation partner, far below τ = 2 % of the diagonal, so R = P = F1 = 1.
    O = np.array([[x, y, z] for x in (0.0, 1.0) for y in (0.0, 1.0) for z in (0.0, 1.0)])
    V = O + [0.001, 0.0, 0.0]
    first = m.kernel(O.copy(), V.copy(), th)
    assert (first.f1, first.retention, first.precision) == (1.0, 1.0, 1.0)
    # six other cases in between (other models of the clip), then a case with equal clouds in new arrays
    for k in range(6):
        m.kernel(O * (2.0 + k), V * (2.0 + k), th)
    again = m.kernel(np.array(O), np.array(V), th)
    assert again is first and len(runs) == 7
    assert m.kernel(O, V, {**th, "distance_threshold_ratio": 0.01}) is not first  # other thresholds: a new run
    assert len(runs) == 8


def test_kernel_memo_is_bounded(monkeypatch):
    from worldrecall.plugins.scene_memory import metrics as sm

    m = sm.MemorySceneF1()
    th = dict(m.thresholds)
    O = np.array([[x, y, z] for x in (0.0, 1.0) for y in (0.0, 1.0) for z in (0.0, 1.0)])
    for k in range(sm.KERNEL_MEMO_ENTRIES + 5):
        m.kernel(O + k, O + k, th)
    assert len(m._kernels) == sm.KERNEL_MEMO_ENTRIES
    monkeypatch.setattr(sm, "KERNEL_MEMO_BYTES", 1)  # a byte cap below one entry: only the newest is kept
    m.kernel(O - 1, O - 1, th)
    assert len(m._kernels) == 1


# -- OPIS: a window's projected visibility test runs once per static object ----------------------------------

def _opis_case():
    """Static objects in every projected state (visible, outside, too small, occluded), matched or not."""
    from helpers.opis_builders import E1, E2, E3, det, geometry, inv, obj, proj, win

    objects = [obj("a", E1, track="static_geometry"), obj("b", E2, track="static_geometry"),
               obj("c", E3, track="static_geometry"), obj("d", E1, track="static_geometry", category="mug"),
               obj("e", E2)]  # e: no geometry (identity only)
    projections = {"a": proj("a"), "b": proj("b", inside=2), "c": proj("c", spread=1.0),
                   "d": proj("d", occluded=9)}
    windows = [win("w0", [det("o1", E1), det("o2", E2), det("o5", E2)], geometry(projections), ordinal=0),
               win("w1", [det("o3", E3)], geometry(projections, camera_confidence=0.1), ordinal=1),
               win("w2", [], geometry({"a": proj("a", valid=3)}), ordinal=2)]
    return inv(*objects), windows


def test_opis_rows_equal_the_unshared_visibility_tests(monkeypatch):
    from worldrecall.plugins.opis import rows as rows_mod
    from worldrecall.plugins.opis import visibility as vis_mod
    from worldrecall.plugins.opis.thresholds import OpisThresholds

    inventory, windows = _opis_case()
    calls = []
    real_proj = vis_mod.projected_visibility

    def counted(*a, **k):
        calls.append(a[0].object_id)
        return real_proj(*a, **k)

    monkeypatch.setattr(vis_mod, "projected_visibility", counted)
    monkeypatch.setattr(rows_mod, "projected_visibility", counted)
    for th in (OpisThresholds(), OpisThresholds(official_parity=True)):
        calls.clear()
        shared = rows_mod.build_rows(inventory, windows, th)
        n_shared = len(calls)
        real_classify = rows_mod.classify_visibility
        # the plain code: every classify_visibility call runs its own projected test
        monkeypatch.setattr(rows_mod, "classify_visibility",
                            lambda real=real_classify, **kw: real(**{k: v for k, v in kw.items() if k != "projected"}))
        calls.clear()
        plain = rows_mod.build_rows(inventory, windows, th)
        monkeypatch.setattr(rows_mod, "classify_visibility", real_classify)
        assert [r.to_json() for r in shared[0]] == [r.to_json() for r in plain[0]]
        assert shared[1] == plain[1]
        # 4 + 4 + 1 projected objects: once each (the plain code asks twice where the state is not final)
        assert n_shared == 9 and len(calls) > n_shared
    states = [r.visibility_state for r in shared[0]]
    assert states[:4] == ["expected_visible", "outside_view", "too_small", "occluded"]


# -- Scene Memory turning points: find_peaks without importing scipy.signal ----------------------------------

def test_prominent_peaks_hand_value():
    from worldrecall.plugins.scene_memory.trajectory import prominent_peaks

    x = [0, 2, 1, 3, 3, 3, 0, 1, 0]
    # peaks 1 (prominence 2 - max(0, 1) = 1), 4 (middle of the 3,3,3 plateau: 3 - 0 = 3), 7 (1 - 0 = 1)
    assert prominent_peaks(np.array(x, float), 1.0) == [1, 4, 7]
    assert prominent_peaks(np.array(x, float), 1.5) == [4]
    assert prominent_peaks(np.array([1.0, 1.0, 1.0]), 0.0) == []      # no strict rise: no peak
    assert prominent_peaks(np.array([]), 0.0) == []


def test_prominent_peaks_equal_scipy_find_peaks():
    from scipy.signal import find_peaks

    from worldrecall.plugins.scene_memory.trajectory import prominent_peaks

    rng = np.random.default_rng(3)
    for trial in range(400):
        n = int(rng.integers(0, 60))
        x = rng.integers(0, 5, n).astype(float) if trial % 2 else rng.normal(size=n)  # ties and plateaus
        if trial % 7 == 0 and n:
            x[rng.integers(0, n)] = np.nan
        top = float(np.nanmax(x)) if n and np.isfinite(x).any() else 1.0
        for frac in (0.0, 0.25, 0.5, 0.9):
            want = [int(p) for p in find_peaks(x, prominence=frac * abs(top))[0]]
            assert prominent_peaks(x, frac * abs(top)) == want, (x.tolist(), frac)


# -- memory_loop pair metrics: a first frame's SSIM terms and colour means computed once ----------------------

def _colour_deltas_reference(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """The plain code: float64 copies of both CIELAB images, means per channel."""
    la = cv2.cvtColor(a, cv2.COLOR_RGB2LAB).astype(np.float64)
    lb = cv2.cvtColor(b, cv2.COLOR_RGB2LAB).astype(np.float64)
    light = abs(float(np.mean(la[..., 0]) - np.mean(lb[..., 0])) * 100.0 / 255.0)
    ca = np.asarray([np.mean(la[..., 1]), np.mean(la[..., 2])]) - 128.0
    cb = np.asarray([np.mean(lb[..., 1]), np.mean(lb[..., 2])]) - 128.0
    return light, float(np.linalg.norm(ca - cb))


def test_colour_deltas_equal_the_float64_means():
    from worldrecall.plugins.scene_memory.rendering import colour_deltas, lab_means

    # hand value: white vs black in OpenCV's 8-bit Lab: L 255 vs 0 -> 100; a, b both 128 -> chroma 0
    white, black = np.full((4, 5, 3), 255, np.uint8), np.zeros((4, 5, 3), np.uint8)
    assert lab_means(white) == (255.0, 128.0, 128.0)
    assert colour_deltas(white, black) == (100.0, 0.0)
    rng = np.random.default_rng(11)
    for h, w in ((240, 320), (17, 23), (1, 1), (97, 131)):  # (larger frames start OpenCV threads before forks)
        a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        for b in (rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
                  np.clip(a.astype(int) + rng.integers(-9, 10, a.shape), 0, 255).astype(np.uint8)):
            assert colour_deltas(a, b) == _colour_deltas_reference(a, b)
            assert colour_deltas(a, b, lab_means(a)) == _colour_deltas_reference(a, b)


def test_ssim_rgb_with_shared_first_frame_terms_is_the_same_number():
    from worldrecall.plugins.scene_memory.pair_frames import rgb_stats, ssim_rgb

    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (61, 90, 3), dtype=np.uint8)
    stats = rgb_stats(a)
    kept = [s.copy() for t in stats for s in t]
    for _ in range(3):  # one first frame, several revisits
        b = np.clip(a.astype(int) + rng.integers(-20, 21, a.shape), 0, 255).astype(np.uint8)
        assert ssim_rgb(a, b, stats) == ssim_rgb(a, b)
    assert all(np.array_equal(x, y) for x, y in zip(kept, [s for t in stats for s in t]))  # terms untouched


# -- MemoBench pixel fidelity: each frame's own SSIM terms once per run of pairs -----------------------------

def _ssim_reference(a: np.ndarray, b: np.ndarray) -> float:
    """The plain expression, every term computed per pair."""
    x = cv2.cvtColor(a, cv2.COLOR_RGB2GRAY).astype(np.float32)
    y = cv2.cvtColor(b, cv2.COLOR_RGB2GRAY).astype(np.float32)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    blur = lambda z: cv2.GaussianBlur(z, (11, 11), 1.5)
    mx, my = blur(x), blur(y)
    mx2, my2, mxy = mx * mx, my * my, mx * my
    sx2, sy2, sxy = blur(x * x) - mx2, blur(y * y) - my2, blur(x * y) - mxy
    return float((((2 * mxy + c1) * (2 * sxy + c2)) / ((mx2 + my2 + c1) * (sx2 + sy2 + c2) + 1e-8)).mean())


def test_pair_ssims_equal_one_ssim_per_pair():
    from worldrecall.plugins.memobench import sampling
    from worldrecall.plugins.memobench.pixel_fidelity import pair_ssims, ssim

    # constant 100 vs 110: σ = 0 -> (2·100·110 + C1) / (100² + 110² + C1), C1 = 6.5025 (float32)
    x, y = np.full((16, 16, 3), 100, np.uint8), np.full((16, 16, 3), 110, np.uint8)
    assert ssim(x, y) == pytest.approx(22006.5025 / 22106.5025, abs=1e-6)
    rng = np.random.default_rng(9)
    gen = rng.integers(0, 256, (13, 24, 32, 3), dtype=np.uint8)
    gt = np.clip(gen[:9].astype(int) + rng.integers(-30, 31, (9, 24, 32, 3)), 0, 255).astype(np.uint8)
    defs = sampling.pixel_phase_indices(4, 8, 13, 3, 6, 9)  # 9 GT frames for 13 generated ones: repeats
    pairs = sorted({(i, j) for gens, gts in defs.values() for i, j in zip(gens, gts)})
    assert len(pairs) > len({i for i, _ in pairs}) and len(pairs) > len({j for _, j in pairs})
    gen_of, gt_of = {p: gen[p[0]] for p in pairs}, {p: gt[p[1]] for p in pairs}
    for keep in (1, 8):
        got = pair_ssims(pairs, gen_of, gt_of, keep_gt=keep)
        assert list(got) == pairs
        assert all(got[p] == _ssim_reference(gen_of[p], gt_of[p]) == ssim(gen_of[p], gt_of[p]) for p in pairs)


def test_opis_decoded_timestamps_with_one_decoder_thread(random_video):
    import av

    from worldrecall.plugins.opis.windows import _decoded_times, decoded_timestamps

    with av.open(str(random_video)) as c:  # the plain decode, FFmpeg's automatic threads
        want = [float(f.time) for f in c.decode(video=0) if f.time is not None]
    got = _decoded_times.__wrapped__(str(random_video), 0, 0)
    assert list(got) == want and len(want) == 9
    assert decoded_timestamps(random_video) == [t - want[0] for t in want]
    assert decoded_timestamps(random_video)[1] == pytest.approx(1 / 8)  # written at 8 fps


def test_observation_side_is_reused_and_gives_the_same_scores(monkeypatch):
    from worldrecall.plugins.scene_memory import f1

    rng = np.random.default_rng(4)
    O = np.round(rng.random((600, 3)) * 20) / 20       # a grid: repeated points and exact ties
    revisits = [O + rng.normal(0, s, O.shape) for s in (0.0, 0.002, 0.05)]
    fresh = []
    for V in revisits:
        f1._LAST_OBSERVATION.clear()
        r = f1.score_point_clouds(O, V, keep_points=True)
        fresh.append((r.values(), r.obs.copy(), r.rev.copy(), r.retained.copy(), r.hallucinated.copy()))
    built = []
    real = f1.unique_rows
    monkeypatch.setattr(f1, "unique_rows", lambda p: built.append(len(p)) or real(p))
    f1._LAST_OBSERVATION.clear()
    for V, want in zip(revisits, fresh):
        r = f1.score_point_clouds(O.copy(), V, keep_points=True)
        assert r.values() == want[0]
        assert all(np.array_equal(a, b) for a, b in zip((r.obs, r.rev, r.retained, r.hallucinated), want[1:]))
    assert len(built) == 3 + 1  # each revisit once, the observation once
    assert fresh[0][0]["f1"] == 1.0  # the revisit is the observation itself


def test_a_video_is_opened_once_for_its_header_check_and_decode(random_video, monkeypatch):
    from worldrecall.core.video import Video

    want = _decode_reference(random_video)
    opened = []
    real = cv2.VideoCapture
    monkeypatch.setattr(cv2, "VideoCapture", lambda *a: opened.append(a[0]) or real(*a))
    assert np.array_equal(Video(random_video).frames(), want)
    assert opened == [str(random_video)]
    # a header over a cap still fails before any decoding, and leaves nothing open to decode from
    with pytest.raises(video_mod.VideoLimitError, match=r"v.mp4: 9 declared frames exceed the limit of 8"):
        Video(random_video, max_frames=8).frames()


def _warp_error_reference(a: np.ndarray, b: np.ndarray, flow: np.ndarray) -> float:
    """The plain torch warp error (the code the numpy grid replaced)."""
    import torch
    import torch.nn.functional as F

    h, w = a.shape[:2]
    t1 = torch.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1).float().div(255).unsqueeze(0)
    t2 = torch.from_numpy(np.ascontiguousarray(b)).permute(2, 0, 1).float().div(255).unsqueeze(0)
    f = torch.from_numpy(np.ascontiguousarray(flow, dtype=np.float32)).permute(2, 0, 1)
    gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                            indexing="ij")
    wx = (gx + f[0]) / (w - 1) * 2.0 - 1.0
    wy = (gy + f[1]) / (h - 1) * 2.0 - 1.0
    grid = torch.stack([wx, wy], dim=-1).unsqueeze(0)
    warped = F.grid_sample(t1, grid, mode="bilinear", padding_mode="border", align_corners=True)
    return float((warped - t2).abs().mean().item())


def test_warp_error_equals_the_plain_torch_expression():
    from worldrecall.plugins.memobench.motion_smoothness import warp_error

    rng = np.random.default_rng(11)
    for h, w in ((240, 320), (17, 23), (96, 160), (2, 3)):
        for scale in (0.0, 0.3, 4.0, 80.0):  # zero flow, sub-pixel, pixels, far outside (border padding)
            a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            b = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            flow = (rng.normal(size=(h, w, 2)) * scale).astype(np.float32)
            assert warp_error(a, b, flow) == _warp_error_reference(a, b, flow), (h, w, scale)
    flow64 = rng.normal(size=(17, 23, 2)) * 2.0  # a float64 flow is taken as float32, as before
    a, b = (rng.integers(0, 256, (17, 23, 3), dtype=np.uint8) for _ in range(2))
    assert warp_error(a, b, flow64) == _warp_error_reference(a, b, flow64)
