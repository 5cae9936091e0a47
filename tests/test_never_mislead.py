"""Issue 43, "never mislead": every output tells the truth about what was measured.

- ``ok`` means a value: a metric whose inputs are absent is a skip naming the missing file and how to produce
  it, and the engine turns an ``ok`` row without any value into a failure (``<metric> returned no value``);
- a camera gate that was not measured is "not measured" (never ✗) in every view;
- WRBench's defaults are the release's, and every assumed reference is on the row and said once;
- a pose estimate carries its quality, and an unreliable one leaves the gate not measured;
- a judge that is not configured is a skip with one line saying how to configure it.
"""

from __future__ import annotations

import json
from pathlib import Path

from worldrecall.engine.cli import main


def _rows(out: Path, latest: bool = False) -> list[dict]:
    """The rows of every results folder under ``out`` (``latest``: of the last one written only)."""
    rows: dict[tuple, dict] = {}
    files = sorted(out.glob("results/*/rows-shard-*.jsonl"), key=lambda f: f.stat().st_mtime)
    for f in files[-1:] if latest else files:
        for line in f.read_text().splitlines():
            r = json.loads(line)
            rows[(r["benchmark"], r["model"], r["case_id"], r["metric"])] = r  # the last write per key wins
    return list(rows.values())


def _run(tmp_path: Path, *overrides: str) -> int:
    return main(["run", f"output_root={tmp_path / 'out'}", "tracking=none", "progress=false", *overrides])


def _rollout(folder: Path, name: str = "c1") -> Path:
    from tests.helpers.scene_memory_fixtures import textured_frames
    from worldrecall.formats.mp4 import write_video

    folder.mkdir(parents=True, exist_ok=True)
    write_video(folder / f"{name}.mp4", textured_frames(12), fps=4.0)
    return folder


def test_scene_memory_without_sidecars_skips_naming_the_file_and_how_to_produce_it(tmp_path, capsys):
    gen = _rollout(tmp_path / "gen" / "modelA")
    code = _run(tmp_path, "only=[scene_memory]", "suite=none", f"benchmarks.scene_memory.data_root={gen.parent}",
                f"benchmarks.scene_memory.generations={{modelA:{gen}}}")
    rows = _rows(tmp_path / "out")
    assert rows and code == 0  # nothing failed: every metric lacks an input, and says which
    no_value = [r["metric"] for r in rows if r["status"] == "ok"
                and not any(v is not None for v in r["values"].values())]
    assert no_value == []
    f1 = next(r for r in rows if r["metric"] == "scene_memory.memory_scene_f1")
    assert f1["status"] == "skipped"
    assert "missing ViPE sidecar" in f1["reason"] and "annotations_vipe/c1_vipe_ann" in f1["reason"]
    assert "vipe infer" in f1["reason"]
    assert "\n" not in f1["reason"]


def test_an_ok_row_without_any_value_is_a_failure_naming_the_metric():
    from worldrecall.core.data import ScoreRow
    from worldrecall.engine.stages.pipeline import CasePipeline

    row = ScoreRow("b", "m", "c", "b.metric", {})
    CasePipeline._fill_from_entry(None, row, {"values": {"x": None, "y": float("nan")}}, None)
    assert row.status == "failed" and row.reason == "score: b.metric returned no value"
    row = ScoreRow("b", "m", "c", "b.metric", {})
    CasePipeline._fill_from_entry(None, row, {"values": {"x": None, "y": 0.0}}, None)
    assert row.status == "ok" and row.values["y"] == 0.0


def test_a_gate_with_no_pose_source_is_not_measured_in_every_view(tmp_path, capsys):
    """No ✗ and no 0 pass rate where the camera gate never ran: console, report and MLflow say "not measured"."""
    out = tmp_path / "out"
    code = main(["run", f"output_root={out}", "progress=false", "experiment=smoke", "only=[wrbench]",
                 "models.pose=null"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "✗" not in printed and "gate passed" not in printed
    assert "(gate not measured) oracle" in printed
    assert "wrbench.camera_gate not measured (no backend selected for role 'pose'" in printed
    html = next(out.glob("results/*/report/index.html")).read_text()
    assert "✗" not in html and "gate not measured" in html
    full = next(out.glob("results/*/tables/leaderboard.txt")).read_text()
    assert "✗" not in full and "no camera-gated view: wrbench.camera_gate not measured" in full

    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    runs = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()])
            if r.data.tags.get("worldrecall.kind") == "model"]
    assert runs
    for r in runs:
        assert not any("gate" in k for k in r.data.metrics), r.data.metrics  # no 0 pass rate logged
        assert r.data.tags["worldrecall.camera_gate"].startswith("not measured: wrbench.camera_gate not measured")


def _wrbench_videos(tmp_path: Path, records: list[dict]) -> Path:
    import numpy as np
    from tests.helpers.wrbench_fixtures import write_clip, write_manifest
    from worldrecall.plugins.wrbench.camera_gate import triangle_yaw

    gen = tmp_path / "gens" / "m1"
    for r in records:
        write_clip(gen / f"{r['video_id']}.mp4", n=12)
        np.save(gen / f"{r['video_id']}_poses.npy", triangle_yaw(12, 60.0))  # the camera turned 60° and back
        r.update(video_path=f"{r['video_id']}.mp4", pose_path=f"{r['video_id']}_poses.npy",
                 world_state_prompt="A cat sits on the sofa.")
    write_manifest(gen, records)
    return gen


def test_wrbench_peak_yaw_is_the_releases_and_every_assumption_is_on_the_row_and_said_once(tmp_path, capsys):
    gen = _wrbench_videos(tmp_path, [{"video_id": "a", "camera_type": "yaw_RL"},
                                     {"video_id": "b", "camera_type": "yaw_RL", "requested_yaw_deg": 45.0},
                                     {"video_id": "c", "camera_type": "yaw_LR"}])
    code = _run(tmp_path, "only=[wrbench]", "suite=none", f"benchmarks.wrbench.data_root={tmp_path}",
                f"benchmarks.wrbench.generations={{m1:{gen}}}", "models.pose=poses_npy",
                "benchmarks.wrbench.metrics.probes.enabled=false")
    printed = capsys.readouterr().out
    gates = {r["case_id"]: r for r in _rows(tmp_path / "out") if r["metric"] == "wrbench.camera_gate"}
    assert code == 0 and set(gates) == {"a", "b", "c"}
    assert "(vs the instructed go-and-return yaw (yaw_RL, 60 deg))" in gates["a"]["info"]["verdict"]
    assert gates["a"]["info"]["assumed"]["requested_yaw_deg"] == {
        "value": 60.0, "source": "WRBench preset yaw_RL/yaw_LR default (DEFAULT_YAW_PEAK_DEG)",
        "set": "requested_yaw_deg (videos.json) or benchmarks.wrbench.metrics.camera_gate.params.requested_yaw_deg"}
    assert "requested_yaw_deg" not in gates["b"]["info"]["assumed"]  # the record's own value is no assumption
    assert "45 deg" in gates["b"]["info"]["verdict"]
    assert gates["b"]["info"]["assumed"]["phases"]["source"].startswith("the camera type alone")
    lines = [x for x in printed.splitlines() if "assumed: requested_yaw_deg" in x]
    assert len(lines) == 1 and lines[0].startswith("wrbench: assumed: requested_yaw_deg = 60 (WRBench preset")
    assert lines[0].endswith("on 2 case(s); set requested_yaw_deg (videos.json) or "
                             "benchmarks.wrbench.metrics.camera_gate.params.requested_yaw_deg to change it")
    assert sum("assumed: phases" in x for x in printed.splitlines()) == 1


def test_a_wrbench_judge_that_is_not_configured_is_a_skip_saying_how(tmp_path, capsys):
    """Issue 43: no probe answers beside any video used to fail every case and exit 3."""
    gen = _wrbench_videos(tmp_path, [{"video_id": "a", "camera_type": "yaw_RL"},
                                     {"video_id": "b", "camera_type": "yaw_LR"}])
    code = _run(tmp_path, "only=[wrbench]", "suite=none", f"benchmarks.wrbench.data_root={tmp_path}",
                f"benchmarks.wrbench.generations={{m1:{gen}}}", "models.pose=poses_npy")
    probes = [r for r in _rows(tmp_path / "out") if r["metric"] == "wrbench.probes"]
    assert code == 0 and len(probes) == 2
    assert all(r["status"] == "skipped" for r in probes)
    reason = probes[0]["reason"]
    assert reason.startswith("wrbench.probes skipped: judge wrbench_probe_sidecar cannot answer for any of the 2")
    assert "a.probes.json: no probe answers beside the video" in reason
    assert "benchmarks.wrbench.metrics.probes.params.judge=" in reason and "<video>.probes.json" in reason
    assert "\n" not in reason


def test_one_video_without_answers_among_answered_ones_is_skipped_not_failed(tmp_path):
    gen = _wrbench_videos(tmp_path, [{"video_id": "a", "camera_type": "yaw_RL"},
                                     {"video_id": "b", "camera_type": "yaw_LR"}])
    (gen / "a.probes.json").write_text(json.dumps({"D3_POSITION_RELATION": 0.9}))
    _run(tmp_path, "only=[wrbench]", "suite=none", f"benchmarks.wrbench.data_root={tmp_path}",
         f"benchmarks.wrbench.generations={{m1:{gen}}}", "models.pose=poses_npy")
    b = next(r for r in _rows(tmp_path / "out") if r["metric"] == "wrbench.probes" and r["case_id"] == "b")
    assert b["status"] == "skipped" and "b.probes.json: no probe answers beside the video; configure a judge" in \
        b["reason"]


def test_an_unreliable_pose_estimate_leaves_the_gate_not_measured_with_its_quality_on_the_row(tmp_path, capsys):
    gen = _wrbench_videos(tmp_path, [{"video_id": "a", "camera_type": "yaw_RL"}])
    off = [f"benchmarks.wrbench.metrics.{m}.enabled=false" for m in ("probes", "camprec", "camalign",
                                                                      "visual_integrity")]
    base = ["only=[wrbench]", "suite=none", f"benchmarks.wrbench.data_root={tmp_path}",
            f"benchmarks.wrbench.generations={{m1:{gen}}}", "models.pose=sift_pose", *off]
    code = _run(tmp_path, *base)  # a 32x24 texture sliding sideways: SIFT finds almost nothing to match
    (row,) = [r for r in _rows(tmp_path / "out") if r["metric"] == "wrbench.camera_gate"]
    assert code == 0 and row["status"] == "skipped"
    assert row["reason"].startswith("wrbench.camera_gate skipped: camera gate not measured: pose unreliable: "
                                    "a frame pair has ")
    q = row["info"]["pose_quality"]
    assert q["inliers_min"] < 20 and {"matches_min", "inlier_ratio_median", "residual_px_median"} <= set(q)
    assert "✗" not in capsys.readouterr().out
    # the threshold is a threshold: at 0 the same poses are measured (passed or failed), from the cache
    _run(tmp_path, *base, "benchmarks.wrbench.metrics.camera_gate.thresholds.pose_min_inliers=0")
    rows = [r for r in _rows(tmp_path / "out", latest=True) if r["metric"] == "wrbench.camera_gate"]
    assert rows[0]["status"] == "ok" and rows[0]["values"]["passed"] in (0.0, 1.0)
    assert rows[0]["info"]["pose_quality"] == q


def test_pose_quality_belongs_to_the_estimate_even_when_the_poses_come_from_the_cache(tmp_path):
    """A backend's outputs are kept per input (CachedOutputs): the quality is returned with the poses in one call,
    so a video whose poses come from the store gets its own quality, never the last computed video's."""
    from worldrecall.engine.cache import Store
    from worldrecall.engine.cache.identity import CachedOutputs
    import numpy as np

    from worldrecall.plugins.models.sift_pose import build

    rng = np.random.default_rng(0)
    base = np.kron(rng.random((24, 32, 3)), np.ones((8, 8, 1)))  # blocky texture: corners to match
    textured = np.stack([(np.roll(base, 2 * i, axis=1)[:96, :128] * 255).astype(np.uint8) for i in range(3)])
    flat = np.full((3, 96, 128, 3), 127, np.uint8)  # nothing to match: every pair fails
    pose = CachedOutputs(build({}), {"name": "sift_pose"}, Store(tmp_path / "cache"))
    fields = pose.quality_fields
    _, qa = pose.poses_and_quality(list(textured))
    _, qb = pose.poses_and_quality(list(flat))
    _, again = pose.poses_and_quality(list(textured))  # served from the store
    fa, fb = dict(zip(fields, qa)), dict(zip(fields, qb))
    assert fa["inliers_min"] > fb["inliers_min"] == 0
    assert np.array_equal(again, qa, equal_nan=True)
