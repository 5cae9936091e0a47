"""WRBench parity items, each against a value worked out by hand (written out, never produced by the code).

Release files: d1/pose.py + d1/d1_camera.py (CamPrec), d1/camera_intent.py (CamAlign),
d2/extract_d2_dinov2_local_global_candidate.py (D2), scoring/run_local_qwen35_probe_logprob_scorer.py (probes),
scoring/export_runtime_v2_evidence_first.py (gate), aggregate/latest_d1_d6_metrics.py (contract).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from worldrecall.plugins.wrbench import contract, d1, d2, probes


def yaw_pose(deg: float, t=(0.0, 0.0, 0.0)) -> np.ndarray:
    """OpenCV c2w turned right by ``deg`` about the camera's y axis, at position ``t``."""
    a = math.radians(deg)
    p = np.eye(4)
    p[:3, :3] = [[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]]
    p[:3, 3] = t
    return p


def stack(*poses: np.ndarray) -> np.ndarray:
    return np.stack(poses)


# ---- D1-CamPrec -----------------------------------------------------------------------------------------

def test_camprec_yaw_reward_is_exp_of_mean_rotation_error_over_45():
    # target turns 0, 30, 0; predicted 0, 20, 0: rotation errors 0, 10, 0 -> mean 10/3 deg; no translation
    # anywhere -> shape error 0; reward = exp(-(10/3)/45) = 0.9286029058931803; same sign, both peaks > 2 deg
    r = d1.camprec(stack(yaw_pose(0), yaw_pose(30), yaw_pose(0)), stack(yaw_pose(0), yaw_pose(20), yaw_pose(0)),
                   "yaw_RL")
    assert r["status"] == "ok"
    assert r["rot_error_deg"] == pytest.approx(10.0 / 3.0, abs=1e-9)
    assert r["trans_shape_error"] == pytest.approx(0.0, abs=1e-12)
    assert r["score"] == pytest.approx(0.9286029058931803, abs=1e-9)


def test_camprec_wrong_direction_and_weak_motion_score_zero():
    target = stack(yaw_pose(0), yaw_pose(30), yaw_pose(0))
    wrong = d1.camprec(target, stack(yaw_pose(0), yaw_pose(-20), yaw_pose(0)), "yaw_RL")
    assert (wrong["status"], wrong["score"], wrong["flags"]) == ("ok", 0.0, ["yaw_direction_mismatch"])
    weak = d1.camprec(target, stack(yaw_pose(0), yaw_pose(1.0), yaw_pose(0)), "yaw_RL")
    assert (weak["score"], weak["flags"]) == (0.0, ["weak_yaw_motion"])  # 1 deg < 2 deg


def test_camprec_static_is_all_or_nothing():
    target = stack(yaw_pose(0), yaw_pose(0), yaw_pose(0))
    # turns 1.5 deg (<= 2) and moves 0.04 (<= 0.05): 1.0; moving 0.06: 0.0
    still = d1.camprec(target, stack(yaw_pose(0), yaw_pose(1.5, (0.04, 0, 0)), yaw_pose(0)), "static")
    assert still["score"] == 1.0
    moved = d1.camprec(target, stack(yaw_pose(0), yaw_pose(1.5, (0.06, 0, 0)), yaw_pose(0)), "static")
    assert (moved["score"], moved["flags"]) == (0.0, ["static_motion_detected"])


def test_translation_shape_error_by_hand():
    # target x = 0, 1, 2; predicted x = 0, 1, 1: scale = (1*1 + 2*1) / (1 + 1) = 1.5 -> 0, 1.5, 1.5;
    # residuals 0, -0.5, 0.5 -> RMSE sqrt(1/6); target RMS sqrt(5/3) (+1e-8) -> sqrt(1/10) = 0.31622776601683794
    t = stack(*(yaw_pose(0, (x, 0, 0)) for x in (0, 1, 2)))
    p = stack(*(yaw_pose(0, (x, 0, 0)) for x in (0, 1, 1)))
    assert d1.translation_shape_error(t, p) == pytest.approx(0.31622776601683794, abs=1e-8)


def test_camprec_null_with_status_for_unscorable_rows():
    target = stack(yaw_pose(0), yaw_pose(30))
    assert d1.camprec(target, stack(yaw_pose(0), yaw_pose(20), yaw_pose(0)), "yaw_RL")["status"] == "length_mismatch"
    assert d1.camprec(target, target, "uncontrolled")["status"] == "excluded_uncontrolled"
    assert d1.camprec(target, target, "orbit")["status"] == "unsupported_camera_type"
    bad = target.copy()
    bad[1, 3, 0] = 0.5
    r = d1.camprec(target, bad, "yaw_RL")
    assert (r["status"], r["score"]) == ("invalid_pose", None)


# ---- D1-CamAlign ----------------------------------------------------------------------------------------

def test_camalign_yaw_score_and_statuses():
    ok = d1.camalign(stack(yaw_pose(0), yaw_pose(16), yaw_pose(4)), "yaw_RL")
    assert (ok["status"], ok["scope"]) == ("ok", "common_yaw")
    assert ok["score"] == pytest.approx((16 - 2) / (30 - 2), abs=1e-9)  # 0.5
    mism = d1.camalign(stack(yaw_pose(0), yaw_pose(16)), "yaw_LR")
    assert (mism["status"], mism["score"], mism["direction"]) == ("direction_mismatch", 0.0, "yaw_RL")
    weak = d1.camalign(stack(yaw_pose(0), yaw_pose(1.5)), "yaw_LR")
    assert (weak["status"], weak["score"]) == ("weak_motion", 0.0)
    full = d1.camalign(stack(yaw_pose(0), yaw_pose(-45)), "yaw_LR")
    assert full["score"] == 1.0  # (45 - 2) / 28 clipped


def test_camalign_static_and_the_table_denominator_switch():
    # turns 1 deg, no move: motion = 1/5 = 0.2 -> score 0.8, status motion_detected (ok only at 1.0)
    r = d1.camalign(stack(yaw_pose(0), yaw_pose(1.0)), "static")
    assert (r["status"], r["scope"]) == ("motion_detected", "static_hold")
    assert r["score"] == pytest.approx(0.8, abs=1e-9)
    assert d1.camalign_counts(r, "status_ok") is None      # the release's table builder drops it
    assert d1.camalign_counts(r, "all_scored") == pytest.approx(0.8, abs=1e-9)
    # moving 0.05 (camera frame): 0.05 / 0.10 = 0.5 -> 0.5
    assert d1.camalign(stack(yaw_pose(0), yaw_pose(0, (0, 0, 0.05))), "static")["score"] == pytest.approx(0.5)
    assert d1.camalign(stack(yaw_pose(0), yaw_pose(0)), "static")["status"] == "ok"
    assert d1.camalign(stack(yaw_pose(0)), "static")["status"] == "invalid_pose"  # fewer than 2 poses
    assert d1.camalign(stack(yaw_pose(0), yaw_pose(0)), "pan_LR")["status"] == "unsupported_intent"


# ---- D2 -------------------------------------------------------------------------------------------------

def three_frames():
    # patches per frame (2 x 2-d, unit): A = [1,0],[0,1]; B = [1,0],[.6,.8]; C = [0,1],[.6,-.8]
    patches = np.array([[[1, 0], [0, 1]], [[1, 0], [0.6, 0.8]], [[0, 1], [0.6, -0.8]]], dtype=np.float32)
    cls = np.array([[1, 0], [0.9, math.sqrt(0.19)], [0.7, math.sqrt(0.51)]], dtype=np.float32)
    return cls, patches


def test_d2_visual_integrity_by_hand():
    # A->B cosines [[1,.6],[0,.8]]: best matches [1,.8] and [1,.8] -> mean .9, p20 of [.8,.8,1,1] = .8
    # B->C cosines [[0,.6],[.8,-.28->0]]: [.6,.8] and [.8,.6] -> mean .7, p20 of [.6,.6,.8,.8] = .6
    # video local low = p20 of [.8,.6] = .6 + .2*(.8-.6) = .64; CLS first-last = .7 -> score min(.7,.64) = .64
    cls, patches = three_frames()
    r = d2.visual_integrity(cls, patches)
    assert r["score"] == pytest.approx(0.64, abs=1e-6)
    assert r["cls_first_last"] == pytest.approx(0.7, abs=1e-6)
    assert r["local_low_p20"] == pytest.approx(0.64, abs=1e-6)
    assert r["local_mean_median"] == pytest.approx(0.8, abs=1e-6)  # median of .9, .7
    assert (r["frames"], r["lowest_pair"]) == (3, 1)


def test_d2_normalises_clips_and_needs_two_frames():
    cls, patches = three_frames()
    scaled = d2.visual_integrity(cls * 7.0, patches * 3.0)  # L2 normalisation first: same numbers
    assert scaled["score"] == pytest.approx(0.64, abs=1e-6)
    opposite = d2.visual_integrity(np.array([[1, 0], [-1, 0]], np.float32), patches[:2])
    assert opposite["cls_first_last"] == 0.0 and opposite["score"] == 0.0  # negative cosine clipped to 0
    one = d2.visual_integrity(cls[:1], patches[:1])
    assert one["score"] is None and one["frames"] == 1


def test_d2_token_split_skips_register_tokens():
    hidden = np.zeros((1, 6, 2), np.float32)
    hidden[0, 0] = [3, 4]          # CLS -> [.6, .8]
    hidden[0, 1:3] = [9, 9]        # two register tokens, dropped
    hidden[0, 3:] = [[2, 0], [0, 5], [1, 1]]
    g, p = d2.split_tokens(hidden, num_register_tokens=2)
    assert g[0].tolist() == pytest.approx([0.6, 0.8])
    assert p.shape == (1, 3, 2)
    assert p[0, 2].tolist() == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2)])


def test_d2_sampling_3fps_max24_and_the_example_config():
    # 81 frames at 16 fps at 3 fps: every 16/3-th frame, round(16k/3) for k = 0..15, the last frame is 80
    assert d2.sample_indices(81, 16.0, **{k: v for k, v in d2.OFFICIAL_SAMPLING.items() if k != "policy"}) == [
        0, 5, 11, 16, 21, 27, 32, 37, 43, 48, 53, 59, 64, 69, 75, 80]
    # the runtime example's 2 fps: every 8th frame
    assert d2.sample_indices(81, 16.0, fps=2.0, max_frames=16) == list(range(0, 81, 8))
    assert d2.sample_indices(3, 16.0) == [0, 1, 2]  # min 4 capped by the 3 frames there are
    assert d2.sample_indices(10, 16.0, policy="fixed_count", max_frames=4) == [0, 3, 6, 9]


# ---- D3-D6 probes ---------------------------------------------------------------------------------------

def test_p_yes_from_logits_by_hand():
    # yes ids {1, 2} with logits ln2 and 0 -> lse = ln 3; no id {3} with ln 3 -> p = 3 / (3 + 3) = 0.5
    assert probes.p_yes_from_logits([9.0, math.log(2), 0.0, math.log(3)], {1, 2}, {3}) == 0.5
    # one yes logit 2, one no logit 0: sigmoid(2) = 0.8807970779778823 -> rounded to 6 decimals
    assert probes.p_yes_from_logits([2.0, 0.0], {0}, {1}) == 0.880797


def test_dimension_scores_polarity_rounding_and_missing():
    p = {"D3_POSITION_RELATION": 0.9, "D3_STATIC_ANCHORS": 0.8, "D3_NEG_WRONG_SPATIAL": 0.3,
         "D4_ACTION_STATE": 0.6, "D4_TEMPORAL_PROGRESS": 0.5, "D4_NEG_ABSENT_FREEZE": 0.2,
         "D5_RETURN_POSITION": 0.7, "D5_NEG_VANISH_RESET": 0.4, "D6_HIDDEN_PROGRESS": 0.2}
    scores, missing = probes.dimension_scores(p)
    assert scores["d3"] == 0.8                 # (.9 + .8 + (1 - .3)) / 3
    assert scores["d4"] == 0.633333            # (.6 + .5 + .8) / 3 = 0.6333…, 6 decimals
    assert scores["d5"] == 0.65                # (.7 + .6) / 2 (gate probes are not score probes)
    assert scores["d6"] is None                # D6_NEG_FREEZE_RESET missing
    assert "D6_NEG_FREEZE_RESET" in missing and "D5_GATE_HIDDEN" in missing


def test_evidence_gate_rules():
    g = probes.evidence_gate({"evidence_shared_oov_applicable": True})
    assert (g.shared, g.d5, g.d6) == (True, True, True)
    g = probes.evidence_gate({"evidence_shared_oov_applicable": False, "evidence_shared_oov_na_reason": "no_return"})
    assert (g.shared, g.shared_reason, g.d5_reason) == (False, "no_return", "no_return")
    # pre-shared rows: shared = d5 and d6; a per-dimension bool wins for its dimension
    g = probes.evidence_gate({"evidence_d5_applicable": True, "evidence_d6_applicable": False,
                              "evidence_d6_na_reason": "unidentifiable"})
    assert (g.shared, g.shared_reason, g.d5, g.d6, g.d6_reason) == (False, "unidentifiable", True, False,
                                                                    "unidentifiable")
    g = probes.evidence_gate({"evidence_shared_oov_applicable": "yes"})  # not a bool: d5 and d6 (absent) -> False
    assert (g.shared, g.shared_reason) == (False, "unclear")
    assert probes.evidence_gate(None).shared_reason == "missing_evidence"
    g = probes.evidence_gate({"evidence_shared_oov_applicable": True}, manifest_reobservation_support=False)
    assert (g.shared, g.d5_reason, g.d6_reason) == (False, "no_oov", "no_oov")


def test_probe_gates_threshold_half_and_masking():
    p = {"D5_GATE_HIDDEN": 0.5, "D5_GATE_RETURN": 0.7, "D5_GATE_UNIDENTIFIABLE": 0.49,
         "D6_GATE_HIDDEN": 0.9, "D6_GATE_RETURN": 0.2, "D6_GATE_UNIDENTIFIABLE": 0.1}
    assert probes.dimension_gate(p, "D5") == (True, None)            # >= 0.5 counts, unidentifiable < 0.5
    assert probes.dimension_gate(p, "D6") == (False, "no_return")
    g = probes.probe_gate(p, "probe_dimension")
    assert (g.shared, g.d5, g.d6) == (False, True, False)
    assert probes.shared_probe_gate({"OOV_EVER_UNJUDGEABLE": 0.4, "OOV_RETURN_JUDGEABLE": 0.9}) == (False, "no_oov")
    m = probes.masked_oov({"d5": 0.7, "d6": 0.6}, g)
    assert (m["d5"], m["d6"], m["d6_null_reason"]) == (0.7, None, "not applicable: no_return")


# ---- contract -------------------------------------------------------------------------------------------

def test_contract_null_policy_and_forbidden_fallbacks():
    d1s, d2s, d3s, d5s = (contract.BY_DIMENSION[k] for k in ("D1", "D2", "D3", "D5"))
    assert contract.require_value({"d1_status": "length_mismatch", "d1_camera_accuracy": None}, d1s, "v") is None
    assert contract.require_value({"d1_status": "ok", "d1_camera_accuracy": "0.25"}, d1s, "v") == 0.25
    with pytest.raises(contract.ContractError, match="missing required status field d1_status"):
        contract.require_value({"d1_camera_accuracy": 0.5}, d1s, "v")
    with pytest.raises(contract.ContractError, match="forbidden fallback"):
        contract.require_value({"d2_dinov2_temporal_consistency": 0.9, "d2_selected_visual_integrity_score": 0.8},
                               d2s, "v")
    assert contract.require_value({"vlm_spatial_reasoning": None}, d5s, "v") is None   # D5: null allowed
    with pytest.raises(contract.ContractError, match="must be non-null"):
        contract.require_value({"vlm_spatial_fidelity": ""}, d3s, "v")
    with pytest.raises(contract.ContractError, match="missing required metric field"):
        contract.require_value({}, d3s, "v")
    with pytest.raises(contract.ContractError, match="not finite"):
        contract.require_value({"vlm_spatial_fidelity": float("inf")}, d3s, "v")
    with pytest.raises(contract.ContractError, match="not numeric"):
        contract.require_value({"vlm_spatial_fidelity": "high"}, d3s, "v")
    assert contract.gate_applicable({contract.GATE_FIELD: None, contract.LEGACY_GATE_FIELD: True}) is None
    assert contract.gate_applicable({contract.LEGACY_GATE_FIELD: 1}) is True
