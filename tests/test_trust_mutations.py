"""Issue 11: tests that notice a wrong formula — the four mutation survivors and thresholds checked by effect.

* SSIM's C2 (the only hand value compared flat images, where C2 cancels): a textured hand case.
* ORS rounded to 4 places: tests/test_trust_parity.py (0.3781 / 0.2222 whose 4th place matters).
* The bootstrap's 2.5 / 97.5 percentiles: replicates recomputed independently, percentiles taken explicitly.
* ``max_failure_rate`` at exactly the limit: a real run with exactly that fraction of failed cases.
* Scene Memory's ICP trim ratio: changing ``icp_trim`` changes F1.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.scene_memory_fixtures import room_cloud

from worldrecall.plugins.memobench.pixel_fidelity import ssim
from worldrecall.plugins.stats.hierarchy import bootstrap_macro

sys.path.insert(0, str(Path(__file__).parent))


# -- SSIM C2 ----------------------------------------------------------------------------------------------

def test_ssim_textured_hand_value_depends_on_c2():
    # x: flat 100. y: checkerboard 100 ± 10, y = 100 + 10·s with s = (-1)^(i+j). With reflect-101 borders a
    # period-2 checkerboard stays a checkerboard, so the separable Gaussian (11 taps, σ = 1.5, weights g_k,
    # k = -5..5, Σ g = 1) maps s to d²·s with d = Σ_k (-1)^k g_k:
    #   μy = 100 + 10·d²·s,   E[y²] = 10100 + 2000·d²·s  ->  σy² = E[y²] - μy² = 100·(1 - d⁴)  (everywhere)
    #   σx² = 0 and σxy = 100·μy - 100·μy = 0 (x is flat)
    #   SSIM(s) = (2·100·μy + C1)·(0 + C2) / ((100² + μy² + C1)·(0 + σy² + C2) + 1e-8),
    # averaged over the two pixel classes s = ±1 (a 16×16 image has 128 of each).
    k = np.arange(-5, 6)
    g = np.exp(-k ** 2 / (2 * 1.5 ** 2))
    g /= g.sum()
    d = float(np.sum(g * (-1.0) ** k))           # ≈ -9e-5: the blur nearly flattens the checkerboard
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2   # 6.5025, 58.5225
    var_y = 100 * (1 - d ** 4)
    vals = []
    for s in (1, -1):
        mu_y = 100 + 10 * d ** 2 * s
        vals.append((2 * 100 * mu_y + c1) * c2 / ((100 ** 2 + mu_y ** 2 + c1) * (var_y + c2) + 1e-8))
    expected = sum(vals) / 2                      # ≈ C2 / (100 + C2) = 58.5225 / 158.5225 = 0.36917
    assert expected == pytest.approx(58.5225 / 158.5225, abs=1e-6)
    i, j = np.indices((16, 16))
    y = (100 + 10 * (-1) ** (i + j)).astype(np.uint8)
    x = np.full((16, 16), 100, np.uint8)
    rgb = lambda a: np.repeat(a[..., None], 3, axis=2)
    got = ssim(rgb(x), rgb(y))
    # float32 as the official code: E[y²] - μy² cancels ~10⁴-sized terms, so σy² carries ~1e-3 of noise
    assert got == pytest.approx(expected, abs=1e-4)
    # a C2 of (0.02·255)² would give 26.01 / 126.01 = 0.2064, a C2 of 0 gives 0: both far outside the tolerance
    assert abs(got - 26.01 / 126.01) > 0.1


# -- bootstrap percentiles -------------------------------------------------------------------------------

def test_bootstrap_ci_is_the_2_5_and_97_5_percentile_of_the_replicates():
    values = np.array([0.0, 1.0, 3.0, 7.0, 10.0])
    B, seed = 400, 7
    # independent re-computation: one stratum, B resamples of the 5 cases with the same generator
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, len(values), size=(B, len(values)))
    means = values[draw].mean(axis=1)
    lo, hi = bootstrap_macro(values, [], B, seed, level=0.95)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])), abs=1e-12)
    # and not any neighbouring percentiles (the survivor): 5/95 and 1/99 differ on this sample
    assert (lo, hi) != pytest.approx(tuple(np.percentile(means, [5, 95])), abs=1e-9)
    assert (lo, hi) != pytest.approx(tuple(np.percentile(means, [1, 99])), abs=1e-9)
    lo90, hi90 = bootstrap_macro(values, [], B, seed, level=0.90)
    assert (lo90, hi90) == pytest.approx(tuple(np.percentile(means, [5, 95])), abs=1e-12)


def test_bootstrap_tiny_resample_set_by_hand():
    # two cases 0 and 10: each replicate mean is 0, 5 or 10. With B = 4 replicates the CI is the linear-
    # interpolated 2.5 / 97.5 percentile of the 4 sorted means m0 ≤ m1 ≤ m2 ≤ m3:
    # position 0.025·3 = 0.075 -> m0 + 0.075·(m1 - m0); position 0.975·3 = 2.925 -> m2 + 0.925·(m3 - m2)
    values = np.array([0.0, 10.0])
    rng = np.random.default_rng(3)
    m = np.sort(values[rng.integers(0, 2, size=(4, 2))].mean(axis=1))
    lo, hi = bootstrap_macro(values, [], 4, 3)
    assert lo == pytest.approx(m[0] + 0.075 * (m[1] - m[0]))
    assert hi == pytest.approx(m[2] + 0.925 * (m[3] - m[2]))


# -- max_failure_rate at exactly the limit ------------------------------------------------------------

def _failure_run(tmp_path: Path, limit: float):
    import json

    from helpers import toy_plugin
    from helpers.toy_plugin import make_dataset, toy_config

    from worldrecall.engine.stages.runner import Runner
    from worldrecall.registry.host import load_plugins

    ds = make_dataset(tmp_path, {"m": [0, 0]}, n_frames=4)
    data = Path(ds["data_root"])
    cases = json.loads((data / "cases.json").read_text())["cases"]
    cases += [{"id": "gone1", "video": "gone1.mp4"}, {"id": "gone2", "video": "gone2.mp4"}]   # 2 of 4 fail
    (data / "cases.json").write_text(json.dumps({"cases": cases}))
    cfg = toy_config(tmp_path, ds, max_failure_rate=limit, aggregators=[], aggregator_params={})
    host = load_plugins(extra=[toy_plugin], fresh=True)
    return Runner(cfg, host).run()


@pytest.mark.parametrize("limit, code", [(0.5, 0), (0.49, 3)])
def test_failure_rate_exactly_at_the_limit_passes(tmp_path, limit, code):
    res = _failure_run(tmp_path, limit)
    assert (res.n_cases, res.n_failed_cases, res.failure_rate) == (4, 2, 0.5)   # 2 / 4
    assert res.exit_code == code       # 0.5 > 0.5 is false -> 0; 0.5 > 0.49 -> 3


# -- Scene Memory ICP trim ratio by its effect on F1 ------------------------------------------------------



def test_icp_trim_changes_scene_f1():
    from worldrecall.plugins.scene_memory.f1 import score_point_clouds
    from worldrecall.plugins.scene_memory.metrics import SceneF1

    O = room_cloud(2000)
    # revisit: 85 % an exact copy shifted by 0.05 on every axis, 15 % (300 ball points) moved 1 unit in x
    V = np.concatenate([O[:1700] + 0.05, O[1700:] + np.array([1.0, 0.0, 0.0])])
    th = dict(SceneF1.thresholds)
    assert th["icp_trim"] == 0.8
    trimmed = SceneF1._kernel(O, V, th)
    # trim 0.8 keeps the 1700 inliers' closest 80 %: ICP lands exactly on the -0.05 shift, so its F1 equals
    # scoring V - 0.05 with no alignment at all (an independent path)
    np.testing.assert_allclose(trimmed.icp.t, [-0.05] * 3, atol=1e-9)
    assert trimmed.f1 == pytest.approx(score_point_clouds(O, V - 0.05, alignment="none").f1, abs=1e-12)
    untrimmed = SceneF1._kernel(O, V, {**th, "icp_trim": 1.0})
    # every match kept: the outliers drag the fit off the true shift and F1 drops (0.921 -> 0.779 here)
    assert abs(untrimmed.icp.t[0] + 0.05) > 0.05
    assert trimmed.f1 - untrimmed.f1 > 0.1
    assert math.isfinite(untrimmed.f1)
