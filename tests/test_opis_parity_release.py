"""OPIS against the released V3 code at the function level (SSStarain/OPIS @ e1fb0e98, ``v3/metrics.py``,
``v3/evaluator.py``): the static structure filter of ``aggregate_structure_quality``, null residuals in an
unknown error space, and the presence false-positive count of a track whose extras are not attributable.
Every expected value is worked out by hand in the comments."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers.opis_builders import E1, E2, det, geometry, inv, obj, proj, win

from worldrecall.plugins.opis.release_outputs import core_values
from worldrecall.plugins.opis.rows import build_rows
from worldrecall.plugins.opis.score import row_table
from worldrecall.plugins.opis.structure import StructureRow, aggregate_structure, static_geometry_value
from worldrecall.plugins.opis.thresholds import OpisThresholds

TH = OpisThresholds()
ALL_WINDOWS = OpisThresholds(coverage_denominator="all_windows")


def test_static_structure_counts_only_scored_geometry_eligible_rows():
    # object A, two candidate windows: 0.9 on a scored row, 0.1 on an unscored (or geometry-ineligible) row.
    # The release reads a static value only where state == "scored" and geometry_eligible:
    #   raw = 0.9; shrunk = (0.9 + 2·0.5)/(1 + 2) = 1.9/3 = 0.63333; coverage-adjusted = 0.9/2 = 0.45.
    # Counting both (what we did): raw 0.5, shrunk (1.0 + 1)/(2 + 2) = 0.5, coverage 1.0/2 = 0.5.
    for other in (StructureRow("A", 0.1, True, False, scored=False),
                  StructureRow("A", 0.1, True, False, scored=True, geometry_eligible=False)):
        rows = [StructureRow("A", 0.9, True, False, scored=True), other]
        for th in (TH, ALL_WINDOWS):
            s = aggregate_structure(rows, th)
            assert s["raw"] == pytest.approx(0.9)
            assert s["shrunk"] == pytest.approx(1.9 / 3)
            assert s["coverage_adjusted"] == pytest.approx(0.45)
            assert s["n_valid_rows"] == 1 and s["coverage"] == pytest.approx(0.5)
    # a dynamic value counts whatever the row's state (the release's input_structure): (0.9 + 0.1)/2
    dyn = [StructureRow("D", 0.9, True, True, scored=False), StructureRow("D", 0.1, True, True, scored=False)]
    assert aggregate_structure(dyn, TH)["raw"] == pytest.approx(0.5)


def test_rows_pass_their_state_to_the_aggregation():
    # a built row carries a static value only when scored, so the filter changes no number of a real run:
    # s matched with 5 in-box correspondences, median residual 3 px over a 50 px diagonal -> exp(-0.06/0.05)
    from worldrecall.plugins.opis.score import structure_rows

    ref = np.array([[12, 12], [28, 12], [12, 28], [28, 28], [20, 20]], float)
    cur = ref + np.array([30.0, 30.0])
    s = obj("s", E1, track="static_geometry", bbox=(10.0, 10.0, 30.0, 30.0))
    geo = geometry({"s": proj("s", x0=12.0, spread=16.0)}, ref_px=ref, cur_px=cur, err=[3.0] * 5)
    rows, _ = build_rows(inv(s), [win("w0", [det("o1", E1, (40.0, 40.0, 70.0, 80.0))], geo)], TH)
    assert rows[0].state == "scored" and rows[0].structure == pytest.approx(math.exp(-1.2))
    (sr,) = structure_rows(rows, TH)
    assert sr.scored and sr.counted_value == pytest.approx(math.exp(-1.2))


def test_an_unknown_error_space_leaves_residual_and_normalised_error_null():
    # 5 correspondences inside both boxes, residuals in another space: the release's _reprojection_error is
    # inf, so normalized = inf, the row is not scored and reprojection_error_px stays None (no inf written)
    ref = np.array([[12, 12], [14, 14], [16, 16], [18, 18], [20, 20]], float)
    cur = ref + 40.0
    err = np.array([1.0, 2.0, 3.0, 4.0, 9.0])
    g = static_geometry_value(ref, cur, err, err <= 8.0, (10, 10, 30, 30), (40, 40, 70, 80), TH,
                              error_space="normalized")
    assert (g["value"], g["residual_px"], g["normalized_error"]) == (None, None, None)
    assert g["reason"] == "invalid_or_unknown_residual_units" and g["inlier_ratio"] == pytest.approx(0.8)
    # an empty observed box with known residuals: normalised error undefined -> both null as well
    g = static_geometry_value(ref, cur, err, None, (10, 10, 30, 30), (40, 40, 40, 80), TH)
    assert (g["value"], g["residual_px"], g["normalized_error"]) == (None, None, None)
    # through a window: the row table is strict JSON (the release writes allow_nan=False)
    s = obj("s", E1, track="static_geometry", bbox=(10.0, 10.0, 30.0, 30.0))
    geo = geometry({"s": proj("s", x0=42.0, spread=20.0)}, ref_px=ref, cur_px=cur, err=err)
    geo.error_space = "normalized"
    table = row_table(inv(s), [win("w0", [det("o1", E1, (40.0, 40.0, 70.0, 80.0))], geo)], TH)
    geo_diag = table[0]["diagnostics"]["geometry"]
    assert geo_diag["residual_px"] is None and geo_diag["normalized_error"] is None
    json.dumps(table, allow_nan=False, default=str)


def test_false_positives_of_an_unattributable_track_are_null_at_the_helper():
    # one window: a matched, one extra detection (E2). With extras attributable the count is 1; without
    # (two tracks and an unassigned detection) ours returns None at the helper, where the release's
    # aggregate_core_2d returns 0 and evaluate_v3 then overwrites it with None: the outputs are equal
    a = obj("a", E1)
    rows, extras = build_rows(inv(a), [win("w0", [det("o1", E1), det("ox", E2, (60.0, 60.0, 80.0, 80.0))])], TH)
    assert core_values(rows, extras)["presence_false_positive"] == 1
    off = core_values(rows, extras, fp_attributable=False)
    assert off["presence_false_positive"] is None
    # the rest as the release's helper computes with fp_attributable=False: no window evaluable for extras,
    # so no strict F1 and a frame score of 1 (a present, the extra not confirmed)
    assert off["presence_f1_strict"] is None and off["presence_score"] == 1.0
