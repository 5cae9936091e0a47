"""The ``opis`` loader: release layout, domain mapping, precomputed observations and broken layouts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers.opis_fixtures import scene_doc, static_object, write_example_folder, write_release

from worldrecall.core.components import LoadRequest
from worldrecall.core.data import Case, CaseError
from worldrecall.plugins.opis.loader import OpisLoader, read_domains


def _load(root: Path, models=("m1",), **options):
    req = LoadRequest(root, {m: root / "generations" / m for m in models}, options)
    return list(OpisLoader().load(req))


def _one(items):
    assert len(items) == 1, items
    return items[0]


def test_release_layout_gives_cases_with_strata_and_sidecars(tmp_path):
    root = write_release(tmp_path, cases={"c1": "home", "c2": "lab"},
                         domains={"home": "real-world", "lab": "embodied"}, models=("a", "b"))
    items = _load(root, models=("a", "b"))
    assert len(items) == 4 and all(isinstance(c, Case) for c in items)
    c = next(c for c in items if c.case_id == "c2" and c.model == "b")
    assert c.strata == {"domain": "embodied", "subcategory": "lab"}
    assert c.video is not None and c.video.path == root / "generations" / "b" / "c2.mp4"
    assert c.sidecars["raw"].name == "raw.jpg" and c.sidecars["reference_scene"].name == "reference_scene.json"
    assert c.prompt == "the camera pans right and back"
    assert c.annotations["image_size"] == [64, 48] and c.annotations["fps"] == 16.0
    json.dumps(c.annotations)  # part of the fingerprint: JSON-able and path-free


def test_missing_raw_jpg_is_a_case_error(tmp_path):
    root = write_release(tmp_path)
    (root / "final/home/c1/raw.jpg").unlink()
    e = _one(_load(root))
    assert isinstance(e, CaseError) and e.stage == "load"
    assert "raw.jpg" in e.reason and "missing" in e.reason


def test_missing_reference_scene_is_a_case_error(tmp_path):
    root = write_release(tmp_path)
    (root / "final/home/c1/reference_scene.json").unlink()
    e = _one(_load(root))
    assert isinstance(e, CaseError) and "reference_scene.json" in e.reason


def test_image_size_mismatch_is_a_case_error(tmp_path):
    root = write_release(tmp_path, size=(64, 48))
    p = root / "final/home/c1/reference_scene.json"
    p.write_text(json.dumps(scene_doc("c1", (640, 480), [static_object("o1", [4, 4, 20, 20])])))
    e = _one(_load(root))
    assert isinstance(e, CaseError)
    assert "[640, 480]" in e.reason and "[64, 48]" in e.reason and "\n" not in e.reason


def test_missing_generation_is_an_error_or_skipped(tmp_path):
    root = write_release(tmp_path, cases={"c1": "home", "c2": "home"})
    (root / "generations/m1/c2.mp4").unlink()
    items = _load(root)
    err = next(i for i in items if i.case_id == "c2")
    assert isinstance(err, CaseError) and "c2.mp4" in err.reason and "generation missing" in err.reason
    assert isinstance(next(i for i in items if i.case_id == "c1"), Case)
    skipped = _load(root, missing_generation="skip")
    assert [i.case_id for i in skipped] == ["c1"]


def test_mask_path_escaping_the_case_folder_is_refused(tmp_path):
    root = write_release(tmp_path)
    (tmp_path / "secret.png").write_bytes(b"x")
    p = root / "final/home/c1/reference_scene.json"
    obj = static_object("o1", [4, 4, 20, 20])
    obj["mask_path"] = "../../../secret.png"
    p.write_text(json.dumps(scene_doc("c1", (64, 48), [obj])))
    e = _one(_load(root))
    assert isinstance(e, CaseError) and "escapes" in e.reason


def test_subcategory_without_domain_is_refused(tmp_path):
    root = write_release(tmp_path, cases={"c1": "home", "c2": "lab"}, domains={"home": "real-world"})
    items = _load(root)
    lab = next(i for i in items if i.case_id == "c2")
    assert isinstance(lab, CaseError) and "'lab' has no domain" in lab.reason
    assert isinstance(next(i for i in items if i.case_id == "c1"), Case)


def test_domain_from_scene_metadata_and_conflict(tmp_path):
    root = write_release(tmp_path, domains={})
    p = root / "final/home/c1/reference_scene.json"
    p.write_text(json.dumps(scene_doc("c1", (64, 48), [static_object("o1", [4, 4, 20, 20])], domain="synthetic")))
    assert _one(_load(root)).strata["domain"] == "synthetic"
    (root / "domains.json").write_text(json.dumps({"home": "real-world"}))
    e = _one(_load(root))
    assert isinstance(e, CaseError) and "contradicts" in e.reason


def test_domain_mapping_csv_and_explicit_option(tmp_path):
    root = write_release(tmp_path, domains={})
    (root / "meta").mkdir()
    (root / "meta/map.csv").write_text("subcategory,domain\nhome,game-world\n")
    assert read_domains(root / "meta/map.csv") == {"home": "game-world"}
    assert _one(_load(root, domains="meta/map.csv")).strata["domain"] == "game-world"
    e = _one(_load(root, domains="../outside.json"))
    assert isinstance(e, CaseError) and "escapes" in e.reason


def test_precomputed_video_observation_without_video(tmp_path):
    root = write_release(tmp_path)
    (root / "generations/m1/c1.mp4").unlink()
    obs = root / "generations/m1/c1/video_observation.json"
    obs.parent.mkdir()
    obs.write_text(json.dumps({"video_id": "c1", "windows": []}))
    c = _one(_load(root))
    assert isinstance(c, Case) and c.video is None
    assert c.sidecars["video_observation"] == obs and c.annotations["precomputed_observation"] is True


def test_no_case_folders_is_one_error_per_model(tmp_path):
    root = write_release(tmp_path)
    shutil.rmtree(root / "final")
    (root / "final").mkdir()
    e = _one(_load(root))
    assert isinstance(e, CaseError) and e.case_id == "*"


def test_synthetic_layout_loads(tmp_path):
    """The synthetic suite's OPIS copy: domain 'synthetic', linked sidecar and reference geometry attached."""
    import pytest

    pytest.importorskip("open3d")
    from worldrecall.plugins.synthetic.build import ensure_suite

    suite = ensure_suite(tmp_path / "suite", n_cases=1, width=96, height=72, gt_frames=30, gen_frames=24)
    root = suite / "opis"
    items = _load(root, models=("oracle", "forgetful"))
    assert len(items) == 2 and all(isinstance(c, Case) for c in items), items
    c = items[0]
    assert c.strata["domain"] == "synthetic" and c.strata["subcategory"]
    assert {"raw", "reference_scene", "reference_geometry", "vipe", "masks"} <= set(c.sidecars)
    assert (c.sidecars["vipe"] / "instance_masks.npz").is_file()


def test_official_example_folder_is_one_case_without_an_image(tmp_path):
    """The release's example artifacts: reference_scene.json + video_observation.json in one folder."""
    ex = tmp_path / "example"
    ex.mkdir()
    write_example_folder(ex)
    c = _one(list(OpisLoader().load(LoadRequest(ex, {"demo_model": ex}))))
    assert isinstance(c, Case) and c.case_id == "example" and c.video is None
    assert c.strata == {"domain": "example", "subcategory": "example"}
    assert "raw" not in c.sidecars and c.sidecars["video_observation"] == ex / "video_observation.json"
    # without the observation the image is needed
    (ex / "video_observation.json").unlink()
    e = _one(list(OpisLoader().load(LoadRequest(ex, {"demo_model": ex}))))
    assert isinstance(e, CaseError) and "raw.jpg: conditioning image missing" in e.reason


def test_case_listed_twice_is_a_clear_error_and_other_cases_load(tmp_path):
    root = write_release(tmp_path, cases={"c1": "home", "c2": "home"})
    shutil.copytree(root / "final/home/c1", root / "final/lab/c1")      # the same case id under a second subcategory
    (root / "domains.json").write_text(json.dumps({"home": "real-world", "lab": "real-world"}))
    items = _load(root)
    errors = [i for i in items if isinstance(i, CaseError)]
    assert len(errors) == 2 and {e.case_id for e in errors} == {"c1"}
    assert "listed 2 times" in errors[0].reason and "final/lab/c1" in errors[0].reason
    assert "\n" not in errors[0].reason
    assert [c.case_id for c in items if isinstance(c, Case)] == ["c2"]
