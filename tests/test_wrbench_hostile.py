"""Issue 45: WRBench's readers against hostile inputs. Each example of the issue, then property-based fuzzing of
every WRBench reader (manifest, release variants, evidence, probe answers, pose stacks) in the project's pattern
(tests/test_hostile_fuzz.py): accepted and valid, or refused with our error in one line naming the file."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.wrbench_fixtures import write_clip, write_manifest, write_release

from worldrecall.core.components import LoadRequest
from worldrecall.core.data import Case, CaseError, CaseFailure
from worldrecall.core.judges import JudgeError
from worldrecall.core.video import Video
from worldrecall.plugins.models import pose_npy
from worldrecall.plugins.wrbench import d1, validate
from worldrecall.plugins.wrbench.aligner import WRBenchPhases
from worldrecall.plugins.wrbench.camera_metrics import CamPrec
from worldrecall.plugins.wrbench.loader import WRBenchLoader
from worldrecall.plugins.wrbench.sidecar_judge import ProbeSidecarJudge

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=60, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])
GOOD = {"video_id": "a", "video_path": "a.mp4", "camera_type": "yaw_LR", "variant_id": "v1"}


def run_loader(root: Path, records: Any, *, variants_text: str | None = None, evidence_text: str | None = None,
               manifest_text: str | None = None) -> tuple[list[Case], dict[str, str]]:
    """Load one model folder ``m1`` (a.mp4 and b.mp4 exist); returns (cases, {case id: error})."""
    release = write_release(root / "release", [{"variant_id": "v1", "world_state_prompt": "A cat jumps."},
                                               {"variant_id": "v2", "world_state_prompt": "A dog sits."}])
    if variants_text is not None:
        (release / "variants.local.jsonl").write_text(variants_text, encoding="utf-8")
    gens = root / "gens" / "m1"
    for name in ("a.mp4", "b.mp4"):
        if not (gens / name).exists():
            write_clip(gens / name)
    if manifest_text is not None:
        gens.mkdir(parents=True, exist_ok=True)
        (gens / "videos.json").write_text(manifest_text, encoding="utf-8")
    else:
        write_manifest(gens, records)
    options = {}
    if evidence_text is not None:
        (root / "evidence.jsonl").write_text(evidence_text, encoding="utf-8")
        options["evidence_jsonl"] = str(root / "evidence.jsonl")
    out = list(WRBenchLoader().load(LoadRequest(data_root=release, generations={"m1": gens}, options=options)))
    return ([c for c in out if isinstance(c, Case)],
            {e.case_id: e.reason for e in out if isinstance(e, CaseError)})


def one_line_naming(msg: str, *names: str) -> bool:
    return bool(msg) and "\n" not in msg and all(n in msg for n in names)


# ---- the examples ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("frame", ["NaN", "Infinity", "-Infinity", "2.5", "-3", "true", "\"4\""])
def test_a_non_finite_or_non_integral_phase_frame_fails_its_record_by_name(tmp_path, frame):
    text = json.dumps([GOOD, {**GOOD, "video_id": "b", "video_path": "b.mp4"}])
    text = text.replace('"video_id": "b",', f'"video_id": "b", "look_away_frame": {frame}, "return_frame": 9,')
    cases, errors = run_loader(tmp_path, None, manifest_text=text)
    assert [c.case_id for c in cases] == ["a"]
    assert one_line_naming(errors["b"], "videos.json record 1", "look_away_frame")


def test_video_id_that_is_not_text_is_refused_not_named_none(tmp_path):
    cases, errors = run_loader(tmp_path, [GOOD, {**GOOD, "video_id": None}, {**GOOD, "video_id": 7},
                                          {**GOOD, "video_id": ["x"]}])
    assert [c.case_id for c in cases] == ["a"] and "None" not in errors
    for i in (1, 2, 3):
        assert one_line_naming(errors[f"record-{i}"], f"videos.json record {i}", "video_id must be a non-empty string")


@pytest.mark.parametrize("evidence", [["x"], "yes", 3, {"evidence_shared_oov_applicable": "true"},
                                      {"evidence_d5_applicable": 1}, {"evidence_shared_oov_na_reason": 5}])
def test_evidence_that_is_not_an_object_of_flags_fails_its_record(tmp_path, evidence):
    cases, errors = run_loader(tmp_path, [GOOD, {**GOOD, "video_id": "b", "video_path": "b.mp4",
                                                 "evidence": evidence}])
    assert [c.case_id for c in cases] == ["a"]
    assert one_line_naming(errors["b"], "videos.json record 1", "evidence")


def test_a_phase_frame_past_the_videos_end_fails_naming_the_video(tmp_path):
    video = Video(write_clip(tmp_path / "v.mp4", n=12))
    case = Case("wrbench", "c", "m", video, annotations={"camera": "yaw_LR", "look_away_frame": 3,
                                                          "return_frame": 40})
    with pytest.raises(CaseFailure, match=r"v\.mp4: the manifest's return_frame 40 is past the video's last frame 11"):
        WRBenchPhases().align(case, WRBenchPhases.defaults)
    ok = Case("wrbench", "c", "m", video, annotations={"camera": "yaw_LR", "look_away_frame": 3, "return_frame": 11})
    assert WRBenchPhases().align(ok, WRBenchPhases.defaults).phases["returned"].start == 11


def test_an_unusable_requested_trajectory_costs_camprec_only(tmp_path):
    """``d1.expand_poses`` refusing the target used to raise out of the aligner and fail every row of the video."""
    bad = np.tile(np.eye(4), (12, 1, 1))
    bad[:, 3, 0] = 1.0                                    # bottom row broken
    np.save(tmp_path / "t.npy", bad)
    video = Video(write_clip(tmp_path / "v.mp4", n=12))
    case = Case("wrbench", "c", "m", video, annotations={"camera": "yaw_LR"}, sidecars={"target_poses": tmp_path / "t.npy"})
    a = WRBenchPhases().align(case, WRBenchPhases.defaults)
    assert a.info["source"] == "camera type (triangle)" and "bottom row" in a.info["target_unusable"]
    m = CamPrec()
    meas = {"pred_c2w": np.tile(np.eye(4), (12, 1, 1)), "camera": "yaw_LR", "has_target": True,
            "target_c2w": np.zeros((0, 4, 4)), "target_problem": "t.npy: pose 0: bottom row is not [0, 0, 0, 1]"}
    assert m.score(meas, m.thresholds)["score"] is None
    assert m.verdict(meas, m.thresholds).startswith("d1_status=invalid_pose (invalid_pose: t.npy: pose 0")


def test_loader_warns_on_every_row_about_an_unusable_or_skewed_target(tmp_path):
    gens = tmp_path / "gens" / "m1"
    gens.mkdir(parents=True)
    bad = np.tile(np.eye(4), (12, 1, 1))
    bad[2, 0, 0] = np.nan
    np.save(gens / "nan.npy", bad)
    skew = np.tile(np.eye(4), (12, 1, 1))
    skew[:, 0, 0] = 1.5                                   # scaled, not a rotation
    np.save(gens / "skew.npy", skew)
    cases, errors = run_loader(tmp_path, [{**GOOD, "target_pose_path": "nan.npy"},
                                          {**GOOD, "video_id": "b", "video_path": "b.mp4",
                                           "target_pose_path": "skew.npy"}])
    assert not errors and len(cases) == 2
    w = {c.case_id: c.warnings for c in cases}
    assert any("nan.npy: pose 2 is not finite" in x and "invalid_pose" in x for x in w["a"])
    assert any("skew.npy: 12 rotation block(s) not orthonormal" in x and "as the release does" in x for x in w["b"])


def test_an_estimated_pose_file_with_more_rows_than_frames_is_refused(tmp_path):
    p = tmp_path / "poses.npy"
    np.save(p, np.tile(np.eye(4), (20, 1, 1)))
    video = Video(write_clip(tmp_path / "v.mp4", n=12))
    case = Case("wrbench", "c", "m", video, sidecars={"poses_npy": p})
    with pytest.raises(CaseFailure, match=r"poses\.npy: 20 poses for a video of 12 frames"):
        pose_npy.build({}).poses([None] * 12, case=case, indices=list(range(12)))
    nan = np.tile(np.eye(4), (12, 1, 1))
    nan[5, 1, 3] = np.inf
    np.save(p, nan)
    with pytest.raises(CaseFailure, match=r"poses\.npy: pose 5 is not finite"):
        pose_npy.build({}).poses([None] * 12, case=case, indices=list(range(12)))


def test_huge_translations_are_invalid_pose_never_a_perfect_score():
    t = np.tile(np.eye(4), (4, 1, 1))
    t[:, 0, 3] = [0.0, 1e200, 2e200, 3e200]               # the shape error overflows to NaN
    r = d1.camprec(t, t, "pan_LR")
    assert r["status"] == "invalid_pose" and r["score"] is None and "non-finite" in r["flags"][0]


def test_jsonl_is_split_on_newlines_only(tmp_path):
    # U+2028 / U+0085 inside a string: str.splitlines cut the record in two and lost the benchmark
    text = json.dumps({"variant_id": "v1", "world_state_prompt": "A cat\u2028jumps\u0085high."}, ensure_ascii=False)
    cases, errors = run_loader(tmp_path, [GOOD], variants_text=text + "\n")
    assert not errors and cases[0].prompt == "A cat\u2028jumps\u0085high."
    assert validate.json_lines("a\u2028b\r\n\nc") == [(1, "a\u2028b\r"), (3, "c")]


def test_a_21_digit_integer_costs_its_record_only(tmp_path):
    text = json.dumps([GOOD, {**GOOD, "video_id": "b", "video_path": "b.mp4"}]).replace(
        '"video_id": "b",', '"video_id": "b", "return_frame": 123456789012345678901,')
    cases, errors = run_loader(tmp_path, None, manifest_text=text)
    assert [c.case_id for c in cases] == ["a"]
    assert one_line_naming(errors["b"], "videos.json record 1", "return_frame: integer longer than 20 digits")


def test_a_cut_off_variants_line_costs_only_the_records_that_need_it(tmp_path):
    text = (json.dumps({"variant_id": "v1", "world_state_prompt": "A cat jumps."}) + "\n"
            + '{"variant_id": "v2", "world_state_pro\n'
            + json.dumps({"variant_id": "v3", "world_state_prompt": 5}) + "\n")
    cases, errors = run_loader(tmp_path, [GOOD, {**GOOD, "video_id": "b", "video_path": "b.mp4", "variant_id": "v2"},
                                          {**GOOD, "video_id": "c", "video_path": "b.mp4", "variant_id": "v3"}],
                               variants_text=text)
    assert [c.case_id for c in cases] == ["a"]
    assert one_line_naming(errors["b"], "variants.local.jsonl:2: not valid JSON", "variant_id 'v2' not found")
    assert one_line_naming(errors["c"], "variant_id 'v3'", "world_state_prompt must be a string")


def test_duplicate_variant_ids_cost_the_records_that_use_them(tmp_path):
    v = json.dumps({"variant_id": "v1", "world_state_prompt": "x"}) + "\n"
    other = json.dumps({"variant_id": "v2", "world_state_prompt": "y"}) + "\n"
    cases, errors = run_loader(tmp_path, [GOOD, {**GOOD, "video_id": "b", "video_path": "b.mp4", "variant_id": "v2"}],
                               variants_text=v + other + v)
    assert [c.case_id for c in cases] == ["b"]
    assert one_line_naming(errors["a"], "variants.local.jsonl:3: duplicate variant_id 'v1' (first on line 1)")


def test_a_broken_evidence_line_costs_only_videos_without_a_record(tmp_path):
    ev = (json.dumps({"video_id": "a", "evidence_shared_oov_applicable": True}) + "\n" + '{"video_id": "b", \n'
          + json.dumps({"video_id": "c", "evidence_shared_oov_applicable": "yes"}) + "\n")
    cases, errors = run_loader(tmp_path, [GOOD, {**GOOD, "video_id": "b", "video_path": "b.mp4"},
                                          {**GOOD, "video_id": "c", "video_path": "b.mp4"}], evidence_text=ev)
    assert [c.case_id for c in cases] == ["a"] and cases[0].annotations["evidence"]["evidence_shared_oov_applicable"]
    assert one_line_naming(errors["b"], "evidence.jsonl:2: not valid JSON", "video_id 'b' not found")
    assert one_line_naming(errors["c"], "evidence.jsonl: video_id 'c'", "evidence_shared_oov_applicable")


# ---- property-based: every WRBench reader -----------------------------------------------------------------------

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-10**25, 10**25), st.text(max_size=8),
                      st.floats(allow_nan=True, allow_infinity=True))
JSON_VALUE = st.recursive(JSON_LEAF, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c,
                                                                                          max_size=3), max_leaves=6)
RECORD_KEYS = ["video_id", "video_path", "camera_type", "variant_id", "world_state_prompt", "look_away_frame",
               "return_frame", "requested_yaw_deg", "reobservation_support", "evidence", "target_pose_path",
               "viewpoint_condition_type", "family_id", "model"]


@FUZZ
@given(key=st.sampled_from(RECORD_KEYS), value=JSON_VALUE)
def test_fuzz_manifest_one_bad_field_costs_only_its_record(tmp_path_factory, key, value):
    root = tmp_path_factory.mktemp("m")
    text = json.dumps([GOOD, {**GOOD, "video_id": "b", "video_path": "b.mp4", key: value}], allow_nan=True)
    cases, errors = run_loader(root, None, manifest_text=text)
    assert "a" in [c.case_id for c in cases], errors             # the healthy video always survives
    for reason in errors.values():
        assert one_line_naming(reason, "videos.json") or ".npy" in reason or ".mp4" in reason, reason
    for c in cases:
        assert isinstance(c.case_id, str) and c.case_id and c.case_id != "None"
        for k in validate.FRAME_FIELDS:
            assert k not in c.annotations or (isinstance(c.annotations[k], int) and c.annotations[k] >= 0)
        ev = c.annotations.get("evidence")
        assert ev is None or isinstance(ev, dict)


@FUZZ
@given(data=st.binary(max_size=300) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_fuzz_manifest_bytes_refused_in_one_line_or_loaded(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("b")
    gens = root / "gens" / "m1"
    gens.mkdir(parents=True)
    (gens / "videos.json").write_bytes(data)
    out = list(WRBenchLoader().load(LoadRequest(data_root=root, generations={"m1": gens})))
    for o in out:
        if isinstance(o, CaseError):
            assert one_line_naming(o.reason, "videos.json"), o.reason


@FUZZ
@given(lines=st.lists(st.one_of(JSON_VALUE.map(lambda v: json.dumps(v, allow_nan=True)),
                                st.text(max_size=30)), max_size=6))
def test_fuzz_jsonl_index_keeps_bad_lines_as_problems(tmp_path_factory, lines):
    p = tmp_path_factory.mktemp("j") / "variants.x.jsonl"
    good = json.dumps({"variant_id": "keep", "world_state_prompt": "p"})
    p.write_text("\n".join([*lines, good]) + "\n", encoding="utf-8", errors="surrogatepass")
    try:
        idx = validate.read_jsonl_index(p, "variant_id")
    except CaseFailure as e:                      # only an undecodable file is refused whole
        assert one_line_naming(str(e), "variants.x.jsonl") and "UTF-8" in str(e)
        return
    assert all(isinstance(k, str) and k for k in idx.records)
    assert all(one_line_naming(b, "variants.x.jsonl:") for b in idx.bad_lines)
    assert "keep" in idx.records or "keep" in idx.bad_keys


@FUZZ
@given(ev=JSON_VALUE)
def test_fuzz_evidence_record(ev):
    try:
        got = validate.check_evidence(ev, "ev.json")
    except CaseFailure as e:
        assert one_line_naming(str(e), "ev.json")
        return
    for k in validate.EVIDENCE_BOOLS:
        assert got.get(k) is None or isinstance(got[k], bool)


@FUZZ
@given(answers=st.dictionaries(st.sampled_from(["D3_POSITION_RELATION", "D4_ACTION_STATE", "x"]), JSON_VALUE,
                               max_size=3))
def test_fuzz_probe_answers(tmp_path_factory, answers):
    d = tmp_path_factory.mktemp("p")
    (d / "v.probes.json").write_text(json.dumps(answers, allow_nan=True))
    try:
        resp = ProbeSidecarJudge().ask(d / "v.mp4", "", [{"id": "D3_POSITION_RELATION"}, {"id": "D4_ACTION_STATE"}], {})
    except JudgeError as e:
        assert one_line_naming(str(e), "v.probes.json")
        return
    assert all(math.isfinite(a["p_yes"]) and 0.0 <= a["p_yes"] <= 1.0 for a in resp.answers)


POSE = st.one_of(
    st.integers(0, 4).flatmap(lambda t: st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64),
                                                  min_size=t * 16, max_size=t * 16).map(
        lambda xs, t=t: np.asarray(xs, dtype=np.float64).reshape(t, 4, 4))),
    st.sampled_from([np.zeros((3, 3)), np.zeros((2, 3, 3)), np.array(["a"]), np.zeros((2, 4, 4), np.complex128),
                     np.tile(np.eye(4), (3, 1, 1)), np.tile(np.eye(4)[:3], (3, 1, 1))]))


@FUZZ
@given(arr=POSE, rows=st.sampled_from([None, 3]))
def test_fuzz_pose_stack(arr, rows):
    try:
        out, warnings = validate.pose_stack(arr, "t.npy", rows)
    except CaseFailure as e:
        assert one_line_naming(str(e), "t.npy")
        return
    assert out.ndim == 3 and out.shape[1:] == (4, 4) and np.all(np.isfinite(out))
    assert np.allclose(out[:, 3], [0, 0, 0, 1]) and (rows is None or len(out) == rows)
    assert all(one_line_naming(w, "t.npy", "not orthonormal") for w in warnings)


@FUZZ
@given(arr=POSE)
def test_fuzz_camprec_never_scores_nan(arr):
    r = d1.camprec(np.tile(np.eye(4), (len(arr) if arr.ndim == 3 else 1, 1, 1)), arr, "yaw_LR")
    assert r["score"] is None or (math.isfinite(r["score"]) and 0.0 <= r["score"] <= 1.0)
    assert r["pose_reward"] is None or math.isfinite(r["pose_reward"])


# ---- through the CLI: broken records beside healthy videos -------------------------------------------------------

def test_cli_broken_records_cost_only_their_videos(tmp_path, worldrecall_run):
    """``worldrecall run`` on a manifest with two healthy videos and one record broken in each of the issue's ways:
    both healthy videos score D2-D6, each broken record is one error naming videos.json, its record and field."""
    from worldrecall.plugins.wrbench.probes import CATALOG

    release = write_release(tmp_path / "release", [])
    (release / "variants.local.jsonl").write_text(
        json.dumps({"variant_id": "v1", "world_state_prompt": "A cat\u2028jumps."}, ensure_ascii=False) + "\n"
        + '{"variant_id": "v9", "world_sta\n', encoding="utf-8")
    gens = tmp_path / "gens" / "m1"
    answers = {p.probe_id: 0.9 if p.polarity == "positive" else 0.1 for p in CATALOG}
    for name in ("a", "b", "x"):
        write_clip(gens / f"{name}.mp4", seed=ord(name))
        (gens / f"{name}.probes.json").write_text(json.dumps(answers))
    ev = {"evidence_shared_oov_applicable": True}
    good = {"video_path": "a.mp4", "camera_type": "yaw_LR", "variant_id": "v1", "evidence": ev}
    broken = {"nan-frame": {"look_away_frame": "NaN", "return_frame": 9}, "bad-evidence": {"evidence": ["x"]},
              "past-end": {"look_away_frame": 3, "return_frame": 400}, "cut-variant": {"variant_id": "v9"},
              "huge": {"return_frame": "123456789012345678901"}}
    recs = [{**good, "video_id": "a"}, {**good, "video_id": "b", "video_path": "b.mp4"}, {**good, "video_id": None}]
    recs += [{**good, "video_id": k, "video_path": "x.mp4", **v} for k, v in broken.items()]
    text = json.dumps(recs).replace('"NaN"', "NaN").replace('"123456789012345678901"', "123456789012345678901")
    gens.mkdir(parents=True, exist_ok=True)
    (gens / "videos.json").write_text(text)
    run = worldrecall_run("only=[wrbench]", "tracking=none", f"benchmarks.wrbench.data_root={release}",
                          f"benchmarks.wrbench.generations={tmp_path / 'gens'}",
                          *[f"benchmarks.wrbench.metrics.{m}.enabled=false" for m in ("camprec", "camalign",
                                                                                      "camera_gate")],
                          models=None, suite=None)
    rows = [r for r in run.rows if r["benchmark"] == "wrbench"]
    ok = {(r["case_id"], r["metric"]) for r in rows if r["status"] == "ok"}
    assert {("a", "wrbench.probes"), ("b", "wrbench.probes"), ("a", "wrbench.visual_integrity"),
            ("b", "wrbench.visual_integrity")} <= ok, [(r["case_id"], r["status"], r.get("reason")) for r in rows]
    failed = {r["case_id"]: str(r.get("reason") or "") for r in rows if r["status"] != "ok"}
    assert set(failed) >= {"record-2", *broken}, failed
    assert "record 2: video_id must be a non-empty string" in failed["record-2"]
    assert "look_away_frame must be a finite number" in failed["nan-frame"]
    assert "evidence must be a JSON object" in failed["bad-evidence"]
    assert "return_frame 400 is past the video's last frame 11" in failed["past-end"]
    assert "variants.local.jsonl:2: not valid JSON" in failed["cut-variant"]
    assert "return_frame: integer longer than 20 digits" in failed["huge"]
    assert all("\n" not in r for r in failed.values())


@FUZZ
@given(cut=st.integers(0, 10342), insert=st.binary(max_size=6), at=st.integers(0, 10342))
def test_fuzz_published_table_reader(tmp_path_factory, cut, insert, at):
    """``official_results`` with a path (the release's CSV given by the user): accepted rows are typed, anything
    else is one line naming the file."""
    from worldrecall.plugins.wrbench import official_results as off

    data = off.PAPER_TABLE.read_bytes()
    data = (data[:at] + insert + data[at:])[:cut]
    p = tmp_path_factory.mktemp("t") / "results.csv"
    p.write_bytes(data)
    try:
        rows = off.official_rows(p)
    except CaseFailure as e:
        assert one_line_naming(str(e), "results.csv"), str(e)
        return
    for r in rows:
        assert isinstance(r["n_outputs"], int) and isinstance(r["low_n_flag"], bool)
        assert all(r[c] is None or math.isfinite(r[c]) for c in off.FLOAT_COLUMNS)


def test_published_table_row_without_a_name_is_refused(tmp_path):
    from worldrecall.plugins.wrbench import official_results as off

    text = off.PAPER_TABLE.read_text(encoding="utf-8").replace("gen3c,Gen3C,", "gen3c,,", 1)
    (tmp_path / "t.csv").write_text(text, encoding="utf-8")
    with pytest.raises(CaseFailure, match=r"t\.csv: line 2: display_name: missing"):
        off.official_rows(tmp_path / "t.csv")


def test_a_stratum_that_is_not_a_label_fails_its_record(tmp_path):
    cases, errors = run_loader(tmp_path, [{**GOOD, "family_id": 3},
                                          {**GOOD, "video_id": "b", "video_path": "b.mp4", "family_id": {"x": 1}}])
    assert [c.case_id for c in cases] == ["a"] and cases[0].strata["family_id"] == "3"
    assert one_line_naming(errors["b"], "videos.json record 1", "family_id must be text or a finite number")


def test_shared_manifest_record_whose_model_is_not_text_is_refused_not_skipped(tmp_path):
    gens = tmp_path / "gens"
    write_clip(gens / "a.mp4")
    write_release(tmp_path / "release", [{"variant_id": "v1", "world_state_prompt": "x"}])
    manifest = write_manifest(gens, [{**GOOD, "model": "m1"}, {**GOOD, "video_id": "b", "model": ["m1"]},
                                     {**GOOD, "video_id": "c", "model": "m2"}])
    out = list(WRBenchLoader().load(LoadRequest(data_root=tmp_path / "release", generations={"m1": manifest})))
    assert [o.case_id for o in out if isinstance(o, Case)] == ["a"]
    errors = {o.case_id: o.reason for o in out if isinstance(o, CaseError)}
    assert set(errors) == {"b"} and "model must be a string" in errors["b"]


@FUZZ
@given(arr=POSE, intent=st.sampled_from(["yaw_LR", "yaw_RL", "static", "orbit"]))
def test_fuzz_camalign_never_scores_nan(arr, intent):
    r = d1.camalign(arr, intent)
    assert r["score"] is None or (math.isfinite(r["score"]) and 0.0 <= r["score"] <= 1.0), r


@FUZZ
@given(ev=JSON_VALUE, manifest=st.sampled_from([None, True, False]))
def test_fuzz_evidence_gate_after_the_check(ev, manifest):
    from worldrecall.plugins.wrbench import probes

    try:
        checked = validate.check_evidence(ev, "ev.json")
    except CaseFailure:
        return
    g = probes.evidence_gate(checked, manifest)
    assert all(isinstance(x, bool) for x in (g.shared, g.d5, g.d6))
    assert all(r is None or isinstance(r, str) for r in (g.shared_reason, g.d5_reason, g.d6_reason))


def test_d2_refuses_non_finite_tokens_instead_of_scoring_them(tmp_path):
    from worldrecall.plugins.wrbench.visual_integrity import VisualIntegrity

    class Embedder:
        def cls_and_patches(self, frames, *, case=None, indices=None):
            cls = np.ones((len(frames), 4), np.float32)
            cls[1, 0] = np.nan
            return cls, np.ones((len(frames), 3, 4), np.float32)

    class Models:
        def get(self, role):
            return Embedder()

    class Ctx:
        models = Models()

    case = Case("wrbench", "c", "m", Video(write_clip(tmp_path / "v.mp4")))
    with pytest.raises(CaseFailure, match=r"v\.mp4: cls_patch_embedder returned non-finite tokens"):
        VisualIntegrity().measure(case, None, Ctx())
