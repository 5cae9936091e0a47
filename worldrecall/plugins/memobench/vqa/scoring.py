"""Pure scoring of one clip's VQA answers: per-dimension pass rates on 0–1 (rounded to 4 places).

A question passes when the bank's polarity and the judge's Yes/No agree (Positive: Yes passes; Negative:
No passes); the judge's own Verdict is ignored. Switches (metric thresholds) select official behaviour:

* ``official_parity`` — the official scorer's item rules (errata 2): only the exact string ``Positive`` is
  positive; polarity is looked up by the raw ``ID`` (a string ``"3"`` misses an integer key) and a missed
  lookup, or a bank question without a ``Dimension Polarity`` field, means Positive; every returned item
  is counted (duplicates twice, IDs not in the bank too); an empty bank means the judge's Verdict decides.
  Off (default): polarity is read case-insensitively, IDs are compared as text, each bank question is
  counted once (its first answer) and foreign IDs are ignored; a bank question without a polarity fails
  the case (:class:`CaseFailure`) instead of being guessed.
* ``dimension_from`` — ``bank`` (default: the dimension of the bank question with that ID) or ``judge``
  (official: the returned item's own ``Dimension`` string; names other than the four are ignored).
* ``omitted_counts_as_fail`` — bank questions the judge did not answer count as fails (default) or are
  left out of the denominator (official).
* ``official_answer_match`` — only ``answer.strip().lower()`` equal to ``yes``/``no`` counts (official);
  default also accepts trailing punctuation (``"Yes."``). Anything else is a fail either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from worldrecall.core.data import CaseFailure
from worldrecall.core.judges import id_key
from worldrecall.plugins.memobench.vqa.bank import DIMENSIONS, polarity_is_positive

SCORE_KEYS = tuple(DIMENSIONS.values())
DEFAULT_THRESHOLDS: dict[str, Any] = {
    "omitted_counts_as_fail": True,
    "official_parity": False,
    "dimension_from": "bank",
    "official_answer_match": False,
}


def normalise_answer(answer: Any, official: bool = False) -> str | None:
    """``"yes"`` / ``"no"`` or None (not an answer): ``"Yes."``, ``" YES "`` -> yes unless ``official``."""
    if not isinstance(answer, str):
        return None
    a = answer.strip().lower()
    if not official:
        a = a.rstrip(".!").strip()
    return a if a in ("yes", "no") else None


def score_answers(
    questions: list[Mapping[str, Any]], answers: list[Any], thresholds: Mapping[str, Any]
) -> dict[str, float | None]:
    """Per-dimension pass rates plus counts for one clip (see the module docstring for the switches)."""
    th = {**DEFAULT_THRESHOLDS, **dict(thresholds)}
    dim_from = str(th["dimension_from"])
    if dim_from not in ("bank", "judge"):
        raise ValueError(f"dimension_from must be 'bank' or 'judge', got {dim_from!r}")
    official = bool(th["official_parity"])
    strict_answers = bool(th["official_answer_match"])

    bank_dim = {id_key(q["ID"]): q["Dimension"] for q in questions}
    # official: raw-keyed lookup, and a question without the field defaults to Positive (dict.get default)
    raw_polarity = {q["ID"]: q.get("Dimension Polarity", "Positive") for q in questions}
    if not official:
        for q in questions:
            if "Dimension Polarity" not in q:
                raise CaseFailure(f"question ID {q['ID']} has no 'Dimension Polarity' (only official_parity "
                                  "scores it, as Positive)")
    text_polarity = {id_key(q["ID"]): q.get("Dimension Polarity") for q in questions}

    count = {d: 0 for d in DIMENSIONS}
    passed = {d: 0 for d in DIMENSIONS}
    seen: set[str] = set()
    n_unexpected = n_duplicate = n_unrecognised = n_other_dim = 0

    for item in answers:
        if not isinstance(item, Mapping):
            n_unexpected += 1
            continue
        k = id_key(item.get("ID"))
        in_bank = k in bank_dim
        if not official:
            if not in_bank:
                n_unexpected += 1
                continue
            if k in seen:
                n_duplicate += 1
                continue
        elif not in_bank:
            n_unexpected += 1
        seen.add(k)
        dim = bank_dim.get(k) if dim_from == "bank" else item.get("Dimension")
        if dim not in DIMENSIONS:
            n_other_dim += 1  # official: a new key the leaderboard never reads
            continue
        ans = normalise_answer(item.get("Answer"), official=strict_answers)
        if ans is None:
            n_unrecognised += 1
        if official:
            ok = _passes_official(item, ans, raw_polarity)
        else:
            positive = polarity_is_positive(text_polarity[k])
            ok = (positive is True and ans == "yes") or (positive is False and ans == "no")
        count[dim] += 1
        passed[dim] += int(ok)

    omitted = [k for k in bank_dim if k not in seen]
    if th["omitted_counts_as_fail"]:
        for k in omitted:
            count[bank_dim[k]] += 1

    out = _pass_rates(count, passed)
    out.update(
        {
            "n_questions": float(len(bank_dim)),
            "n_answered": float(len(bank_dim) - len(omitted)),
            "n_omitted": float(len(omitted)),
            "n_unexpected": float(n_unexpected),
            "n_duplicate": float(n_duplicate),
            "n_unrecognised_answers": float(n_unrecognised),
            "n_other_dimension": float(n_other_dim),
        }
    )
    return out


def _passes_official(item: Mapping[str, Any], ans: str | None, raw_polarity: Mapping[Any, Any]) -> bool:
    """The released rule: polarity looked up by the raw ID (unknown IDs Positive); errata 2: with an empty
    bank the judge's Verdict decides."""
    if not raw_polarity:
        return str(item.get("Verdict") or "").strip().lower() == "pass"
    rid = item.get("ID")
    pol = raw_polarity.get(rid, "Positive") if _hashable(rid) else "Positive"
    positive = pol == "Positive"
    return (positive and ans == "yes") or (not positive and ans == "no")


def _pass_rates(count: Mapping[str, int], passed: Mapping[str, int]) -> dict[str, float | None]:
    """Per dimension: the pass rate (4 decimals; None without questions), then its counts."""
    out: dict[str, float | None] = {}
    for name, key in DIMENSIONS.items():
        out[key] = round(passed[name] / count[name], 4) if count[name] else None
    for name, key in DIMENSIONS.items():
        out[f"{key}_count"] = float(count[name])
        out[f"{key}_passed"] = float(passed[name])
    return out


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True
