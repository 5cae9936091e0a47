"""The memory_loop siblings against the released runtime (``memory_loop.analyze_memory_rollout``), item by
item: the statuses of each component (not applicable vs error) when intrinsics are missing or a backend
raises, and hand-traced values of the shared pairing, the gate, the clamps and the half-life horizon.

Backends are the real classical ones (colour-histogram embedder, OpenCV SIFT matcher, weight-free gradient
Gram); a failing backend is one of them whose method raises, as a broken install or model would.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers.scene_memory_fixtures import loop_poses, memory_loop_case, pose, yaw

from worldrecall.core.components import MeasureContext
from worldrecall.core.models import BackendUnavailable, ModelHub
from worldrecall.formats.vipe import read_sidecar
from worldrecall.plugins.scene_memory.metrics import MemorySceneF1
from worldrecall.plugins.scene_memory.pair_frames import clamp01
from worldrecall.plugins.scene_memory.rendering import pair_scores
from worldrecall.plugins.scene_memory.suite import (
    MemoryGeometricClosure,
    MemoryHalfLife,
    MemoryRenderingRecovery,
    MemoryReturnGate,
    MemoryRevisitFidelity,
)
from worldrecall.plugins.scene_memory.trajectory import RevisitPair, select_diverse_pairs, turnaround_gate


class _Hub(ModelHub):
    """The classical backends of the three roles; ``broken`` roles raise ``error`` when they run."""

    def __init__(self, broken: tuple[str, ...] = (), error: Exception | None = None):
        super().__init__({}, {})
        from worldrecall.plugins.models import color_histogram, sift_matches, texture_gram

        self.backends = {"revisit_embedder": color_histogram.build({}), "local_features": sift_matches.build({}),
                         "texture": texture_gram.build_gradient({})}
        self.broken, self.error = broken, error or RuntimeError("CUDA error: device-side assert triggered")

    def get(self, role):
        inner = self.backends[role]
        if role not in self.broken:
            return inner
        err = self.error

        class _Raising:
            def embed(self, *a, **k):
                raise err

            def match(self, *a, **k):
                raise err

            def distance(self, *a, **k):
                raise err
        return _Raising()


def _run(cls, case, al, hub=None, **th):
    m = cls(thresholds=th or None)
    meas = json.loads(json.dumps(m.measure(case, al, MeasureContext(models=hub or _Hub()))))  # as cached
    return m, meas, m.score(meas, m.thresholds)


# -- a sidecar without intrinsics.npy ------------------------------------------------------------------------
def test_a_sidecar_without_intrinsics_scores_all_but_closure_and_scene_f1(tmp_path):
    # the release's resolve_pose_track drops the intrinsics (None) and goes on: gate, fidelity, recovery and
    # half-life are scored exactly as with them; closure and memory_scene_f1 are not applicable
    case, al, _ = memory_loop_case(tmp_path / "with", "dolly", drift=3)
    bare, bal, bsc = memory_loop_case(tmp_path / "without", "dolly", drift=3)
    (bsc / "intrinsics.npy").unlink()
    assert read_sidecar(bsc, need_depth=False, need_intrinsics=False).intrinsics is None
    with pytest.raises(Exception, match="intrinsics.npy: missing"):
        read_sidecar(bsc, need_depth=False)  # the reader's default still refuses
    assert bal.info["gate"] and bal.info["scored_pairs"] == al.info["scored_pairs"]
    for cls in (MemoryReturnGate, MemoryRevisitFidelity, MemoryRenderingRecovery, MemoryHalfLife):
        assert _run(cls, bare, bal)[2] == _run(cls, case, al)[2], cls
    assert _run(MemoryRevisitFidelity, bare, bal)[2]["fidelity"] is not None
    m, meas, c = _run(MemoryGeometricClosure, bare, bal)
    assert _run(MemoryGeometricClosure, case, al)[2]["closure"] is not None
    assert c["closure"] is None and c["n_pairs"] == 9.0 and c["n_scored"] == 0.0
    assert "intrinsics.npy: missing" in m.verdict(meas, m.thresholds)
    f1 = MemorySceneF1()
    sm = f1.measure(bare, bal, MeasureContext(models=_Hub()))
    s = f1.score(sm, f1.thresholds)
    assert s["f1"] is None and s["applicable"] == 0.0 and "intrinsics.npy: missing" in sm["reason"]
    assert f1.score(f1.measure(case, al, MeasureContext(models=_Hub())), f1.thresholds)["applicable"] == 1.0


# -- backends that raise -------------------------------------------------------------------------------------
def test_a_texture_backend_that_raises_makes_recovery_not_applicable(tmp_path):
    case, al, _ = memory_loop_case(tmp_path, "dolly")
    for parity in (False, True):
        m, meas, r = _run(MemoryRenderingRecovery, case, al, hub=_Hub(("texture",)), official_parity=parity)
        assert r["recovery"] is None and r["n_pairs"] == 0.0
        assert m.verdict(meas, m.thresholds | {"official_parity": parity}) == \
            "rendering recovery failed: RuntimeError: CUDA error: device-side assert triggered"
    # ImportError is the one the release catches inside the pair: colour-only fallback (parity), skip (ours)
    m = MemoryRenderingRecovery()
    meas = m.measure(case, al, MeasureContext(models=_Hub(("texture",), ImportError("no torchvision"))))
    assert meas["texture_error"] == "no torchvision" and all(p["gram_distance"] is None for p in meas["pairs"])
    with pytest.raises(BackendUnavailable, match="no torchvision"):
        m.score(meas, m.thresholds)
    s = m.score(meas, m.thresholds | {"official_parity": True})
    assert s["texture_fallback"] == 1.0 and s["recovery"] == pytest.approx(1.0)  # identical frames


def test_the_colour_only_fallback_is_per_pair_as_released():
    # pair 1 has a Gram distance of τ (texture e^-1), pair 2 none: (e^-1 + e^-1 + e^-1)/3 and (1 + 1)/2
    a = {"lightness_delta": 6.0, "chroma_delta": 8.0, "gram_distance": 0.002}
    b = {"lightness_delta": 0.0, "chroma_delta": 0.0, "gram_distance": None}
    m = MemoryRenderingRecovery()
    meas = {"facts": {"gate": True, "gate_official": True}, "pairs": [a, b], "error": ""}
    s = m.score(meas, m.thresholds | {"official_parity": True})
    assert s["recovery"] == pytest.approx((math.exp(-1) + 1.0) / 2) and s["texture"] is None
    assert s["lighting"] == pytest.approx((math.exp(-1) + 1.0) / 2) and s["texture_fallback"] == 1.0


def test_an_embedder_that_raises_makes_fidelity_and_half_life_not_applicable(tmp_path):
    case, al, _ = memory_loop_case(tmp_path, "dolly", drift=3)
    hub = _Hub(("revisit_embedder",))
    m, meas, f = _run(MemoryRevisitFidelity, case, al, hub=hub)
    assert f["fidelity"] is None and meas["pairs"] == []
    assert m.verdict(meas, m.thresholds) == "revisit embedder failed: RuntimeError: CUDA error: device-side " \
                                            "assert triggered"
    h, hmeas, hs = _run(MemoryHalfLife, case, al, hub=_Hub(("revisit_embedder",)))
    assert hs["half_life_s"] is None and hs["score"] is None
    assert h.verdict(hmeas, h.thresholds).startswith("revisit fidelity is unavailable, so its decay cannot be "
                                                     "fitted: revisit embedder failed: RuntimeError")
    # the other components do not depend on the embedder
    assert _run(MemoryRenderingRecovery, case, al, hub=hub)[2]["recovery"] is not None


def test_a_matcher_that_raises_makes_closure_not_applicable(tmp_path):
    case, al, _ = memory_loop_case(tmp_path, "dolly")
    m, meas, c = _run(MemoryGeometricClosure, case, al, hub=_Hub(("local_features",), ValueError("bad frame")))
    assert c["closure"] is None
    assert m.verdict(meas, m.thresholds) == "geometric closure failed: ValueError: bad frame"


def test_a_backend_that_cannot_be_built_still_skips(tmp_path):
    # BackendUnavailable is worldrecall's "cannot build this backend here": the metric is skipped
    case, al, _ = memory_loop_case(tmp_path, "dolly")
    with pytest.raises(BackendUnavailable):
        _run(MemoryRevisitFidelity, case, al, hub=_Hub(("revisit_embedder",), BackendUnavailable("offline")))


# -- verdicts of the gate --------------------------------------------------------------------------------------
def test_not_applicable_rows_carry_the_release_reason(tmp_path):
    case, al, _ = memory_loop_case(tmp_path, "static")
    m, meas, f = _run(MemoryRevisitFidelity, case, al)
    assert f["fidelity"] is None
    # a static camera: d_0k* = 0 < 3·0.15 -> never departed
    assert m.verdict(meas, m.thresholds) == ("camera never departed its anchor viewpoint, so returning to it "
                                             "does not test memory")
    g, gmeas, gs = _run(MemoryReturnGate, case, al)
    assert gs["passed"] == 0.0 and g.verdict(gmeas, g.thresholds) is None  # the gate itself has a value


# -- hand-traced pairing ------------------------------------------------------------------------------------
def test_pair_records_report_the_distance_matrix_entries():
    # a pure yaw loop 0°, 30°, 60°, 90°, 60°, 30°, 0° at 4 fps, 4 rows each: E = 0 -> rotation-only, the
    # translation part is 0 and d = θ/180. Gap g = round(1 s · 4) = 4 rows. Rows 24–27 (0°) return to row
    # 0 (the first of the 0° rows, argmin takes the first): d = 0, excursion max θ_0m/180 = 90/180 = 0.5 ≥
    # 3·0.15. Rows at 30° / 60° find exact partners but their excursion is at most 60/180 = 0.33 < 0.45
    P = np.stack([pose(yaw(a)) for a in [0, 30, 60, 90, 60, 30, 0] for _ in range(4)])
    g = turnaround_gate(P, fps=4.0)
    assert g.degenerate and g.extent == 0.0
    assert g.pairs == [(0, 24), (0, 25), (0, 26), (0, 27)]
    last = g.revisits[-1]
    assert last.gap_s == 27 / 4 and last.translation_distance == 0.0 and last.rotation_deg == 0.0
    assert last.excursion == pytest.approx(0.5)
    # departure d_0k* = 90/180 = 0.5 ≥ 3·0.15 -> departed; k* = first row at 90° = 12
    assert g.departed and g.departure == pytest.approx(0.5) and g.k_star == 12
    # 0°, 45°, 90°, then 10°: row 12 pairs with row 0 at θ = 10° (d = 10/180 ≤ 0.15; the 45° rows are
    # 35/180 away), excursion 90/180 between them; the pair reports θ_12,0 = 10° and the normalised
    # translation 0 (rotation-only)
    P = np.stack([pose(yaw(a)) for a in [0, 45, 90, 10] for _ in range(4)])
    g = turnaround_gate(P, fps=4.0)
    p = g.revisits[0]
    assert (p.first_row, p.revisit_row) == (0, 12) and p.rotation_deg == pytest.approx(10.0, abs=1e-9)
    assert p.pose_distance == pytest.approx(10 / 180, abs=1e-12) and p.translation_distance == 0.0


def test_the_rotation_weight_scales_the_rotation_term():
    # a yaw excursion to 25° only: departure 25/180 = 0.139 < 0.45 (not departed); with w = 4 it is
    # 4·25/180 = 0.556 ≥ 0.45 (departed), and returning pairs need 4·θ/180 ≤ 0.15
    P = np.stack([pose(yaw(a)) for a in [0, 25, 0] for _ in range(8)])
    assert not turnaround_gate(P, fps=4.0).departed
    g = turnaround_gate(P, fps=4.0, rotation_weight=4.0)
    assert g.departed and g.departure == pytest.approx(4 * 25 / 180)
    assert g.gate_official and (0, 16) in g.pairs


def test_at_most_24_diverse_pairs_in_gap_order():
    # 30 pairs at gaps k = 1..30 s into 24 buckets over [1, 30] (span 29): bucket = min(int((k − 1)/29·24), 23)
    # k:      1 2 | 3 4 5 | 6 7 | 8 9 10 11 | 12 13 | 14 … 17 | 18 19 | 20 … 23 | 24 25 | 26 27 28 | 29 30
    # bucket: 0 0 | 1 2 3 | 4 4 | 5 6 7  8  |  9  9 | 10 … 13 | 14 14 | 15 … 18 | 19 19 | 20 21 22 | 23 23
    # distance 0.05 except 0.01 at k = 2, 7, 12, 19, 25, 29: those win their shared bucket, but bucket 0 is
    # then given to the shortest gap (1) and bucket 23 to the longest (30), as released
    low = {2, 7, 12, 19, 25, 29}
    pairs = [RevisitPair(0, 10 + k, 0.01 if k in low else 0.05, 0.0, 0.0, float(k), 1.0) for k in range(1, 31)]
    got = select_diverse_pairs(pairs[::-1], 24)
    want = [1, 3, 4, 5, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 19, 20, 21, 22, 23, 25, 26, 27, 28, 30]
    assert [p.gap_s for p in got] == [float(k) for k in want] and len(got) == 24


def test_the_gate_needs_a_departure_and_a_return():
    # dolly out 1 m and back: departed (d = 1 ≥ 0.45) and returned (9 pairs, see the suite tests);
    # cut before the return leg: departed, never returned -> gate fails
    P = loop_poses("dolly", 4)
    assert turnaround_gate(P, fps=4.0).gate_official
    g = turnaround_gate(P[:17], fps=4.0)
    assert g.departed and not g.returned and not g.gate_official


# -- clamps and the half-life horizon -------------------------------------------------------------------------
def test_the_release_clamp_differs_only_on_non_finite_values():
    # base.clamp01 = max(0, min(1, x)): Python's min(1.0, nan) is 1.0, so NaN and +inf give 1, −inf 0
    assert clamp01(float("nan"), release=True) == 1.0 and clamp01(math.inf, release=True) == 1.0
    assert clamp01(-math.inf, release=True) == 0.0
    assert clamp01(float("nan")) == 0.0 and clamp01(math.inf) == 0.0  # ours: no evidence is no score
    for x in (-0.5, 0.0, 0.25, 1.0, 1.5):
        assert clamp01(x) == clamp01(x, release=True) == min(max(x, 0.0), 1.0)
    nan_pair = {"lightness_delta": float("nan"), "chroma_delta": 0.0, "gram_distance": None}
    assert pair_scores(nan_pair, release_clamp=True)["score"] == 1.0
    assert pair_scores(nan_pair)["score"] == 0.0


def test_half_life_score_is_the_half_life_over_the_60_s_horizon():
    # fidelity f(gap) = 0.6·exp(−gap/5) at gaps 1..8 s, written as SSIM 0 and cos = 2f/0.7 − 1 (so that
    # 0.7·(cos + 1)/2 = f): τ = 5 s, half-life 5·ln 2 = 3.4657 s, score 3.4657/60 = 0.057762; 8 ≥ 5 points,
    # R² = 1 ≥ 0.3
    gaps = np.arange(1.0, 9.0)
    f = 0.6 * np.exp(-gaps / 5.0)
    pairs = [{"gap_s": float(g), "cosine": float(2 * v / 0.7 - 1), "ssim": 0.0} for g, v in zip(gaps, f)]
    m = MemoryHalfLife()
    s = m.score({"facts": {"gate": True, "gate_official": True}, "pairs": pairs, "error": ""}, m.thresholds)
    assert s["tau_s"] == pytest.approx(5.0, rel=1e-6) and s["half_life_s"] == pytest.approx(3.465736, rel=1e-6)
    assert s["score"] == pytest.approx(3.465736 / 60.0, rel=1e-6) and s["n_points"] == 8.0
    assert s["r_squared"] == pytest.approx(1.0)
    # 4 points: below min_points (5) -> not applicable, the fit's message as the verdict
    short = {"facts": {"gate": True, "gate_official": True}, "pairs": pairs[:4], "error": ""}
    assert m.score(short, m.thresholds)["half_life_s"] is None
    assert m.verdict(short, m.thresholds) == "half-life fitting needs at least 5 pairs, got 4"
