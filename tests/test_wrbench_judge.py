"""The local log-probability Qwen-VL judge through its real loading code: a tiny random-weight Qwen2-VL saved
with ``save_pretrained`` and loaded offline, fp32 without flash-attention on CPU; and the WRBench probes metric
asking it through the judge hub (the row's verdict names the precision)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.wrbench_fixtures import write_clip
from helpers.wrbench_qwen import save_tiny_qwen2_vl

from worldrecall.core.components import MeasureContext
from worldrecall.core.data import Alignment, Case
from worldrecall.core.judges import JudgeHub
from worldrecall.core.models import ModelHub
from worldrecall.core.video import Video
from worldrecall.plugins.judges import qwen_vl_logprob as q
from worldrecall.plugins.judges.plugin import register_judges
from worldrecall.plugins.wrbench.probe_metric import ProbeScores

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_qwen2_vl(tmp_path_factory.mktemp("qwen") / "tiny-qwen2-vl")


def test_yes_probability_by_hand():
    # yes logits ln 2 and 0 (lse = ln 3), no logit ln 3 -> 3 / 6 = 0.5; yes 2 vs no 0 -> sigmoid(2) -> 0.880797
    assert q.yes_probability([math.log(2), 0.0, math.log(3)], [0, 1], [2]) == 0.5
    assert q.yes_probability(np.array([2.0, 0.0]), [0], [1]) == 0.880797


def test_judge_loads_offline_in_fp32_and_matches_a_manual_forward(tiny, tmp_path):
    judge = q.make_qwen_vl_logprob_judge({"model_path": str(tiny), "device": "cpu"})
    assert (judge.dtype, judge.attn, judge.usage["dtype"]) == ("float32", "sdpa", "float32")
    assert judge.model_id == "tiny-qwen2-vl@float32/sdpa"
    video = write_clip(tmp_path / "v.mp4", n=16)
    resp = judge.ask(video, "", [{"id": "A", "prompt": "Is the cat on the bed?"}, {"id": "B", "prompt": "Is it red?"}],
                     {"yes": ["Yes", " yes"], "no": ["No", " no"]})
    got = {a["id"]: a["p_yes"] for a in resp.answers}
    assert set(got) == {"A", "B"} and all(0.0 < v < 1.0 for v in got.values())
    assert resp.usage["dtype"] == "float32" and resp.usage["attn_implementation"] == "sdpa"
    # the same forward by hand: softmax over the one-token "Yes" / "No" at the last position
    import torch

    inputs = judge._inputs(Video(video).frames(), 16.0, "Is the cat on the bed?")
    with torch.inference_mode():
        logits = judge.model(**inputs).logits[0, -1].double()
    yes, no = judge.processor.tokenizer.encode("Yes"), judge.processor.tokenizer.encode("No")
    assert len(yes) == len(no) == 1
    manual = round(float(torch.sigmoid(logits[yes[0]] - logits[no[0]])), 6)
    assert got["A"] == pytest.approx(manual, abs=2e-6)


def test_missing_model_folder_is_backend_unavailable(tmp_path):
    from worldrecall.core.models import BackendUnavailable

    with pytest.raises(BackendUnavailable, match="model_path"):
        q.make_qwen_vl_logprob_judge({"model_path": str(tmp_path / "nope")})


def test_probe_metric_through_the_registered_judge(tiny, tmp_path):
    specs = {}
    register_judges(lambda spec: specs.__setitem__(spec.name, spec))
    hub = JudgeHub(specs, {"qwen_vl_logprob": {"model_path": str(tiny), "device": "cpu"}})
    video = Video(write_clip(tmp_path / "w.mp4", n=16))
    case = Case("wrbench", "w", "m", video, prompt="A cat jumps onto the bed.",
                annotations={"evidence": {"evidence_shared_oov_applicable": True}})
    metric = ProbeScores({"judge": "qwen_vl_logprob"})
    m = metric.measure(case, Alignment(), MeasureContext(models=ModelHub({}, {}), judges=hub))
    assert len(m["p_yes"]) == 16 and all(v is not None for v in m["p_yes"].values())
    s = metric.score(m, {})
    assert all(0.0 <= s[k] <= 1.0 for k in ("d3", "d4", "d5", "d6")) and s["reobservation_support"] == 1.0
    assert "probes by tiny-qwen2-vl@float32/sdpa (dtype=float32, attn_implementation=sdpa, device=cpu)" in \
        metric.verdict(m, {})
