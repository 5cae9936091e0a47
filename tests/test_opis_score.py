"""OPIS pure scoring: every formula with hand-computed values, the spec appendix fixtures 5 and 6, the OPIS
errata, the A.14 edge cases and the ablation switches."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.opis_builders import E1, E2, E3, FRAME, det, geometry, inv, obj, proj, win

from worldrecall.core.data import CaseFailure
from worldrecall.plugins.opis.association import (
    assign,
    associate,
    attribute_similarity,
    category_similarity,
    margins_of,
    pair_similarity,
    raw_cosine,
)
from worldrecall.plugins.opis.composite import (
    arithmetic_composite,
    composite_scores,
    core2d,
    geometric_composite,
)
from worldrecall.plugins.opis.records import (
    ClaimRecord,
    InventoryObject,
    Observation,
    PoseRecord,
    WindowGeometry,
)
from worldrecall.plugins.opis.rows import build_rows
from worldrecall.plugins.opis.score import row_table, score_case
from worldrecall.plugins.opis.structure import (
    StructureRow,
    aggregate_structure,
    claims_value,
    dynamic_structure_value,
    pose_route,
    pose_value,
    static_geometry_value,
)
from worldrecall.plugins.opis.thresholds import DEFAULT_THRESHOLDS, OpisThresholds, resolve
from worldrecall.plugins.opis.visibility import (
    classify_visibility,
    clipped_box_area,
    convex_hull_area,
    projected_visibility,
)

TH = OpisThresholds()
PARITY = OpisThresholds(official_parity=True)




# ------------------------------------------------------------------------------------------------ thresholds


def test_default_thresholds_hold_the_released_constants_as_plain_json():
    d = DEFAULT_THRESHOLDS
    assert (d["camera_confidence_min"], d["visible_fraction_min"], d["min_observable_area_px"]) == (0.65, 0.30, 16.0)
    assert (d["depth_coverage_min"], d["occlusion_tolerance"], d["occluded_fraction_min"]) == (0.70, 0.05, 0.70)
    assert (d["weight_embedding"], d["weight_attributes"], d["weight_category"]) == (0.65, 0.25, 0.10)
    assert (d["acceptance"], d["ambiguity_margin"], d["min_embedding_cosine"]) == (0.35, 0.05, 0.05)
    assert (d["geometry_error_scale"], d["pose_residual_scale"]) == (0.05, 0.2)
    assert (d["shrink_prior_mean"], d["shrink_prior_strength"]) == (0.5, 2.0)
    assert (d["weight_presence"], d["weight_identity"], d["weight_structure"]) == (0.2, 0.4, 0.4)
    assert (d["vlm_claim_confidence_min"], d["pose_min_coverage"], d["pose_min_edges"]) == (0.7, 0.5, 3)
    assert all(isinstance(v, (bool, int, float, str)) for v in d.values())


def test_resolve_refuses_unknown_keys_and_wrong_types():
    assert resolve({"acceptance": 0.4}).acceptance == 0.4
    assert resolve({"pose_min_edges": 4.0}).pose_min_edges == 4
    with pytest.raises(ValueError, match="unknown key 'acceptence'"):
        resolve({"acceptence": 0.4})
    with pytest.raises(ValueError, match="official_parity must be a bool"):
        resolve({"official_parity": 1})
    with pytest.raises(ValueError, match="composite"):
        resolve({"composite": "harmonic"})
    p = resolve({"official_parity": True})
    assert (p.effective_composite, p.effective_structure_in_composite, p.effective_coverage_denominator) == (
        "geometric", "shrunk", "all_windows")


# ------------------------------------------------------------------------------------------------ A.7 association


def test_pair_similarity_hand_computed():
    r = obj("r", [1.0, 0.0], attrs={"color": "Red", "shape": "compact"})
    o = det("o", [0.6, 0.8], attrs={"color": "red", "shape": "wide"})
    s, parts = pair_similarity(r, o, TH)
    # cos = 0.6 -> e = 0.8; a = mean(1, 0) = 0.5; c = 1 -> (0.65*0.8 + 0.25*0.5 + 0.10*1) / 1.0 = 0.745
    assert parts["cosine"] == pytest.approx(0.6)
    assert s == pytest.approx(0.745)
    # no shared attribute, empty observed category: (0.65*0.8 + 0.10*0.5) / (0.65 + 0.10) = 0.57/0.75 = 0.76
    s2, _ = pair_similarity(obj("r", [1.0, 0.0]), det("o", [0.6, 0.8], category=""), TH)
    assert s2 == pytest.approx(0.76)


def test_attribute_and_category_terms():
    # numeric: 1 - |7 - 10| / max(10, 1) = 0.7; string match is case-insensitive
    assert attribute_similarity({"mark": 10}, {"mark": 7}) == pytest.approx(0.7)
    assert attribute_similarity({"mark": 0.2}, {"mark": 3.0}) == 0.0            # 1 - 2.8/1 clipped to 0
    assert attribute_similarity({"color": "Blue", "mean_rgb": [1]}, {"color": "blue"}) == 1.0
    assert attribute_similarity({"texture": "x"}, {"color": "red"}) is None
    assert category_similarity("Cup", "cup") == 1.0
    assert category_similarity("cup", "mug") == 0.0
    assert category_similarity("", "mug") == 0.5


def test_similarity_hard_zeros():
    # raw cosine 1/sqrt(1 + 30^2) = 0.0333 < 0.05 -> 0 even with matching category and attributes
    r = obj("r", [1.0, 0.0], attrs={"color": "red"})
    assert pair_similarity(r, det("o", [1.0, 30.0], attrs={"color": "red"}), TH)[0] == 0.0
    # category alone cannot match
    assert pair_similarity(obj("r", None), det("o", None), TH)[0] == 0.0
    # non-finite embedding -> 0
    assert pair_similarity(obj("r", [1.0, 0.0]), det("o", [np.nan, 1.0]), TH)[0] == 0.0
    assert raw_cosine([1.0, 0.0], [1.0, 0.0, 0.0]) is None


def test_hungarian_beats_greedy_and_margins():
    sim = np.array([[0.9, 0.8], [0.85, 0.1]])
    # greedy: r0-o0 (0.9), r1 left with 0.1 < 0.35 -> total cost 0.1 + 0.65 = 0.75;
    # Hungarian: r0-o1, r1-o0 -> cost 0.2 + 0.15 = 0.35
    assert assign(sim, 0.35) == {0: 1, 1: 0}
    m = margins_of(sim, {0: 1, 1: 0}, 0.35)
    # r0: 0.8 - max(0.9, 0.35) = -0.1; r1: 0.85 - max(0.1, 0.35) = 0.5
    assert m == pytest.approx([-0.1, 0.5])
    # a pair below acceptance is rejected (null column cost 0.65 < 1 - 0.3)
    assert assign(np.array([[0.3]]), 0.35) == {}


def test_errata3_unmatched_reference_is_ambiguous_only_in_parity():
    refs = [obj("a", E1), obj("b", E2)]
    obs = [det("o1", E1)]
    # a: matched, margin = 1.0 - max(0.35) ; b: unmatched, margin = 0.35 - max(sim(b,o1), 0.35) <= 0
    default = associate(refs, obs, TH)
    parity = associate(refs, obs, PARITY)
    assert default.pairs == parity.pairs == {"a": "o1"}
    assert default.margins["b"] <= 0 and parity.margins["b"] <= 0
    assert "b" not in default.ambiguous and "b" in parity.ambiguous
    assert "a" not in parity.ambiguous


# ------------------------------------------------------------------------------------------------ A.6 visibility


def test_convex_hull_and_clipped_box():
    assert convex_hull_area(np.array([[0, 0], [4, 0], [4, 4], [0, 4], [2, 2]])) == pytest.approx(16.0)
    assert convex_hull_area(np.array([[0, 0], [1, 1], [2, 2]])) == 0.0      # collinear
    # (-10,-10,3,3) clipped to the frame is 3x3 = 9 px^2 (169 unclipped)
    assert clipped_box_area((-10, -10, 3, 3), FRAME) == 9.0
    assert clipped_box_area((-10, -10, 3, 3), None) == 169.0


@pytest.mark.parametrize(
    "kwargs, cam, state, presence",
    [
        ({}, 0.9, "expected_visible", True),
        ({}, 0.6, "unreliable_camera_pose", False),                    # 0.6 < 0.65
        ({"inside": 2}, 0.9, "outside_view", False),                   # 2/10 = 0.2 < 0.3
        ({"spread": 3.0}, 0.9, "too_small", False),                    # hull <= 3x3 = 9 < 16
        ({"valid": 6}, 0.9, "evaluator_failure", False),               # depth coverage 0.6 < 0.7
        ({"valid": 8, "occluded": 6}, 0.9, "occluded", False),         # occ 6/8 = 0.75 >= 0.7, visible 2/10 < 0.3
        ({"n": 20, "valid": 14, "occluded": 9}, 0.9, "evaluator_failure", False),  # occ 9/14=0.64, visible 5/20=0.25
        ({"valid": 8, "occluded": 5}, 0.9, "expected_visible", True),  # occ 5/8 = 0.625, visible 3/10 = 0.3
        ({"baseline": True}, 0.9, "insufficient_baseline", True),
        ({"n": 3}, 0.9, "evaluator_failure", False),                   # < 4 queries
    ],
)
def test_projected_visibility_steps(kwargs, cam, state, presence):
    v = projected_visibility(proj("a", **kwargs), cam, FRAME, TH)
    assert (v.state, v.presence_eligible) == (state, presence)
    assert v.geometry_eligible == (state == "expected_visible")


def test_errata2_depth_confidence_gates_valid_points():
    conf = [0.9] * 6 + [0.5] * 4          # 6/10 confident -> coverage 0.6 < 0.7 -> failure
    v = projected_visibility(proj("a", conf=conf), 0.9, FRAME, TH)
    assert v.state == "evaluator_failure" and v.reason == "insufficient_depth_evidence"
    assert projected_visibility(proj("a", conf=[0.9] * 10), 0.9, FRAME, TH).state == "expected_visible"


def test_classify_visibility_order():
    # a final projection outcome wins over a matched detection
    v = classify_visibility(projection=proj("a", inside=2), camera_confidence=0.9, frame_size=FRAME,
                            observed_bbox=(10, 10, 40, 40), geometry_required=True, frame_scored=True, th=TH)
    assert v.state == "outside_view"
    # projection failure falls through to direct observation, which vetoes geometry
    v = classify_visibility(projection=proj("a", valid=6), camera_confidence=0.9, frame_size=FRAME,
                            observed_bbox=(10, 10, 40, 40), geometry_required=True, frame_scored=True, th=TH)
    assert (v.state, v.presence_eligible, v.geometry_eligible) == ("expected_visible", True, False)
    # observed bbox clipped before the too-small test (A.14)
    v = classify_visibility(projection=None, camera_confidence=None, frame_size=FRAME, observed_bbox=(-10, -10, 3, 3),
                            geometry_required=False, frame_scored=False, th=TH)
    assert v.state == "too_small"
    # dynamic, unmatched, no projection -> evaluator failure (not missing)
    v = classify_visibility(projection=None, camera_confidence=None, frame_size=FRAME, observed_bbox=None,
                            geometry_required=False, frame_scored=True, th=TH, dynamic=True)
    assert (v.state, v.presence_eligible) == ("evaluator_failure", False)
    # O-A3 flagged variant: a dynamic object's projection makes it presence-eligible (never geometry)
    oa3 = OpisThresholds(dynamic_projection_presence=True)
    v = classify_visibility(projection=proj("d"), camera_confidence=0.9, frame_size=FRAME, observed_bbox=None,
                            geometry_required=False, frame_scored=True, th=oa3, dynamic=True)
    assert (v.state, v.presence_eligible, v.geometry_eligible) == ("expected_visible", True, False)


# ------------------------------------------------------------------------------------------------ A.11 structure


def test_static_geometry_value_hand_computed():
    ref = [[12, 12], [14, 14], [16, 16], [18, 18], [20, 20], [90, 90]]
    cur = [[52, 52], [54, 54], [56, 56], [58, 58], [60, 60], [95, 95]]
    err = [1.0, 2.0, 3.0, 4.0, 100.0, 0.5]   # the last one is outside both boxes
    # 5 instance correspondences; median error 3 px; observed bbox 30x40 -> diagonal 50 -> eps 0.06
    # g = exp(-0.06 / 0.05) = exp(-1.2) = 0.301194
    g = static_geometry_value(np.array(ref, float), np.array(cur, float), np.array(err), np.array(err) <= 8,
                              (10, 10, 30, 30), (40, 40, 70, 80), TH)
    assert g["n_correspondences"] == 5
    assert g["residual_px"] == 3.0 and g["normalized_error"] == pytest.approx(0.06)
    assert g["value"] == pytest.approx(math.exp(-1.2))
    assert g["inlier_ratio"] == pytest.approx(4 / 5)
    # 3 correspondences < 4 -> no value; the no-structural-threshold ablation accepts them
    few = static_geometry_value(np.array(ref[:3], float), np.array(cur[:3], float), np.array(err[:3]), None,
                                (10, 10, 30, 30), (40, 40, 70, 80), TH)
    assert few["value"] is None and few["reason"] == "insufficient_instance_correspondences"
    abl = static_geometry_value(np.array(ref[:3], float), np.array(cur[:3], float), np.array(err[:3]), None,
                                (10, 10, 30, 30), (40, 40, 70, 80), OpisThresholds(ablation_no_structural_threshold=True))
    assert abl["value"] == pytest.approx(math.exp(-(2.0 / 50) / 0.05))   # median of 1, 2, 3 = 2 px
    # a non-finite error among the selected -> no value
    bad = static_geometry_value(np.array(ref, float), np.array(cur, float), np.array([1, 2, np.inf, 4, 5, 0.5]),
                                None, (10, 10, 30, 30), (40, 40, 70, 80), TH)
    assert bad["value"] is None


def test_pose_value_hand_computed_and_errata6():
    # shared edges 0..3 (edge 4 has no reference length); rho = log 2, log 2, log 2, log 2.2
    # s = median = log 2; residuals 0, 0, 0, log 1.1 = 0.09531 -> (3 + exp(-0.09531/0.2)) / 4 = 0.905230
    p = pose_value([1, 1, 1, 1, np.nan], [2, 2, 2, 2.2, 1], TH)
    assert p["n_shared"] == 4 and p["coverage"] == pytest.approx(4 / 5)
    assert p["value"] == pytest.approx((3 + math.exp(-math.log(1.1) / 0.2)) / 4)
    # per-edge residuals |rho - s| and the family score, as the release reports them
    p = pose_value([1, 1, 1, 1, np.nan], [2, 2, 2, 2.2, 1], TH, edge_names=["a:b", "b:c", "c:d", "d:e", "e:f"])
    assert p["edge_log_errors"] == pytest.approx({"a:b": 0.0, "b:c": 0.0, "c:d": 0.0, "d:e": math.log(1.1)})
    assert p["family_scores"] == {"landmark_proportions": p["value"]} and p["reason"] == "scored"
    assert pose_value([1, np.nan, np.nan], [1, 1, 1], TH)["reason"] == "insufficient_landmark_evidence"
    # uniform size change -> residuals 0 -> 1
    assert pose_value([1, 2, 3], [2, 4, 6], TH)["value"] == pytest.approx(1.0)
    # errata 6: 3 valid reference edges out of 7 template edges
    ref = [1, 1, 1, np.nan, np.nan, np.nan, np.nan]
    cur = [1, 1, 1, 1, 1, 1, 1]
    assert pose_value(ref, cur, TH)["value"] is None            # coverage 3/7 = 0.43 < 0.5
    assert pose_value(ref, cur, PARITY)["value"] == pytest.approx(1.0)  # coverage 3/3
    # fewer than 3 shared edges -> no value
    assert pose_value([1, 1, np.nan], [1, 1, 1], PARITY)["value"] is None


def test_claims_value_hand_computed():
    claims = [
        {"fact_id": "f1", "family": "parts", "confidence": 0.9},
        {"fact_id": "f2", "family": "parts", "confidence": 0.8},
        {"fact_id": "f3", "family": "connectivity", "confidence": 0.95},
        {"fact_id": "f4", "family": "local_shape", "confidence": 0.5},    # below 0.7: not eligible
        {"fact_id": "f5", "family": "local_shape", "confidence": 0.9},    # no judgment -> unknown
    ]
    judgments = [
        {"fact_id": "f1", "status": "supported", "confidence": 0.9, "visible": True},
        {"fact_id": "f2", "status": "contradicted", "confidence": 0.8, "visible": True},
        {"fact_id": "f3", "status": "supported", "confidence": 0.6, "visible": True},    # judgment too unsure
        {"fact_id": "f4", "status": "supported", "confidence": 0.9, "visible": True},
    ]
    c = claims_value(claims, judgments, TH)
    # parts: (1 + 0) / 2 = 0.5; no other family evaluable -> 0.5; coverage 2 evaluable / 4 eligible
    assert c["value"] == pytest.approx(0.5)
    assert c["coverage"] == pytest.approx(0.5)
    assert claims_value(claims[:1], [{"fact_id": "f1", "status": "supported", "confidence": 0.9, "visible": False}],
                        TH)["value"] is None


def test_pose_routing_uses_the_release_names_exactly():
    # exact normalised name (lower case, _ and - as spaces), then the aliases; no last-word rule
    assert pose_route("Person", "articulated") == "human"
    assert pose_route("police-officer", "articulated") == "human"
    assert pose_route("Golden_Retriever", "articulated") == "animal"
    assert pose_route("baby", "articulated") == "human"          # HUMAN_ALIASES
    assert pose_route("black  bear", "articulated") == "animal"  # ANIMAL_ALIASES, whitespace collapsed
    assert pose_route("Young woman", "articulated") == "unsupported"  # our old last-word rule said human
    assert pose_route("two dogs", "articulated") == "unsupported"
    assert pose_route("puppy", "articulated") == "unsupported"        # not in the release's lists
    assert pose_route("robot arm", "articulated") == "unsupported"
    assert pose_route("dog", "deformable") == "vlm"


CLAIM_OK = ClaimRecord("p", [{"fact_id": "f", "family": "parts", "confidence": 0.9}],
                       [{"fact_id": "f", "status": "supported", "confidence": 0.9, "visible": True}])


def test_errata7_fallback_only_with_a_pose_measurement_in_parity():
    # no pose measurement stored for the row: default falls back to the VLM, parity does not (errata 7)
    d = dynamic_structure_value(category="person", kinematic_class="articulated", pose=None, claims=CLAIM_OK, th=TH)
    p = dynamic_structure_value(category="person", kinematic_class="articulated", pose=None, claims=CLAIM_OK, th=PARITY)
    assert (d["value"], d["backend"], d["fallback_attempted"], d["fallback_used"]) == (1.0, "vlm_fallback", True, True)
    assert d["fallback_reason"] == "missing_pose_measurement"
    # the release's pose result: backend pose, coverage 0.0 (not None), reason of the missing measurement
    assert (p["value"], p["backend"], p["coverage"], p["reason"]) == (None, "pose", 0.0, "missing_pose_measurement")
    assert p["fallback_attempted"] is False
    # a stored pose record without enough edges: both modes fall back
    rec = PoseRecord("p", "human", [f"e{i}" for i in range(10)], np.full(10, np.nan), np.ones(10))
    for th in (TH, PARITY):
        r = dynamic_structure_value(category="person", kinematic_class="articulated", pose=rec, claims=CLAIM_OK, th=th)
        assert (r["value"], r["backend"]) == (1.0, "vlm_fallback")
    # non-pose dynamic objects use the claims directly
    v = dynamic_structure_value(category="towel", kinematic_class="deformable", pose=None, claims=CLAIM_OK, th=TH)
    assert (v["backend"], v["fallback_attempted"]) == ("vlm", False)
    assert v["family_scores"] == {"parts": 1.0} and v["reason"] == "scored"


def test_unsupported_articulated_goes_through_pose_then_vlm_fallback():
    # the release gives an unsupported profile an empty pose record, so every matched row has a measurement
    # and the fallback runs in parity too; its labels are vlm_fallback / attempted
    for th in (TH, PARITY):
        r = dynamic_structure_value(category="robot arm", kinematic_class="articulated", pose=None,
                                    claims=CLAIM_OK, th=th)
        assert (r["value"], r["backend"], r["fallback_attempted"], r["fallback_used"]) == (1.0, "vlm_fallback", True, True)
        assert r["fallback_reason"] == "unsupported_articulated_category" and r["profile"] == "unsupported"
        # claims that give nothing: still an attempted fallback, no value
        none = dynamic_structure_value(category="robot arm", kinematic_class="articulated", pose=None, claims=None, th=th)
        assert (none["value"], none["backend"], none["fallback_attempted"], none["fallback_used"]) == (
            None, "vlm_fallback", True, False)
    # fallback off (the release's articulated_fallback: none): the pose route alone, no value
    off = dynamic_structure_value(category="robot arm", kinematic_class="articulated", pose=None, claims=CLAIM_OK,
                                  th=OpisThresholds(vlm_fallback=False))
    assert (off["value"], off["backend"], off["coverage"], off["reason"]) == (
        None, "pose", 0.0, "unsupported_articulated_category")


def test_pose_reason_codes_follow_the_release():
    names = [f"e{i}" for i in range(4)]
    # landmarks measured but too few shared edges: the release's insufficient_landmark_evidence
    rec = PoseRecord("p", "human", names, np.full(4, np.nan), np.ones(4))
    r = dynamic_structure_value(category="person", kinematic_class="articulated", pose=rec, claims=None,
                                th=OpisThresholds(vlm_fallback=False))
    assert (r["reason"], r["backend"], r["coverage"]) == ("insufficient_landmark_evidence", "pose", 0.0)
    # a side without landmarks names the producer's reason (reference first)
    rec = PoseRecord("p", "human", names, np.ones(4), np.full(4, np.nan), current_reason="current_pose_failure:ValueError")
    r = dynamic_structure_value(category="person", kinematic_class="articulated", pose=rec, claims=None,
                                th=OpisThresholds(vlm_fallback=False))
    assert r["reason"] == "current_pose_failure:ValueError"


def test_pose_profile_or_skeleton_mismatch_is_an_error():
    names = [f"e{i}" for i in range(4)]
    rec = PoseRecord("p", "human", names, np.ones(4), np.ones(4), current_template="animal")
    with pytest.raises(ValueError, match="profiles must match"):
        dynamic_structure_value(category="person", kinematic_class="articulated", pose=rec, claims=None, th=TH)
    rec = PoseRecord("p", "human", names, np.ones(4), np.ones(4), current_edge_names=names[::-1])
    with pytest.raises(ValueError, match="skeletons must match"):
        dynamic_structure_value(category="person", kinematic_class="articulated", pose=rec, claims=None, th=PARITY)
    with pytest.raises(ValueError, match="skeletons must match"):
        pose_value([1, 1, 1], [1, 1], TH)
    # through score_case: a one-line CaseFailure naming the window and the object
    d = obj("p", E1, track="dynamic_identity", kin="articulated", category="person")
    w = win("w0", [det("o1", E1, category="person")])
    w.pose["p"] = PoseRecord("p", "human", names, np.ones(4), np.ones(4), current_template="animal")
    with pytest.raises(CaseFailure, match="window w0 object p: pose profiles must match"):
        score_case(inv(d), [w], TH)


def test_structure_aggregation_hand_computed():
    rows = [
        StructureRow("A", 0.8, True, False), StructureRow("A", 0.6, True, False),
        StructureRow("A", None, True, False),          # visible but unscorable
        StructureRow("A", None, False, False),         # out of view
        StructureRow("B", None, True, False), StructureRow("B", None, True, False),
    ]
    s = aggregate_structure(rows, TH)
    # raw: A = (0.8 + 0.6)/2 = 0.7 (B has no value) -> 0.7
    assert s["raw"] == pytest.approx(0.7)
    # coverage, eligible denominator: A 1.4/3, B 0/2 -> (0.46667 + 0)/2 = 0.23333
    assert s["coverage_adjusted"] == pytest.approx((1.4 / 3) / 2)
    # shrunk: A (1.4 + 2*0.5)/(2 + 2) = 0.6, B (0 + 1)/(0 + 2) = 0.5 -> 0.55
    assert s["shrunk"] == pytest.approx(0.55)
    assert s["coverage"] == pytest.approx(2 / 5)
    allw = aggregate_structure(rows, OpisThresholds(coverage_denominator="all_windows"))
    # all windows: A 1.4/4 = 0.35, B 0 -> 0.175; coverage 2/6
    assert allw["coverage_adjusted"] == pytest.approx(0.175)
    assert allw["coverage"] == pytest.approx(2 / 6)
    mn = aggregate_structure(rows, OpisThresholds(ablation_min_instead_of_mean=True))
    # min: A m = 0.6 -> raw 0.6; coverage (2*0.6/3 + 0)/2 = 0.2; shrunk ((1.2 + 1)/4 + 0.5)/2 = 0.525
    assert (mn["raw"], mn["coverage_adjusted"], mn["shrunk"]) == pytest.approx((0.6, 0.2, 0.525))
    assert aggregate_structure([], TH)["raw"] is None


# ------------------------------------------------------------------------------------------------ A.12 composite


def test_fixture6_composite_forms():
    # P = 0.9, I = 0.3, S = 0.5: arithmetic 100 (0.18 + 0.12 + 0.20) = 50.0;
    # geometric 100 * 0.9^0.2 * 0.3^0.4 * 0.5^0.4 = 45.844
    assert arithmetic_composite(0.9, 0.3, 0.5, TH) == pytest.approx(50.0)
    assert geometric_composite(0.9, 0.3, 0.5, TH) == pytest.approx(45.844264, abs=1e-5)
    assert round(geometric_composite(0.9, 0.3, 0.5, TH), 1) == 45.8
    # PI-only (O-A4): 100 (0.2*0.9 + 0.8*0.3) = 42.0; geometric 100 * 0.9^0.2 * 0.3^0.8
    c = composite_scores(0.9, 0.3, None, TH)
    assert c["opis"] == pytest.approx(42.0) and c["pi_only"] == 1.0
    assert c["opis_geometric"] == pytest.approx(100 * 0.9 ** 0.2 * 0.3 ** 0.8)
    # Core-2D = 100 sqrt(0.27) = 51.9615
    assert core2d(0.9, 0.3) == pytest.approx(51.961524)
    assert composite_scores(0.9, 0.3, 0.5, PARITY)["opis"] == pytest.approx(45.844264, abs=1e-5)
    with pytest.raises(ValueError, match="structure"):
        arithmetic_composite(0.9, 0.3, 1.5, TH)


# ------------------------------------------------------------------------------------------------ A.8/A.9 rows, presence


def _static_pair():
    return obj("a", E1, track="static_geometry"), obj("b", E2, track="static_geometry", bbox=(50, 50, 70, 70))


def test_fixture5_missing_reference_zeroes_the_frame():
    a, b = _static_pair()
    g = lambda: geometry({"a": proj("a"), "b": proj("b", x0=50)})
    windows = [
        win("w0", [det("o1", E1), det("o2", E2, (50, 50, 70, 70))], g(), ordinal=0),
        win("w1", [det("o1", E1)], g(), ordinal=1),                # b expected visible but missing
    ]
    out = score_case(inv(a, b), windows, DEFAULT_THRESHOLDS)
    # frame scores 1 and 0 -> P = 0.5
    assert out["presence"] == pytest.approx(0.5)
    assert out["presence_fn"] == 1.0 and out["rows_generation_failure"] == 1.0
    # identity: a matched twice (1, 1), b once (1) -> 1; the missing row does not enter I
    assert out["identity"] == pytest.approx(1.0)


def test_fixture5_extra_with_unknown_visibility_reference_is_not_counted():
    a = obj("a", E1)                                   # identity-only object, detected
    d = obj("d", E2, track="dynamic_identity", kin="deformable", category="towel")   # unmatched, no evidence
    windows = [win("w0", [det("o1", E1), det("x", E3, (60, 60, 90, 90), category="lamp")])]
    out = score_case(inv(a, d), windows)
    # d has no visibility evidence -> evaluator_failure; an unknown missing object could explain "x",
    # so extras are not attributable -> the frame scores 1
    assert out["presence"] == 1.0
    assert out["presence_fp"] == 0.0 and out["presence_unverified_extra"] == 1.0
    # once d is detected every row is evaluable and "x" is a confirmed extra -> frame 0
    windows = [win("w0", [det("o1", E1), det("o2", E2, category="towel"), det("x", E3, (60, 60, 90, 90), category="lamp")])]
    out = score_case(inv(a, d), windows)
    assert out["presence"] == 0.0 and out["presence_fp"] == 1.0


def test_window_with_only_a_confirmed_extra_scores_zero_and_empty_window_is_skipped():
    a, _ = _static_pair()
    windows = [
        win("w0", [det("o1", E1)], geometry({"a": proj("a")}), ordinal=0),             # f = 1
        win("w1", [det("x", E3, (60, 60, 90, 90))], geometry({"a": proj("a", inside=1)}), ordinal=1),  # a outside view; extra -> 0
        win("w2", [], geometry({"a": proj("a", inside=1)}), ordinal=2),                # nothing evaluable -> skipped
    ]
    out = score_case(inv(a), windows)
    # mean(1, 0) = 0.5 over 2 scored windows
    assert out["presence"] == pytest.approx(0.5) and out["n_presence_windows"] == 2.0
    assert out["n_windows"] == 3.0


def test_errata4_static_geometry_failure_keeps_presence():
    a, _ = _static_pair()
    # scored frame, projection expected visible, but no correspondences -> no static value
    windows = [win("w0", [det("o1", E1)], geometry({"a": proj("a")}, ref_px=np.zeros((0, 2)), cur_px=np.zeros((0, 2)), err=np.zeros(0)))]
    rows_d, _ = build_rows(inv(a), windows, TH)
    rows_p, _ = build_rows(inv(a), windows, PARITY)
    assert rows_d[0].state == "geometry_unavailable" and rows_p[0].state == "evaluator_failure"
    assert rows_d[0].presence == rows_p[0].presence == 1.0
    assert score_case(inv(a), windows, {"official_parity": True})["presence"] == 1.0


def test_errata5_detection_of_a_removed_object():
    a, _ = _static_pair()
    b = obj("b", E2, bbox=(50, 50, 70, 70))           # identity-only, keeps the window evaluable
    # a is predicted occluded (removed before association) but still detected as "o1"
    windows = [win("w0", [det("o1", E1), det("o2", E2, (50, 50, 70, 70))],
                   geometry({"a": proj("a", valid=8, occluded=6)}))]
    parity = score_case(inv(a, b), windows, {"official_parity": True})
    default = score_case(inv(a, b), windows)
    # parity: o1 is an unassigned observation -> confirmed extra -> frame 0
    assert parity["presence"] == 0.0 and parity["presence_fp"] == 1.0
    # default: o1 is attributed to the occluded object a -> no extra -> frame 1
    assert default["presence"] == 1.0 and default["presence_fp"] == 0.0


def test_errata1_and_a14_dynamic_unmatched_drops_out_of_presence():
    a = obj("a", E1)
    d = obj("d", E2, track="dynamic_identity", kin="articulated", category="person")
    out = score_case(inv(a, d), [win("w0", [det("o1", E1)])])
    assert out["presence"] == 1.0 and out["presence_unverified_missing"] == 1.0
    # O-A3 variant: d's reference position projects in view -> it counts as missing
    out = score_case(inv(a, d), [win("w0", [det("o1", E1)], geometry({"d": proj("d", x0=50)}))],
                     {"dynamic_projection_presence": True})
    assert out["presence"] == 0.0


def test_a14_failed_geometry_falls_back_to_direct_observation():
    a, b = _static_pair()
    failed = WindowGeometry(scored=False, failure_reason="fewer than 12 matches")
    out_rows = row_table(inv(a, b), [win("w0", [det("o1", E1)], failed)])
    ra, rb = out_rows
    assert ra["visibility_state"] == "expected_visible" and ra["presence"] == 1.0
    assert ra["state"] == "geometry_unavailable"
    # b: unmatched static object without projection -> evaluator failure, not missing
    assert rb["state"] == "evaluator_failure" and rb["presence"] is None


def test_ambiguous_match_counts_for_p_and_i_but_gets_no_dynamic_structure():
    # two look-alike detections: the margin is 0 < 0.05 -> ambiguous
    d = obj("d", E1, track="dynamic_identity", kin="deformable", category="towel")
    claims = {"d": ClaimRecord("d", [{"fact_id": "f", "family": "parts", "confidence": 0.9}],
                               [{"fact_id": "f", "status": "supported", "confidence": 0.9, "visible": True}])}
    windows = [win("w0", [det("o1", E1, category="towel"), det("o2", E1, (50, 50, 70, 70), category="towel")], claims=claims)]
    rows, _ = build_rows(inv(d), windows, TH)
    assert rows[0].ambiguous and rows[0].presence == 1.0 and rows[0].identity == pytest.approx(1.0)
    # the row keeps its own (visibility) reason, the structure evidence says why it has no value
    assert rows[0].structure is None and rows[0].reason == "direct_observation"
    assert rows[0].diagnostics["structure_evidence"] == {"reason": "ambiguous_association"}
    # with one detection the same claims give structure 1
    rows, _ = build_rows(inv(d), [win("w0", [det("o1", E1, category="towel")], claims=claims)], TH)
    assert rows[0].structure == 1.0


# ------------------------------------------------------------------------------------------------ A.10 identity


def test_identity_per_object_mean_and_diagnostics():
    a = obj("a", [1.0, 0.0], group="cups")
    b = obj("b", [0.0, 1.0], bbox=(50, 50, 70, 70), group="cups")
    w0 = win("w0", [det("o1", [0.6, 0.8], track_id="t1"), det("o2", [0.0, 1.0], (50, 50, 70, 70), track_id="t2")], ordinal=0)
    w1 = win("w1", [det("o1", [1.0, 0.0], track_id="t1")], ordinal=1)
    out = score_case(inv(a, b), [w0, w1])
    # a: cos 0.6 (w0) and 1.0 (w1) -> 0.8; b: 1.0 -> I = (0.8 + 1.0)/2 = 0.9
    assert out["identity"] == pytest.approx(0.9)
    # min instead of mean: a -> 0.6, b -> 1.0 -> 0.8
    assert score_case(inv(a, b), [w0, w1], {"ablation_min_instead_of_mean": True})["identity"] == pytest.approx(0.8)
    # set identity: group "cups": w0 mean(0.6, 1.0) = 0.8, w1 1.0 -> 0.9
    assert out["identity_set"] == pytest.approx(0.9)
    assert out["identity_swap_rate"] == 0.0
    # a raw cosine below 0.05 cannot match, whatever the attributes: no identity evidence at all
    c = obj("c", [1.0, 0.0], attrs={"color": "red", "shape": "tall"})
    o = det("o", [0.05, 1.0], attrs={"color": "red", "shape": "tall"})  # cos = 0.0499 < 0.05 -> similarity 0
    assert score_case(inv(c), [win("w0", [o])])["identity_status"] == "no_evidence_zero_fallback"


def test_identity_swap_rate_counts_track_identity_changes():
    a = obj("a", [1.0, 0.0])
    b = obj("b", [0.0, 1.0], bbox=(50, 50, 70, 70))
    # track t1 carries a, then b, then b -> 1 swap over 2 transitions
    ws = [
        win("w0", [det("o1", [1.0, 0.0], track_id="t1")], ordinal=0),
        win("w1", [det("o1", [0.0, 1.0], (50, 50, 70, 70), track_id="t1")], ordinal=1),
        win("w2", [det("o1", [0.0, 1.0], (50, 50, 70, 70), track_id="t1")], ordinal=2),
    ]
    assert score_case(inv(a, b), ws)["identity_swap_rate"] == pytest.approx(0.5)


# ------------------------------------------------------------------------------------------------ score_case end to end


def _structure_case():
    """One static object over 3 windows: scored twice (values known), out of view once."""
    a = obj("a", E1, track="static_geometry", bbox=(10, 10, 30, 30))
    ref = np.array([[12, 12], [14, 14], [16, 16], [18, 18]], float)
    cur = ref.copy()
    g_good = geometry({"a": proj("a")}, ref_px=ref, cur_px=cur, err=[0.0, 0.0, 0.0, 0.0])        # g = 1
    g_bad = geometry({"a": proj("a")}, ref_px=ref, cur_px=cur, err=[2.0, 2.0, 2.0, 2.0])         # eps = 2/28.28
    g_out = geometry({"a": proj("a", inside=1)}, ref_px=ref, cur_px=cur, err=[0.0] * 4)          # outside view
    ws = [
        win("w0", [det("o1", E1)], g_good, ordinal=0),
        win("w1", [det("o1", E1)], g_bad, ordinal=1),
        win("w2", [], g_out, ordinal=2),
    ]
    return inv(a), ws


def test_score_case_structure_and_composites():
    inventory, ws = _structure_case()
    out = score_case(inventory, ws)
    g2 = math.exp(-(2.0 / math.hypot(20, 20)) / 0.05)          # observed bbox 20x20 -> diagonal 28.284
    # raw = (1 + g2)/2; eligible windows = 2 -> coverage-adjusted = (1 + g2)/2 as well
    assert out["structure_raw"] == pytest.approx((1 + g2) / 2)
    assert out["structure"] == pytest.approx((1 + g2) / 2)
    # all-windows denominator (3 windows, one out of view) -> (1 + g2)/3
    allw = score_case(inventory, ws, {"coverage_denominator": "all_windows"})
    assert allw["structure"] == pytest.approx((1 + g2) / 3)
    # shrunk = (1 + g2 + 1)/(2 + 2)
    assert out["structure_shrunk"] == pytest.approx((2 + g2) / 4)
    # P = 1 (2 scored windows, w2 skipped), I = 1 -> OPIS = 100 (0.2 + 0.4 + 0.4 S)
    assert out["presence"] == 1.0 and out["identity"] == 1.0
    assert out["opis"] == pytest.approx(100 * (0.6 + 0.4 * (1 + g2) / 2))
    assert out["pi_only"] == 0.0 and out["structure_mode"] == "structure"
    # official parity: geometric with the shrunk structure
    par = score_case(inventory, ws, {"official_parity": True})
    assert par["opis"] == pytest.approx(100 * ((2 + g2) / 4) ** 0.4)
    assert par["composite_form"] == "geometric"
    # structure disabled: PI-only 100 (0.2 + 0.8) = 100; parity uses the raw static mean instead
    off = score_case(inventory, ws, {"structure_enabled": False})
    assert off["pi_only"] == 1.0 and off["opis"] == pytest.approx(100.0) and off["structure"] is None
    offp = score_case(inventory, ws, {"structure_enabled": False, "official_parity": True})
    assert offp["pi_only"] == 0.0 and offp["opis"] == pytest.approx(100 * ((1 + g2) / 2) ** 0.4)


def test_ablation_no_coverage_multiplier_uses_raw_structure():
    inventory, ws = _structure_case()
    ws[1].observations = []       # a now missing in w1 (eligible by projection) -> coverage drops
    base = score_case(inventory, ws, {"coverage_denominator": "eligible"})
    # a: one value (1.0) over 2 eligible windows -> coverage-adjusted 0.5; raw 1.0
    assert base["structure"] == pytest.approx(0.5) and base["structure_raw"] == pytest.approx(1.0)
    abl = score_case(inventory, ws, {"ablation_no_coverage_multiplier": True})
    assert abl["structure"] == pytest.approx(1.0)
    # P: w0 1, w1 0 -> 0.5; OPIS = 100 (0.1 + 0.4 + 0.4) = 90 with raw S, 100 (0.1 + 0.4 + 0.2) = 70 with coverage
    assert abl["opis"] == pytest.approx(90.0) and base["opis"] == pytest.approx(70.0)


def test_score_case_refuses_bad_inputs_with_one_line():
    a = obj("a", E1)
    with pytest.raises(CaseFailure, match="no sampled windows"):
        score_case(inv(a), [])
    with pytest.raises(CaseFailure, match="duplicate window_id"):
        score_case(inv(a), [win("w0", []), win("w0", [])])
    with pytest.raises(CaseFailure) as e:
        score_case(inv(a), [win("w0", [det("o1", [1.0, 0.0])])])
    assert "embedding dimension 2 != reference_scene's 3" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(CaseFailure, match="non-finite"):
        score_case(inv(a), [win("w0", [det("o1", [np.nan, 0.0, 1.0])])])


def test_no_evidence_gives_zero_with_status():
    d = obj("d", E1, track="dynamic_identity", kin="deformable")
    out = score_case(inv(d), [win("w0", [])])
    assert out["presence"] == 0.0 and out["presence_status"] == "no_evidence_zero_fallback"
    assert out["identity"] == 0.0 and out["identity_status"] == "no_evidence_zero_fallback"
    assert out["identity_score_status"] == "no_evidence_zero_fallback"
    assert out["presence_score_status"] == "no_evidence_zero_fallback"
    assert out["presence_score_known_evidence"] == 0.0          # 0.0, not None, when undefined
    # the dynamic object is a structure candidate with no eligible window: coverage None, shrunk = prior 0.5
    assert out["structure_shrunk"] == pytest.approx(0.5)


def test_a14_object_without_reference_queries_gets_no_static_geometry_by_default():
    a = obj("a", E1, track="static_geometry")
    ref = np.array([[12, 12], [14, 14], [16, 16], [18, 18]], float)
    # scored frame, a matched, but no projection stored for it (no valid eroded support -> no queries)
    w = win("w0", [det("o1", E1)], geometry({}, ref_px=ref, cur_px=ref, err=[0.0] * 4))
    rows_d, _ = build_rows(inv(a), [w], TH)
    rows_p, _ = build_rows(inv(a), [w], PARITY)
    assert rows_d[0].structure is None and rows_d[0].reason == "no_reference_queries"
    # the released code scores it from the instance correspondences: median error 0 -> exp(0) = 1
    assert rows_p[0].structure == 1.0 and rows_p[0].state == "scored"


def test_vectorised_similarity_matrix_equals_pair_similarity():
    from worldrecall.plugins.opis.association import similarity_matrix

    rng = np.random.default_rng(0)

    def emb():
        kind = rng.integers(0, 6)
        return [None, np.zeros(4), np.array([np.nan, 1, 1, 1.0]), rng.normal(size=5), rng.normal(size=4),
                rng.normal(size=4)][kind]

    def attrs():
        return {k: (float(rng.integers(0, 5)) if k == "mark" else str(rng.choice(["red", "Red", "blue"])))
                for k in ("color", "shape", "texture", "mark") if rng.random() < 0.4}

    cats = ["cup", "Cup ", "", "box"]
    for _ in range(100):
        refs = [InventoryObject(f"r{i}", cats[rng.integers(0, 4)], (0, 0, 1, 1), emb(), attrs())
                for i in range(rng.integers(1, 5))]
        obs = [Observation(f"o{i}", (0, 0, 1, 1), cats[rng.integers(0, 4)], 1.0, attrs(), emb())
               for i in range(rng.integers(1, 5))]
        loop = np.array([[pair_similarity(r, o, TH)[0] for o in obs] for r in refs])
        np.testing.assert_allclose(similarity_matrix(refs, obs, TH), loop, atol=1e-12)


def test_soft_presence_diagnostics_hand_computed():
    a, b = _static_pair()
    g = lambda: geometry({"a": proj("a"), "b": proj("b", x0=50)})
    windows = [
        win("w0", [det("o1", E1), det("o2", E2, (50, 50, 70, 70))], g(), ordinal=0),
        win("w1", [det("o1", E1)], g(), ordinal=1),
    ]
    out = score_case(inv(a, b), windows)
    # TP = 3 (a, b in w0; a in w1), FN = 1 (b in w1), FP = 0, nothing unverified
    assert (out["presence_tp"], out["presence_fn"], out["presence_fp"]) == (3.0, 1.0, 0.0)
    assert out["presence_recall"] == pytest.approx(3 / 4)
    assert out["presence_precision"] == pytest.approx(1.0)
    # F1 = 2*3 / (2*3 + 0 + 1) = 6/7
    assert out["presence_f1"] == pytest.approx(6 / 7)
    # frame macro: w0 4/4 = 1, w1 2/(2 + 0 + 1) = 2/3 -> 5/6
    assert out["presence_f1_frame_macro"] == pytest.approx(5 / 6)


def test_no_structural_threshold_ablation_on_dynamic_evidence():
    abl = OpisThresholds(ablation_no_structural_threshold=True)
    # 1 shared edge of 10: default needs 3 edges and coverage 0.5; the ablation keeps it (residual 0 -> 1)
    ref = [1.0] + [np.nan] * 9
    assert pose_value(ref, [2.0] * 10, TH)["value"] is None
    assert pose_value(ref, [2.0] * 10, abl)["value"] == pytest.approx(1.0)
    # a low-confidence claim and judgment are kept by the ablation
    claims = [{"fact_id": "f", "family": "parts", "confidence": 0.3}]
    judg = [{"fact_id": "f", "status": "contradicted", "confidence": 0.3, "visible": True}]
    assert claims_value(claims, judg, TH)["value"] is None
    assert claims_value(claims, judg, abl)["value"] == 0.0


def test_camera_motion_summary_divides_by_all_frames():
    from worldrecall.plugins.opis.camera_motion import summarize_camera_motion

    def g(d, scored=True):
        return WindowGeometry(scored=scored, displacement_fraction=d)

    # 6 frames: 3 scored and moving (0.02, 0.05, 0.011), 1 scored still (0.005), 2 without a camera
    frames = [g(0.02), g(0.05), g(0.005), g(0.011), g(None, scored=False), None]
    m = summarize_camera_motion(frames)
    # moving 3 / all 6 = 0.5 >= 0.5 -> valid; averaging scored windows only would give 3 / 4 as well
    assert (m["motion_valid"], m["n_valid_frames"], m["coverage"]) == (True, 4, pytest.approx(4 / 6))
    assert m["moving_frame_fraction"] == pytest.approx(0.5) and m["reason"] == "camera_change_detected"
    # one more frame without a camera: 3 / 7 < 0.5 -> not valid (scored-only averaging would say 3 / 4, valid)
    m = summarize_camera_motion(frames + [g(None, scored=False)])
    assert (m["motion_valid"], m["reason"]) == (False, "insufficient_camera_change")
    assert m["moving_frame_fraction"] == pytest.approx(3 / 7)
    # fewer than 3 valid frames: undecided
    m = summarize_camera_motion([g(0.5), g(0.5), None])
    assert (m["motion_valid"], m["reason"]) == (None, "insufficient_camera_evidence")
    # archived records with only the moves flag still decide
    assert summarize_camera_motion([WindowGeometry(scored=True, moves=True)] * 3)["motion_valid"] is True
    # through score_case: reported as a diagnostic number
    o = obj("a", E1)
    ws = [win(f"w{k}", [det("o1", E1)], geo=WindowGeometry(scored=k < 3, displacement_fraction=0.02), ordinal=k)
          for k in range(7)]
    v = score_case(inv(o), ws, TH)
    assert v["motion_valid"] == 0.0 and v["motion_moving_frame_fraction"] == pytest.approx(3 / 7)


def test_identity_row_is_clamped_at_zero_for_a_negative_cosine():
    # the association's hard zero (raw cosine < 0.05) is lowered so a negative-cosine pair can match on its
    # colour and category: cos = -0.6 -> e = 0.2; score (0.65 x 0.2 + 0.25 x 1 + 0.10 x 1) / 1 = 0.48 >= 0.35
    th = OpisThresholds(min_embedding_cosine=-1.0)
    a = obj("a", E1, attrs={"color": "red"})
    b = obj("b", E2, bbox=(50.0, 50.0, 70.0, 70.0), attrs={"color": "blue"})
    w = win("w0", [det("oa", [-0.6, 0.0, 0.8], attrs={"color": "red"}),
                   det("ob", [0.0, 0.8, 0.6], (50.0, 50.0, 70.0, 70.0), attrs={"color": "blue"})])
    rows, _ = build_rows(inv(a, b), [w], th)
    assert rows[0].observed_id == "oa" and rows[0].presence == 1.0
    assert rows[0].identity == 0.0                         # max(0, -0.6), not -0.6
    assert rows[1].identity == pytest.approx(0.8)
    # I = mean over objects (0 + 0.8) / 2 = 0.4; without the clamp it would be (-0.6 + 0.8) / 2 = 0.1
    assert score_case(inv(a, b), [w], th)["identity"] == pytest.approx(0.4)


def test_projection_not_from_the_input_image_is_no_evidence():
    s = obj("s", E1, track="static_geometry")
    p = proj("s")
    p.reference_source = "reference_and_current"          # e.g. a pairwise point map, not the input alone
    g = geometry({"s": p})
    # unmatched: the projection is an evaluator failure, never "missing"
    rows, _ = build_rows(inv(s), [win("w0", [], g)], TH)
    assert (rows[0].visibility_state, rows[0].reason, rows[0].presence) == (
        "evaluator_failure", "reference_projection_not_input_only", None)
    # matched: direct observation (presence 1) but not geometry eligible (the projection vetoes geometry)
    rows, _ = build_rows(inv(s), [win("w0", [det("o1", E1)], g)], PARITY)
    assert rows[0].presence == 1.0 and rows[0].state == "evaluator_failure"
    assert rows[0].reason == "geometry_unavailable_for_visible_instance"
    assert rows[0].diagnostics["projection_state"] == "evaluator_failure"


def test_visibility_confidence_and_per_projection_camera_confidence():
    s = obj("s", E1, track="static_geometry")
    # window camera 0.9, projection's own 0.5 < 0.65 -> unreliable (the projection's value is used), confidence 0
    p = proj("s")
    p.camera_confidence = 0.5
    rows, _ = build_rows(inv(s), [win("w0", [], geometry({"s": p}, camera_confidence=0.9))], TH)
    assert rows[0].visibility_state == "unreliable_camera_pose" and rows[0].visibility_confidence == 0.0
    # projected expected visible: the camera confidence; outside view likewise; direct observation: 1
    rows, _ = build_rows(inv(s), [win("w0", [], geometry({"s": proj("s")}, camera_confidence=0.8))], TH)
    assert rows[0].visibility_state == "expected_visible" and rows[0].visibility_confidence == pytest.approx(0.8)
    rows, _ = build_rows(inv(s), [win("w0", [], geometry({"s": proj("s", inside=2)}, camera_confidence=0.8))], TH)
    assert rows[0].visibility_state == "outside_view" and rows[0].visibility_confidence == pytest.approx(0.8)
    d = obj("d", E1, track="dynamic_identity", kin="deformable")
    rows, _ = build_rows(inv(d), [win("w0", [det("o1", E1)])], TH)
    assert rows[0].visibility_confidence == 1.0
    rows, _ = build_rows(inv(d), [win("w0", [])], TH)
    assert rows[0].visibility_confidence == 0.0          # no visibility evidence


def test_static_residual_in_another_error_space_or_missing_reports_support():
    ref = np.array([[12, 12], [14, 14], [16, 16], [18, 18], [20, 20]], float)
    cur = ref + 40.0
    err = np.array([1.0, 2.0, 3.0, 4.0, 9.0])
    inl = err <= 8.0
    box_r, box_o = (10, 10, 30, 30), (40, 40, 70, 80)
    # hull of the 5 collinear reference points has area 0 -> coverage 0; inliers 4 / 5
    for e, space in ((err, "normalized"), (None, "source_pixels")):
        g = static_geometry_value(ref, cur, e, inl, box_r, box_o, TH, error_space=space)
        assert g["value"] is None and g["reason"] == "invalid_or_unknown_residual_units"
        assert g["n_correspondences"] == 5 and g["inlier_ratio"] == pytest.approx(0.8) and g["coverage"] == 0.0
        assert g["residual_px"] is None and g["normalized_error"] is None  # null as released, never inf
    # no correspondences at all: the count gate (the release's reason), no residual computed
    g = static_geometry_value(np.zeros((0, 2)), np.zeros((0, 2)), np.zeros(0), None, box_r, box_o, TH)
    assert (g["value"], g["reason"], g["n_correspondences"], g["coverage"]) == (
        None, "insufficient_instance_correspondences", 0, 0.0)
    # through a window: a geometry whose residuals are in another space gives no static value
    s = obj("s", E1, track="static_geometry", bbox=box_r)
    geo = geometry({"s": proj("s", x0=42.0, spread=20.0)}, ref_px=ref, cur_px=cur, err=err)
    geo.error_space = "normalized"
    rows, _ = build_rows(inv(s), [win("w0", [det("o1", E1, box_o)], geo)], TH)
    assert rows[0].structure is None and rows[0].diagnostics["geometry"]["inlier_ratio"] == pytest.approx(0.8)
    geo.error_space = "source_pixels"
    rows, _ = build_rows(inv(s), [win("w0", [det("o1", E1, box_o)], geo)], TH)
    # median 3 px over diagonal 50 -> exp(-0.06 / 0.05)
    assert rows[0].structure == pytest.approx(math.exp(-1.2))


def _release_case():
    """s (static) matched with 5 correspondences in w0 and missing in w1; d (dynamic) matched with a supported
    claim in w0 and without evidence in w1; one extra detection in w0."""
    s = obj("s", E1, track="static_geometry", bbox=(10.0, 10.0, 30.0, 30.0))
    d = obj("d", E2, track="dynamic_identity", kin="deformable", bbox=(50.0, 50.0, 70.0, 70.0))
    ref = [[12, 12], [28, 12], [12, 28], [28, 28], [20, 20]]
    g0 = geometry({"s": proj("s")}, ref_px=ref, cur_px=ref, err=[1.0, 2.0, 3.0, 4.0, 9.0])
    w0 = win("w0", [det("o1", E1), det("od", E2, (50.0, 50.0, 70.0, 70.0)), det("ox", E3, (80.0, 80.0, 95.0, 95.0))],
             g0, claims={"d": ClaimRecord("d", [{"fact_id": "f", "family": "parts", "confidence": 0.9}],
                                           [{"fact_id": "f", "status": "supported", "confidence": 0.9, "visible": True}])})
    w1 = win("w1", [], geometry({"s": proj("s")}), ordinal=1)
    return inv(s, d), [w0, w1]


def test_release_named_presence_and_identity_values():
    out = score_case(*_release_case(), TH)
    # w0: both matched + 1 confirmed extra -> 0; w1: s missing -> 0 (d has no evidence: not attributable)
    assert out["presence_strict_frame_macro"] == 0.0 and out["presence_score"] == 0.0
    # TP 2, FN 1, FP 1, unverified missing 1 (d in w1), unverified extra 0
    assert out["presence_score_known_evidence"] == pytest.approx(4 / 6)       # 2TP / (2TP + FP + FN)
    assert out["presence_f1_strict"] is None                                  # w1's extras are unknown
    assert out["presence_score_status"] == "partial_fp_evidence"
    assert out["presence_score_policy"] == "strict_frame_presence_v1"
    assert out["presence_recall_instance_macro"] == pytest.approx((0.5 + 1.0) / 2)  # s: 1 of 2, d: 1 of 1
    assert out["identity_unambiguous_rows"] == 2.0 and out["identity_unambiguous_instances"] == 2.0
    assert out["identity_evidence_coverage"] == 1.0 and out["identity_score_status"] == "observed"


def test_release_named_geometry_and_structure_values():
    out = score_case(*_release_case(), TH)
    eps = 3.0 / math.hypot(20, 20)                      # median of 1, 2, 3, 4, 9 over the observed diagonal
    g = math.exp(-eps / 0.05)
    assert out["v3_reference_projective_score"] == pytest.approx(g)
    assert out["v3_correspondence_coverage"] == pytest.approx(256 / 400)   # 16 x 16 hull in a 20 x 20 box
    assert out["v3_inlier_ratio"] == pytest.approx(0.8) and out["v3_mean_reprojection_error_px"] == 3.0
    assert out["v3_normalized_reprojection_error"] == pytest.approx(eps)
    assert out["v3_geometry_coverage"] == 0.5 and out["v3_geometry_candidate_rows"] == 2.0
    # dynamic d over both windows: values [1.0] of 2 -> shrunk (1 + 2 x 0.5) / (1 + 2), coverage-adjusted 1/2
    assert out["v3_input_structure_score"] == pytest.approx(2 / 3)
    assert out["v3_input_structure_score_raw"] == 1.0
    assert out["v3_input_structure_score_coverage_adjusted"] == pytest.approx(0.5)
    assert out["v3_structure_coverage"] == 0.5 and out["v3_structure_valid_rows"] == 1.0
    # all candidates: s (g of 2 rows) and d
    assert out["v3_structural_quality_score"] == pytest.approx(((g + 1) / 3 + 2 / 3) / 2)
    assert out["v3_structural_quality_score_raw"] == pytest.approx((g + 1) / 2)
    assert out["v3_structural_quality_coverage"] == 0.5
    # the score track: geometric, presence 0 -> 0, with its mode and weights
    assert out["full_igm_score"] == 0.0 and out["full_igm_score_mode"] == "presence_identity_structural_quality"
    assert out["effective_score_weights"] == {"presence": 0.2, "identity": 0.4, "structural_quality": 0.4}


def test_track_metrics_with_unattributable_extras():
    out = score_case(*_release_case(), TH)
    g = math.exp(-(3.0 / math.hypot(20, 20)) / 0.05)
    # two tracks and an unassigned detection: extras are attributed to no track (fp_attributable=False)
    assert out["track_false_positive_policy"] == "unassigned_extras_not_attributable_to_individual_tracks"
    st, dy = out["track_metrics"]["static_geometry"], out["track_metrics"]["dynamic_identity"]
    # static track: w0 present (the extra no longer counts) -> 1, w1 missing -> 0
    assert st["presence_score"] == 0.5 and st["presence_false_positive"] is None and st["presence_f1_strict"] is None
    assert st["core_2d_score"] == pytest.approx(100 * math.sqrt(0.5))
    assert st["full_igm_score"] == pytest.approx(100 * 0.5 ** 0.2 * ((g + 1) / 3) ** 0.4)
    # dynamic track: w0 present, w1 has nothing evaluable -> skipped
    assert dy["presence_score"] == 1.0 and dy["identity_score"] == 1.0
    assert dy["full_igm_score"] == pytest.approx(100 * (2 / 3) ** 0.4)
    # the metric's flat numbers carry them
    from worldrecall.plugins.opis.metric import flat_numbers

    flat = flat_numbers(out)
    assert flat["track_metrics_dynamic_identity_presence_score"] == 1.0
    assert flat["effective_score_weights_structural_quality"] == 0.4


def test_track_metrics_keep_extras_with_one_track():
    o = obj("a", E1)
    out = score_case(inv(o), [win("w0", [det("o1", E1), det("ox", E3, (60.0, 60.0, 80.0, 80.0))])], TH)
    assert out["track_false_positive_policy"] is None
    t = out["track_metrics"]["excluded"]
    assert t["presence_score"] == 0.0 and t["presence_false_positive"] == 1.0 and t["presence_f1_strict"] == pytest.approx(2 / 3)


def test_composite_missing_identity_and_presence_f1_fallback():
    c = composite_scores(None, None, 0.5, PARITY, presence_f1=0.25)
    assert c["opis_geometric"] == 0.0                     # identity None counts 0
    c = composite_scores(None, 1.0, None, PARITY, presence_f1=0.25)
    assert c["opis_geometric"] == pytest.approx(100 * 0.25 ** 0.2)   # PI-only weights (0.2, 0.8)
    c = composite_scores(None, 1.0, None, PARITY)
    assert c["opis_geometric"] == 0.0


def _reference_hull_area(points: np.ndarray) -> float:
    """Monotone chain on numpy scalars, as first written: the reference the fast version must equal."""
    pts = np.unique(np.asarray(points, dtype=np.float64).reshape(-1, 2), axis=0)
    if len(pts) < 3:
        return 0.0

    def cross(o, a, b):
        return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in pts[::-1]:
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    hull = np.array(lower[:-1] + upper[:-1])
    if len(hull) < 3:
        return 0.0
    x, y = hull[:, 0], hull[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2.0)


def test_convex_hull_area_equals_the_reference_chain_bit_for_bit():
    # triangle (0,0) (4,0) (0,3) with interior, edge and repeated points: 4·3/2 = 6
    tri = np.array([[0, 0], [4, 0], [0, 3], [1, 1], [2, 0], [0, 3], [2, 1.5]])
    assert convex_hull_area(tri) == 6.0
    rng = np.random.default_rng(0)
    for n in (3, 4, 10, 57, 300):
        for _ in range(20):
            cloud = rng.normal(0, 50, (n, 2)) * rng.uniform(0.01, 3, 2) + rng.uniform(-500, 500, 2)
            grid = rng.integers(0, 6, (n, 2)).astype(np.float64)  # duplicates and collinear runs
            for pts in (cloud, grid, np.r_[cloud, cloud[:3]]):
                assert convex_hull_area(pts) == _reference_hull_area(pts)
