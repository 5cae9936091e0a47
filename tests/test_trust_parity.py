"""Issue 11, parity residue: ORS with a 0.0-score candidate, ``rounding.mix`` with a missing min, VQA
questions without a polarity field in official-parity mode. Every expected value is worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from worldrecall.core.data import CaseFailure
from worldrecall.plugins.memobench import rounding
from worldrecall.plugins.memobench.ors import ORS
from worldrecall.plugins.memobench.vqa.scoring import score_answers

IF, OB = "Instruction Following", "Object and Background"


def _ors(m, **th):
    metric = ORS(thresholds=th)
    return metric.score(m, metric.thresholds)


def test_ors_zero_score_candidate_is_detected_and_rates_match_official():
    # n_R = 4 frames. frame 0: one in-band candidate with score exactly 0.0 (official `>= 0.0`: detected,
    # confidence 0.0); frame 1: 0.8125 in band; frame 2: 0.7 in band; frame 3: nothing.
    m = {"n_r": 4, "cand_frame": np.array([0, 1, 2]), "cand_coverage": np.array([0.1, 0.2, 0.3]),
         "cand_score": np.array([0.0, 0.8125, 0.7])}
    v = _ors(m)
    # n_d = 3 -> detection rate 3/4 = 0.75
    # mean confidence (0 + 0.8125 + 0.7) / 3 = 1.5125 / 3 = 0.50416… -> 0.5042
    # ORS = Σ confidences / n_R = 1.5125 / 4 = 0.378125 -> 4 places 0.3781 (3 places would be 0.378)
    assert v["n_detected"] == 3.0 and v["detection_rate"] == 0.75
    assert v["mean_confidence"] == 0.5042
    assert v["score"] == 0.3781
    assert v["score_raw"] == pytest.approx(0.378125, abs=1e-12)
    # (the former exclusive comparison gave n_d 2, rate 0.5, mean 0.75625, ORS 0.378125: same ORS, other rates)


def test_ors_min_score_threshold_is_inclusive_at_any_value():
    m = {"n_r": 2, "cand_frame": np.array([0, 1]), "cand_coverage": np.array([0.1, 0.1]),
         "cand_score": np.array([0.5, 0.4999])}
    # min_score 0.5: frame 0 (== 0.5) detected, frame 1 not -> rate 0.5, mean 0.5, ORS 0.25
    v = _ors(m, min_score=0.5)
    assert (v["detection_rate"], v["mean_confidence"], v["score"]) == (0.5, 0.5, 0.25)


def test_ors_rounds_to_four_places():
    # one frame of n_R = 3 at 0.6667: ORS = 0.6667 / 3 = 0.222233… -> 0.2222 (3 places: 0.222)
    m = {"n_r": 3, "cand_frame": np.array([0]), "cand_coverage": np.array([0.1]), "cand_score": np.array([0.6667])}
    v = _ors(m)
    assert v["score"] == 0.2222 and v["detection_rate"] == 0.3333 and v["mean_confidence"] == 0.6667


def test_mix_with_missing_min_is_nan_like_official():
    # official: 0.7 * mean_pct + 0.3 * NaN = NaN (pandas element-wise sum); here None = NaN
    assert rounding.mix(45.3, None, 0.7) is None
    assert rounding.mix(45.3, float("nan"), 0.7) is None
    assert rounding.mix(None, 12.1, 0.7) is None
    assert rounding.mix_raw(0.453, None, 0.7) is None
    # both present: 0.7 * 45.3 + 0.3 * 12.1 = 31.71 + 3.63 = 35.34
    assert rounding.mix(45.3, 12.1, 0.7) == 35.34


def _q(i, dim, pol=None):
    d = {"ID": i, "Dimension": dim, "Question": f"q{i}"}
    if pol is not None:
        d["Dimension Polarity"] = pol
    return d


def test_vqa_missing_polarity_is_positive_in_official_parity():
    bank = [_q(1, IF), _q(2, IF, "Negative"), _q(3, OB)]
    answers = [{"ID": 1, "Answer": "Yes", "Dimension": IF}, {"ID": 2, "Answer": "No", "Dimension": IF},
               {"ID": 3, "Answer": "No", "Dimension": OB}]
    v = score_answers(bank, answers, {"official_parity": True, "dimension_from": "judge",
                                      "omitted_counts_as_fail": False})
    # ID 1 no polarity -> Positive, Yes passes; ID 2 Negative, No passes -> IF 2/2 = 1.0
    # ID 3 no polarity -> Positive, No fails -> OB 0/1 = 0.0 (before the fix: None -> Negative -> IF 0.5, OB 1.0)
    assert v["InstructionFollowing"] == 1.0 and v["ObjectBackground"] == 0.0


def test_vqa_missing_polarity_fails_the_case_by_default():
    with pytest.raises(CaseFailure, match="question ID 1 has no 'Dimension Polarity'"):
        score_answers([_q(1, IF)], [{"ID": 1, "Answer": "Yes"}], {})


def test_vqa_bank_without_polarity_fails_before_the_judge_unless_official(tmp_path):
    from worldrecall.core.components import MeasureContext
    from worldrecall.core.data import Alignment, Case
    from worldrecall.core.video import Video
    from worldrecall.formats.mp4 import write_video
    from worldrecall.plugins.memobench.vqa.bank import read_bank, write_bank_csv
    from worldrecall.plugins.memobench.vqa.metric import VQAMetric

    data = tmp_path / "data"
    final = [_q(1, IF), _q(2, OB, "Negative")]                  # ID 1 has no polarity field
    write_bank_csv(data / "vqa_questions" / "Havana-3-questions.csv", "Havana", 3, final, [], [], [], final)
    assert "Dimension Polarity" not in read_bank(data / "vqa_questions" / "Havana-3-questions.csv").questions[0]
    video = write_video(tmp_path / "Havana_003" / "video.mp4", np.zeros((4, 16, 16, 3), np.uint8), 8)
    case = Case("memobench", "Havana_003", "m", Video(video), data_root=data)
    ctx = MeasureContext(models=None, judges=None, artifacts_dir=tmp_path / "a")
    with pytest.raises(CaseFailure, match=r"Havana-3-questions.csv: question ID 1 has no 'Dimension Polarity'"):
        VQAMetric().measure(case, Alignment(phases={}), ctx)
    # parity mode goes on to the judge (here: none configured, so that is what it reports)
    with pytest.raises(CaseFailure, match="no judges configured"):
        VQAMetric(thresholds={"official_parity": True}).measure(case, Alignment(phases={}), ctx)
