"""A settle computes thousands of keys, so what every case of a metric shares is encoded once
(``CasePipeline.key_parts``) and joined by ``keys.object_json``: the keys and the text ``cache explain`` shows
must be exactly those of encoding the whole structure at once."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from worldrecall.core.components import ConfigTypeError
from worldrecall.core.data import Alignment, Case, Phase
from worldrecall.core.models import BackendUnavailable
from worldrecall.core.video import VideoPool
from worldrecall.engine.cache.identity import IdentifiedJudgeHub, IdentifiedModelHub, received_identity
from worldrecall.engine.cache.keys import (
    canonical_json,
    component_identity,
    key_and_ingredients,
    named_files,
    object_json,
)
from worldrecall.engine.stages.pipeline import SCORING_METHODS, CasePipeline
from worldrecall.formats.mp4 import write_video
from worldrecall.registry.host import load_plugins


def test_object_json_is_the_canonical_json_of_the_whole_object():
    value = {"z": [1, 2.5, None], "a": {"é": "ü", 'q"uote': "\\", "n": math.nan}, "B": True, "": "", "k9": object}
    fields = {k: canonical_json(v) for k, v in value.items()}
    assert object_json(fields) == canonical_json(value)
    assert object_json({}) == canonical_json({}) == "{}"
    nested = {"outer": object_json({"b": canonical_json([1]), "a": canonical_json("x")})}
    assert object_json(nested) == canonical_json({"outer": {"a": "x", "b": [1]}})


@pytest.fixture()
def pipeline(tmp_path):
    """The hubs a default run builds (the classical backend set), as the runner builds them."""
    host = load_plugins()
    hub = IdentifiedModelHub(host.models, {}, {}, device="cpu", roles=host.roles, backend_set="classical")
    judges = IdentifiedJudgeHub(host.judges, {})
    return CasePipeline(host, hub, judges, VideoPool(), tmp_path / "cache", artifacts=True, device="cpu",
                        batch_size=4)


def _case(tmp_path) -> Case:
    path = tmp_path / "gen.mp4"
    write_video(path, np.full((12, 32, 48, 3), 90, np.uint8), fps=8)
    return Case("memobench", "clip", "m", VideoPool().get(path), prompt="a red chair",
                annotations={"h_gt": 30, "r_gt": 60, "G": 90, "G_source": "test"})


def _metrics(pipeline):
    """Every registered metric that can be built with its defaults and whose identity this hub can state."""
    out = []
    for name in sorted(pipeline.host.components["metric"]):
        try:
            metric = pipeline.host.metric(name)()
            received_identity(metric, pipeline.hub, pipeline.judges)
        except (BackendUnavailable, ConfigTypeError, KeyError, TypeError):
            continue
        out.append(metric)
    return out


def test_keys_from_shared_parts_are_those_of_the_whole_structure(tmp_path, pipeline):
    case = _case(tmp_path)
    alignment = Alignment({"V": Phase("V", 0, 3), "D": Phase("D", 4, 7), "R": Phase("R", 8, 11)}, {"h": 3})
    metrics = _metrics(pipeline)
    assert len(metrics) >= 30  # every built-in metric, not an empty loop
    fp = case.fingerprint()
    for metric in metrics:
        extra = metric.cache_params(case, alignment)
        whole_m = key_and_ingredients(
            identity=component_identity(metric, without=SCORING_METHODS),
            inputs={"case": fp, "alignment": "a" * 64, "files": named_files(metric, metric.params)},
            params={"params": metric.params, "extra": extra,
                    **received_identity(metric, pipeline.hub, pipeline.judges)})
        whole_s = key_and_ingredients(identity=component_identity(metric), inputs={"measurement": whole_m[0]},
                                      params={"thresholds": metric.thresholds, "artifacts": True})
        shared = pipeline.key_parts(metric)
        assert pipeline.keyed(metric, case, "a" * 64, alignment, fp, shared) == (whole_m, whole_s), metric.name
        assert pipeline.keyed(metric, case, "a" * 64, alignment) == (whole_m, whole_s), metric.name
        assert json.loads(whole_m[1])["params"]["extra"] == json.loads(json.dumps(extra, default=str))


def test_a_threshold_changes_the_score_key_only(tmp_path, pipeline):
    case = _case(tmp_path)
    alignment = Alignment({"V": Phase("V", 0, 3)}, {})
    metric = pipeline.host.metric("memobench.ors")()
    before = pipeline.keys(metric, case, "a" * 64, alignment, parts=pipeline.key_parts(metric))
    metric.thresholds = {**metric.thresholds, "area_min": 0.004}
    after = pipeline.keys(metric, case, "a" * 64, alignment, parts=pipeline.key_parts(metric))
    assert before[0] == after[0] and before[1] != after[1]


def test_alignment_keys_from_shared_parts_are_those_of_the_whole_structure(tmp_path, pipeline):
    """An aligner's identity, params and named files are encoded once per plan (``KeyParts``); the key and the
    text ``cache explain`` shows are those of encoding everything per case (every aligner, two cases)."""
    from worldrecall.engine.stages.pipeline import KeyParts

    first = _case(tmp_path)
    path = tmp_path / "other.mp4"
    write_video(path, np.full((12, 32, 48, 3), 30, np.uint8), fps=8)
    second = Case("memobench", "clip", "m", VideoPool().get(path), prompt="a red chair",
                  annotations={"h_gt": 30, "r_gt": 60, "G": 90, "G_source": "test"})
    names = sorted(pipeline.host.components["aligner"])
    assert names  # not an empty loop
    parts = KeyParts()
    keys = set()
    for name in names:
        for case in (first, second):
            fp = case.fingerprint()
            whole = key_and_ingredients(**pipeline.alignment_ingredients(name, case, {}, fp))
            assert pipeline.alignment_keyed(name, case, {}, fp, parts) == whole, name
            assert pipeline.alignment_keyed(name, case, {}, None, parts) == whole, name
            keys.add(whole[0])
    assert len(parts.aligners) == len(names)
    assert len(keys) == 2 * len(names)  # each case and each aligner its own key
