"""MIND through the user's path: ``worldrecall run`` on the synthetic suite's MIND layout (views, ranking by LCM
MSE printed with enough decimals, the action gate, the Result.json tables) and on a MIND-Data folder of one's own
with broken files (one per-case error naming each file, the rest scored)."""

from __future__ import annotations

import json

import numpy as np
from test_mind_core import action_doc, flat, gt_clip, write_lossless

MODELS = ("oracle", "wrong_trajectory", "frozen_camera")


def test_mind_on_the_synthetic_suite(worldrecall_run):
    run = worldrecall_run("only=[mind]", models=MODELS)
    assert run.exit_code == 0, run.stderr[-2000:]
    assert not [r for r in run.rows if r["status"] == "failed"], [r["reason"] for r in run.rows
                                                                  if r["status"] == "failed"]
    lcm = {(r["model"], r["case_id"]): r for r in run.rows_for("mind.lcm")}
    clip = {m: r for (m, c), r in lcm.items() if "/mirror_test/" not in c}
    assert {m for m in clip} == set(MODELS) and all(r["status"] == "ok" for r in clip.values())
    mse = {m: r["values"]["mse"] for m, r in clip.items()}
    assert mse["oracle"] < mse["wrong_trajectory"] and mse["oracle"] < mse["frozen_camera"]
    mirror = [r for (m, c), r in lcm.items() if "/mirror_test/" in c]
    assert mirror and all(r["status"] == "skipped" and "mind.mirror" in r["reason"] for r in mirror)
    assert any(r["status"] == "ok" for r in run.rows_for("mind.mirror"))
    # the views: ranked by LCM MSE, the oracle's MSE printed with significant digits (never 0.000)
    out = run.stdout
    assert "mind · camera-gated view" in out and "LCM MSE" in out
    line = next(ln for ln in out.splitlines() if ln.split()[1:2] == ["oracle"])
    assert "0.000 " not in line + " "
    view = run.tables["ranking"]
    cell = view[(view["benchmark"] == "mind") & (view["column"] == "LCM MSE") & (view["model"] == "oracle")]
    assert len(cell) == 2 and (cell["digits"] >= 4).all()     # gated and all-cases views
    assert float(cell["mean"].iloc[-1]) != 0.0 and round(float(cell["mean"].iloc[-1]), int(cell["digits"].iloc[-1]))
    gate = {r["model"]: r for r in run.rows_for("mind.action_gate") if "/mirror_test/" not in r["case_id"]}
    assert gate["frozen_camera"]["values"]["passed"] == 0.0 and gate["oracle"]["values"]["passed"] == 1.0
    # the mirror videos have no action program: the gate gives them no verdict, so they are neither in the
    # denominator of "gate passed" nor in the pass rate (the oracle passes every clip it judged)
    n_clips = sum(1 for m, c in lcm if m == "oracle" and "/mirror_test/" not in c)
    n_all = sum(1 for m, _ in lcm if m == "oracle")
    assert n_all > n_clips and f"{n_clips}/{n_clips}" in line.split() and f"{n_clips}/{n_all}" not in line
    rate = view[(view["benchmark"] == "mind") & (view["model"] == "oracle") & (view["metric"] == "mind.action_gate")]
    assert len(rate) and (rate["mean"] == 1.0).all() and (rate["n_gate_measured"] == n_clips).all()
    clips = run.tables["mind_clips"]
    oracle = clips[(clips["model"] == "oracle") & clips["lcm_avg_mse"].notna()]
    assert float(oracle["lcm_avg_mse"].iloc[0]) == mse["oracle"]
    assert {"perspective", "test_type", "n_clips"} <= set(run.tables["mind_groups"].columns)


def test_mind_on_a_folder_of_ones_own_with_broken_files(worldrecall_run, tmp_path):
    data, gen = tmp_path / "MIND-Data", tmp_path / "generations"
    gt_clip(data, "1st_data", "mem_test", "good", flat(12, list(range(0, 120, 10))), action_doc(4, 12))
    bad = gt_clip(data, "1st_data", "mem_test", "bad", flat(12, 50), action_doc(4, 12))
    (bad / "action.json").write_text(json.dumps({"mark_time": 4, "total_time": "twelve", "data": []}))
    for clip in ("good", "bad"):
        write_lossless(gen / "m" / "1st_data" / "mem_test" / clip / "video.mp4", flat(8, 60))
    write_lossless(gen / "m" / "3rd_data" / "mirror_test" / "walk" / "path-1.mp4", flat(7, 0))   # odd
    write_lossless(gen / "m" / "3rd_data" / "mem_test" / "orphan" / "video.mp4", flat(8, 60))    # no GT
    run = worldrecall_run("only=[mind]", f"benchmarks.mind.data_root={data}",
                          f"benchmarks.mind.generations={gen}",
                          "benchmarks.mind.aligner_params.release_batches=false", "max_failure_rate=1.0",
                          suite=None, models=None)
    assert run.exit_code == 0, run.stderr[-2000:]
    failed = {r["case_id"]: r["reason"] for r in run.rows if r["status"] == "failed"}
    assert "bad/action.json: 'total_time' must be an integer" in failed["1st_data/mem_test/bad"]
    assert "path-1.mp4: frame count 7 is not an even number" in failed["3rd_data/mirror_test/walk/path-1"]
    orphan = {r["metric"]: r for r in run.rows if r["case_id"] == "3rd_data/mem_test/orphan"}
    assert orphan["mind.lcm"]["status"] == "skipped" and "missing GT clip folder" in orphan["mind.lcm"]["reason"]
    assert "orphan" in orphan["mind.lcm"]["reason"] and orphan["mind.action"]["status"] == "skipped"
    good = next(r for r in run.rows_for("mind.lcm") if r["case_id"] == "1st_data/mem_test/good")
    # generated level 60 vs GT levels 40..110 (frames 4..11): MSE = mean(((60 - g) / 255)²)
    expect = float(np.mean(((60 - np.arange(40, 120, 10)) / 255.0) ** 2))
    assert abs(good["values"]["mse"] - expect) < 1e-6 * expect + 1e-9


def test_an_unmeasured_headline_names_the_cause_of_its_scored_rows():
    """LCM LPIPS is null on every clip (no perceptual backend) while the mirror videos skip mind.lcm: the end-of-run
    line names the missing backend, not the mirror skip."""
    from worldrecall.core.data import ScoreRow
    from worldrecall.engine.stages.absence import unmeasured_headlines
    from worldrecall.registry.host import load_plugins

    def row(case: str, status: str, **kw) -> ScoreRow:
        return ScoreRow(benchmark="mind", model="m", case_id=case, metric="mind.lcm", status=status, **kw)

    rows = [row("3rd_data/mirror_test/a/path-1", "skipped", values={},
                reason="mind.lcm skipped: a mirror-test video"),
            row("1st_data/mem_test/c", "ok", values={"mse": 0.1, "psnr": 10.0, "ssim": 0.5, "lpips": None},
                info={"verdict": "identical frame pair(s): psnr null; lpips null: no perceptual backend"})]
    block = unmeasured_headlines(rows, load_plugins().benchmarks)
    line = next(ln for ln in block.splitlines() if "LCM LPIPS" in ln)
    assert line.endswith("lpips null: no perceptual backend") and "mirror" not in line
