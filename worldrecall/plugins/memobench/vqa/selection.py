"""Pure selection rules of the MemoBench VQA bank builder (official recipe, spec §3.10), tested against the
45 shipped banks: pass / outcome of one answer, reference passes, hint-consistent failures, short
dimensions, tidying generated questions and the official evaluation objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from worldrecall.core.judges import id_key
from worldrecall.plugins.memobench.vqa.bank import DIMENSIONS, polarity_is_positive
from worldrecall.plugins.memobench.vqa.scoring import normalise_answer

__all__ = ["QUESTION_FIELDS", "by_id", "merge_evaluation", "outcome", "passes", "select_consistent",
           "select_reference_passes", "short_dimensions", "tidy_generated"]

QUESTION_FIELDS = ("ID", "Dimension", "Dimension Polarity", "Question")


def passes(question: Mapping[str, Any], answer: Mapping[str, Any] | None, rule: str = "verdict") -> bool:
    """Did ``answer`` pass ``question``? ``verdict``: the judge's Verdict; ``answer``: answer × polarity."""
    if answer is None:
        return False
    if rule == "verdict":
        return str(answer.get("Verdict") or "").strip().lower() == "pass"
    if rule == "answer":
        ans = normalise_answer(answer.get("Answer"))
        pos = polarity_is_positive(question.get("Dimension Polarity"))
        return (pos is True and ans == "yes") or (pos is False and ans == "no")
    raise ValueError(f"pass_rule must be 'verdict' or 'answer', got {rule!r}")


def outcome(
    question: Mapping[str, Any], answer: Mapping[str, Any] | None, rule: str = "verdict"
) -> str | None:
    """The comparable outcome of one answer (Pass/Fail), or None when the question went unanswered."""
    if answer is None:
        return None
    return "Pass" if passes(question, answer, rule) else "Fail"


def by_id(answers: Sequence[Any]) -> dict[str, Mapping[str, Any]]:
    """First answer per question ID (IDs compared as text)."""
    out: dict[str, Mapping[str, Any]] = {}
    for a in answers:
        if isinstance(a, Mapping):
            out.setdefault(id_key(a.get("ID")), a)
    return out


def select_reference_passes(
    questions: Sequence[Mapping[str, Any]], answers: Sequence[Any], rule: str = "verdict"
) -> list[dict[str, Any]]:
    """Step 2: the questions that pass on the reference video, in question order."""
    got = by_id(answers)
    return [dict(q) for q in questions if passes(q, got.get(id_key(q["ID"])), rule)]


def select_consistent(
    questions: Sequence[Mapping[str, Any]], plain: Sequence[Any], hinted: Sequence[Any], rule: str = "verdict"
) -> list[dict[str, Any]]:
    """Step 3: the questions whose outcome on the failure video is the same with and without the hint."""
    a, b = by_id(plain), by_id(hinted)
    out = []
    for q in questions:
        k = id_key(q["ID"])
        oa, ob = outcome(q, a.get(k), rule), outcome(q, b.get(k), rule)
        if oa is not None and oa == ob:
            out.append(dict(q))
    return out


def short_dimensions(questions: Sequence[Mapping[str, Any]], min_per_dimension: int) -> list[str]:
    """Dimensions with fewer than ``min_per_dimension`` questions."""
    n = {d: 0 for d in DIMENSIONS}
    for q in questions:
        if q.get("Dimension") in n:
            n[q["Dimension"]] += 1
    return [d for d, c in n.items() if c < min_per_dimension]


def tidy_generated(items: Sequence[Any], per_dimension: int) -> list[dict[str, Any]]:
    """Keep well-formed generated questions (known dimension, Positive/Negative, text), at most
    ``per_dimension`` per dimension, grouped in the official dimension order and renumbered 1..n."""
    groups: dict[str, list[dict[str, Any]]] = {d: [] for d in DIMENSIONS}
    for it in items:
        if not isinstance(it, Mapping):
            continue
        dim, text = it.get("Dimension"), it.get("Question")
        pos = polarity_is_positive(it.get("Dimension Polarity"))
        if (
            dim in groups
            and pos is not None
            and isinstance(text, str)
            and text.strip()
            and len(groups[dim]) < per_dimension
        ):
            groups[dim].append(
                {
                    "Dimension": dim,
                    "Dimension Polarity": "Positive" if pos else "Negative",
                    "Question": " ".join(text.split()),
                }
            )
    out = []
    for dim in DIMENSIONS:
        for q in groups[dim]:
            out.append({"ID": len(out) + 1, **q})
    return out


def merge_evaluation(
    questions: Sequence[Mapping[str, Any]], answers: Sequence[Any], rule: str = "verdict"
) -> list[dict[str, Any]]:
    """Evaluation objects in the official bank format: question fields + Answer, Verdict, Reasoning."""
    got = by_id(answers)
    out = []
    for q in questions:
        a = got.get(id_key(q["ID"]))
        if a is None:
            continue
        verdict = a.get("Verdict") if rule == "verdict" else ("Pass" if passes(q, a, rule) else "Fail")
        out.append(
            {
                **{k: q[k] for k in QUESTION_FIELDS},
                "Answer": a.get("Answer"),
                "Verdict": verdict,
                "Reasoning": a.get("Reasoning", ""),
            }
        )
    return out
