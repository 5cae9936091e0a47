"""Issue 11: official model-name canonicalisation and importing official result folders into the leaderboard."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd
import pytest

from worldrecall.core.data import ScoreRow
from worldrecall.plugins.memobench.leaderboard import MemoBenchLeaderboard
from worldrecall.plugins.memobench.official_results import canonical_model, display_model, official_rows


def _cell(t, split, model, col):
    hit = t[(t["split"] == split) & (t["model"] == model)]
    assert len(hit) == 1, f"{model}/{split}: {len(hit)} rows in {sorted(t['model'])}"
    return float(hit[col].iloc[0])


def test_canonical_model_names():
    assert canonical_model("CogVideoX") == canonical_model("cogvideo") == "cogvideo"
    assert canonical_model("LingBot-World") == canonical_model("Lingbot") == "lingbot-world"
    assert canonical_model("StableVirtualCamera") == "stable-virtual-camera"
    assert canonical_model("MyModel") == "mymodel"            # not in the table: lower-cased
    assert display_model("cogvideo") == "CogVideoX" and display_model("mymodel") == "mymodel"


def test_cogvideo_and_cogvideox_land_on_one_row():
    rows = [ScoreRow("memobench", "cogvideo", "c1", "memobench.visual_quality", {"score": 40.0},
                     strata={"split": "synthetic"}),
            ScoreRow("memobench", "CogVideoX", "c2", "memobench.visual_quality", {"score": 60.0},
                     strata={"split": "synthetic"})]
    t = MemoBenchLeaderboard().aggregate(rows, {"replicates": 10})["memobench_leaderboard"]
    syn = t[t["split"] == "synthetic"]
    assert list(syn["model"]) == ["cogvideo"]
    assert _cell(t, "synthetic", "cogvideo", "VisualQuality") == 50.0      # (40 + 60) / 2
    off = MemoBenchLeaderboard().aggregate(rows, {"replicates": 10, "canonical_models": False})
    assert sorted(off["memobench_leaderboard"].query("split == 'synthetic'")["model"]) == ["CogVideoX", "cogvideo"]


def _write(path: Path, df: pd.DataFrame, mtime: float | None = None, bom: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(("\ufeff" if bom else "") + df.to_csv(index=False), encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def _vqa_csv(path: Path, scene: str, vid: int, folder: str, scores: dict) -> None:
    _write(path, pd.DataFrame([{"scene": scene, "video_id": vid, "folder": folder, "Evaluation": "[]",
                                "score": json.dumps(scores)}]))


def build_official_tree(root: Path) -> dict[str, Path]:
    """Official Step 1 / ORS / VQA output folders for one model spelled three ways, plus skip-rule decoys."""
    ev, ors, vqa = root / "eval", root / "ors", root / "vqa"
    cols = ["id", "scene", "data_type", "VisualQuality", "CameraControllability", "ImageRewardScore",
            "ImageRewardScore_pct", "GT_ALL_PSNR", "error"]
    old = pd.DataFrame([["Barnyard_001", "Barnyard", "synthetic", 10.0, 10.0, 10.0, 10.0, 10.0, None]], columns=cols)
    new = pd.DataFrame([
        ["Barnyard_001", "Barnyard", "synthetic", 50.0, 0.4, 30.0, 30.0, 14.0, None],
        ["Barnyard_002", "Barnyard", "synthetic", None, None, None, None, None, "RuntimeError: boom"],
        [1, "real", "real", 70.0, 0.6, 50.0, 50.0, 16.0, None],
    ], columns=cols)
    _write(ev / "CogVideoX" / "eval_synthetic_20260101_000000.csv", old, mtime=1_000_000)
    _write(ev / "CogVideoX" / "eval_both_20260102_000000.csv", new, mtime=2_000_000, bom=True)   # newest wins
    _write(ors / "cogvideo" / "ors_scores.csv", pd.DataFrame(
        {"clip_id": ["Barnyard_001", "001"], "data_type": ["synthetic", "real"], "scene": ["Barnyard", "real"],
         "ors": [0.4, 0.2], "detection_rate": [1.0, 0.5], "mean_confidence": [0.4, 0.4]}))
    four = ["Instruction Following", "Object and Background", "Continuity of Memory", "Physics Adherence"]
    _vqa_csv(vqa / "CogVideoX" / "Barnyard-1.csv", "Barnyard", 1, "Barnyard_001", dict(zip(four, [0.5, 1, 0.25, 0])))
    _write(vqa / "CogVideoX" / "overall.csv", pd.DataFrame({"scene": ["Barnyard"], "video_id": [1],
                                                            "Instruction Following": [0.0]}))   # no score: skipped
    _vqa_csv(vqa / "CogVideoX_old" / "Barnyard-1.csv", "Barnyard", 1, "Barnyard_001", dict.fromkeys(four, 0.0))
    _vqa_csv(vqa / "Lingbot" / "Barnyard-1.csv", "Barnyard", 1, "Barnyard_001", dict.fromkeys(four, 0.0))
    return {"official_eval_dir": str(ev), "official_ors_dir": str(ors), "official_vqa_dir": str(vqa)}


def test_official_rows_follow_the_official_skip_rules(tmp_path):
    dirs = build_official_tree(tmp_path)
    rows = official_rows(dirs["official_eval_dir"], dirs["official_ors_dir"], dirs["official_vqa_dir"])
    models = {r.model for r in rows}
    assert models == {"cogvideo (official)"}                      # Lingbot and *_old VQA folders skipped
    vq = {r.case_id: r.values["score"] for r in rows if r.metric == "memobench.visual_quality"}
    assert vq == {"Barnyard_001": 50.0, "001": 70.0}              # the newest eval file only; real id padded
    failed = [r for r in rows if r.status == "failed"]
    assert [(r.case_id, r.reason) for r in failed] == [("Barnyard_002", "RuntimeError: boom")]
    vqa = [r for r in rows if r.metric == "memobench.vqa"]
    assert len(vqa) == 1 and vqa[0].case_id == "Barnyard_001"     # overall.csv has no score column


def test_official_folders_next_to_a_run_in_one_leaderboard(tmp_path):
    dirs = build_official_tree(tmp_path)
    own = [ScoreRow("memobench", "CogVideoX", "Barnyard_001", "memobench.visual_quality", {"score": 44.0},
                    strata={"split": "synthetic"})]
    t = MemoBenchLeaderboard().aggregate(own, {"replicates": 10, **dirs})["memobench_leaderboard"]
    allt = t[t["split"] == "all"]
    assert sorted(allt["model"]) == ["cogvideo", "cogvideo (official)"]
    m = "cogvideo (official)"
    assert _cell(t, "all", m, "VisualQuality") == 60.0                 # (50 + 70) / 2; failed clip left out
    assert _cell(t, "synthetic", m, "VisualQuality") == 50.0
    # CameraControllability: mean (0.4 + 0.6) / 2 = 0.5 < 1 -> official heuristic ×100 = 50
    assert _cell(t, "all", m, "CameraControllability") == pytest.approx(50.0)
    assert _cell(t, "all", m, "ImageRewardScore") == 40.0              # _pct column: (30 + 50) / 2
    assert _cell(t, "all", m, "GT_ALL_PSNR") == 15.0                   # (14 + 16) / 2
    assert _cell(t, "all", m, "ORS") == pytest.approx(0.3)             # (0.4 + 0.2) / 2, 0-1 as in the paper
    assert _cell(t, "all", m, "InstructionFollowing") == 50.0          # 0.5 × 100
    assert _cell(t, "all", m, "PhysicsAdherence") == 0.0
    assert _cell(t, "all", "cogvideo", "VisualQuality") == 44.0        # the run's own row, not pooled
    pct = MemoBenchLeaderboard().aggregate([], {"replicates": 10, "ors_percent": True, **dirs})
    assert _cell(pct["memobench_leaderboard"], "all", m, "ORS") == pytest.approx(30.0)   # official CSV ×100


def test_image_reward_raw_column_when_pct_is_missing(tmp_path):
    # errata 3: without ImageRewardScore_pct the ImageRewardScore column is averaged
    _write(tmp_path / "eval" / "m" / "eval_x.csv", pd.DataFrame(
        {"id": ["A_001", "A_002"], "scene": ["A", "A"], "data_type": ["synthetic"] * 2, "ImageRewardScore": [20.0, 40.0]}))
    t = MemoBenchLeaderboard().aggregate([], {"replicates": 10, "official_eval_dir": str(tmp_path / "eval"),
                                              "official_label": "{model}"})["memobench_leaderboard"]
    assert _cell(t, "all", "m", "ImageRewardScore") == 30.0
    assert math.isnan(_cell(t, "all", "m", "VisualQuality"))


def test_missing_official_folder_names_it(tmp_path):
    from worldrecall.core.data import CaseFailure

    with pytest.raises(CaseFailure, match="nowhere: official ORS folder does not exist"):
        official_rows(ors_dir=tmp_path / "nowhere")
