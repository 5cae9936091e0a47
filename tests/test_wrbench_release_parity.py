"""WRBench item by item against its released code (JinPLu/WRBench @ 629595dc; issue 45): each test holds values
worked out by hand from the release's rule and names the release's file and function."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from worldrecall.core.data import CaseFailure
from worldrecall.plugins.wrbench import d2, probes, table
from worldrecall.plugins.wrbench import official_results as off
from worldrecall.plugins.wrbench.camera_metrics import CamPrec
from worldrecall.plugins.wrbench.probe_metric import ProbeScores

OFFICIAL = {k: v for k, v in d2.OFFICIAL_SAMPLING.items() if k != "policy"}


# ---- item 1: D2 frame sampling ----------------------------------------------------------------------------

def test_d2_sampling_keeps_the_last_frame_as_released():
    """``_frame_indices_for_sampling`` (src/wrbench/eval/d2/extract_d2_dinov2_consistency_features.py): every
    ``max(fps_video / 3, 1)``-th frame from 0, rounded, plus frame 0 and the last frame."""
    # 141 frames @ 24 fps: step 8 -> 0, 8, ..., 136 (18 frames) + the last frame 140 = 19 (<= 24, no thinning)
    assert d2.sample_indices(141, 24.0, **OFFICIAL) == [*range(0, 137, 8), 140]
    # 150 @ 30: step 10 -> 0 .. 140 (15) + 149
    assert d2.sample_indices(150, 30.0, **OFFICIAL) == [*range(0, 141, 10), 149]
    # 121 @ 24: step 8 -> 0 .. 120, and 120 is already the last frame
    assert d2.sample_indices(121, 24.0, **OFFICIAL) == list(range(0, 121, 8))
    # 81 @ 16: step 16/3 -> round(16k/3), k = 0..15: the last one is 80 = the last frame
    assert d2.sample_indices(81, 16.0, **OFFICIAL) == [0, 5, 11, 16, 21, 27, 32, 37, 43, 48, 53, 59, 64, 69, 75, 80]
    # 125 @ 24: 0 .. 120 + 124
    assert d2.sample_indices(125, 24.0, **OFFICIAL)[-2:] == [120, 124]


def test_d2_sampling_thins_by_truncation():
    """Past ``max_frames`` the release keeps the entries at ``linspace(0, len - 1, max, dtype=int64)`` (truncated)."""
    # 100 frames @ 10 fps: step 10/3 -> round(10k/3), k = 0..29 (30 values, 96.67 -> 97) + 99 = 31 candidates
    # c = [0,3,7,10,13,17,20,23,27,30,33,37,40,43,47,50,53,57,60,63,67,70,73,77,80,83,87,90,93,97,99];
    # positions j*30/23 truncated: 0,1,2,3,5,6,7,9,10,11,13,14,15,16,18,19,20,22,23,24,26,27,28,30
    # (16.96 -> 16, where rounding would give 17: c[16] = 53, not c[17] = 57)
    assert d2.sample_indices(100, 10.0, **OFFICIAL) == [0, 3, 7, 10, 17, 20, 23, 30, 33, 37, 43, 47, 50, 53, 60,
                                                        63, 67, 73, 77, 80, 87, 90, 93, 99]


def test_d2_sampling_short_video_and_unknown_fps():
    """Below ``min_frames`` the release unions in ``_fixed_count_indices(min_frames)``; no frame rate (or none
    positive) falls back to ``_fixed_count_indices(max_frames)``, both truncated ``linspace``."""
    # 30 frames @ 30 fps sampled at 0.5 fps: step 60 -> {0} + last 29 = 2 < 4;
    # linspace(0, 29, 4) = 0, 9.67, 19.33, 29 -> 0, 9, 19, 29 (rounding would give 10)
    assert d2.sample_indices(30, 30.0, fps=0.5, min_frames=4, max_frames=24) == [0, 9, 19, 29]
    # unknown fps: linspace(0, 80, 24) truncated: 80k/23 -> 0, 3, 6, 10, 13, ...
    got = d2.sample_indices(81, None, **OFFICIAL)
    assert got[:6] == [0, 3, 6, 10, 13, 17] and got[-1] == 80 and len(got) == 24
    assert d2.sample_indices(81, 0.0, **OFFICIAL) == got
    assert d2.sample_indices(81, float("nan"), **OFFICIAL) == got
    # bounds are capped by the video: 3 frames -> all three
    assert d2.sample_indices(3, 16.0, **OFFICIAL) == [0, 1, 2]
    assert d2.sample_indices(0, 16.0, **OFFICIAL) == []
    with pytest.raises(ValueError, match="max_frames"):
        d2.sample_indices(10, 16.0, max_frames=0)


# ---- item 2: a video with an unanswered probe ----------------------------------------------------------------

def _answers(**missing: None) -> dict:
    p = {pr.probe_id: 0.9 if pr.polarity == "positive" else 0.1 for pr in probes.CATALOG}
    p.update(missing)
    return p


def _measurement(p_yes: dict, evidence: dict | None) -> dict:
    return {"p_yes": p_yes, "judge_model": "t", "precision": {}, "gate_source": "evidence", "evidence": evidence,
            "manifest_reobservation_support": None}


def test_an_unanswered_gate_probe_drops_the_video_as_released():
    """``merge_sharded_outputs`` (src/wrbench/eval/scoring/run_local_qwen35_probe_logprob_scorer.py) exports only
    rows whose ``probe_status`` is ``ok``, and ``aggregate_probe_results`` says ``partial`` when any active probe
    has no ``p_yes``: a missing gate answer drops the video though D3-D6 could be computed."""
    m = ProbeScores()
    full = _measurement(_answers(), {"evidence_shared_oov_applicable": True})
    assert m.score(full, {})["d3"] == 0.9
    gate_missing = _measurement(_answers(D5_GATE_HIDDEN=None), {"evidence_shared_oov_applicable": True})
    with pytest.raises(CaseFailure, match="probe_status partial: no answer to D5_GATE_HIDDEN"):
        m.score(gate_missing, {})
    # a D6 score answer missing where the gate is not applicable: still dropped (ours used to score D3-D5)
    d6_missing = _measurement(_answers(D6_HIDDEN_PROGRESS=None), {"evidence_shared_oov_applicable": False})
    with pytest.raises(CaseFailure, match="D6_HIDDEN_PROGRESS"):
        m.score(d6_missing, {})
    lenient = {"partial_probes": "score_available"}
    s = m.score(d6_missing, lenient)
    assert (s["d3"], s["d5"], s["d6"]) == (0.9, None, None)
    assert m.score(gate_missing, lenient)["d5"] == 0.9


# ---- item 3: the table's D1 eligible count for prompt-only models ----------------------------------------------

def test_prompt_only_d1_eligible_counts_every_controlled_row():
    """``build_table`` (src/wrbench/eval/aggregate/build_wrbench_vnext_main_table.py) counts every row whose
    camera is not ``uncontrolled`` as D1-eligible, whatever the model; a prompt-only model's rows have no target
    (``missing_target_pose``), so its n is 0 and its mean NA."""
    recs = [{"camera": "yaw_LR", "camprec": None, "d2": .5, "d3": .5, "d4": .5},
            {"camera": "static", "camprec": None, "d2": .5, "d3": .5, "d4": .5},
            {"camera": "uncontrolled", "camprec": None, "d2": .5, "d3": .5, "d4": .5}]
    c = table.model_columns(recs, "prompt-only")
    assert (c["D1_CamPrec"], c["D1_CamPrec_n"], c["D1_CamPrec_eligible"]) == (None, 0, 2)


# ---- item 4: the probe-dimension gate does not read the manifest ------------------------------------------------

def test_probe_dimension_gate_ignores_the_manifest():
    """The P25 scorer's gate (``_gate_for_dimension``) and its gate-masked export read the probes only; the
    manifest's ``reobservation_support: false`` is applied by the evidence exporter alone
    (``export_runtime_v2_evidence_first.py``)."""
    m = ProbeScores()
    p = _answers(D5_GATE_HIDDEN=0.9, D5_GATE_RETURN=0.9, D5_GATE_UNIDENTIFIABLE=0.1, D6_GATE_HIDDEN=0.9,
                 D6_GATE_RETURN=0.9, D6_GATE_UNIDENTIFIABLE=0.1)
    meas = {**_measurement(p, None), "gate_source": "probe_dimension", "manifest_reobservation_support": False}
    s = m.score(meas, {})
    assert (s["d5"], s["d6"], s["reobservation_support"]) == (0.9, 0.9, 1.0)
    # under the evidence gate the manifest still says no_oov
    ev = {**_measurement(p, {"evidence_shared_oov_applicable": True}), "manifest_reobservation_support": False}
    assert m.score(ev, {})["d5"] is None and "no_oov" in m.verdict(ev, {})


# ---- item 5: CamPrec status precedence -------------------------------------------------------------------------

def test_camprec_camera_grammar_before_the_target():
    """``score_d1_row`` (src/wrbench/eval/d1/d1_camera.py) returns ``unsupported_camera_type`` before it builds a
    target, so a camera outside the grammar without a target is unsupported, not missing its target."""
    m = CamPrec()
    meas = {"pred_c2w": np.tile(np.eye(4), (3, 1, 1)), "camera": "orbit", "has_target": False,
            "target_c2w": np.zeros((0, 4, 4))}
    assert m.verdict(meas, m.thresholds).startswith("d1_status=unsupported_camera_type")
    assert m.score(meas, m.thresholds)["score"] is None
    assert m.verdict({**meas, "camera": "yaw_LR"}, m.thresholds).startswith("d1_status=missing_target_pose")
    assert m.verdict({**meas, "camera": "uncontrolled"}, m.thresholds).startswith("d1_status=excluded_uncontrolled")


# ---- item 6: the published Avg cell ---------------------------------------------------------------------------

def test_avg_cell_is_written_unrounded_as_published():
    """src/wrbench/data/results/wrbench_23model_results.csv writes ``Avg`` as Python's shortest repr
    (``0.6521638952558334`` for Hailuo 2.3) while the other metric cells have 12 significant digits: every one of
    the 23 published ``Avg`` cells is reproduced byte for byte from the row's own cells."""
    raw = {r["model_id"]: r["Avg"] for r in csv.DictReader(off.PAPER_TABLE.open(encoding="utf-8"))}
    rows = off.read_paper_table()
    assert len(rows) == 23
    for r in rows:
        assert table.csv_cell(table.derived(r)["Avg"], "Avg") == raw[r["model_id"]], r["model_id"]
    assert raw["hailuo_2_3"] == "0.6521638952558334"
    assert table.csv_cell(0.6521638952558334) == "0.652163895256"          # any other column: %.12g
    assert table.csv_cell(0.6521638952558334, "Avg") == "0.6521638952558334"
    assert table.csv_cell(None, "Avg") == "NA"


# ---- item 7: D1 target certification --------------------------------------------------------------------------

CERTIFIED_YAW = {"target_coordinate_convention": "opencv_c2w", "target_role": "benchmark_intended_control",
                 "camera_type": "yaw_LR", "control_profile": "canonical_60deg", "evidence_level": "benchmark_intent",
                 "yaw_peak_deg": -60.0, "num_frames": 121, "fps": 24, "image_size": [832, 480], "fov": 60.0,
                 "trajectory_sampling_rule": "linear"}


@pytest.mark.parametrize(("change", "status", "note"), [
    ({}, "ok", None),
    ({"target_coordinate_convention": None}, "coordinate_mismatch", "target convention is not OpenCV C2W: None"),
    ({"target_coordinate_convention": "OpenCV camera_to_world, x-right y-down z-forward"}, "ok", None),
    ({"yaw_peak_deg": 30.0}, "profile_mismatch", "yaw_peak_deg is not 60: 30.0"),
    ({"control_profile": None, "canonical_profile": "yaw_go_return_60deg"}, "ok", None),
    ({"control_profile": None, "canonical_profile": "yaw_go_return_30deg"}, "profile_mismatch",
     "control_profile is not canonical_60deg: diagnostic_30deg"),
    ({"control_family": "translation"}, "profile_mismatch", "control_family does not match control_direction"),
    ({"fov": ""}, "missing_gt", "fov is missing"),
    ({"evidence_level": None}, "missing_gt", "evidence_level is missing"),
    ({"evidence_level": None, "target_certification_status": "Certified"}, "ok", None),
    ({"evidence_level": "estimate"}, "invalid_sidecar", "evidence_level is not main-score eligible: estimate"),
    ({"target_role": "preview"}, "invalid_sidecar", "target_role is not benchmark_intended_control: preview"),
    ({"adapter_provenance": {"kind": "guess"}}, "invalid_sidecar", "adapter_provenance is not recognized: guess"),
    ({"adapter_provenance": {"mode": "deterministic_adapter"}}, "ok", None),
    ({"yaw_peak_deg": "sixty"}, "missing_gt", "yaw_peak_deg is missing or invalid"),
])
def test_target_certification_as_released(change, status, note):
    """``validate_camera_control_target`` (src/wrbench/eval/d1/d1_sidecar_contract.py) with its default
    ``require_main_profile=True``: each change to a certified yaw target gives the release's status."""
    from worldrecall.plugins.wrbench import certification

    c = certification.certify({**CERTIFIED_YAW, **change})
    assert (c.ok, c.status) == (status == "ok", status)
    assert note is None or any(note in n for n in c.notes), c.notes


def test_target_certification_static_pan_and_the_convention_only_mode():
    from worldrecall.plugins.wrbench import certification

    static = {**CERTIFIED_YAW, "camera_type": "static", "control_profile": "canonical_static", "yaw_peak_deg": None}
    assert certification.certify(static).ok                       # no yaw needed for a static target
    pan = {**static, "camera_type": "pan_RL", "control_profile": "canonical_60deg"}
    assert certification.certify(pan).status == "profile_mismatch"   # control_profile is not canonical_pan
    bare = {"target_coordinate_convention": "opencv_c2w", "camera_type": "yaw_LR"}
    assert certification.certify(bare, require_main_profile=False).ok
    assert certification.certify(bare).status == "profile_mismatch"  # "control_profile is missing" says profile
    assert certification.certify(["x"]).status == "invalid_sidecar"


def test_camprec_row_takes_the_certification_status():
    """``d1_camera._load_explicit_target``: an uncertified target gives its status on the D1 row, before the
    file is read; ``target_certification: off`` (worldrecall's default) scores any requested trajectory."""
    m = CamPrec()
    eye = np.tile(np.eye(4), (3, 1, 1))
    meas = {"pred_c2w": eye, "camera": "static", "has_target": True, "target_c2w": eye, "target_problem": "",
            "target_payload": {"camera_type": "static"}}
    assert m.verdict(meas, m.thresholds).startswith("d1_status=ok")
    th = {**m.thresholds, "target_certification": "main_profile"}
    assert m.verdict(meas, th).startswith("d1_status=coordinate_mismatch (target convention is not OpenCV C2W")
    assert m.score(meas, th)["score"] is None
    conv = {**m.thresholds, "target_certification": "convention"}
    ok_conv = {**meas, "target_payload": {"camera_type": "static", "metric_tier": "opencv_c2w"}}
    assert m.score(ok_conv, conv)["score"] == 1.0
    static = {**CERTIFIED_YAW, "camera_type": "static", "control_profile": "canonical_static"}
    assert m.score({**meas, "target_payload": static}, th)["score"] == 1.0
    with pytest.raises(CaseFailure, match="target_certification"):
        m.score(meas, {**m.thresholds, "target_certification": "strict"})


def test_loader_keeps_the_certification_fields_of_a_record_with_a_target(tmp_path):
    from helpers.wrbench_fixtures import write_clip, write_manifest, write_release

    from worldrecall.core.components import LoadRequest
    from worldrecall.core.data import Case
    from worldrecall.plugins.wrbench.loader import WRBenchLoader

    release = write_release(tmp_path / "r", [{"variant_id": "v1", "world_state_prompt": "x"}])
    gens = tmp_path / "g"
    write_clip(gens / "a.mp4")
    np.save(gens / "t.npy", np.tile(np.eye(4), (12, 1, 1)))
    rec = {"video_id": "a", "video_path": "a.mp4", "camera_type": "yaw_LR", "variant_id": "v1",
           "target_pose_path": "t.npy", **{k: v for k, v in CERTIFIED_YAW.items() if k != "camera_type"}}
    write_manifest(gens, [rec, {**rec, "video_id": "b", "target_pose_path": None}])
    cases = [c for c in WRBenchLoader().load(LoadRequest(data_root=release, generations={"m": gens}))
             if isinstance(c, Case)]
    assert cases[0].annotations["d1_target"]["yaw_peak_deg"] == -60.0
    assert "d1_target" not in cases[1].annotations          # no target, nothing to certify


# ---- item 8: repeated samples ----------------------------------------------------------------------------------

def test_median_over_repeated_samples_as_released():
    """``median_sample_rows`` (run_local_qwen35_probe_logprob_scorer.py), used when ``num_samples > 1``: per probe
    the ``statistics.median`` of the samples that answered, rounded to 6 decimals; no answer in any sample ->
    missing (then the video is partial and dropped)."""
    samples = [{"A": 0.2, "B": 0.9, "C": None}, {"A": 0.6, "B": None, "C": None}, {"A": 0.3, "B": 0.5, "C": None}]
    got = probes.median_samples(samples, ["A", "B", "C"])
    # A: median(.2, .6, .3) = .3; B: median(.9, .5) = .7 (mean of the middle two); C: none
    assert got == {"A": 0.3, "B": 0.7, "C": None}
    assert probes.median_samples([{"A": 1 / 3}, {"A": 2 / 3}], ["A"]) == {"A": 0.5}
    assert probes.median_samples([{"A": 0.1234564}], ["A"]) == {"A": 0.123456}


def test_probe_metric_asks_num_samples_times_and_takes_medians(tmp_path):
    from worldrecall.core.judges import JudgeResponse

    answers = iter([0.2, 0.6, 0.3])

    class Judge:
        model_id = "fake"

        def ask(self, video, system, questions, schema):
            v = next(answers)
            return JudgeResponse(answers=[{"id": q["id"], "p_yes": v} for q in questions], usage={}, raw="",
                                 model_id="fake")

    class Hub:
        def get(self, name):
            return Judge()

    class Ctx:
        judges = Hub()

    from helpers.wrbench_fixtures import write_clip

    from worldrecall.core.data import Case
    from worldrecall.core.video import Video

    case = Case("wrbench", "c", "m", Video(write_clip(tmp_path / "v.mp4")), prompt="A cat.",
                annotations={"evidence": {"evidence_shared_oov_applicable": True}})
    m = ProbeScores()
    m.params = {**m.params, "judge": "fake", "num_samples": 3}
    meas = m.measure(case, None, Ctx())
    assert len(meas["samples"]) == 3 and set(meas["p_yes"].values()) == {0.3}
    # D3 = mean(p, p, 1 - p) over 0.3 = (0.3 + 0.3 + 0.7) / 3 = 0.433333
    assert m.score(meas, m.thresholds)["d3"] == 0.433333
    m.params = {**m.params, "num_samples": 0}
    with pytest.raises(CaseFailure, match="num_samples"):
        m.measure(case, None, Ctx())
