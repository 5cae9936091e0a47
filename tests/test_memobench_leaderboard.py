"""The ``memobench.leaderboard`` aggregator: paper columns per split, CIs, marks, gating, VQA columns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from worldrecall.core.data import ScoreRow
from worldrecall.plugins.memobench.leaderboard import MemoBenchLeaderboard, to_markdown

SPLIT = {"syn1": "synthetic", "syn2": "synthetic", "r1": "real"}


def _rows() -> list[ScoreRow]:
    rows: list[ScoreRow] = []

    def add(model, metric, per_case, key="score", status="ok"):
        for case, v in per_case.items():
            rows.append(ScoreRow("memobench", model, case, metric, {key: v}, status=status,
                                 strata={"split": SPLIT[case]}))

    add("A", "memobench.visual_quality", {"syn1": 50.0, "syn2": 60.0, "r1": 70.0})
    add("A", "memobench.obj_identity", {"syn1": 80.0, "syn2": 90.0})
    add("A", "memobench.obj_identity", {"r1": 10.0}, status="failed")          # failed rows never count
    add("A", "memobench.camera_controllability", {"syn1": 40.0, "syn2": 60.0, "r1": 80.0}, key="pct")
    add("A", "memobench.ors", {"syn1": 0.5, "syn2": 0.7, "r1": 0.3})
    add("A", "memobench.pixel_fidelity", {"syn1": 0.3, "syn2": 0.5, "r1": 0.4}, key="ALL_LPIPS")
    add("A", "memobench.vqa", {"syn1": 0.5, "syn2": 0.75}, key="InstructionFollowing")
    add("A", "memobench.camera_gate", {"syn1": 1.0, "syn2": 0.0, "r1": 1.0}, key="passed")
    add("B", "memobench.visual_quality", {"syn1": 40.0, "syn2": 40.0, "r1": 40.0})
    add("B", "memobench.camera_controllability", {"syn1": 0.5, "syn2": 0.9, "r1": 0.7}, key="pct")
    add("B", "memobench.pixel_fidelity", {"syn1": 0.2, "syn2": 0.2, "r1": 0.2}, key="ALL_LPIPS")
    add("B", "memobench.ors", {"syn1": 0.1, "syn2": 0.1, "r1": 0.1})
    rows.append(ScoreRow("other", "A", "syn1", "other.metric", {"score": 1.0}, strata={"split": "synthetic"}))
    return rows


def _agg(**params):
    # canonical_models off: these tests pin the table maths on the models' names as given ("A", "B");
    # directions come from the metrics' declared metadata, passed by the engine as value_meta
    from worldrecall.engine.stages.aggregate import value_meta
    from worldrecall.registry.host import load_plugins

    rows = _rows()
    return MemoBenchLeaderboard().aggregate(rows, {"replicates": 200, "canonical_models": False,
                                                   "value_meta": value_meta(load_plugins(), rows), **params})


def _cell(t, split, model, col):
    return float(t[(t["split"] == split) & (t["model"] == model)][col].iloc[0])


def test_means_per_split():
    t = _agg()["memobench_leaderboard"]
    assert list(t.columns[3:]) == ["VisualQuality", "MotionSmoothness", "ObjIdentityConsistency", "Geo3DConsistency",
                                   "CameraControllability", "ImageRewardScore", "ORS", "GT_ALL_PSNR", "GT_ALL_SSIM",
                                   "GT_ALL_LPIPS", "InstructionFollowing", "ObjectBackground", "ContinuityOfMemory",
                                   "PhysicsAdherence", "GatePassRate"]
    assert (_cell(t, "synthetic", "A", "VisualQuality"), _cell(t, "real", "A", "VisualQuality"),
            _cell(t, "all", "A", "VisualQuality")) == (55.0, 70.0, 60.0)           # (50+60)/2, 70, 180/3
    assert _cell(t, "all", "A", "ObjIdentityConsistency") == 85.0                  # failed r1 row left out
    assert math.isnan(_cell(t, "real", "A", "ObjIdentityConsistency"))
    assert _cell(t, "all", "A", "ORS") == pytest.approx(0.5)                       # 0-1 as in the paper
    assert _cell(t, "all", "A", "InstructionFollowing") == 62.5                    # (0.5 + 0.75) / 2 × 100
    assert _cell(t, "all", "A", "GT_ALL_LPIPS") == pytest.approx(0.4)
    assert _cell(t, "all", "A", "GatePassRate") == pytest.approx(2 / 3)
    assert math.isnan(_cell(t, "all", "B", "GatePassRate"))
    assert int(t[(t["split"] == "all") & (t["model"] == "A")]["n_cases"].iloc[0]) == 3


def test_ors_percent_and_camctrl_heuristic():
    t = _agg(ors_percent=True)["memobench_leaderboard"]
    assert _cell(t, "all", "A", "ORS") == pytest.approx(50.0)
    # B's CameraControllability mean is (0.5 + 0.9 + 0.7) / 3 = 0.7 < 1: the official heuristic multiplies by 100
    assert _cell(t, "all", "B", "CameraControllability") == pytest.approx(70.0)
    assert _cell(t, "all", "A", "CameraControllability") == pytest.approx(60.0)
    off = _agg(camctrl_rescale_below_one=False)["memobench_leaderboard"]
    assert _cell(off, "all", "B", "CameraControllability") == pytest.approx(0.7)


def test_gated_variant():
    g = _agg()["memobench_leaderboard_gated"]
    a = g[(g["split"] == "all") & (g["model"] == "A")].iloc[0]
    assert a["n_gated"] == 2                                       # syn1 and r1 pass
    assert a["ObjIdentityConsistency"] == 80.0                     # syn1 only (r1 failed)
    assert a["ORS"] == pytest.approx(0.4)                          # (0.5 + 0.3) / 2
    b = g[(g["split"] == "all") & (g["model"] == "B")].iloc[0]
    assert b["n_gated"] == 0 and math.isnan(b["ORS"])


def test_bootstrap_ci():
    ci = _agg()["memobench_leaderboard_ci"]

    def get(model, col, split="all", variant="all"):
        return ci[(ci["split"] == split) & (ci["model"] == model) & (ci["column"] == col)
                  & (ci["variant"] == variant)].iloc[0]

    b = get("B", "VisualQuality")
    assert b["ci_low"] == b["ci_high"] == 40.0 and b["n"] == 3        # constant values
    a = get("A", "VisualQuality")
    assert 50.0 <= a["ci_low"] < 60.0 < a["ci_high"] <= 70.0


def test_a_columns_interval_depends_on_its_column_and_the_stream_only():
    """Every column is resampled with the same case indices, so changing one column (a re-scored metric) leaves
    every other column's interval as it was; an all-NaN column has none; another stream resamples other cases."""
    from worldrecall.plugins.memobench import leaderboard as lb

    x = np.random.default_rng(1).normal(50, 10, (30, 4))
    x[:5, 1] = np.nan
    x[:, 3] = np.nan  # an all-NaN column: no interval
    lo, hi = lb.bootstrap_ci(x, 300, np.random.default_rng([0, 7]), 0.95)
    assert np.isnan(lo[3]) and np.isnan(hi[3]) and np.all(lo[:3] < hi[:3])
    y = x.copy()
    y[:, 0] += 5.0
    lo2, hi2 = lb.bootstrap_ci(y, 300, np.random.default_rng([0, 7]), 0.95)
    assert lo2[0] == pytest.approx(lo[0] + 5.0) and hi2[0] == pytest.approx(hi[0] + 5.0)
    assert np.array_equal(lo2[1:], lo[1:], equal_nan=True) and np.array_equal(hi2[1:], hi[1:], equal_nan=True)
    # one column alone gets the interval it gets among the others
    lo1, hi1 = lb.bootstrap_ci(x[:, 1:2], 300, np.random.default_rng([0, 7]), 0.95)
    assert (lo1[0], hi1[0]) == (lo[1], hi[1])
    other, _ = lb.bootstrap_ci(x, 300, np.random.default_rng([0, 8]), 0.95)
    assert not np.array_equal(other[:3], lo[:3])


def test_bootstrap_is_seeded():
    vals = np.random.default_rng(0).normal(50, 10, 40)
    rows = [ScoreRow("memobench", "C", f"c{i}", "memobench.visual_quality", {"score": float(v)},
                     strata={"split": "synthetic"}) for i, v in enumerate(vals)]

    def lows(seed):
        ci = MemoBenchLeaderboard().aggregate(rows, {"replicates": 300, "seed": seed})["memobench_leaderboard_ci"]
        return ci[(ci["column"] == "VisualQuality") & (ci["variant"] == "all")][["ci_low", "ci_high"]].to_numpy()

    a, b, c = lows(0), lows(0), lows(1)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    # a 95 % case-bootstrap interval of 40 N(50, 10) values has width ≈ 2·1.96·10/√40 ≈ 6.2
    assert 4.0 < a[0, 1] - a[0, 0] < 9.0 and a[0, 0] < vals.mean() < a[0, 1]


def test_marks_and_markdown():
    tables = _agg()
    m = tables["memobench_leaderboard_marks"]
    row = {r["model"]: r for _, r in m[m["split"] == "all"].iterrows()}
    assert (row["A"]["VisualQuality"], row["B"]["VisualQuality"]) == ("best", "second")
    assert (row["B"]["GT_ALL_LPIPS"], row["A"]["GT_ALL_LPIPS"]) == ("best", "second")   # lower is better
    md = to_markdown(tables, "all")
    assert "| A | **60.00** |" in md and "<u>40.00</u>" in md and "**0.20**" in md
    assert "VQA-IF" in md and "Geo3DConsistency" not in md and "3DConsist" not in md      # empty columns dropped
    assert "[" in to_markdown(tables, "all", with_ci=True)
    assert "VisQual" not in to_markdown(tables, "all", variant="gated")


def test_empty_rows():
    tables = MemoBenchLeaderboard().aggregate([], {})
    assert tables["memobench_leaderboard"].empty and tables["memobench_cases"].empty
