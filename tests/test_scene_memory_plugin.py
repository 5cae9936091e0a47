"""Scene Memory F1 plugin end to end: registration, config defaults, loader, aligners, metrics, artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.scene_memory_fixtures import room_rollout
from omegaconf import OmegaConf

import worldrecall
from worldrecall.engine.cache import Store
from worldrecall.core.components import LoadRequest, MeasureContext
from worldrecall.core.data import Case, CaseError, CaseFailure, CaseSkip
from worldrecall.core.models import ModelHub
from worldrecall.core.video import VideoPool
from worldrecall.formats.mp4 import write_video
from worldrecall.plugins.scene_memory import plugin as sm_plugin
from worldrecall.plugins.scene_memory.aligners import ActionsAligner, TurnaroundAligner
from worldrecall.plugins.scene_memory.camera_gate import SceneCameraGate
from worldrecall.plugins.scene_memory.loader import SceneMemoryLoader
from worldrecall.plugins.scene_memory.metrics import MemorySceneF1, SceneF1
from worldrecall.plugins.scene_memory.render import read_ply
from worldrecall.plugins.scene_memory.suite import SUITE_METRICS

CONF = Path(worldrecall.__file__).parent / "conf" / "benchmark" / "scene_memory.yaml"
BOX = [((-0.6, -0.6, 2.2), (0.6, 0.6, 2.8))]  # an object that only exists on the revisit leg
FPS = 4.0
FPA = 4  # frames per action


def _ctx() -> MeasureContext:
    return MeasureContext(models=ModelHub({}, {}))


def _rollout(model_dir: Path, case: str, kind: str, *, boxes=(), actions: dict | None = None) -> None:
    """<case>.mp4 (tiny), annotations_vipe/<case>_vipe_ann/ and optionally <case>_actions.json."""
    _, P = room_rollout(model_dir / "annotations_vipe" / f"{case}_vipe_ann", kind, frames_per_action=FPA,
                         fps=FPS, revisit_boxes=boxes)
    frames = np.zeros((len(P), 16, 16, 3), np.uint8)
    frames[:, :, :, 0] = np.arange(len(P))[:, None, None] * 5
    write_video(model_dir / f"{case}.mp4", frames, fps=FPS)
    if actions is not None:
        (model_dir / f"{case}_actions.json").write_text(json.dumps(actions))


DOLLY_ACTIONS = {"actions": ["push_in"] * 4 + ["pull_out"] * 4, "frames_per_action": FPA}


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> Path:
    """R/scene_memory/{model}/... for three counterfactual models."""
    root = tmp_path_factory.mktemp("sm") / "scene_memory"
    _rollout(root / "oracle", "dolly_loop_000", "dolly", actions=DOLLY_ACTIONS)
    _rollout(root / "hallucinated_background", "dolly_loop_000", "dolly", boxes=BOX, actions=DOLLY_ACTIONS)
    _rollout(root / "frozen_camera", "dolly_loop_000", "static", actions=DOLLY_ACTIONS)
    return root


def _load(root: Path, **options) -> list:
    models = {p.name: p for p in sorted(root.iterdir()) if p.is_dir()}
    return list(SceneMemoryLoader().load(LoadRequest(root, models, options, VideoPool())))


def _run(case: Case, metric_cls=MemorySceneF1, aligner=None, thresholds=None):
    aligner = aligner or (ActionsAligner() if metric_cls is SceneF1 else TurnaroundAligner())
    al = aligner.align(case, {})
    m = metric_cls(thresholds=thresholds)
    meas = m.measure(case, al, _ctx())
    return m, al, meas, m.score(meas, m.thresholds)


# -- registration and config ---------------------------------------------------------------------------
def test_plugin_registers_every_component():
    got: list = []
    for hook in (sm_plugin.register_loaders, sm_plugin.register_aligners, sm_plugin.register_metrics,
                 sm_plugin.register_benchmarks):
        hook(got.append)
    names = sorted(o.name for o in got)
    assert names == ["scene_memory", "scene_memory", "scene_memory.actions", "scene_memory.camera_gate",
                     "scene_memory.memory_geometric_closure",
                     "scene_memory.memory_half_life", "scene_memory.memory_rendering_recovery",
                     "scene_memory.memory_return_gate", "scene_memory.memory_revisit_fidelity",
                     "scene_memory.memory_scene_f1", "scene_memory.scene_f1", "scene_memory.turnaround"]
    assert SceneF1.aligner == "scene_memory.actions" and MemorySceneF1.aligner is None  # the benchmark's own aligner


def test_registered_through_the_plugin_host():
    from worldrecall.registry.host import load_plugins

    host = load_plugins(fresh=True)
    assert host.get("metric", "scene_memory.memory_scene_f1") is MemorySceneF1
    assert host.get("aligner", "scene_memory.turnaround").name == "scene_memory.turnaround"
    assert host.get("loader", "scene_memory").name == "scene_memory"


def test_yaml_defaults_equal_class_defaults():
    cfg = OmegaConf.to_container(OmegaConf.load(CONF), resolve=False)
    assert cfg["enabled"] is True and cfg["loader"] == "scene_memory"
    assert cfg["aligner"] == "scene_memory.turnaround"
    assert cfg["aligner_params"] == TurnaroundAligner.defaults
    assert cfg["loader_options"] == SceneMemoryLoader.defaults
    suite = {m.name.split(".", 1)[1]: m for m in SUITE_METRICS}
    assert set(cfg["metrics"]) == {"memory_scene_f1", "scene_f1", "camera_gate", *suite}
    for short, cls in (("memory_scene_f1", MemorySceneF1), ("scene_f1", SceneF1), ("camera_gate", SceneCameraGate),
                       *suite.items()):
        assert cls.name == f"scene_memory.{short}"
        assert cfg["metrics"][short].get("params", {}) == cls.params
        assert cfg["metrics"][short]["thresholds"] == cls.thresholds
    assert cfg["data_root"] == "${suite.root}/scene_memory" == cfg["generations"]


def test_official_defaults():
    th = MemorySceneF1.thresholds
    assert (th["alignment"], th["centroid_align"], th["distance_threshold_ratio"], th["voxel_size"]) == \
        ("trimmed_icp", False, 0.02, 0.0)
    assert (th["icp_max_iterations"], th["icp_trim"], th["icp_tolerance"], th["icp_max_translation_ratio"],
            th["icp_max_rotation_deg"]) == (20, 0.8, 1e-5, 0.10, 10.0)
    assert MemorySceneF1.params["frames_per_segment"] == 8 and MemorySceneF1.params["points_per_frame"] == 4096


# -- loader ----------------------------------------------------------------------------------------------
def test_loader_builds_cases(layout):
    items = _load(layout)
    assert [(c.model, c.case_id) for c in items] == [("frozen_camera", "dolly_loop_000"),
                                                     ("hallucinated_background", "dolly_loop_000"),
                                                     ("oracle", "dolly_loop_000")]
    c = items[2]
    assert isinstance(c, Case) and c.benchmark == "scene_memory"
    assert c.sidecars["vipe"] == layout / "oracle" / "annotations_vipe" / "dolly_loop_000_vipe_ann"
    assert c.strata == {"domain": "memory_loop", "subcategory": "dolly_loop"}
    assert c.annotations["fps"] == pytest.approx(FPS) and c.annotations["fps_source"] == "video"
    assert c.annotations["actions"]["frames_per_action"] == FPA
    assert c.annotations["num_frames"] == 33  # probed from the container, nothing decoded
    assert c.video._frames is None
    json.dumps(c.annotations)  # JSON-able
    assert c.video is not None and c.video.path.name == "dolly_loop_000.mp4"


def test_loader_errors(tmp_path):
    root = tmp_path / "scene_memory"
    (root / "m").mkdir(parents=True)
    write_video(root / "m" / "lost.mp4", np.zeros((3, 8, 8, 3), np.uint8), fps=FPS)
    (root / "m" / "broken_actions.json").write_text("{")
    _rollout(root / "m", "broken", "dolly")
    (root / "m" / "broken_actions.json").write_text("{")
    items = {c.case_id: c for c in _load(root)}
    # a missing sidecar is not a load error: the release reports the metrics not applicable, worldrecall skips
    # them with one line naming the file and how to produce it (issue 43: never an ok row without a value)
    lost = items["lost"]
    assert isinstance(lost, Case) and "vipe" not in lost.sidecars
    # (the experimental path looks for its action program first, as released)
    for metric_cls, why, how in ((MemorySceneF1, "lost_vipe_ann: ViPE sidecar missing", "vipe infer"),
                                 (SceneF1, "lost_actions.json: action program missing", "_actions.json beside it")):
        with pytest.raises(CaseSkip) as e:
            _run(lost, metric_cls)
        assert why in str(e.value) and how in str(e.value)
        al = (ActionsAligner() if metric_cls is SceneF1 else TurnaroundAligner()).align(lost, {})
        assert al.info["missing"] and why in al.info["reason"]
    # a broken action file only hurts the experimental split (an error there)
    case = items["broken"]
    assert isinstance(case, Case) and "broken_actions.json: unreadable" in case.annotations["actions_error"]
    with pytest.raises(CaseFailure, match="broken_actions.json: unreadable"):
        ActionsAligner().align(case, {})
    assert TurnaroundAligner().align(case, {}).info["gate"] is True


def test_manifest_and_bundles(tmp_path):
    root = tmp_path / "scene_memory"
    mdir = root / "m"
    mdir.mkdir(parents=True)
    rng = np.random.default_rng(0)
    pts = rng.random((200, 3))
    np.savez(mdir / "bundle_scene_memory.npz", pobs=pts, prev=pts + 0.001)
    np.save(mdir / "obs.npy", pts)
    np.savetxt(mdir / "rev.xyz", pts)
    (root / "cases.json").write_text(json.dumps({"cases": [
        {"case_id": "explicit", "observation_point_cloud_path": "obs.npy", "revisit_point_cloud_path": "rev.xyz"},
        {"case_id": "escape", "video": "../../../etc/passwd"},
        {"case_id": "other_model", "model": "nope", "video": "x.mp4"},
    ]}))
    # discovery: a bundle alone is a case (precomputed clouds, no sidecar needed)
    (case,) = _load(root)
    assert case.case_id == "bundle" and "scene_memory_npz" in case.sidecars
    _, al, meas, s = _run(case)
    assert al.info["source"] == "precomputed" and meas["source"] == "precomputed:bundle_scene_memory.npz"
    assert s["f1"] == 1.0 and s["gate"] is None and s["f1_gate_zeroed"] == 1.0
    # manifest
    items = {c.case_id: c for c in _load(root, manifest="cases.json")}
    assert set(items) == {"explicit", "escape"}
    assert isinstance(items["escape"], CaseError) and "escapes" in items["escape"].reason
    s2 = _run(items["explicit"])[3]
    assert s2["f1"] == 1.0 and s2["n_obs"] == 200.0
    bad = _load(root, manifest="missing.json")
    assert isinstance(bad[0], CaseError) and "missing.json: manifest missing" in bad[0].reason


# -- metrics on counterfactual models --------------------------------------------------------------------
def test_official_metric_ranks_models(layout):
    cases = {c.model: c for c in _load(layout)}
    _, al, meas, oracle = _run(cases["oracle"])
    assert al.info["k_star"] == 16 and al.info["n_pairs"] == 9 and al.info["gate"] is True
    assert al.phases["observation"].start == 0 and al.phases["observation"].end == 15
    assert al.phases["revisit"].start == 16 and al.phases["revisit"].end == 32
    # 8 rows per leg: round(linspace(0, 15, 8)) = 0,2,4,6,9,11,13,15 (6.43 -> 6, 8.57 -> 9)
    assert meas["observation_rows"].tolist() == [0, 2, 4, 6, 9, 11, 13, 15]
    assert meas["observation"].dtype == np.float32 and meas["observation"].shape == (8 * 16 * 12, 3)
    assert oracle["f1"] > 0.99 and oracle["gate"] == 1.0 and oracle["f1_gate_zeroed"] == oracle["f1"]
    for key in ("f1", "retention", "precision", "hallucination", "gate", "f1_gate_zeroed", "n_obs", "n_rev",
                "tau", "icp_accepted"):
        assert key in oracle
    hall = _run(cases["hallucinated_background"])[3]
    assert hall["f1"] < oracle["f1"] - 0.1 and hall["hallucination"] > 0.1
    frozen = _run(cases["frozen_camera"])[3]
    # gate failed: not applicable (skipped, not zero) but 0 in the gate-zeroed mean
    assert frozen["gate"] == 0.0 and frozen["f1"] is None and frozen["f1_gate_zeroed"] == 0.0
    assert frozen["applicable"] == 0.0


def test_thresholds_rescore_without_measuring(layout, tmp_path):
    case = next(c for c in _load(layout) if c.model == "hallucinated_background")
    m, _, meas, base = _run(case)
    # the measurement survives the cache (npz + JSON) and re-scores identically
    Store(tmp_path / "cache").put_arrays("measurements", "kk", meas)
    back = Store(tmp_path / "cache").get_arrays("measurements", "kk")
    assert m.score(back, m.thresholds) == base
    wide = m.score(back, {**m.thresholds, "distance_threshold_ratio": 0.5})
    assert wide["tau"] == pytest.approx(25 * base["tau"]) and wide["f1"] >= base["f1"]
    absolute = m.score(back, {**m.thresholds, "distance_threshold": 0.3, "alignment": "none"})
    assert absolute["tau"] == 0.3 and absolute["icp_accepted"] is None
    parity = m.score(back, {**m.thresholds, "official_parity": True})
    assert parity["f1"] == pytest.approx(base["f1"], abs=0.01)


def test_official_parity_uses_official_gate(tmp_path):
    root = tmp_path / "scene_memory"
    _rollout(root / "jitter", "dolly_loop_000", "jitter")
    (case,) = _load(root)
    m, al, meas, ours = _run(case)
    assert al.info["gate_official"] is True and al.info["gate"] is False
    assert ours["gate"] == 0.0 and ours["f1"] is None and ours["gate_official"] == 1.0
    official = m.score(meas, {**m.thresholds, "official_parity": True})
    assert official["gate"] == 1.0 and official["f1"] is not None


def test_experimental_metric(layout):
    cases = {c.model: c for c in _load(layout)}
    _, al, _, s = _run(cases["oracle"], SceneF1)
    # 33 video frames; first segment ends at frame 16; row = round(16·32/33) = 16
    assert al.info["split_row"] == 16 and al.info["transition_frame"] == 16 and al.info["gate"] is True
    assert s["f1"] > 0.99
    frozen_m, _, frozen_meas, frozen = _run(cases["frozen_camera"], SceneF1)
    # gate optional (off): the static camera is scored; with require_gate it is zeroed, not skipped
    assert frozen["gate"] == 0.0 and frozen["f1"] is not None and frozen["f1_gate_zeroed"] == 0.0
    gated = frozen_m.score(frozen_meas, {**frozen_m.thresholds, "require_gate": True})
    assert gated["f1"] == 0.0


def test_per_leg_f1_for_double_loop(tmp_path):
    root = tmp_path / "scene_memory"
    _rollout(root / "m", "double_yaw_loop_000", "double_yaw")
    (case,) = _load(root)
    _, al, _, s = _run(case)
    assert al.info["turns"] == [24, 72] and al.info["legs"] == [[24, 72], [72, 97]]
    assert s["n_legs"] == 2.0 and s["leg1_f1"] > 0.9 and s["leg2_f1"] > 0.9
    assert s["leg_f1_min"] == min(s["leg1_f1"], s["leg2_f1"])


def test_short_split_is_not_applicable(tmp_path):
    root = tmp_path / "scene_memory"
    sc, _ = room_rollout(root / "m" / "annotations_vipe" / "one_vipe_ann", "dolly", frames_per_action=1)
    # keep the outbound leg only: k* is the last row -> revisit leg has 1 row
    for f in ("poses_c2w", "poses_w2c", "intrinsics", "depth_metric", "frame_indices", "timestamps"):
        np.save(sc / f"{f}.npy", np.load(sc / f"{f}.npy")[:5])
    np.savez(sc / "depth_valid_mask.npz", mask=np.load(sc / "depth_valid_mask.npz")["mask"][:5])
    write_video(root / "m" / "one.mp4", np.zeros((5, 8, 8, 3), np.uint8), fps=FPS)
    (case,) = _load(root)
    _, al, meas, s = _run(case)
    assert al.info["split_ok"] is False and al.phases == {}
    assert s["f1"] is None and s["applicable"] == 0.0 and "observation" not in meas


def test_nan_depth_is_dropped_as_released(tmp_path):
    # the release builds valid = mask & finite & depth > 0: a NaN where the mask says valid is one pixel
    # fewer, not an error. Revisit rows of the 33-row dolly split at 16: 16 + round(linspace(0, 16, 8)) =
    # 16, 18, 21, 23, 25, 27, 30, 32, every pixel used (192 < 4096) -> row 21's NaN removes one point
    root = tmp_path / "scene_memory"
    _rollout(root / "clean", "dolly_loop_000", "dolly", actions=DOLLY_ACTIONS)
    _rollout(root / "nan", "dolly_loop_000", "dolly", actions=DOLLY_ACTIONS)
    d = root / "nan" / "annotations_vipe" / "dolly_loop_000_vipe_ann"
    dep = np.load(d / "depth_metric.npy")
    dep[21, 1, 1] = np.nan
    np.save(d / "depth_metric.npy", dep)
    cases = {c.model: c for c in _load(root)}
    _, _, meas, s = _run(cases["nan"])
    _, _, _, s0 = _run(cases["clean"])
    assert meas["revisit_rows"].tolist() == [16, 18, 21, 23, 25, 27, 30, 32]
    assert s["n_rev"] == s0["n_rev"] - 1 == 8 * 192 - 1 and s["n_obs"] == s0["n_obs"] and s["f1"] is not None


def test_missing_depth_export_is_not_applicable_and_short_depth_scores_its_rows(tmp_path):
    root = tmp_path / "scene_memory"
    for m in ("nodepth", "short"):
        _rollout(root / m, "dolly_loop_000", "dolly", actions=DOLLY_ACTIONS)
    (root / "nodepth" / "annotations_vipe" / "dolly_loop_000_vipe_ann" / "depth_valid_mask.npz").unlink()
    d = root / "short" / "annotations_vipe" / "dolly_loop_000_vipe_ann"
    np.save(d / "depth_metric.npy", np.load(d / "depth_metric.npy")[:30])  # 30 depth rows, 33 poses
    cases = {c.model: c for c in _load(root)}
    _, _, meas, s = _run(cases["nodepth"], MemorySceneF1)  # its gate was measured: values, F1 not applicable
    assert s["f1"] is None and s["applicable"] == 0.0 and "depth_valid_mask.npz missing" in meas["reason"]
    with pytest.raises(CaseSkip, match="depth_valid_mask.npz missing"):  # nothing measured: a skip saying why
        _run(cases["nodepth"], SceneF1)
    # official: rows 30 and 32 of the revisit leg [16, 18, 21, 23, 25, 27, 30, 32] are past the depth
    # stack and skipped; the release scores the rest
    _, _, meas, s = _run(cases["short"])
    assert meas["revisit_rows"].tolist() == [16, 18, 21, 23, 25, 27] and s["n_rev"] == 6 * 192
    # experimental: N = min(33 poses, 30 depth, 33 masks) = 30; t = 16 of 32 frames (one segment after
    # parsing: push_in/pull_out are no-ops, so t = 33 // 2 = 16 of 33 frames) -> row round(16·29/33) = 14
    _, al, meas, s = _run(cases["short"], SceneF1)
    assert al.info["n_rows"] == 30 and al.info["split_row"] == 14 and s["f1"] is not None


def test_intrinsics_other_than_n33_are_not_applicable_in_parity(tmp_path):
    root = tmp_path / "scene_memory"
    _rollout(root / "m", "dolly_loop_000", "dolly")
    d = root / "m" / "annotations_vipe" / "dolly_loop_000_vipe_ann"
    K = np.load(d / "intrinsics.npy")
    np.save(d / "intrinsics.npy", np.stack([K[:, 0, 0], K[:, 1, 1], K[:, 0, 2], K[:, 1, 2]], axis=1))  # [N,4]
    (case,) = _load(root)
    _, _, meas, s = _run(case)
    assert meas["release_readable"] is False and s["f1"] is not None  # ours: [N,4] accepted
    _, _, _, sp = _run(case, thresholds={"official_parity": True})
    assert sp["f1"] is None and sp["applicable"] == 0.0 and sp["gate"] == 1.0


def test_one_pose_is_an_error(tmp_path):
    root = tmp_path / "scene_memory"
    _rollout(root / "m", "dolly_loop_000", "dolly")
    d = root / "m" / "annotations_vipe" / "dolly_loop_000_vipe_ann"
    for f in ("poses_c2w", "poses_w2c", "intrinsics", "depth_metric", "frame_indices", "timestamps"):
        np.save(d / f"{f}.npy", np.load(d / f"{f}.npy")[:1])
    np.savez(d / "depth_valid_mask.npz", mask=np.load(d / "depth_valid_mask.npz")["mask"][:1])
    (case,) = _load(root)
    with pytest.raises(CaseFailure, match="poses_c2w.npy: 1 pose row"):
        TurnaroundAligner().align(case, {})


def test_nan_pose_is_an_error(tmp_path):
    root = tmp_path / "scene_memory"
    _rollout(root / "m", "dolly_loop_000", "dolly")
    d = root / "m" / "annotations_vipe" / "dolly_loop_000_vipe_ann"
    P = np.load(d / "poses_c2w.npy")
    P[3, 0, 3] = np.nan
    np.save(d / "poses_c2w.npy", P)
    (d / "poses_w2c.npy").unlink()
    (case,) = _load(root)
    with pytest.raises(CaseFailure, match="poses_c2w.npy: non-finite pose at row 3"):
        TurnaroundAligner().align(case, {})


def test_artifacts(layout, tmp_path):
    case = next(c for c in _load(layout) if c.model == "hallucinated_background")
    m, _, meas, s = _run(case)
    paths = m.artifacts(meas, m.thresholds, tmp_path / "art")
    assert [p.name for p in paths] == ["observation.ply", "revisit_aligned.ply", "clouds.png"]
    pts, col = read_ply(paths[0])
    assert len(pts) == s["n_obs"]
    # forgotten observation points are orange, retained green; their share is 1 − retention
    forgotten = (col == np.array([245, 124, 0], np.uint8)).all(axis=1)
    assert forgotten.mean() == pytest.approx(1 - s["retention"])
    _, vcol = read_ply(paths[1])
    halluc = (vcol == np.array([200, 30, 160], np.uint8)).all(axis=1)
    assert halluc.mean() == pytest.approx(s["hallucination"])
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert m.artifacts({"split_ok": False}, m.thresholds, tmp_path / "none") == []


# -- through the runner ----------------------------------------------------------------------------------
def test_runner_with_shipped_config(layout, tmp_path):
    from worldrecall.engine.stages.runner import Runner
    from worldrecall.registry.host import load_plugins

    bench = OmegaConf.to_container(OmegaConf.load(CONF), resolve=False)
    bench["data_root"] = bench["generations"] = str(layout)
    bench["metrics"]["scene_f1"]["enabled"] = True  # the experimental variant is off by default
    cfg = {"output_root": str(tmp_path / "out"), "cache_dir": str(tmp_path / "out" / "cache"), "device": "cpu",
           "batch_size": 4, "progress": False, "artifacts": True, "max_failure_rate": 0.5,
           "shard": {"count": 1, "index": 0}, "suite": {"builder": None, "root": None, "params": {}},
           "models": {"set": "classical", "options": {}}, "tracking": {"enabled": False},
           "benchmarks": {"scene_memory": bench}, "aggregators": ["mean"], "aggregator_params": {}}
    result = Runner(cfg, load_plugins(fresh=True)).run()
    rows = {(r.model, r.metric): r for r in result.rows}
    # 3 models x 8 metrics (F1, experimental F1, the rest of the memory_loop suite, the camera gate), CPU backends
    assert len(rows) == 24 and all(r.status == "ok" for r in rows.values()), [r.reason for r in rows.values()]
    # the camera gate beside the protocol's own: the sidecar camera against the action program
    gate = {m: rows[(m, "scene_memory.camera_gate")] for m in ("oracle", "frozen_camera", "hallucinated_background")}
    assert {m: r.values["passed"] for m, r in gate.items()} == {"oracle": 1.0, "frozen_camera": 0.0,
                                                                "hallucinated_background": 1.0}, \
        {m: r.info.get("verdict") for m, r in gate.items()}
    official = rows[("oracle", "scene_memory.memory_scene_f1")]
    assert official.values["f1"] > 0.99 and official.info["alignment"]["info"]["method"] == "turnaround"
    assert len(official.info["artifacts"]) == 3
    assert rows[("oracle", "scene_memory.scene_f1")].info["alignment"]["info"]["method"] == "actions"
    assert rows[("frozen_camera", "scene_memory.memory_scene_f1")].values["f1"] is None
    mean = result.tables["mean"]
    sel = mean[(mean.metric == "scene_memory.memory_scene_f1")]
    f1 = sel[sel.value_name == "f1"].set_index("model")["mean"]
    assert f1["oracle"] > f1["hallucinated_background"]
    # frozen camera: conditional mean has no case, gate-zeroed mean is 0, pass rate 0
    zeroed = sel[sel.value_name == "f1_gate_zeroed"].set_index("model")["mean"]
    assert zeroed["frozen_camera"] == 0.0
    assert np.isnan(f1.get("frozen_camera", np.nan))


def test_native_vipe_sidecar_scores_like_converted(tmp_path):
    from worldrecall.formats.vipe import read_sidecar, write_native_vipe

    root = tmp_path / "scene_memory"
    _rollout(root / "conv", "dolly_loop_000", "dolly", boxes=BOX)
    conv = read_sidecar(root / "conv" / "annotations_vipe" / "dolly_loop_000_vipe_ann")
    K = conv.intrinsics[0]
    (root / "native" / "annotations_vipe").mkdir(parents=True)
    write_native_vipe(root / "native" / "annotations_vipe" / "dolly_loop_000_vipe_ann", "dolly_loop_000",
                      conv.poses_c2w, np.tile([K[0, 0], K[1, 1], K[0, 2], K[1, 2]], (len(conv), 1)),
                      np.asarray(conv.depth))
    (root / "native" / "dolly_loop_000.mp4").hardlink_to(root / "conv" / "dolly_loop_000.mp4")
    scores = {c.model: _run(c)[3] for c in _load(root)}
    # same rollout, depth stored as half floats: the same split and nearly the same F1
    assert scores["native"]["split_row"] == scores["conv"]["split_row"] == 16
    assert scores["native"]["f1"] == pytest.approx(scores["conv"]["f1"], abs=0.02)


def test_bad_config_values_are_refused_at_construction():
    from worldrecall.core.components import ConfigTypeError

    with pytest.raises(ConfigTypeError, match="alignment: expected a string"):
        MemorySceneF1(thresholds={"alignment": 3})
    MemorySceneF1(thresholds={"alignment": "icp"})  # any other string: the release's centroid/none fallback
    with pytest.raises(ConfigTypeError, match="unknown key"):
        SceneF1(thresholds={"tau": 0.1})
    with pytest.raises(ConfigTypeError, match="points_per_frame: must be ≥ 1"):
        SceneF1(params={"points_per_frame": 0})


def test_empty_cloud_is_not_applicable_officially_and_an_error_experimentally(tmp_path):
    root = tmp_path / "scene_memory"
    _rollout(root / "m", "dolly_loop_000", "dolly", actions=DOLLY_ACTIONS)
    d = root / "m" / "annotations_vipe" / "dolly_loop_000_vipe_ann"
    mask = np.load(d / "depth_valid_mask.npz")["mask"]
    mask[16:] = False  # nothing valid on the revisit leg
    np.savez(d / "depth_valid_mask.npz", mask=mask)
    (case,) = _load(root)
    _, _, meas, s = _run(case)
    assert len(meas["revisit"]) == 0 and s["f1"] is None and s["applicable"] == 0.0
    m = SceneF1()
    al = ActionsAligner().align(case, {})
    meas = m.measure(case, al, _ctx())
    with pytest.raises(CaseFailure, match="scene_f1: empty point cloud"):
        m.score(meas, m.thresholds)
