"""OPIS inventory parsing (reference_scene.json, A.2 + errata 1), video_observation.json parsing, and the
JSON / cache round trip of the measurement records."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from worldrecall.engine.cache import Store
from worldrecall.core.data import CaseFailure
from worldrecall.plugins.opis.inventory import (
    check_embedding_backend,
    load_reference_scene,
    load_video_observation,
    normalise_mobility,
    parse_reference_scene,
    parse_video_observation,
)
from worldrecall.plugins.opis.records import (
    ClaimRecord,
    Inventory,
    ObjectProjection,
    PoseRecord,
    Window,
    WindowGeometry,
    case_to_measurement,
    measurement_to_case,
)
from worldrecall.plugins.opis.score import row_table, score_case


def _mobility(**over):
    m = {"kinematic_class": "rigid", "motion_expectation": "world_static", "evaluation_track": "static_geometry",
         "geometry_eligible": True, "confidence": 0.9}
    m.update(over)
    return m


def _scene():
    return {
        "scene_id": "case01",
        "metadata": {"image_size": [64, 48], "preprocessing": {"embedding_backend": "colorhist"}},
        "objects": [
            {"object_id": "o1", "category": "cup", "bbox": [4, 4, 20, 20], "attributes": {"color": "red"},
             "embedding": [1.0, 0.0, 0.0], "metadata": {"mobility": _mobility()}},
            {"object_id": "o2", "category": "person", "bbox": [30, 10, 50, 40], "attributes": {},
             "embedding": [0.0, 1.0, 0.0],
             "metadata": {"mobility": _mobility(kinematic_class="articulated", motion_expectation="independent_motion",
                                                evaluation_track="dynamic_identity", geometry_eligible=False),
                          "ambiguity_group": ["o2", "o3"]}},
        ],
    }


def _fail(doc, **kw) -> str:
    with pytest.raises(CaseFailure) as e:
        parse_reference_scene(doc, source="case01/reference_scene.json", **kw)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("case01/reference_scene.json")
    return msg


def test_valid_scene_parses():
    inv = parse_reference_scene(_scene(), image_size=(64, 48))
    assert inv.scene_id == "case01" and inv.image_size == (64, 48) and inv.embedding_backend == "colorhist"
    o1, o2 = inv.objects
    assert o1.static_track and not o1.dynamic_track and o1.mobility_source == "mobility"
    assert o2.dynamic_track and o2.kinematic_class == "articulated" and o2.ambiguity_group == "o2|o3"
    assert o1.embedding.tolist() == [1.0, 0.0, 0.0]


def test_missing_or_mismatched_image_size():
    doc = _scene()
    del doc["metadata"]["image_size"]
    assert "metadata.image_size" in _fail(doc)
    doc = _scene()
    del doc["metadata"]
    assert "metadata.image_size" in _fail(doc)
    assert "!= reference image size [640, 480]" in _fail(_scene(), image_size=(640, 480))


def test_unknown_enum_values_are_normalised_not_failing():
    doc = _scene()
    doc["objects"][0]["metadata"]["mobility"] = _mobility(kinematic_class="wobbly", evaluation_track="sideways")
    o = parse_reference_scene(doc).objects[0]
    # unknown kinematics -> unknown; unknown track -> excluded; static contract broken -> no geometry
    assert (o.kinematic_class, o.evaluation_track, o.geometry_eligible) == ("unknown", "excluded", False)
    m = normalise_mobility(_mobility(motion_expectation="teleporting"))
    assert (m["motion_expectation"], m["evaluation_track"], m["geometry_eligible"]) == ("unknown", "dynamic_identity", False)


def test_static_contract_rules():
    # rigid + world_static + static track but geometry_eligible false -> identity only (track kept, no geometry)
    m = normalise_mobility(_mobility(geometry_eligible=False))
    assert (m["evaluation_track"], m["geometry_eligible"]) == ("static_geometry", False)
    # deformable declared on the static track -> dynamic
    m = normalise_mobility(_mobility(kinematic_class="deformable"))
    assert (m["evaluation_track"], m["geometry_eligible"]) == ("dynamic_identity", False)
    # explicitly excluded stays excluded even if moving
    m = normalise_mobility(_mobility(motion_expectation="independent_motion", evaluation_track="excluded"))
    assert m["evaluation_track"] == "excluded"
    # protocol_frozen satisfies the static contract
    assert normalise_mobility(_mobility(motion_expectation="protocol_frozen"))["geometry_eligible"] is True


def test_errata1_unlabeled_objects_are_identity_only_unless_flag():
    doc = _scene()
    doc["objects"][0]["metadata"] = {}
    doc["objects"][0]["instance_kind"] = "static"
    o = parse_reference_scene(doc).objects[0]
    assert (o.evaluation_track, o.static_track, o.mobility_source) == ("unlabeled", False, "unlabeled")
    o = parse_reference_scene(doc, allow_unlabeled_geometry=True).objects[0]
    assert (o.evaluation_track, o.static_track, o.mobility_confidence, o.mobility_source) == (
        "static_geometry", True, 0.5, "legacy")
    doc["objects"][0]["instance_kind"] = "articulated"
    assert parse_reference_scene(doc).objects[0].dynamic_track
    del doc["objects"][0]["instance_kind"]
    assert parse_reference_scene(doc, allow_unlabeled_geometry=True).objects[0].evaluation_track == "unlabeled"


def test_legacy_kind_key_is_read_from_object_metadata():
    doc = _scene()
    doc["objects"][0]["metadata"] = {"kind": "articulated"}      # the release's older key
    o = parse_reference_scene(doc).objects[0]
    assert (o.evaluation_track, o.kinematic_class, o.mobility_confidence, o.mobility_source) == (
        "dynamic_identity", "articulated", 0.5, "legacy")
    doc["objects"][0]["metadata"] = {"kind": "static"}
    assert parse_reference_scene(doc, allow_unlabeled_geometry=True).objects[0].static_track
    # instance_kind wins over kind (metadata.get("instance_kind", metadata.get("kind")))
    doc["objects"][0]["metadata"] = {"instance_kind": "deformable", "kind": "static"}
    assert parse_reference_scene(doc).objects[0].kinematic_class == "deformable"


def test_mobility_confidence_is_clipped_to_unit_interval():
    for given, want in ((1.7, 1.0), (-0.2, 0.0), (0.35, 0.35), ("0.8", 0.8), ("high", None), (None, None)):
        assert normalise_mobility(_mobility(confidence=given))["mobility_confidence"] == want
    doc = _scene()
    doc["objects"][0]["metadata"]["mobility"]["confidence"] = 3
    assert parse_reference_scene(doc).objects[0].mobility_confidence == 1.0


def test_errata1_flag_re_applies_at_score_time():
    doc = _scene()
    doc["objects"][0]["metadata"] = {}
    doc["objects"][0]["instance_kind"] = "rigid"
    inv = parse_reference_scene(doc)
    windows = parse_video_observation(_video_obs())
    # the object is matched in w0; unlabeled -> identity only, no structure candidate at all
    rows_off = [r for r in row_table(inv, windows) if r["object_id"] == "o1"]
    rows_on = [r for r in row_table(inv, windows, {"allow_unlabeled_geometry": True}) if r["object_id"] == "o1"]
    assert {r["geometry_candidate"] for r in rows_off} == {False}
    assert {r["geometry_candidate"] for r in rows_on} == {True}
    assert score_case(inv, windows)["structure_candidate_objects"] == 1.0   # only the dynamic o2
    assert score_case(inv, windows, {"allow_unlabeled_geometry": True})["structure_candidate_objects"] == 2.0


def test_bad_objects_fail_with_the_field_named():
    doc = _scene()
    doc["objects"][1]["embedding"] = [0.0, 1.0]
    assert "object o2.embedding: dimension 2 differs" in _fail(doc)
    doc = _scene()
    doc["objects"][0]["bbox"] = [4, 4, 2, 20]
    assert "object o1.bbox" in _fail(doc)
    doc = _scene()
    doc["objects"][0]["bbox"] = [4, 4, 80, 20]
    assert "outside the 64x48 image" in _fail(doc)
    doc = _scene()
    doc["objects"][0]["center"] = [float("nan"), 3.0]
    assert "non-finite value at center[0]" in _fail(doc)
    doc = _scene()
    doc["objects"][0]["embedding"] = [float("inf"), 0.0, 0.0]
    assert "non-finite" in _fail(doc)
    doc = _scene()
    doc["objects"][1]["object_id"] = "o1"
    assert "duplicate object_id" in _fail(doc)
    doc = _scene()
    doc["objects"] = []
    assert "objects must be a non-empty list" in _fail(doc)


def test_empty_masks_fail(tmp_path):
    doc = _scene()
    doc["objects"][0]["mask"] = np.zeros((48, 64), int).tolist()
    assert "object o1.mask: is empty" in _fail(doc)
    doc["objects"][0]["mask"] = np.zeros((10, 10), int).tolist()
    assert "shape [10, 10]" in _fail(doc)
    # a mask PNG on disk, read relative to the scene file
    from PIL import Image

    case = tmp_path / "case01"
    (case / "masks").mkdir(parents=True)
    Image.fromarray(np.zeros((48, 64), np.uint8)).save(case / "masks" / "o1.png")
    doc = _scene()
    doc["objects"][0]["mask_path"] = "masks/o1.png"
    (case / "reference_scene.json").write_text(json.dumps(doc))
    with pytest.raises(CaseFailure, match=r"mask_path: masks/o1.png is empty"):
        load_reference_scene(case / "reference_scene.json", image_size=(64, 48))
    full = np.zeros((48, 64), np.uint8)
    full[5:15, 5:15] = 255
    Image.fromarray(full).save(case / "masks" / "o1.png")
    assert load_reference_scene(case / "reference_scene.json", image_size=(64, 48)).objects[0].has_support
    doc["objects"][0]["mask_path"] = "../../etc/passwd"
    (case / "reference_scene.json").write_text(json.dumps(doc))
    with pytest.raises(CaseFailure, match="escapes the data root"):
        load_reference_scene(case / "reference_scene.json")


def test_unreadable_file_is_one_line(tmp_path):
    p = tmp_path / "reference_scene.json"
    p.write_text("{not json")
    with pytest.raises(CaseFailure) as e:
        load_reference_scene(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(CaseFailure, match=r"missing.json: cannot be read \(FileNotFoundError"):
        load_reference_scene(tmp_path / "missing.json")


def test_embedding_backend_and_dimension_check():
    inv = parse_reference_scene(_scene())
    check_embedding_backend(inv, "colorhist", 3)
    with pytest.raises(CaseFailure, match="backend 'dinov3'"):
        check_embedding_backend(inv, "dinov3", 3)
    with pytest.raises(CaseFailure, match="dimension 384 != reference_scene's 3"):
        check_embedding_backend(inv, None, 384)


def _video_obs():
    return {
        "video_id": "v1",
        "windows": [
            {"window_id": "w0", "frame_index": 24, "timestamp": 1.0, "frame_size": [64, 48],
             "objects": [{"observed_id": "d0", "bbox": [4, 4, 20, 20], "category": "cup", "confidence": 0.8,
                          "attributes": {"color": "red"}, "embedding": [1.0, 0.0, 0.0], "track_id": 7}]},
            {"window_id": "w1", "frame_index": 32, "timestamp": 1.333, "frame_size": [64, 48], "objects": []},
        ],
    }


def test_video_observation_parses_and_scores_without_models(tmp_path):
    p = tmp_path / "video_observation.json"
    p.write_text(json.dumps(_video_obs()))
    windows = load_video_observation(p)
    assert [w.window_id for w in windows] == ["w0", "w1"]
    assert windows[0].observations[0].track_id == "7" and windows[0].geometry is None
    out = score_case(parse_reference_scene(_scene()), windows)
    # o1 (static track) matched in w0 by direct observation; o2 (dynamic) unmatched -> no evidence.
    # w0: extras not attributable (o2 unknown), eligible {o1: present} -> 1; w1: nothing evaluable -> skipped
    assert out["presence"] == 1.0 and out["n_presence_windows"] == 1.0
    assert out["identity"] == pytest.approx(1.0)


def test_video_observation_bad_inputs():
    doc = _video_obs()
    doc["windows"][0]["frame_size"] = [64]
    with pytest.raises(CaseFailure, match=r"windows\[0\].frame_size"):
        parse_video_observation(doc, source="v.json")
    doc = _video_obs()
    doc["windows"][0]["objects"][0]["bbox"] = [1, 2, float("nan"), 4]
    with pytest.raises(CaseFailure, match=r"objects\[0\].bbox"):
        parse_video_observation(doc)
    doc = _video_obs()
    doc["windows"][1]["window_id"] = "w0"
    with pytest.raises(CaseFailure, match="duplicated"):
        parse_video_observation(doc)


def _full_case() -> tuple[Inventory, list[Window]]:
    inv = parse_reference_scene(_scene())
    proj = ObjectProjection(
        object_id="o1", projected_px=np.arange(16, dtype=float).reshape(8, 2), projected_depth=np.full(8, 2.0),
        current_depth=np.full(8, 1.9), depth_valid=np.ones(8, bool), depth_confidence=np.full(8, 0.9),
        insufficient_baseline=False, in_view=np.ones(8, bool),
    )
    geo = WindowGeometry(scored=True, camera_confidence=0.8, depth_scale=1.1, moves=True, projections={"o1": proj},
                         ref_px=np.ones((5, 2)), cur_px=np.zeros((5, 2)), reproj_err=np.array([0.1, 0.2, np.inf, 1.0, 2.0]),
                         inlier=np.array([True, True, False, True, True]))
    pose = PoseRecord("o2", "human", [f"e{i}" for i in range(10)], np.array([1.0] * 9 + [np.nan]), np.ones(10))
    claims = ClaimRecord("o2", [{"fact_id": "f1", "family": "parts", "confidence": 0.9, "text": "two arms"}],
                         [{"fact_id": "f1", "status": "supported", "confidence": 0.8, "visible": True}])
    windows = parse_video_observation(_video_obs())
    windows[0].geometry = geo
    windows[0].pose = {"o2": pose}
    windows[0].claims = {"o2": claims}
    return inv, windows


def _same(a, b) -> None:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert np.asarray(a).dtype == np.asarray(b).dtype
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif hasattr(a, "__dataclass_fields__"):
        assert type(a) is type(b)
        for k in a.__dataclass_fields__:
            _same(getattr(a, k), getattr(b, k))
    else:
        assert a == b


def test_records_round_trip_through_plain_json():
    inv, windows = _full_case()
    text = json.dumps({"inventory": inv.to_json(), "windows": [w.to_json() for w in windows]}, allow_nan=True)
    back = json.loads(text)
    _same(Inventory.from_json(back["inventory"]), inv)
    _same([Window.from_json(w) for w in back["windows"]], windows)


def test_case_round_trips_through_the_measurement_cache(tmp_path):
    inv, windows = _full_case()
    m = case_to_measurement(inv, windows)
    assert all(isinstance(v, np.ndarray) for k, v in m.items() if k != "opis_case")
    Store(tmp_path).put_arrays("measurements", "k1", m)
    loaded = Store(tmp_path).get_arrays("measurements", "k1")
    assert loaded is not None
    inv2, windows2 = measurement_to_case(loaded)
    _same(inv2, inv)
    _same(windows2, windows)
    # re-scoring the archived measurement gives the same numbers
    assert score_case(inv2, windows2) == score_case(inv, windows)


def test_measurement_refuses_other_schema_versions():
    inv, windows = _full_case()
    m = case_to_measurement(inv, windows)
    bad = copy.deepcopy(m["opis_case"])
    bad["schema_version"] = 99
    with pytest.raises(ValueError, match="schema_version"):
        measurement_to_case({**m, "opis_case": bad})


def test_window_with_null_frame_index_is_accepted():
    doc = _video_obs()
    doc["windows"][0]["frame_index"] = None
    doc["windows"][1]["timestamp"] = None
    windows = parse_video_observation(doc)
    assert windows[0].frame_index is None and windows[1].timestamp is None
    out = score_case(parse_reference_scene(_scene()), windows)
    assert out["presence"] == 1.0
    # the release's default window id: the frame index (then "window"): two unnamed windows collide
    del doc["windows"][0]["window_id"], doc["windows"][1]["window_id"]
    assert [w.window_id for w in parse_video_observation(dict(doc, windows=doc["windows"][1:]))] == ["32"]
    doc["windows"][1]["frame_index"] = None
    with pytest.raises(CaseFailure, match="duplicated"):
        parse_video_observation(dict(doc, windows=[doc["windows"][0], doc["windows"][1]]))
    # a null frame index survives the cache round trip
    inv = parse_reference_scene(_scene())
    _, back = measurement_to_case(case_to_measurement(inv, windows))
    assert back[0].frame_index is None and back[1].timestamp is None


def test_score_then_artifacts_build_the_rows_once_and_match_a_fresh_build(tmp_path, monkeypatch):
    # the metric writes a case's artifacts right after scoring the same measurement: one row build serves
    # both, and gives what a fresh build of each gives (score_case / row_table straight from the records)
    from worldrecall.plugins.opis import score as score_mod
    from worldrecall.plugins.opis.metric import OpisMetric, flat_numbers

    inv, windows = _full_case()
    m = case_to_measurement(inv, windows)
    metric = OpisMetric()
    builds = []
    real = score_mod.case_rows
    monkeypatch.setattr(score_mod, "case_rows", lambda *a, **k: builds.append(1) or real(*a, **k))
    values = metric.score(m, metric.thresholds)
    (path,) = metric.artifacts(m, metric.thresholds, tmp_path / "a")
    assert len(builds) == 1
    fresh = score_case(inv, windows, dict(metric.thresholds))
    assert values == {k: (None if v is None else float(v)) for k, v in flat_numbers(fresh).items()}
    (fresh_path,) = OpisMetric().artifacts(m, metric.thresholds, tmp_path / "b")  # no score before: a fresh build
    assert path.read_bytes() == fresh_path.read_bytes()
    assert path.read_text().count("\n") == 1 + len(row_table(inv, windows, dict(metric.thresholds)))
    assert len(builds) == 4  # + fresh score_case, artifacts and row_table
    # other thresholds, or another measurement object: built again
    metric.score(m, {**metric.thresholds, "official_parity": True})
    metric.score(dict(m), metric.thresholds)
    assert len(builds) == 6
