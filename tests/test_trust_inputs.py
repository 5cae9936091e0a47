"""Issue 11: bad MemoBench inputs are a per-case error or a row warning naming the file, never a silent score.

Phase-sheet rows, text encodings (BOM, Latin-1), paths escaping the data root (symlinks, metadata paths) and
GT geometry (poses, intrinsics) validated with the same functions as ViPE sidecars.
"""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest

from worldrecall.core.components import LoadRequest
from worldrecall.core.data import Case, CaseError, CaseFailure
from worldrecall.core.text import read_csv_rows, read_text
from worldrecall.formats.vipe import validate_intrinsics, validate_poses
from worldrecall.plugins.memobench import gt, metadata, sheets
from worldrecall.plugins.memobench.loader import MemoBenchLoader

PROMPT = "A first person view; the camera sees a fox(subject) running to the left, then turns away."
CLIPS = ("Barnyard_001", "Barnyard_002", "Barnyard_003")


def _frames(folder: Path, n: int, ext: str = "png") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        cv2.imwrite(str(folder / f"{i:05d}.{ext}"), np.full((6, 8, 3), 20 * i, np.uint8))


def _release(root: Path, sheet_rows: list[dict] | None = None, meta_bytes: bytes | None = None,
             n_gen: int = 5) -> Path:
    """data/ with three synthetic clips (4 GT frames each), sheet, metadata; output/m1 with n_gen-frame generations."""
    data = root / "data"
    syn = data / "Synthetic_processed"
    for clip in CLIPS:
        n = int(clip[-3:])
        cdir = syn / "Barnyard" / clip
        _frames(cdir / f"RGB{n}", 4, "jpg")
        (cdir / str(n)).mkdir(parents=True)
        np.save(cdir / str(n) / "intrinsics.npy", np.tile([100.0, 100.0, 4.0, 3.0], (4, 1)))
        np.save(cdir / str(n) / "poses.npy", np.tile(np.eye(4), (4, 1, 1)))
        _frames(root / "output" / "m1" / "Synthetic" / clip / "frames", n_gen)
    rows = sheet_rows if sheet_rows is not None else [
        {"video_folder": c, "exits": 1, "re-enter": 2, "frame_num": 4, "skip": "no", "prompt": "p"} for c in CLIPS]
    pd.DataFrame(rows).to_csv(syn / "Synthetic_ExitReenter.csv", index=False)
    (data / "sam3_metadata").mkdir(parents=True)
    if meta_bytes is None:
        lines = ["scene,video_id,subject,exr_path,prompt"] + [
            f'Barnyard,{int(c[-3:])},fox,data/Synthetic_processed/Barnyard/{c}/RGB{int(c[-3:])}/00000.jpg,"{PROMPT}"'
            for c in CLIPS]
        meta_bytes = ("\n".join(lines) + "\n").encode()
    (data / "sam3_metadata" / "synthetic_metadata.csv").write_bytes(meta_bytes)
    return root


def _load(root: Path, **options) -> tuple[dict[str, Case], dict[str, str]]:
    req = LoadRequest(data_root=root / "data", generations={"m1": root / "output" / "m1"},
                      options={"splits": ["synthetic"], **options})
    out = list(MemoBenchLoader().load(req))
    return ({c.case_id: c for c in out if isinstance(c, Case)},
            {e.case_id: e.reason for e in out if isinstance(e, CaseError)})


def _one_line(msg: str) -> None:
    assert "\n" not in msg and msg.strip() == msg


# -- phase rows ------------------------------------------------------------------------------------------

def _row(clip, h, r, **kw):
    return {"video_folder": clip, "exits": h, "re-enter": r, "frame_num": 4, "skip": "no", "prompt": "p", **kw}


def test_phase_rows_strict_errors_and_warnings(tmp_path):
    rows = [_row("Barnyard_001", 3, 2),                 # r < h
            _row("Barnyard_002", "x", 2),               # non-numeric
            _row("Barnyard_003", 1, 2), _row("Barnyard_003", 1, 2)]   # identical duplicate
    cases, errors = _load(_release(tmp_path, rows))
    assert errors["Barnyard_001"].startswith("Synthetic_ExitReenter.csv row 2: re-enter 2 is not after exits 3")
    assert errors["Barnyard_002"] == "Synthetic_ExitReenter.csv row 3: exits 'x' is not a number"
    assert set(cases) == {"Barnyard_003"}
    assert cases["Barnyard_003"].warnings == [
        "Synthetic_ExitReenter.csv row 5: duplicate row for clip Barnyard_003 (same exits/re-enter)"]
    for m in errors.values():
        _one_line(m)


def test_conflicting_duplicate_rows(tmp_path):
    rows = [_row("Barnyard_001", 1, 2), _row("Barnyard_001", 1, 3), _row("Barnyard_002", 1, 2),
            _row("Barnyard_003", 1, 2)]
    root = _release(tmp_path, rows)
    cases, errors = _load(root)
    assert errors["Barnyard_001"].startswith("Synthetic_ExitReenter.csv row 3: conflicting rows for clip "
                                             "Barnyard_001: (exits 1, re-enter 2) vs (exits 1, re-enter 3)")
    # official mode: the later row wins (as the official loader), with a warning on the case
    cases, errors = _load(root, phase_row_checks="official")
    c = cases["Barnyard_001"]
    assert (c.annotations["h_gt"], c.annotations["r_gt"]) == (1, 3)
    assert "replaces (exits 1, re-enter 2)" in c.warnings[0]


def test_r_before_h_is_scored_clamped_only_in_official_mode(tmp_path):
    root = _release(tmp_path, [_row("Barnyard_001", 3, 2), _row("Barnyard_002", 1, 2), _row("Barnyard_003", 1, 2)])
    cases, errors = _load(root, phase_row_checks="official")
    assert "Barnyard_001" not in errors
    assert cases["Barnyard_001"].warnings == [
        "Synthetic_ExitReenter.csv row 2: re-enter 2 is not after exits 3 (scored with the official clamp)"]


def test_generated_clip_without_a_sheet_row_is_an_error(tmp_path):
    root = _release(tmp_path, [_row("Barnyard_001", 1, 2), _row("Barnyard_002", 1, 2)])   # no Barnyard_003 row
    cases, errors = _load(root)
    assert set(cases) == {"Barnyard_001", "Barnyard_002"}
    assert errors["Barnyard_003"].endswith("generated clip Barnyard_003 has no row in Synthetic_ExitReenter "
                                           "(not scored; add the row or set unlisted_generation=skip)")
    assert "Barnyard_003" not in _load(root, unlisted_generation="skip")[1]
    # a row marked skip is a declared exclusion, not a missing row
    root2 = _release(tmp_path / "b", [_row("Barnyard_001", 1, 2), _row("Barnyard_002", 1, 2),
                                      _row("Barnyard_003", 1, 2, skip="yes")])
    assert "Barnyard_003" not in _load(root2)[1]


# -- text encodings -------------------------------------------------------------------------------------

def test_bom_metadata_keeps_every_subject(tmp_path):
    plain = _release(tmp_path / "a")
    raw = (plain / "data/sam3_metadata/synthetic_metadata.csv").read_bytes()
    root = _release(tmp_path / "b", meta_bytes=b"\xef\xbb\xbf" + raw)
    meta = metadata.read_synthetic_metadata(root / "data/sam3_metadata/synthetic_metadata.csv")
    assert sorted(meta) == list(CLIPS) and all(m.subject == "fox" for m in meta.values())
    cases, errors = _load(root)
    assert not errors and all(c.subject == "fox" for c in cases.values())
    assert cases["Barnyard_001"].annotations["ors_query"] == "a fox(subject) running to the left"


def test_latin1_metadata_fails_each_case_naming_file_and_line(tmp_path):
    plain = _release(tmp_path / "a")
    text = (plain / "data/sam3_metadata/synthetic_metadata.csv").read_text()
    latin = text.replace("fox,data/Synthetic_processed/Barnyard/Barnyard_002", "renard café,data/Synthetic_"
                         "processed/Barnyard/Barnyard_002").encode("latin-1")
    root = _release(tmp_path / "b", meta_bytes=latin)
    with pytest.raises(CaseFailure, match=r"synthetic_metadata.csv: line 3: not UTF-8 text \(byte 0xe9"):
        metadata.read_synthetic_metadata(root / "data/sam3_metadata/synthetic_metadata.csv")
    cases, errors = _load(root)            # the loader goes on: every clip of the split says why
    assert not cases and set(errors) == set(CLIPS)
    assert all("synthetic_metadata.csv: line 3: not UTF-8 text" in m for m in errors.values())


def test_sheet_csv_bom_and_latin1(tmp_path):
    p = tmp_path / "Synthetic_ExitReenter.csv"
    p.write_bytes(b"\xef\xbb\xbfvideo_folder,exits,re-enter\nBarnyard_001,1,2\n")
    rows = sheets.parse_synthetic_sheet(sheets.read_table(p), p.name)
    assert rows["Barnyard_001"].h_gt == 1 and rows["Barnyard_001"].error is None   # BOM not in the header
    p.write_bytes("video_folder,exits,re-enter,prompt\nBarnyard_001,1,2,caf\xe9\n".encode("latin-1"))
    with pytest.raises(sheets.SheetError, match=r"Synthetic_ExitReenter.csv: line 2: not UTF-8 text"):
        sheets.read_table(p)


def test_text_helpers(tmp_path):
    p = tmp_path / "a.csv"
    p.write_bytes(b"\xef\xbb\xbfa,b\n1,2\n")
    assert read_text(p) == "a,b\n1,2\n" and read_csv_rows(p) == [{"a": "1", "b": "2"}]
    with pytest.raises(CaseFailure, match="missing.csv: cannot be read"):
        read_text(tmp_path / "missing.csv")


def test_every_plugin_text_reader_uses_the_bom_tolerant_helper():
    # the fix for the BOM/Latin-1 class of bugs: no plugin opens a user text input as plain "utf-8"
    root = Path(__file__).resolve().parents[1] / "worldrecall" / "plugins"
    offenders = []
    for f in root.rglob("*.py"):
        src = f.read_text(encoding="utf-8")
        for ln, line in enumerate(src.splitlines(), 1):
            if ("open(" in line and 'encoding="utf-8"' in line and '"w"' not in line and "'w'" not in line) or \
                    "pd.read_csv(path)" in line or (f.relative_to(root).parts[0] in ("opis", "memobench") and
                                                    'read_text(encoding="utf-8")' in line):
                offenders.append(f"{f.relative_to(root)}:{ln}")
    assert not offenders, offenders


# -- paths ----------------------------------------------------------------------------------------------

def test_symlinked_frame_folder_outside_the_root_fails_that_case_only(tmp_path):
    root = _release(tmp_path / "r")
    outside = tmp_path / "elsewhere" / "RGB2"
    _frames(outside, 4, "jpg")
    rgb = root / "data/Synthetic_processed/Barnyard/Barnyard_002/RGB2"
    for f in rgb.iterdir():
        f.unlink()
    rgb.rmdir()
    os.symlink(outside, rgb)
    cases, errors = _load(root)
    assert set(cases) == {"Barnyard_001", "Barnyard_003"}            # the other clips are still scored
    assert "data root" in errors["Barnyard_002"] and "RGB2" in errors["Barnyard_002"]
    _one_line(errors["Barnyard_002"])


def test_metadata_path_escaping_the_root_is_an_error_on_the_row(tmp_path):
    plain = _release(tmp_path / "a")
    text = (plain / "data/sam3_metadata/synthetic_metadata.csv").read_text()
    bad = text.replace("data/Synthetic_processed/Barnyard/Barnyard_001/RGB1/00000.jpg", "../../etc/passwd")
    root = _release(tmp_path / "b", meta_bytes=bad.encode())
    cases, errors = _load(root)
    assert set(cases) == {"Barnyard_002", "Barnyard_003"}
    assert "sam3_metadata first-frame path '../../etc/passwd' escapes the data root" in errors["Barnyard_001"]


# -- GT geometry (the same validation as sidecars) ------------------------------------------------------

def _poses(n=3):
    return np.tile(np.eye(4), (n, 1, 1))


@pytest.mark.parametrize("mutate, message", [
    (lambda p: p.__setitem__((1, 0, 3), np.nan), "non-finite pose at row 1"),
    (lambda p: p.__setitem__((2, 0, 0), 2.0), "rotation of row 2 is not orthonormal"),
    (lambda p: p.__setitem__((0, 0, 0), -1.0), "rotation of row 0 is a reflection"),
    (lambda p: p.__setitem__((1, 3, 0), 0.5), "row 1 has bottom row"),
])
def test_validate_poses(mutate, message):
    p = _poses()
    mutate(p)
    with pytest.raises(CaseFailure, match=message):
        validate_poses(p, "poses.npy")
    with pytest.raises(CaseFailure, match=r"shape \[3, 3, 3\]; expected \[N,4,4\]"):
        validate_poses(np.zeros((3, 3, 3)), "poses.npy")
    with pytest.raises(CaseFailure, match="no pose rows"):
        validate_poses(np.zeros((0, 4, 4)), "poses.npy")


def test_validate_intrinsics():
    K = np.tile(np.array([[100.0, 0, 4], [0, 100, 3], [0, 0, 1]]), (2, 1, 1))
    assert validate_intrinsics(K, "k").shape == (2, 3, 3)
    bad = K.copy()
    bad[1, 0, 2] = np.inf
    with pytest.raises(CaseFailure, match="k: row 1 has non-finite intrinsics"):
        validate_intrinsics(bad, "k")
    bad = K.copy()
    bad[0, 2, 2] = 0.0                      # last row [0, 0, 0]: det K = 0
    with pytest.raises(CaseFailure, match="singular"):
        validate_intrinsics(bad, "k")
    bad = K.copy()
    bad[0, 1, 1] = 0.0
    with pytest.raises(CaseFailure, match="invalid focal"):
        validate_intrinsics(bad, "k")


def _gt_case(tmp_path: Path, poses: np.ndarray) -> Case:
    np.save(tmp_path / "poses.npy", poses)
    return Case("memobench", "c", "m", None, annotations={"gt_poses": "poses.npy", "gt_poses_kind": "npy"},
                data_root=tmp_path)


def test_gt_poses_use_the_sidecar_validation(tmp_path):
    assert gt.load_gt_poses(_gt_case(tmp_path, _poses())).shape == (3, 4, 4)
    nan = _poses()
    nan[2, 1, 1] = np.nan
    with pytest.raises(CaseFailure, match=r"poses.npy \(GT poses\): non-finite pose at row 2"):
        gt.load_gt_poses(_gt_case(tmp_path, nan))
    scaled = _poses()
    scaled[:, :3, :3] *= 2                  # not a rotation: used to score camera controllability 1.0
    with pytest.raises(CaseFailure, match="not orthonormal"):
        gt.load_gt_poses(_gt_case(tmp_path, scaled))
    with pytest.raises(CaseFailure, match=r"shape \[3, 16\]"):
        gt.load_gt_poses(_gt_case(tmp_path, np.zeros((3, 16))))


def test_bad_gt_intrinsics_are_a_row_warning(tmp_path):
    root = _release(tmp_path)
    intr = root / "data/Synthetic_processed/Barnyard/Barnyard_002/2/intrinsics.npy"
    k = np.tile([100.0, 100.0, 4.0, 3.0], (4, 1))
    k[1, 0] = np.nan
    np.save(intr, k)
    cases, errors = _load(root)
    assert not errors
    w = cases["Barnyard_002"].warnings
    assert len(w) == 1 and "intrinsics.npy (GT intrinsics): row 1 has non-finite intrinsics (unused by the scores)" in w[0]
    assert cases["Barnyard_001"].warnings == []


def test_unreadable_sheet_is_one_error_row_and_the_other_split_still_loads(tmp_path):
    root = _release(tmp_path)
    sheet = root / "data/Synthetic_processed/Synthetic_ExitReenter.csv"
    sheet.write_bytes(sheet.read_bytes().replace(b",p\n", b",caf\xe9\n", 1))    # Latin-1 é on line 2
    real = root / "data/Real_Raw"
    real.mkdir(parents=True)
    pd.DataFrame({"id": [1], "exit": [1], "reenter": [2]}).to_csv(real / "Real_ExitReenter.csv", index=False)
    req = LoadRequest(data_root=root / "data", generations={"m1": root / "output" / "m1"},
                      options={"splits": ["synthetic", "real"]})
    out = list(MemoBenchLoader().load(req))
    errors = {e.case_id: e.reason for e in out if isinstance(e, CaseError)}
    assert errors["Synthetic_ExitReenter.csv"].startswith(f"{sheet}: line 2: not UTF-8 text (byte 0xe9")
    assert errors["001"].endswith("001.mp4: GT video missing")          # the real split was still read
    assert not any(k.startswith("Barnyard") for k in errors)          # no flood of "no sheet row" errors


def test_sheet_boundary_past_the_gt_clip(tmp_path):
    # G = 4 GT frames (indices 0..3): re-enter 4 is one past the end (a 1-based sheet?) -> warning;
    # re-enter 6 -> error (strict) or warning (official: clamped as the official mapping does)
    root = _release(tmp_path, [_row("Barnyard_001", 1, 4), _row("Barnyard_002", 1, 6), _row("Barnyard_003", 1, 2)])
    cases, errors = _load(root)
    assert cases["Barnyard_001"].warnings == [
        ("Barnyard_001: phase sheet boundary (exits 1, re-enter 4) is past the last GT frame 3 (G = 4 from "
         "rgb_files); clamped as the official code does")]
    assert errors["Barnyard_002"].startswith("Barnyard_002: phase sheet boundary (exits 1, re-enter 6) is past")
    cases, errors = _load(root, phase_row_checks="official")
    assert "Barnyard_002" in cases and "clamped" in cases["Barnyard_002"].warnings[0]


def test_row_warnings_reach_the_score_rows(tmp_path):
    # end to end through the engine: the duplicate-row warning of the sheet is on the case's score row
    from worldrecall.engine.stages.runner import Runner
    from worldrecall.registry.host import load_plugins

    rows = [_row("Barnyard_001", 1, 2), _row("Barnyard_001", 1, 2), _row("Barnyard_002", 1, 2),
            _row("Barnyard_003", 1, 2)]
    root = _release(tmp_path, rows, n_gen=8)
    cfg = {"output_root": str(tmp_path / "out"), "cache_dir": str(tmp_path / "out" / "cache"), "device": "cpu",
           "progress": False, "tracking": {"enabled": False}, "aggregators": [],
           "benchmarks": {"memobench": {
               "enabled": True, "loader": "memobench", "aligner": "memobench.phases",
               "loader_options": {"splits": ["synthetic"]},
               "data_root": str(root / "data"), "generations": {"m1": str(root / "output" / "m1")},
               "metrics": {"pixel_fidelity": {"params": {"lpips": False}, "thresholds": {}}}, "aggregators": []}}}
    res = Runner(cfg, load_plugins(fresh=True)).run()
    by = {r.case_id: r for r in res.rows}
    assert by["Barnyard_001"].status == "ok"
    assert by["Barnyard_001"].warnings == [
        "Synthetic_ExitReenter.csv row 3: duplicate row for clip Barnyard_001 (same exits/re-enter)"]
    assert by["Barnyard_002"].warnings == []


def test_sheet_without_a_required_column_is_one_error_row(tmp_path):
    rows = [{"video_folder": c, "exit": 1, "re-enter": 2} for c in CLIPS]      # "exit" instead of "exits"
    cases, errors = _load(_release(tmp_path, rows))
    assert not cases
    assert errors == {"Synthetic_ExitReenter.csv": "Synthetic_ExitReenter.csv: no 'exits' column "
                                                   "(columns: video_folder, exit, re-enter)"}


def test_scene_memory_manifests_and_action_files_tolerate_a_bom(tmp_path):
    from worldrecall.plugins.scene_memory.actions import read_program
    from worldrecall.plugins.scene_memory.loader import _read_manifest

    j = tmp_path / "manifest.json"
    j.write_bytes(b"\xef\xbb\xbf" + b'{"cases": [{"case_id": "a"}]}')
    c = tmp_path / "manifest.csv"
    c.write_bytes(b"\xef\xbb\xbfcase_id,video\na,a.mp4\n")
    assert _read_manifest(j) == [{"case_id": "a"}]
    assert _read_manifest(c) == [{"case_id": "a", "video": "a.mp4"}]     # not "\ufeffcase_id"
    c.write_bytes("case_id,video\nb\xe9,a.mp4\n".encode("latin-1"))
    with pytest.raises(CaseFailure, match=r"manifest.csv: line 2: not UTF-8 text"):
        _read_manifest(c)
    a = tmp_path / "x_actions.json"
    a.write_bytes("not json \xe9".encode("latin-1"))
    with pytest.raises(CaseFailure, match=r"x_actions.json: line 1: not UTF-8 text"):
        read_program(a)
