"""The ``memobench`` loader on the REAL release metadata with a tiny fake release tree (xlsx and csv)."""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest
from helpers.official_data import SAM3_METADATA as OFFICIAL  # vendored, unchanged MemoBench release files

from worldrecall.core.components import LoadRequest
from worldrecall.core.data import Case, CaseError
from worldrecall.core.video import VideoPool
from worldrecall.plugins.memobench import gt, metadata
from worldrecall.plugins.memobench import loader as loader_mod
from worldrecall.plugins.memobench.aligner import PhaseAligner
from worldrecall.plugins.memobench.loader import MemoBenchLoader

G_SYN = 4      # GT frames per synthetic clip in the fake tree
N_GEN = 5      # generated frames
REAL_WITH_GT = ("001", "002", "004")


def _img(i: int, w: int = 8, h: int = 6) -> np.ndarray:
    return np.full((h, w, 3), (i * 37) % 256, np.uint8)


def _frames(folder: Path, n: int, ext: str = "png", stem: str = "{:05d}") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        cv2.imwrite(str(folder / f"{stem.format(i)}.{ext}"), _img(i))


def _mp4(path: Path, n: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (16, 12))
    for i in range(n):
        w.write(np.full((12, 16, 3), (i * 37) % 256, np.uint8))
    w.release()


def _syn_meta() -> list[dict[str, str]]:
    with open(OFFICIAL / "synthetic_metadata.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _real_meta() -> list[dict[str, str]]:
    with open(OFFICIAL / "real_metadata.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def build_release(root: Path) -> Path:
    """A release tree with every one of the 196 + 164 official clips in the sheets, GT for all synthetic
    clips and three real ones, and a model output folder using every accepted layout."""
    data = root / "data"
    shutil.copytree(OFFICIAL, data / "sam3_metadata")
    syn = data / "Synthetic_processed"
    rows = []
    for r in _syn_meta():
        scene, n = r["scene"], int(r["video_id"])
        clip = f"{scene}_{n:03d}"
        cdir = syn / scene / clip
        stem = Path(r["exr_path"]).name.split(".")[0]     # e.g. NewLevelSequence1 (or the irregular stems)
        _frames(cdir / f"RGB{n}", G_SYN, "jpg", stem + ".{:04d}")
        (cdir / str(n)).mkdir(parents=True, exist_ok=True)
        np.save(cdir / str(n) / "intrinsics.npy", np.tile([100.0, 100.0, 4.0, 3.0], (G_SYN, 1)))
        if clip == "Barnyard_002":      # no poses.npy: the raw UE5 track is the fallback
            pd.DataFrame({"rot_x": [0.0] * G_SYN, "rot_y": [0.0] * G_SYN, "rot_z": np.linspace(0, 1, G_SYN),
                          "loc_x": 0.0, "loc_y": 0.0, "loc_z": 0.0, "fx": 1, "fy": 1, "cx": 0, "cy": 0}
                         ).to_csv(cdir / f"camera_full{n}.csv", index=False)
        else:
            np.save(cdir / str(n) / "poses.npy", np.tile(np.eye(4), (G_SYN, 1, 1)))
        rows.append({"video_folder": clip, "exits": 1, "re-enter": 2, "frame_num": G_SYN, "skip": "no",
                     "prompt": "" if clip == "Barnyard_001" else r["prompt"]})
    by = {row["video_folder"]: row for row in rows}
    by["CityStreet_004"]["skip"] = "Yes"         # skipped (case-insensitive)
    by["CityStreet_003"]["skip"] = " yes"        # not skipped: the official check does not strip
    by["CityStreet_002"]["exits"] = "abc"        # unparsable -> dropped
    by["CityStreet_001"]["re-enter"] = None      # empty -> dropped
    rows.append({"video_folder": "../../../Evil_001", "exits": 1, "re-enter": 2, "frame_num": 4, "skip": "no",
                 "prompt": "x"})
    df = pd.DataFrame(rows)
    df.to_excel(syn / "Synthetic_ExitReenter.xlsx", index=False)
    df.to_csv(syn / "Synthetic_ExitReenter.csv", index=False)

    real = data / "Real_Raw"
    real.mkdir(parents=True)
    rrows = [{"id": float(r["video_id"]), "exit": 1, "reenter": 3} for r in _real_meta()]
    rrows.append({"id": "abc", "exit": 1, "reenter": 2})
    pd.DataFrame(rrows).to_excel(real / "Real_ExitReenter.xlsx", index=False)
    pd.DataFrame(rrows).to_csv(real / "Real_ExitReenter.csv", index=False)
    for cid in REAL_WITH_GT:
        _mp4(real / cid / f"{cid}.mp4", 6)
        (real / cid / "raw").mkdir(parents=True)
        np.savez(real / cid / "raw" / f"{cid}_mapanything.npz", cam_c2w=np.tile(np.eye(4), (6, 1, 1)),
                 intrinsic=np.eye(3))
        if cid != "004":
            _frames(real / cid / "FRAMES", 6, "jpg", "frame_{:04d}")

    gen = root / "output" / "m1"
    s = gen / "Synthetic"
    _mp4(s / "Barnyard_001.mp4", N_GEN)                     # root mp4 …
    _frames(s / "Barnyard_001" / "frames", 2)               # … wins over a same-named folder
    _mp4(s / "Barnyard_002" / "video.mp4", N_GEN)
    _frames(s / "Barnyard_003" / "frames", N_GEN)
    _mp4(s / "Barnyard" / "Barnyard_004" / "video.mp4", N_GEN)
    _frames(s / "Barnyard" / "Barnyard_005", N_GEN, "JPG")  # images directly in the clip folder
    _frames(s / "Barnyard_006" / "samples-rgb", N_GEN)
    _mp4(s / "CityStreet_003" / "video.mp4", N_GEN)
    _mp4(s / "CityStreet_004" / "video.mp4", N_GEN)         # skipped in the sheet: never loaded
    r = gen / "Real"
    _mp4(r / "1.mp4", N_GEN)
    _frames(r / "real_2", N_GEN)
    _mp4(r / "004" / "video.mp4", N_GEN)
    return root


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    return build_release(tmp_path_factory.mktemp("memobench-release"))


def _load(release: Path, **options) -> tuple[list[Case], list[CaseError]]:
    req = LoadRequest(data_root=release / "data", generations={"m1": release / "output" / "m1"},
                      options=options, pool=VideoPool())
    out = list(MemoBenchLoader().load(req))
    return [c for c in out if isinstance(c, Case)], [e for e in out if isinstance(e, CaseError)]


LOADED_SYN = {"Barnyard_001": "root_mp4", "Barnyard_002": "clip_video", "Barnyard_003": "clip_frames",
              "Barnyard_004": "nested_video", "Barnyard_005": "nested_frames", "Barnyard_006": "clip_frames",
              "CityStreet_003": "clip_video"}


def test_subject_phrase_matches_all_196_official_prompts():
    meta = _syn_meta()
    assert len(meta) == 196
    phrases = [metadata.extract_subject_phrase(r["prompt"]) for r in meta]
    assert all(p is not None and "(subject)" in p.lower() for p in phrases)
    assert not any(p.endswith((".", ",")) or p != p.strip() for p in phrases)
    by_clip = {f"{r['scene']}_{int(r['video_id']):03d}": p for r, p in zip(meta, phrases)}
    assert by_clip["Barnyard_001"] == "another person(subject) crossing from the left to right"
    assert by_clip["Barnyard_002"] == "a tractor(subject) moving from the left to right"
    assert metadata.extract_subject_phrase("no phrase here") is None
    assert metadata.ors_query("synthetic", "fox", "no phrase here") == "fox"   # subject fallback


def test_metadata_readers_on_official_csvs():
    syn = metadata.read_synthetic_metadata(OFFICIAL / "synthetic_metadata.csv")
    real = metadata.read_real_metadata(OFFICIAL / "real_metadata.csv")
    assert len(syn) == 196 and len(real) == 164
    assert syn["Middle_Age_009"].subject and "273" in real and real["001"].subject == "a clear glass of water"


def test_loader_cases_layouts_and_errors(release):
    cases, errors = _load(release)
    syn = {c.case_id: c for c in cases if c.strata["split"] == "synthetic"}
    real = {c.case_id: c for c in cases if c.strata["split"] == "real"}
    assert {k: c.annotations["generation_layout"] for k, c in syn.items()} == LOADED_SYN
    assert set(real) == set(REAL_WITH_GT)
    assert all(c.video.num_frames == N_GEN for c in cases)     # every layout decodes
    err = {e.case_id: e.reason for e in errors}
    # a row marked skip is gone entirely (declared); the " yes" row stays
    assert "CityStreet_004" not in syn and "CityStreet_004" not in err
    # unparsable rows no longer disappear: a per-case error naming the sheet row and the cell
    row_of = {r["video_folder"]: i + 2 for i, r in enumerate(pd.read_csv(
        release / "data/Synthetic_processed/Synthetic_ExitReenter.csv").to_dict("records"))}   # header = row 1
    assert err["CityStreet_002"] == (f"Synthetic_ExitReenter.xlsx row {row_of['CityStreet_002']}: "
                                     "exits 'abc' is not a number")
    assert err["CityStreet_001"] == (f"Synthetic_ExitReenter.xlsx row {row_of['CityStreet_001']}: "
                                     "re-enter nan is not a number")
    # every other sheet row is a per-case error naming what is missing
    assert len(syn) + sum(1 for e in errors if e.strata.get("split") == "synthetic") == 196 - 1 + 1
    assert "no generated video" in err["Miami_022"] and "Miami_022" in err["Miami_022"]
    assert "escapes the data root" in err["../../../Evil_001"]
    assert err["003"].endswith("003.mp4: GT video missing")
    assert err["abc"] == "Real_ExitReenter.xlsx row 166: id 'abc' is not a number"   # 164 rows + header -> 166
    assert sum(1 for e in errors if e.strata.get("split") == "real") == 164 - 3 + 1
    assert all(e.stage == "load" and e.model == "m1" for e in errors)


def test_loader_annotations(release):
    cases, _ = _load(release)
    c = {x.case_id: x for x in cases}
    meta = metadata.read_synthetic_metadata(OFFICIAL / "synthetic_metadata.csv")
    b1 = c["Barnyard_001"]
    assert b1.strata == {"split": "synthetic", "scene": "Barnyard", "subject": meta["Barnyard_001"].subject}
    a = b1.annotations
    assert (a["h_gt"], a["r_gt"], a["G"], a["G_ors"], a["clip_number"]) == (1, 2, G_SYN, G_SYN, 1)
    assert a["sheet_prompt"] == "nan"                          # empty cell, as the official Step 1 reads it
    assert b1.prompt == meta["Barnyard_001"].prompt            # the case prompt comes from the metadata
    assert a["ors_query"] == metadata.extract_subject_phrase(meta["Barnyard_001"].prompt)
    assert a["first_frame"] == "Synthetic_processed/Barnyard/Barnyard_001/RGB1/NewLevelSequence1.0000.jpg"
    assert a["gt_poses"] == "Synthetic_processed/Barnyard/Barnyard_001/1/poses.npy" and a["gt_poses_kind"] == "npy"
    assert c["Barnyard_002"].annotations["gt_poses_kind"] == "ue5_csv"
    assert b1.reference.num_frames == G_SYN
    r1 = c["001"]
    assert r1.strata == {"split": "real", "scene": "real", "subject": "a clear glass of water"}
    assert (r1.annotations["G"], r1.annotations["G_source"], r1.annotations["G_ors"]) == (6, "mp4_frame_count", 6)
    assert r1.annotations["ors_query"] == "a clear glass of water" and r1.annotations["sheet_prompt"] is None
    assert c["004"].annotations["G_ors"] is None               # no FRAMES/ folder
    al = PhaseAligner().align(c["004"], {})
    assert al.info["r_ors"] is None and al.info["N"] == N_GEN


def test_xlsx_and_csv_sheets_agree(release):
    a, ea = _load(release, sheet_format="xlsx")
    b, eb = _load(release, sheet_format="csv")
    assert [(c.case_id, c.annotations) for c in a] == [(c.case_id, c.annotations) for c in b]
    assert [(e.case_id, e.reason.replace(".xlsx", ".csv")) for e in ea] == [(e.case_id, e.reason) for e in eb]


def test_step2_frame_source(release):
    cases, _ = _load(release, gt_frame_source="step2", splits=["real"])
    g = {c.case_id: (c.annotations["G"], c.annotations["G_source"]) for c in cases}
    assert g["001"] == (6, "frames_files") and g["004"] == (6, "mp4_frame_count")   # no FRAMES -> step 1


def test_missing_generation_skip(release):
    cases, errors = _load(release, missing_generation="skip", splits=["synthetic"])
    assert len(cases) == len(LOADED_SYN)
    # only GT problems remain (the two unparsable sheet rows are GT problems too)
    assert sorted(e.case_id for e in errors) == ["../../../Evil_001", "CityStreet_001", "CityStreet_002"]


def test_real_selection_filter(release, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(release / "data", data)
    pd.DataFrame({"ID": [1, 2], "Availability": ["Yes ", "no"]}).to_csv(data / "Real_Selected.csv", index=False)
    req = LoadRequest(data_root=data, generations={"m1": release / "output" / "m1"}, options={"splits": ["real"]})
    out = list(MemoBenchLoader().load(req))
    assert [o.case_id for o in out if isinstance(o, Case)] == ["001"]
    assert len(out) == 1        # unselected clips are not cases at all (official filter)
    (data / "Real_Selected.csv").unlink()
    (data / "Real_Selected.xls").write_bytes(b"not a spreadsheet")
    out = list(MemoBenchLoader().load(req))
    assert out and all(isinstance(o, CaseError) and "Real_Selected.xls" in o.reason for o in out)


def test_sidecars_attached_when_found(release, monkeypatch):
    seen = []

    def finder(video_path):
        seen.append(Path(video_path))
        return Path(video_path).parent if Path(video_path).name == "video.mp4" else None

    monkeypatch.setattr(loader_mod, "_sidecar_finder", lambda: finder)
    cases, _ = _load(release, splits=["synthetic"])
    c = {x.case_id: x for x in cases}
    assert c["Barnyard_002"].sidecars == {"vipe": release / "output/m1/Synthetic/Barnyard_002"}
    assert c["Barnyard_001"].sidecars == {}
    assert len(seen) == len(LOADED_SYN)


def test_flat_model_folder_without_split_subdirs(release, tmp_path):
    flat = tmp_path / "flat"
    _mp4(flat / "Barnyard_001.mp4", N_GEN)
    _mp4(flat / "1.mp4", N_GEN)
    req = LoadRequest(data_root=release / "data", generations={"flat": flat})
    cases = [c for c in MemoBenchLoader().load(req) if isinstance(c, Case)]
    assert sorted(c.case_id for c in cases) == ["001", "Barnyard_001"]


def test_ue5_track_conversion_hand_value(tmp_path):
    p = tmp_path / "camera_full1.csv"
    pd.DataFrame({"rot_x": [0.0], "rot_y": [0.0], "rot_z": [math.pi / 2], "loc_x": [1.0], "loc_y": [2.0],
                  "loc_z": [3.0]}).to_csv(p, index=False)
    c2w = gt.ue5_track_to_c2w(p)[0]
    # Rz_LH(90°) = [[0,1,0],[-1,0,0],[0,0,1]], then columns 1 and 2 negated by diag(1,-1,-1)
    np.testing.assert_allclose(c2w, [[0, -1, 0, 1], [-1, 0, 0, 2], [0, 0, -1, 3], [0, 0, 0, 1]], atol=1e-12)


def test_loader_reads_the_synthetic_suite(tmp_path):
    build = pytest.importorskip("worldrecall.plugins.synthetic.build")
    root = Path(build.ensure_suite(tmp_path, n_cases=2, width=96, height=72, gt_frames=24, gen_frames=20))
    out_root = root / "memobench" / "output"
    gens = {p.name: p for p in sorted(out_root.iterdir()) if p.is_dir()}
    req = LoadRequest(data_root=root / "memobench" / "data", generations=gens, options={"splits": ["synthetic"]})
    out = list(MemoBenchLoader().load(req))
    cases = [c for c in out if isinstance(c, Case)]
    assert cases and not [e for e in out if isinstance(e, CaseError)]
    for c in cases:
        al = PhaseAligner().align(c, {})
        assert al.info["N"] == 20 and al.info["G"] == 24 and c.annotations["ors_query"]
        assert "(subject)" in c.annotations["ors_query"]
        assert (c.sidecars["vipe"] / "poses_c2w.npy").is_file()      # the ViPE sidecar next to video.mp4


def test_missing_intrinsics_or_gt_poses_cost_only_the_metrics_that_read_them(tmp_path):
    """Issue 43: a clip without intrinsics.npy (ORS's GT frame count) or without its GT pose file is still a
    case; ORS and the pose metrics declare what they lack (skipped by name), the other metrics run."""
    from worldrecall.plugins.memobench.camera_controllability import CameraControllability
    from worldrecall.plugins.memobench.camera_gate import CameraGate
    from worldrecall.plugins.memobench.motion_smoothness import MotionSmoothness
    from worldrecall.plugins.memobench.ors import ORS

    root = build_release(tmp_path)
    clip = root / "data" / "Synthetic_processed" / "Barnyard" / "Barnyard_003"
    (clip / "3" / "intrinsics.npy").unlink()
    (clip / "3" / "poses.npy").unlink()
    (root / "data" / "Real_Raw" / "001" / "raw" / "001_mapanything.npz").unlink()
    cases, errors = _load(root)
    c = {x.case_id: x for x in cases}
    assert "Barnyard_003" in c and "001" in c and not {"Barnyard_003", "001"} & {e.case_id for e in errors}
    b3, r1 = c["Barnyard_003"], c["001"]
    assert b3.annotations["G_ors"] is None and b3.annotations["gt_poses"] is None
    assert [m.path for m in ORS().missing_inputs(b3)] == [str(clip / "3" / "intrinsics.npy")]
    for metric in (CameraControllability(), CameraGate()):
        assert [m.path for m in metric.missing_inputs(b3)] == [str(clip / "3" / "poses.npy")]
        assert [m.path for m in metric.missing_inputs(r1)] == [
            str(root / "data" / "Real_Raw" / "001" / "raw" / "001_mapanything.npz")]
    assert ORS().missing_inputs(r1) == [] and MotionSmoothness().missing_inputs(b3) == []
    assert ORS().missing_inputs(c["Barnyard_004"]) == CameraControllability().missing_inputs(c["Barnyard_004"]) == []
    # step 2 counts the intrinsics rows for every metric's phases: there the clip cannot load
    _, errors = _load(root, gt_frame_source="step2", splits=["synthetic"])
    assert {e.case_id: e.reason for e in errors}["Barnyard_003"] == \
        f"{clip / '3' / 'intrinsics.npy'}: GT intrinsics missing (gt_frame_source=step2 counts its rows)"
