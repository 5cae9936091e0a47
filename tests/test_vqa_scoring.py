"""Pure VQA scoring: hand-computed pass rates for our defaults and for each official switch."""

from __future__ import annotations

import pytest

from worldrecall.plugins.memobench.vqa.metric import VQAMetric
from worldrecall.plugins.memobench.vqa.scoring import normalise_answer, score_answers

IF, OB, CM, PA = "Instruction Following", "Object and Background", "Continuity of Memory", "Physics Adherence"


def q(i, dim, pol):
    return {"ID": i, "Dimension": dim, "Dimension Polarity": pol, "Question": f"q{i}"}


def a(i, ans, dim=None, verdict=None):
    d = {"ID": i, "Answer": ans}
    if dim is not None:
        d["Dimension"] = dim
    if verdict is not None:
        d["Verdict"] = verdict
    return d


BANK = [
    q(1, IF, "Positive"),
    q(2, IF, "Negative"),
    q(3, OB, "Positive"),
    q(4, CM, "Positive"),
    q(5, CM, "Negative"),
    q(7, CM, "Positive"),
    q(6, PA, "Negative"),
]
ANSWERS = [
    a(1, "Yes."),
    a(2, " YES "),
    a(3, "no"),
    a(4, "yes"),
    a(5, "No"),
    a(7, "Maybe"),
    a(99, "Yes"),
    a(4, "no"),
]  # ID 6 omitted, ID 99 not in the bank, ID 4 answered twice


def test_normalise_answer():
    assert [
        normalise_answer(x) for x in ("Yes.", "yes", " YES ", "No!", "no", None, "Maybe", "Yes, it does")
    ] == ["yes", "yes", "yes", "no", "no", None, None, None]
    assert [normalise_answer(x, official=True) for x in ("Yes.", " YES ", "no")] == [None, "yes", "no"]


def test_default_scoring_hand_computed():
    s = score_answers(BANK, ANSWERS, {})
    # IF: ID1 Positive "Yes." -> pass; ID2 Negative "YES" -> fail           => 1/2 = 0.5
    # OB: ID3 Positive "no" -> fail                                          => 0/1 = 0.0
    # CM: ID4 Positive yes pass (first answer wins), ID5 Negative no pass, ID7 "Maybe" fail => 2/3 = 0.6667
    # PA: ID6 omitted, counted as a fail                                     => 0/1 = 0.0
    assert (
        s["InstructionFollowing"],
        s["ObjectBackground"],
        s["ContinuityOfMemory"],
        s["PhysicsAdherence"],
    ) == (0.5, 0.0, 0.6667, 0.0)
    assert (s["ContinuityOfMemory_count"], s["ContinuityOfMemory_passed"]) == (3.0, 2.0)
    assert (
        s["n_questions"],
        s["n_answered"],
        s["n_omitted"],
        s["n_unexpected"],
        s["n_duplicate"],
        s["n_unrecognised_answers"],
    ) == (7.0, 6.0, 1.0, 1.0, 1.0, 1.0)


def test_omitted_shrinks_the_denominator_when_switched():
    s = score_answers(BANK, ANSWERS, {"omitted_counts_as_fail": False})
    assert (
        s["PhysicsAdherence"] is None and s["PhysicsAdherence_count"] == 0.0
    )  # official: no items -> no key
    bank = BANK + [
        q(8, CM, "Negative")
    ]  # omitted CM question: 2/4 = 0.5 as a fail, 2/3 = 0.6667 when dropped
    assert score_answers(bank, ANSWERS, {})["ContinuityOfMemory"] == 0.5
    assert score_answers(bank, ANSWERS, {"omitted_counts_as_fail": False})["ContinuityOfMemory"] == 0.6667


def test_official_answer_match():
    s = score_answers(BANK, ANSWERS, {"official_answer_match": True})
    # "Yes." is neither yes nor no officially -> ID1 fails too: IF 0/2
    assert s["InstructionFollowing"] == 0.0 and s["n_unrecognised_answers"] == 2.0


OFFICIAL = {
    "official_parity": True,
    "dimension_from": "judge",
    "omitted_counts_as_fail": False,
    "official_answer_match": True,
}
PARITY_BANK = [q(1, IF, "Positive"), q(2, IF, "Negative"), q(3, CM, "positive"), q(4, CM, "Negative")]
PARITY_ANSWERS = [
    a(1, "Yes", IF),  # Positive, yes -> pass
    a("2", "Yes", IF),  # official: "2" misses the int-keyed lookup -> Positive -> pass (ours: fail)
    a(3, "yes", CM),  # official: "positive" is not exactly "Positive" -> Negative -> fail (ours: pass)
    a(4, "No", PA),  # judge labels it PA; Negative, no -> pass (counted under PA officially)
    a(4, "No", CM),  # duplicate: official counts it again (pass, CM)
    a(9, "No", OB),  # not in the bank: official defaults to Positive -> fail (OB)
    a(1, "Yes", "Memory"),  # unknown dimension name: official makes a key nobody reads
]


def test_official_parity_hand_computed():
    s = score_answers(PARITY_BANK, PARITY_ANSWERS, OFFICIAL)
    # IF 2/2 = 1.0; CM (ID3 fail, ID4 dup pass) 1/2 = 0.5; PA 1/1 = 1.0; OB 0/1 = 0.0
    assert (
        s["InstructionFollowing"],
        s["ObjectBackground"],
        s["ContinuityOfMemory"],
        s["PhysicsAdherence"],
    ) == (1.0, 0.0, 0.5, 1.0)
    assert s["n_other_dimension"] == 1.0


def test_ours_on_the_same_answers():
    s = score_answers(PARITY_BANK, PARITY_ANSWERS, {})
    # per bank question, first answer, bank dimension: IF (ID1 pass, ID2 Negative+Yes fail) = 0.5;
    # CM (ID3 positive+yes pass, ID4 Negative+No pass) = 1.0; OB/PA have no questions -> None
    assert (
        s["InstructionFollowing"],
        s["ObjectBackground"],
        s["ContinuityOfMemory"],
        s["PhysicsAdherence"],
    ) == (0.5, None, 1.0, None)
    assert (s["n_duplicate"], s["n_unexpected"]) == (2.0, 1.0)


def test_official_empty_bank_uses_the_verdict():
    answers = [a(1, "Yes", IF, "Fail"), a(2, "No", IF, "Pass"), a(3, None, PA, "Pass")]
    s = score_answers([], answers, OFFICIAL)
    # errata 2: no polarity map -> Verdict decides: IF 1/2 = 0.5, PA 1/1 = 1.0
    assert (s["InstructionFollowing"], s["PhysicsAdherence"], s["ObjectBackground"]) == (0.5, 1.0, None)


def test_dimension_from_judge_alone():
    # judge relabels ID3 (bank CM) as PA: CM loses it, PA gains it. ID3 Positive "yes" -> pass.
    s = score_answers(PARITY_BANK, [a(3, "yes", PA), a(4, "no", CM)], {"dimension_from": "judge"})
    assert (s["PhysicsAdherence"], s["ContinuityOfMemory"]) == (1.0, 1.0)
    assert s["ContinuityOfMemory_count"] == 1.0 and s["PhysicsAdherence_count"] == 1.0
    with pytest.raises(ValueError, match="dimension_from"):
        score_answers(PARITY_BANK, [], {"dimension_from": "question"})


def test_rounding_to_four_places():
    bank = [q(i, CM, "Positive") for i in range(1, 4)] + [q(i, PA, "Negative") for i in range(4, 10)]
    ans = [a(1, "Yes"), a(2, "No"), a(3, "No")] + [a(i, "No") for i in range(4, 9)] + [a(9, "Yes")]
    s = score_answers(bank, ans, {})
    assert s["ContinuityOfMemory"] == 0.3333  # 1/3
    assert s["PhysicsAdherence"] == 0.8333  # 5/6


def test_metric_score_is_the_pure_function():
    m = VQAMetric()
    meas = {"questions": BANK, "answers": ANSWERS}
    assert m.score(meas, m.thresholds) == score_answers(BANK, ANSWERS, {})
    assert m.primary in m.score(meas, m.thresholds)
