"""The OPIS plugin end to end: registration, value metadata, precomputed observations, the synthetic suite's
orderings and an ablation re-scored from the measurement cache without any model call."""

from __future__ import annotations

import csv
import json
from typing import ClassVar

import numpy as np
import pytest
from helpers.opis_fixtures import write_release

from worldrecall.engine.cli import compose
from worldrecall.engine.stages.runner import Runner
from worldrecall.registry.host import load_plugins


def test_plugin_registers_components_roles_and_backends():
    host = load_plugins(fresh=True)
    assert host.loader("opis").benchmark == "opis"
    assert host.aligner("opis.windows").min_frames == 17
    metric = host.metric("opis.opis")
    assert metric.primary == "opis" and set(metric.models) >= {"segmenter", "opis_embedder", "opis_geometry",
                                                               "opis_matcher"}
    assert metric.optional_models == ("pose_landmarks",)
    for role in ("opis_geometry", "opis_matcher", "opis_embedder", "pose_landmarks"):
        r = host.roles[role]
        assert r.defaults.get("reference"), role
        assert all(host.models[n].role == role for n in r.defaults.values())
    assert host.roles["opis_embedder"].defaults == {"classical": "opis_colorhist", "reference": "opis_dinov3_vits16"}
    assert metric.value_meta("opis").range == (0.0, 100.0) and metric.value_meta("opis").higher_is_better
    assert metric.value_meta("presence").range == (0.0, 1.0)
    assert metric.value_meta("rows_scored").higher_is_better is None  # diagnostics are never ranked
    assert {"opis", "presence", "identity", "structure"} <= set(metric.values)


def _precomputed_release(tmp_path):
    root = write_release(tmp_path, frames=40)
    (root / "generations/m1/c1.mp4").unlink()
    # one static object (embedding [1, 0, 0], colour red, compact); window 0 sees it unchanged,
    # window 1 sees a rotated embedding cos = 0.6 -> identity row max(0, 0.6) = 0.6; window 2 sees nothing
    obs = {"video_id": "c1", "windows": [
        {"window_id": "w0", "frame_index": 16, "timestamp": 1.0, "frame_size": [64, 48], "objects": [
            {"observed_id": "a", "bbox": [4, 4, 20, 20], "category": "box", "embedding": [1.0, 0.0, 0.0],
             "attributes": {"color": "red", "shape": "compact"}}]},
        {"window_id": "w1", "frame_index": 24, "timestamp": 1.5, "frame_size": [64, 48], "objects": [
            {"observed_id": "a", "bbox": [6, 4, 22, 20], "category": "box", "embedding": [0.6, 0.8, 0.0],
             "attributes": {"color": "red", "shape": "compact"}}]},
    ]}
    p = root / "generations/m1/c1/video_observation.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(obs))
    return root


def test_precomputed_video_observation_is_scored_without_models(tmp_path):
    from worldrecall.core.components import LoadRequest, MeasureContext
    from worldrecall.plugins.opis.loader import OpisLoader
    from worldrecall.plugins.opis.metric import INFO_KEY, OpisMetric
    from worldrecall.plugins.opis.windows import WindowsAligner

    root = _precomputed_release(tmp_path / "data")
    case = next(iter(OpisLoader().load(LoadRequest(root, {"m1": root / "generations/m1"}))))
    al = WindowsAligner().align(case, {})

    class NoModels:  # any model request fails the test
        selection: ClassVar[dict] = {}

        def get(self, role):
            raise AssertionError(f"model role {role} requested for precomputed observations")

    metric = OpisMetric()
    m = metric.measure(case, al, MeasureContext(models=NoModels()))
    assert m[INFO_KEY]["source"] == "video_observation.json"
    v = metric.score(m, metric.thresholds)
    # both windows: the only object is matched (direct observation) -> P = 1; I = mean(1.0, 0.6) = 0.8
    assert v["presence"] == pytest.approx(1.0) and v["identity"] == pytest.approx(0.8)
    # a static object with no geometry and no dynamic evidence: S has candidates but no valid row -> 0
    # OPIS = 100 (0.2 * 1 + 0.4 * 0.8 + 0.4 * 0) = 52
    assert v["opis"] == pytest.approx(52.0)


def test_sidecar_preflight_says_what_is_missing(tmp_path):
    from worldrecall.core.components import LoadRequest
    from worldrecall.plugins.opis.loader import OpisLoader
    from worldrecall.plugins.opis.plugin import sidecar_preflight

    root = write_release(tmp_path)
    case = next(iter(OpisLoader().load(LoadRequest(root, {"m1": root / "generations/m1"}))))
    assert sidecar_preflight(case) == "c1: no reference_geometry.npz and no annotations_vipe/<case>_vipe_ann"
    pre = _precomputed_release(tmp_path / "pre")
    case = next(iter(OpisLoader().load(LoadRequest(pre, {"m1": pre / "generations/m1"}))))
    assert sidecar_preflight(case) is None


SMALL = ["tracking=none", "progress=false", "only=[opis]", "suite.params.n_cases=3", "suite.params.width=160",
         "suite.params.height=120", "suite.params.gt_frames=60", "suite.params.gen_frames=48"]


def _by(rows, key):
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.metric == "opis.opis" and r.status == "ok":
            out.setdefault(r.model, {})[r.case_id] = r.values.get(key)
    return out


def _mean(d):
    vals = [v for v in d.values() if v is not None]
    return float(np.mean(vals)) if vals else float("nan")


@pytest.mark.slow
def test_synthetic_suite_orderings_and_cached_ablations(tmp_path):
    pytest.importorskip("open3d")
    first = Runner(compose([f"output_root={tmp_path}", *SMALL]), load_plugins(fresh=True)).run()
    assert first.n_failed_cases == 0, [r.reason for r in first.rows if r.status == "failed"][:3]
    rows = [r for r in first.rows if r.metric == "opis.opis"]
    assert len(rows) == 24 and all(r.backend["opis_embedder"] == "opis_colorhist" for r in rows)
    assert all(r.backend["opis_geometry"] == "opis_sidecar_geometry" for r in rows)
    # hallucinated background: moved + recoloured static props -> static Structure below the oracle's
    st = _by(rows, "structure_static_coverage_adjusted")
    pairs = [(st["oracle"][c], v) for c, v in st["hallucinated_background"].items()
             if v is not None and st["oracle"].get(c) is not None]
    assert pairs and all(o > h for o, h in pairs), pairs
    # appearance drift -> Identity below the oracle's (on average over the cases)
    ident = _by(rows, "identity")
    assert _mean(ident["oracle"]) > _mean(ident["appearance_drift"])
    assert _mean(_by(rows, "opis")["oracle"]) > _mean(_by(rows, "opis")["hallucinated_background"])
    # per-(window, object) row table written as an artifact
    art = next(r.info["artifacts"][0] for r in rows if r.info.get("artifacts"))
    with open(art, newline="") as f:
        table = list(csv.DictReader(f))
    assert table and {"window_id", "object_id", "state"} <= set(table[0])

    # ablations and the O-A3 variant re-score from the measurement cache: no model runs
    for override, check in (
        ("ablation_min_instead_of_mean=true", "min"),
        ("dynamic_projection_presence=true", "oa3"),
    ):
        res = Runner(compose([f"output_root={tmp_path}", *SMALL,
                              f"benchmarks.opis.metrics.opis.thresholds.{override}"]), load_plugins(fresh=True)).run()
        assert res.cache_stats["misses"] == 0 and res.cache_stats["hits"] == 24, res.cache_stats
        assert sum(res.model_seconds.values()) == 0.0, res.model_seconds
        assert res.decode_counts == {}
        new = [r for r in res.rows if r.metric == "opis.opis"]
        if check == "min":  # per-object min over windows <= mean over windows
            a, b = _by(rows, "identity"), _by(new, "identity")
            assert all(b[m][c] <= a[m][c] + 1e-12 for m in a for c in a[m] if a[m][c] is not None)
            assert any(b[m][c] < a[m][c] - 1e-6 for m in a for c in a[m] if a[m][c] is not None)
        else:  # a vanished dynamic target now counts as missing where its reference position is in view
            p = _by(new, "presence")
            assert _mean(p["forgetful"]) < _mean(p["oracle"])


def test_official_example_shape_scored_by_hand(tmp_path):
    """Flat example folder (reference_scene.json + video_observation.json, no image), scored from records."""
    from helpers.opis_fixtures import write_example_folder

    from worldrecall.core.components import LoadRequest, MeasureContext
    from worldrecall.plugins.opis.loader import OpisLoader
    from worldrecall.plugins.opis.metric import OpisMetric
    from worldrecall.plugins.opis.windows import WindowsAligner

    ex = tmp_path / "example"
    ex.mkdir()
    write_example_folder(ex)
    case = next(iter(OpisLoader().load(LoadRequest(ex, {"demo": ex}))))
    metric = OpisMetric()
    m = metric.measure(case, WindowsAligner().align(case, {}), MeasureContext(models=None))
    v = metric.score(m, metric.thresholds)
    # sim(a, x): cos = (0.9*0.88 + 0.1*0.12) / (|a| |x|) = 0.804 / (0.905539 * 0.888144) = 0.999689;
    #   (0.65 * (1 + cos) / 2 + 0.10 * 1) / 0.75 = 0.99986 (no attributes on x)
    # sim(b, x): cos = (0.1*0.88 + 0.9*0.12) / 0.804252 = 0.243705 -> (0.65 * 0.621852 + 0.1) / 0.75 = 0.67227
    # Hungarian: a-x + b-null = 0.00014 + 0.65 < b-x + a-null = 0.32773 + 0.65 -> a matched, b unmatched;
    # b is static with no projection evidence -> evaluator failure, not missing (A.14) -> frame all present: P = 1
    cos_ax = 0.804 / (np.hypot(0.9, 0.1) * np.hypot(0.88, 0.12))
    assert v["presence"] == pytest.approx(1.0)
    assert v["identity"] == pytest.approx(cos_ax, abs=1e-9)
    # a: static candidate, no geometry -> no structure value; S_cov = 0 -> OPIS = 100 (0.2 + 0.4 * 0.999689)
    assert v["opis"] == pytest.approx(100 * (0.2 + 0.4 * cos_ax), abs=1e-6)
