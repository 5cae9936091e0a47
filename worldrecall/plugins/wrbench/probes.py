"""D3-D6 yes/no probes, scored from a judge's next-token log-probabilities, and the re-observation gate.

Structure as ``prompts_v2_probe.py`` (catalog ``runtime_v2_probe_catalog_v1``, prompt mode
``runtime_v2_probe_logprob_p25_d3d4_slot_parse``): sixteen probes — per dimension two positive and one
negative *score* probe, and for D5/D6 three *gate* probes each (hidden, return, unidentifiable) — plus the
two shared gate probes of the P10 mode. Question wording is ours (see docs/wrbench.md: a JSON catalog with the
release's exact texts can be given with ``prompt_catalog``).

Scoring as ``run_local_qwen35_probe_logprob_scorer.py``:

* ``p_yes = exp(lse(yes logits) - lse(lse(yes), lse(no)))`` over the single-token yes/no variants, rounded to
  6 decimals (:func:`p_yes_from_logits`);
* a dimension is the mean of ``p_yes`` (positive) and ``1 - p_yes`` (negative) over its score probes, rounded
  to 6 decimals, and None when any of its score probes is missing (:func:`dimension_scores`);
* the D5/D6 gate of the contract is the *evidence* gate of ``export_runtime_v2_evidence_first.py``
  (:func:`evidence_gate`); D5/D6 are null unless their gate is applicable (the gate-masked export), with the
  gate's reason. The probe gates of the scorer itself (:func:`dimension_gate`, :func:`shared_probe_gate`,
  threshold 0.5) are switches.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

PROMPT_MODE = "runtime_v2_probe_logprob_p25_d3d4_slot_parse"
CATALOG_VERSION = "runtime_v2_probe_catalog_v1"
GATE_THRESHOLD = 0.5
YES_VARIANTS = ("Yes", " yes", " Yes", "yes", "YES")
NO_VARIANTS = ("No", " no", " No", "no", "NO")
DIMENSIONS = {"spatial_fidelity": "d3", "state_fidelity": "d4", "spatial_reasoning": "d5", "state_reasoning": "d6"}


@dataclass(frozen=True)
class Probe:
    """One yes/no question: its dimension, role (score | gate), polarity and, for gates, what it tests."""

    probe_id: str
    dimension: str
    role: str
    polarity: str
    question: str
    gate_kind: str | None = None


CATALOG: tuple[Probe, ...] = (
    Probe("D3_POSITION_RELATION", "spatial_fidelity", "score", "positive",
          "While the prompt's main subject or target is clearly visible, are its position, contact and path "
          "plausible relative to the fixed parts of the scene and to the prompt?"),
    Probe("D3_STATIC_ANCHORS", "spatial_fidelity", "score", "positive",
          "Do the fixed parts of the scene (floor, walls, furniture, counters, doors) agree with that same "
          "reading of where the subject or target is and how it moves?"),
    Probe("D3_NEG_WRONG_SPATIAL", "spatial_fidelity", "score", "negative",
          "Does the visible video clearly contradict the prompt in space: wrong target or side, an impossible "
          "placement, sliding locked to the frame, or a path against the prompt?"),
    Probe("D4_ACTION_STATE", "state_fidelity", "score", "positive",
          "While visible, does the subject or target really carry out the action, pose, contact result or "
          "state change the prompt asks for, rather than only being named by it?"),
    Probe("D4_TEMPORAL_PROGRESS", "state_fidelity", "score", "positive",
          "Does that action or state develop over time as the prompt requires, or stay steady when the prompt "
          "asks for a lasting state?"),
    Probe("D4_NEG_ABSENT_FREEZE", "state_fidelity", "score", "negative",
          "Does the visible video clearly contradict the required state: action missing, wrong behaviour, "
          "freezing, looping, reset, regression or an impossible change?"),
    Probe("D5_GATE_HIDDEN", "spatial_reasoning", "gate", "positive",
          "Does the prompt's main subject or target leave the view, get fully covered, or become impossible to "
          "place for a meaningful stretch of the video?", "hidden"),
    Probe("D5_GATE_RETURN", "spatial_reasoning", "gate", "positive",
          "After that stretch, does a later view show the region where it should be, clearly enough to place "
          "it again?", "return"),
    Probe("D5_GATE_UNIDENTIFIABLE", "spatial_reasoning", "gate", "negative",
          "When the view comes back, is the subject or target so unrecognisable that no judgement of where it "
          "is can be made at all?", "unidentifiable"),
    Probe("D5_RETURN_POSITION", "spatial_reasoning", "score", "positive",
          "When that region is seen again, is the subject or target where it plausibly should be, given what "
          "was seen before it disappeared, the time that passed, the prompt and the fixed scene?"),
    Probe("D5_NEG_VANISH_RESET", "spatial_reasoning", "score", "negative",
          "When that region is seen again, does it clearly fail in space: the target missing, back at an "
          "earlier place, somewhere impossible, or having jumped?"),
    Probe("D6_GATE_HIDDEN", "state_reasoning", "gate", "positive",
          "Does the prompt's key action, pose, result or state go out of sight or become impossible to judge "
          "for a meaningful stretch?", "hidden"),
    Probe("D6_GATE_RETURN", "state_reasoning", "gate", "positive",
          "After that stretch, does later footage make the action, pose, result or state judgeable again?",
          "return"),
    Probe("D6_GATE_UNIDENTIFIABLE", "state_reasoning", "gate", "negative",
          "When the footage comes back, is the subject or target so broken or unclear that no judgement of its "
          "action or state can be made at all?", "unidentifiable"),
    Probe("D6_HIDDEN_PROGRESS", "state_reasoning", "score", "positive",
          "When it is judgeable again, does the action, pose, result or state look like it carried on while "
          "unseen, rather than a paused frame?"),
    Probe("D6_NEG_FREEZE_RESET", "state_reasoning", "score", "negative",
          "When it is judgeable again, does it clearly fail over the unseen time: frozen, reset, regressed, the "
          "result vanished, or a change skipped impossibly?"),
)
SHARED_GATE_PROBES: tuple[Probe, ...] = (
    Probe("OOV_EVER_UNJUDGEABLE", "shared_oov_judgeability", "gate", "positive",
          "Does the prompt's main subject, target, action, result or state ever become too unclear to identify "
          "it and judge both roughly where it is and what it is doing?", "ever_unjudgeable"),
    Probe("OOV_RETURN_JUDGEABLE", "shared_oov_judgeability", "gate", "positive",
          "After that unclear stretch, does it become clear enough again to compare both where it is and what "
          "state it is in?", "return_judgeable"),
)


def catalog(gate_source: str, questions: Mapping[str, str] | None = None) -> tuple[Probe, ...]:
    """The probes asked: the full catalog (P25), plus the shared gate probes when the gate is read from them;
    ``questions`` (probe id -> text) replaces the wording of the probes it names."""
    probes = CATALOG + (SHARED_GATE_PROBES if gate_source == "probe_shared" else ())
    if not questions:
        return probes
    unknown = sorted(set(questions) - {p.probe_id for p in CATALOG + SHARED_GATE_PROBES})
    if unknown:
        raise ValueError(f"prompt catalog names unknown probe ids: {', '.join(unknown)}")
    return tuple(Probe(p.probe_id, p.dimension, p.role, p.polarity, str(questions.get(p.probe_id, p.question)),
                       p.gate_kind) for p in probes)


def build_prompt(world_state_prompt: str, probe: Probe, fps: str) -> str:
    """The text sent with the video for one probe: one-token Yes/No answer, the sampling, the generation
    prompt (to identify what matters, never as evidence) and the question."""
    return (
        "You are answering one visual question about an AI-generated video.\n"
        "Reply with exactly one token: Yes or No. No explanation, punctuation or other words.\n\n"
        f"Watch the whole sampled video first (frames sampled at {fps} fps, not every source frame).\n"
        "Use the text prompt only to know which person, object, target, action and result matter; answer from "
        "what the video shows.\n"
        "For a question about counterevidence, answer Yes only when the video clearly shows it.\n\n"
        f"Text prompt used to generate the video:\n{world_state_prompt}\n\n"
        f"Question:\n{probe.question}\n\n"
        "Reply with exactly one token: Yes or No."
    )


def _lse(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("logsumexp of no values")
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def p_yes_from_logits(logits: Sequence[float] | Any, yes_ids: Iterable[int], no_ids: Iterable[int]) -> float:
    """P(Yes | Yes or No) from one position's logits over the yes/no token ids, rounded to 6 decimals."""
    yes, no = sorted(set(int(i) for i in yes_ids)), sorted(set(int(i) for i in no_ids))
    if not yes or not no:
        raise ValueError("yes and no token ids must both be non-empty")

    def at(i: int) -> float:
        v = logits[i]
        return float(v.item()) if hasattr(v, "item") else float(v)

    ly, ln = _lse([at(i) for i in yes]), _lse([at(i) for i in no])
    return round(math.exp(ly - _lse([ly, ln])), 6)


def single_token_ids(encode: Any, variants: Iterable[str]) -> set[int]:
    """Token ids of the variants that encode to exactly one token (``encode(text) -> list[int]``)."""
    ids = {int(t[0]) for t in (list(encode(v)) for v in variants) if len(t) == 1}
    if not ids:
        raise ValueError(f"no single-token variants among {list(variants)}")
    return ids


def dimension_scores(p_yes: Mapping[str, float | None], probes: Sequence[Probe] = CATALOG
                     ) -> tuple[dict[str, float | None], list[str]]:
    """({"d3", "d4", "d5", "d6"} -> score or None, missing probe ids): each score the mean over its score
    probes of p_yes (positive) / 1 - p_yes (negative), rounded to 6 decimals; None if one of them is missing."""
    values: dict[str, list[float]] = {d: [] for d in DIMENSIONS}
    incomplete: set[str] = set()
    missing: list[str] = []
    for pr in probes:
        v = p_yes.get(pr.probe_id)
        if v is None:
            missing.append(pr.probe_id)
            if pr.role == "score":
                incomplete.add(pr.dimension)
            continue
        if pr.role == "score":
            values[pr.dimension].append(1.0 - float(v) if pr.polarity == "negative" else float(v))
    out = {DIMENSIONS[d]: None if d in incomplete or not vs else round(sum(vs) / len(vs), 6)
           for d, vs in values.items()}
    return out, missing


def median_samples(samples: Sequence[Mapping[str, float | None]], probe_ids: Iterable[str]
                   ) -> dict[str, float | None]:
    """One answer per probe from repeated samples, as the release's ``median_sample_rows`` (``num_samples > 1``):
    the median (``statistics.median``: the mean of the middle two for an even count) of the samples that
    answered, rounded to 6 decimals; None when no sample answered."""
    out: dict[str, float | None] = {}
    for pid in probe_ids:
        got = [float(v) for s in samples if (v := s.get(pid)) is not None]
        out[pid] = round(float(median(got)), 6) if got else None
    return out


def unanswered(p_yes: Mapping[str, float | None]) -> list[str]:
    """The asked probes without an answer: any one makes the release's ``probe_status`` ``partial``."""
    return [k for k, v in p_yes.items() if v is None]


@dataclass(frozen=True)
class Gate:
    """The re-observation judgeability gate of one video: shared, D5 and D6 applicability and reasons."""

    shared: bool
    shared_reason: str | None
    d5: bool
    d5_reason: str | None
    d6: bool
    d6_reason: str | None
    source: str


def _as_bool(v: Any) -> bool:
    return bool(v) if isinstance(v, bool) else False


def evidence_gate(evidence: Mapping[str, Any] | None, manifest_reobservation_support: Any = None) -> Gate:
    """The contract's gate from a video's evidence record (``export_runtime_v2_evidence_first.attach_evidence``).

    No record: not applicable (``missing_evidence``). Shared: ``evidence_shared_oov_applicable`` (or
    ``shared_oov_applicable``) when it is a bool, else D5 and D6 both applicable; per dimension:
    ``evidence_d{5,6}_applicable`` when a bool, else the shared value. A missing reason reads ``unclear``.
    A manifest that declares ``reobservation_support: false`` makes all three ``no_oov``."""
    if manifest_reobservation_support is False:
        return Gate(False, "no_oov", False, "no_oov", False, "no_oov", "manifest")
    if evidence is None:
        return Gate(False, "missing_evidence", False, "missing_evidence", False, "missing_evidence", "evidence")
    shared_key = next((k for k in ("evidence_shared_oov_applicable", "shared_oov_applicable") if k in evidence), None)
    raw = evidence.get(shared_key) if shared_key else None
    if isinstance(raw, bool):
        shared = raw
    else:
        shared = _as_bool(evidence.get("evidence_d5_applicable")) and _as_bool(evidence.get("evidence_d6_applicable"))
    reason = evidence.get("evidence_shared_oov_na_reason", evidence.get("shared_oov_na_reason"))
    if not shared and reason in (None, ""):
        reason = evidence.get("evidence_d5_na_reason") or evidence.get("evidence_d6_na_reason") or "unclear"

    def per_dim(key: str, reason_key: str) -> tuple[bool, str | None]:
        v = evidence.get(key)
        if isinstance(v, bool):
            r = evidence.get(reason_key)
            if not v and r in (None, ""):
                r = evidence.get("evidence_shared_oov_na_reason", evidence.get("shared_oov_na_reason")) or "unclear"
            return v, None if v else str(r)
        return bool(shared), None if shared else str(reason)

    d5, r5 = per_dim("evidence_d5_applicable", "evidence_d5_na_reason")
    d6, r6 = per_dim("evidence_d6_applicable", "evidence_d6_na_reason")
    if shared_key is None:  # pre-shared evidence rows: shared = both dimensions
        shared = d5 and d6
        reason = None if shared else r5 or r6 or "unclear"
    return Gate(bool(shared), None if shared else str(reason), d5, r5, d6, r6, "evidence")


def dimension_gate(p_yes: Mapping[str, float | None], prefix: str) -> tuple[bool, str | None]:
    """The scorer's own per-dimension gate (P25): hidden >= 0.5, return >= 0.5, unidentifiable < 0.5."""
    hidden, back, unid = (p_yes.get(f"{prefix}_GATE_{k}") for k in ("HIDDEN", "RETURN", "UNIDENTIFIABLE"))
    if hidden is None or back is None or unid is None:
        return False, "other"
    if hidden < GATE_THRESHOLD:
        return False, "no_oov"
    if back < GATE_THRESHOLD:
        return False, "no_return"
    if unid >= GATE_THRESHOLD:
        return False, "unidentifiable"
    return True, None


def shared_probe_gate(p_yes: Mapping[str, float | None]) -> tuple[bool, str | None]:
    """The P10 shared gate: OOV_EVER_UNJUDGEABLE >= 0.5 and OOV_RETURN_JUDGEABLE >= 0.5."""
    ever, back = p_yes.get("OOV_EVER_UNJUDGEABLE"), p_yes.get("OOV_RETURN_JUDGEABLE")
    if ever is None or back is None:
        return False, "other"
    if ever < GATE_THRESHOLD:
        return False, "no_oov"
    if back < GATE_THRESHOLD:
        return False, "no_return"
    return True, None


def probe_gate(p_yes: Mapping[str, float | None], source: str) -> Gate:
    """The gate read from the probes themselves: ``probe_dimension`` (P25: D5 and D6 gates separately, shared =
    both) or ``probe_shared`` (P10: one gate for both)."""
    if source == "probe_shared":
        ok, why = shared_probe_gate(p_yes)
        return Gate(ok, why, ok, why, ok, why, source)
    if source != "probe_dimension":
        raise ValueError(f"probe gate source: expected 'probe_dimension' or 'probe_shared', got {source!r}")
    d5, r5 = dimension_gate(p_yes, "D5")
    d6, r6 = dimension_gate(p_yes, "D6")
    both = d5 and d6
    return Gate(both, None if both else (r5 or r6), d5, r5, d6, r6, source)


def masked_oov(scores: Mapping[str, float | None], gate: Gate) -> dict[str, Any]:
    """The gate-masked export: D5/D6 kept only where their gate is applicable, else null with the reason."""
    out: dict[str, Any] = {}
    for dim, ok, why in (("d5", gate.d5, gate.d5_reason), ("d6", gate.d6, gate.d6_reason)):
        out[dim] = scores.get(dim) if ok else None
        out[f"{dim}_null_reason"] = None if ok else f"not applicable: {why}"
    return out
