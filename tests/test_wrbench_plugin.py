"""The wrbench plugin on the engine's contract: loader errors name the file, phases, per-video -> per-model table,
the probe sidecar judge, and one tiny end-to-end run of the synthetic suite's WRBench layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.wrbench_fixtures import write_clip, write_manifest, write_release

from worldrecall.core.components import LoadRequest
from worldrecall.core.data import Case, CaseError, CaseFailure
from worldrecall.core.judges import JudgeError
from worldrecall.core.video import Video
from worldrecall.plugins.wrbench import table
from worldrecall.plugins.wrbench.aligner import WRBenchPhases
from worldrecall.plugins.wrbench.loader import WRBenchLoader
from worldrecall.plugins.wrbench.probe_metric import ProbeScores
from worldrecall.plugins.wrbench.sidecar_judge import ProbeSidecarJudge


def load(tmp_path: Path, records: list, **options) -> list:
    release = write_release(tmp_path / "release", [{"variant_id": "v1", "world_state_prompt": "A cat jumps."}])
    write_manifest(tmp_path / "gens" / "m1", records)
    req = LoadRequest(data_root=release, generations={"m1": tmp_path / "gens" / "m1"}, options=options)
    return list(WRBenchLoader().load(req))


def test_loader_joins_release_variants_and_reports_each_bad_record(tmp_path):
    write_clip(tmp_path / "gens" / "m1" / "a.mp4")
    out = load(tmp_path, [
        {"video_id": "a", "video_path": "a.mp4", "camera_type": "yaw_LR", "variant_id": "v1",
         "evidence": {"evidence_shared_oov_applicable": True}},
        {"video_id": "b", "video_path": "missing.mp4", "camera_type": "yaw_LR", "variant_id": "v1"},
        {"video_id": "c", "video_path": "a.mp4", "camera_type": "orbit", "variant_id": "v1"},
        {"video_id": "d", "video_path": "a.mp4", "camera_type": "static", "variant_id": "nope"},
        {"video_id": "a", "video_path": "a.mp4", "camera_type": "static", "world_state_prompt": "x"},
        {"video_id": "e", "video_path": "../../escape.mp4", "camera_type": "static", "world_state_prompt": "x"},
        {"video_id": "f", "video_path": "a.mp4", "camera_type": "static", "world_state_prompt": "x",
         "target_pose_path": "none.npy"},
        "not a record",
    ])
    cases = [c for c in out if isinstance(c, Case)]
    errors = {e.case_id: e.reason for e in out if isinstance(e, CaseError)}
    assert [c.case_id for c in cases] == ["a"]
    assert cases[0].prompt == "A cat jumps." and cases[0].annotations["evidence"]["evidence_shared_oov_applicable"]
    assert cases[0].strata["camera"] == "yaw_LR"
    assert "missing.mp4: video file missing" in errors["b"]
    assert "camera_type 'orbit'" in errors["c"]
    assert "variant_id 'nope' not found" in errors["d"]
    assert "duplicate video_id 'a'" in errors["a"]
    assert "escapes the data root" in errors["e"]
    assert "none.npy: target_pose_path missing" in errors["f"]
    assert "record 7: not an object" in errors["record-7"]
    assert all("videos.json" in r or ".npy" in r or ".mp4" in r for r in errors.values())


def test_unreadable_manifest_is_one_error_naming_it(tmp_path):
    (tmp_path / "gens" / "m1").mkdir(parents=True)
    (tmp_path / "gens" / "m1" / "videos.json").write_text("{not json")
    out = list(WRBenchLoader().load(LoadRequest(data_root=tmp_path, generations={"m1": tmp_path / "gens" / "m1"})))
    assert len(out) == 1 and isinstance(out[0], CaseError) and "videos.json: not valid JSON" in out[0].reason


def case_with(tmp_path: Path, n: int, **ann) -> Case:
    video = Video(write_clip(tmp_path / "v.mp4", n=n))
    return Case("wrbench", "v", "m", video, annotations=ann)


def test_phases_from_annotations_triangle_and_no_look_away(tmp_path):
    al = WRBenchPhases()
    a = al.align(case_with(tmp_path, 12, camera="yaw_LR", look_away_frame=3, return_frame=8), al.defaults)
    assert {k: (p.start, p.end) for k, p in a.phases.items()} == {"visible": (0, 2), "away": (3, 7),
                                                                  "returned": (8, 11)}
    t = al.align(case_with(tmp_path, 12, camera="yaw_RL"), al.defaults)   # floor(12 * .25) = 3, ceil(12 * .75) = 9
    assert (t.phases["away"].start, t.phases["returned"].start) == (3, 9)
    s = al.align(case_with(tmp_path, 12, camera="static"), al.defaults)
    assert list(s.phases) == ["visible"] and s.info["look_away"] is False
    with pytest.raises(CaseFailure, match="look_away_frame 5 must be > 0 and before return_frame 5"):
        al.align(case_with(tmp_path, 12, camera="yaw_LR", look_away_frame=5, return_frame=5), al.defaults)


def test_model_columns_by_hand():
    # 4 videos: CamPrec .8 and (status not ok) None over 3 eligible yaw/static rows (the uncontrolled one is out);
    # CamAlign common-yaw over the 2 yaw rows: (.5 + .7) / 2 = .6; D5 over the 2 gated videos (.6 + .8) / 2 = .7;
    # reobservation support 2 of 4 = .5; Avg = (.6 + .9 + .7 + .5 + .7 + .4) / 6 = .6333…
    recs = [
        {"camera": "yaw_LR", "camprec": 0.8, "camalign": 0.5, "d2": 0.9, "d3": 0.7, "d4": 0.5, "d5": 0.6, "d6": 0.4,
         "gate": True},
        {"camera": "yaw_RL", "camprec": None, "camalign": 0.7, "d2": 0.9, "d3": 0.7, "d4": 0.5, "d5": 0.8, "d6": 0.4,
         "gate": True},
        {"camera": "static", "camprec": 1.0, "camalign": None, "d2": 0.9, "d3": 0.7, "d4": 0.5, "gate": False},
        {"camera": "uncontrolled", "camprec": None, "d2": 0.9, "d3": 0.7, "d4": 0.5, "gate": False},
    ]
    c = table.model_columns(recs, "model-inferred")
    assert (c["D1_CamPrec"], c["D1_CamPrec_n"], c["D1_CamPrec_eligible"]) == (pytest.approx(0.9), 2, 3)
    assert (c["D1_CamAlign_common_yaw"], c["D1_CamAlign_common_yaw_n"]) == (pytest.approx(0.6), 2)
    assert c["D1_CamAlign_static_hold_n"] == 0          # static-hold only for prompt-only models
    assert (c["D5"], c["D5_n"], c["reobservation_support"]) == (pytest.approx(0.7), 2, 0.5)
    assert (c["gate_applicable_rate"], c["low_n_flag"]) == (0.5, True)   # D5_n 2 < 10
    assert c["Avg"] == pytest.approx(3.8 / 6)
    api = table.model_columns(recs, "prompt-only")
    assert api["D1_CamPrec"] is None and api["D1_CamPrec_n"] == 0 and api["D1_CamAlign_static_hold_n"] == 0
    assert api["D1_CamPrec_eligible"] == 3     # the release counts a prompt-only model's controlled rows
    assert table.excluded({"model": "hunyuan_game_craft", "camera": "static"},
                          [{"model": "hunyuan_game_craft", "camera": "static"}])


def test_probe_sidecar_judge_and_the_null_policy(tmp_path):
    video = write_clip(tmp_path / "x.mp4")
    answers = {"D3_POSITION_RELATION": 0.9, "D3_STATIC_ANCHORS": 0.8, "D3_NEG_WRONG_SPATIAL": {"p_yes": 0.3},
               "D4_ACTION_STATE": 0.6, "D4_TEMPORAL_PROGRESS": 0.5, "D4_NEG_ABSENT_FREEZE": 0.2,
               "D5_RETURN_POSITION": 0.7, "D5_NEG_VANISH_RESET": 0.4}
    (tmp_path / "x.probes.json").write_text(json.dumps(answers))
    resp = ProbeSidecarJudge().ask(video, "", [{"id": k} for k in [*answers, "D6_HIDDEN_PROGRESS"]], {})
    got = {a["id"]: a["p_yes"] for a in resp.answers}
    assert got["D3_NEG_WRONG_SPATIAL"] == 0.3 and "D6_HIDDEN_PROGRESS" not in got
    assert resp.model_id == "sidecar:x.probes.json"
    m = {"p_yes": got, "judge_model": resp.model_id, "precision": {}, "gate_source": "evidence",
         "evidence": {"evidence_shared_oov_applicable": False, "evidence_shared_oov_na_reason": "no_return"},
         "manifest_reobservation_support": None}
    metric = ProbeScores()
    s = metric.score(m, {})
    assert (s["d3"], s["d4"], s["d5"], s["d6"], s["reobservation_support"]) == (0.8, 0.633333, None, None, 0.0)
    assert "gate not applicable (no_return): D5/D6 null" in metric.verdict(m, {})
    d5_missing = {**m, "evidence": {"evidence_shared_oov_applicable": True}, "p_yes": {**got, "D5_RETURN_POSITION": None}}
    with pytest.raises(CaseFailure, match="probe_status partial: no answer to D5_RETURN_POSITION"):
        metric.score(d5_missing, {})     # the release drops a video with any unanswered probe
    with pytest.raises(CaseFailure, match="D5 is null but its gate is applicable"):
        metric.score(d5_missing, {"partial_probes": "score_available"})
    (tmp_path / "x.probes.json").write_text(json.dumps({"D3_POSITION_RELATION": 1.5}))
    with pytest.raises(JudgeError, match=r"x\.probes\.json: D3_POSITION_RELATION: p_yes must be a number in \[0, 1\]"):
        ProbeSidecarJudge().ask(video, "", [{"id": "D3_POSITION_RELATION"}], {})


def test_tiny_default_layout_run(worldrecall_run):
    """The synthetic suite's WRBench layout through the CLI: rows for every metric, frozen camera's D5/D6 null
    with the gate's reason, the table with both variants and the paper's 23 rows."""
    run = worldrecall_run("only=[wrbench]", "tracking=none", models=["oracle", "frozen_camera", "forgetful"],
                          n_cases=2)
    assert run.exit_code == 0, run.stderr[-2000:]
    rows = [r for r in run.rows if r["benchmark"] == "wrbench"]
    assert {r["metric"] for r in rows} == {"wrbench.camprec", "wrbench.camalign", "wrbench.visual_integrity",
                                           "wrbench.probes", "wrbench.camera_gate"}
    # ok means a value: a camera that requests no look-away leaves the gate and CamAlign nothing to measure
    assert all(r["status"] == "ok" or r["status"] == "skipped" and ("not measured: no look-away" in r["reason"]
               or "camalign not applicable: d1_camalign_status=unsupported_intent" in r["reason"])
               for r in rows), [r["reason"] for r in rows if r["status"] != "ok"]
    frozen = [r for r in rows if r["model"] == "frozen_camera" and r["metric"] == "wrbench.probes"]
    assert all(r["values"]["d5"] is None and r["values"]["d6"] is None for r in frozen)
    assert all("no_oov" in r["info"]["verdict"] for r in frozen)
    oracle = [r for r in rows if r["model"] == "oracle" and r["metric"] == "wrbench.probes"]
    forgetful = [r for r in rows if r["model"] == "forgetful" and r["metric"] == "wrbench.probes"]
    assert min(r["values"]["d5"] for r in oracle) > max(r["values"]["d5"] for r in forgetful)
    t = run.tables["wrbench_table"]
    assert set(t["variant"]) == {"all", "gated"}
    assert (t["model"].str.contains("WRBench paper, frozen v0.1.2")).sum() == 23
    ours = t[(t["variant"] == "all") & (t["model"] == "frozen_camera")].iloc[0]
    assert ours["D5_n"] == 0 and ours["reobservation_support"] == 0.0


def test_camprec_metric_nulls_with_the_release_status():
    from worldrecall.plugins.wrbench.camera_metrics import CamAlign, CamPrec

    pred = np.tile(np.eye(4), (3, 1, 1))
    m = CamPrec()
    missing = {"pred_c2w": pred, "camera": "yaw_LR", "has_target": False, "target_c2w": np.zeros((0, 4, 4))}
    assert m.score(missing, m.thresholds)["score"] is None
    assert m.verdict(missing, m.thresholds).startswith("d1_status=missing_target_pose")
    short = {**missing, "has_target": True, "target_c2w": pred[:2]}
    assert m.score(short, m.thresholds)["status_ok"] == 0.0
    assert "d1_status=length_mismatch" in m.verdict(short, m.thresholds)
    # a frozen camera asked to yaw: CamAlign weak_motion 0.0 leaves the release's mean, counts with all_scored
    a = CamAlign()
    frozen = {"pred_c2w": pred, "intent": "yaw_RL"}
    assert a.score(frozen, a.thresholds)["score"] is None and a.score(frozen, a.thresholds)["raw_score"] == 0.0
    assert a.score(frozen, {**a.thresholds, "denominator": "all_scored"})["score"] == 0.0


def test_camera_gate_instructed_triangle():
    from worldrecall.plugins.wrbench.camera_gate import triangle_yaw

    t = triangle_yaw(5, -30.0)   # yaw 0, -15, -30, -15, 0 (left first)
    yaw = np.degrees(np.arctan2(t[:, 0, 2], t[:, 0, 0]))
    assert yaw.tolist() == pytest.approx([0.0, -15.0, -30.0, -15.0, 0.0])
