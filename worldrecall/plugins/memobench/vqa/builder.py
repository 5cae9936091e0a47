"""Build a MemoBench VQA question bank for a new clip, reproducibly and with a full audit trail.

The official recipe (memobench spec §3.10), step by step:

1. generate ``4 × questions_per_dimension`` yes/no questions (mixed polarity) from the clip's first frame
   and its generation prompt;
2. ask them on the reference (ground-truth) video and keep those that pass;
3. ask the survivors on a known failure video twice — without and with the failure hint — and keep those
   whose verdicts agree;
4. require ``min_per_dimension`` survivors in every dimension, else go back to 1 (bounded attempts; each
   new attempt's prompt names the dimensions that fell short, so it is a new request, not a cache hit).

"Pass" follows the official builder by default (``pass_rule="verdict"``: the judge's own Verdict; the
shipped banks satisfy Final = GT-Pass ∩ agreeing failure verdicts exactly under this rule); the
alternative ``pass_rule="answer"`` judges by answer and polarity, as the scorer does. Every judge request
and reply is saved as JSON under ``<out>/audit/<scene>-<id>/attempt-<k>/``, and the bank is written in the
official CSV format, so a bank can be audited and rebuilt (with the judge's answer cache, for free).

The pure selection rules are in :mod:`.selection`; the command line (``worldrecall vqa-bank --help``, a
plugin command) is in :mod:`.command`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall.core.judges import Judge, JudgeError, JudgeResponse, MissingAnswers, media_digest
from worldrecall.plugins.memobench.vqa.bank import DIMENSIONS, bank_filename, write_bank_csv
from worldrecall.plugins.memobench.vqa.prompts import (
    EVAL_SCHEMA,
    EVAL_SYSTEM,
    EVAL_USER,
    GEN_SCHEMA,
    GEN_SYSTEM,
    HINT_SUFFIX,
    PROMPT_VERSION,
    generation_prompt,
)
from worldrecall.plugins.memobench.vqa.selection import (
    merge_evaluation,
    select_consistent,
    select_reference_passes,
    short_dimensions,
    tidy_generated,
)

__all__ = ["BankBuildError", "BuildResult", "build_bank"]

log = logging.getLogger(__name__)


class BankBuildError(Exception):
    """No attempt produced enough questions per dimension (the audit trail is on disk)."""


@dataclass
class BuildResult:
    """Where the bank went, its final questions and how many attempts it took."""

    bank_path: Path
    audit_dir: Path
    final: list[dict[str, Any]]
    attempts: int
    counts: dict[str, int] = field(default_factory=dict)


# -- the builder -------------------------------------------------------------------------------------
def _ask(
    judge: Judge,
    media: Any,
    system: str,
    questions: Sequence[Mapping[str, Any]],
    schema: Mapping[str, Any],
    prompt: str,
    step_file: Path,
    step: str,
) -> list[Any]:
    """One judge request, with its inputs and outputs saved to ``step_file`` (partial answers kept)."""
    record: dict[str, Any] = {
        "step": step,
        "inputs": {
            "media": str(media) if isinstance(media, (str, Path)) else "<frames>",
            "media_digest": media_digest(media),
            "model_id": getattr(judge, "model_id", ""),
            "prompt_version": PROMPT_VERSION,
            "system_prompt": system,
            "prompt": prompt,
            "questions": list(questions),
            "schema": schema,
        },
    }
    resp: JudgeResponse | None = None
    try:
        resp = judge.ask(media, system, questions, schema, prompt=prompt)
    except MissingAnswers as e:  # unanswered questions simply do not survive the step
        resp = e.response
        record["missing_ids"] = e.missing
    except JudgeError as e:
        record["error"] = str(e)
        _write_json(step_file, record)
        raise
    record["outputs"] = {
        "answers": resp.answers,
        "usage": resp.usage,
        "raw": resp.raw,
        "model_id": resp.model_id,
    }
    _write_json(step_file, record)
    return list(resp.answers)


def build_bank(
    judge: Judge,
    *,
    scene: str,
    video_id: int,
    prompt: str,
    first_frame: Any,
    reference_video: Any,
    failure_video: Any,
    hint: str,
    out_dir: Path | str,
    eval_judge: Judge | None = None,
    questions_per_dimension: int = 6,
    min_per_dimension: int = 2,
    max_attempts: int = 3,
    pass_rule: str = "verdict",
) -> BuildResult:
    """Build ``{scene}-{video_id}-questions.csv`` under ``out_dir`` (see the module docstring).

    ``judge`` generates questions; ``eval_judge`` (default: the same) answers them. Raises
    :class:`BankBuildError` when ``max_attempts`` attempts all leave a dimension short.
    """
    if pass_rule not in ("verdict", "answer"):
        raise ValueError(f"pass_rule must be 'verdict' or 'answer', got {pass_rule!r}")
    eval_judge = eval_judge or judge
    out_dir = Path(out_dir)
    audit = out_dir / "audit" / f"{scene}-{int(video_id)}"
    short: list[str] = []
    history = []
    for attempt in range(1, max(1, max_attempts) + 1):
        step_dir = audit / f"attempt-{attempt}"
        gen_prompt = generation_prompt(prompt, questions_per_dimension, attempt, short, min_per_dimension)
        tried = _attempt(judge, eval_judge, step_dir, gen_prompt, first_frame, reference_video, failure_video,
                         hint, questions_per_dimension, min_per_dimension, pass_rule)
        summary = {"attempt": attempt, **tried.summary}
        short = short_dimensions(tried.final, min_per_dimension)
        summary.update({"final": len(tried.final), "short_dimensions": short})
        _write_json(
            step_dir / "05_select.json",
            {
                "step": "select",
                "pass_rule": pass_rule,
                "min_per_dimension": min_per_dimension,
                "final_questions": tried.final,
                **summary,
            },
        )
        history.append(summary)
        if not short:
            bank_path, counts = _write_bank(out_dir, scene, int(video_id), tried, pass_rule)
            _write_json(
                audit / "build.json",
                {
                    "scene": scene,
                    "video_id": int(video_id),
                    "bank": bank_path.name,
                    "attempts": history,
                    "prompt_version": PROMPT_VERSION,
                    "generator_model": getattr(judge, "model_id", ""),
                    "eval_model": getattr(eval_judge, "model_id", ""),
                    "pass_rule": pass_rule,
                    "questions_per_dimension": questions_per_dimension,
                    "min_per_dimension": min_per_dimension,
                    "counts": counts,
                    "hint": hint,
                    "prompt": prompt,
                },
            )
            return BuildResult(bank_path, audit, tried.final, attempt, counts)
        log.info(
            "%s-%s attempt %d: dimensions short of %d questions: %s",
            scene,
            video_id,
            attempt,
            min_per_dimension,
            ", ".join(short),
        )
    _write_json(
        audit / "build.json",
        {
            "scene": scene,
            "video_id": int(video_id),
            "bank": None,
            "attempts": history,
            "prompt_version": PROMPT_VERSION,
        },
    )
    raise BankBuildError(
        f"{scene}-{video_id}: after {max_attempts} attempts, dimension(s) {', '.join(short)} "
        f"kept fewer than {min_per_dimension} questions (audit: {audit})"
    )


@dataclass
class _Attempt:
    """One attempt's questions and judge answers: generated (``start``), surviving (``final``)."""

    start: list[dict[str, Any]]
    final: list[dict[str, Any]]
    gt_ans: list[Any] = field(default_factory=list)
    fail_ans: list[Any] = field(default_factory=list)
    hint_ans: list[Any] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def _attempt(judge: Judge, eval_judge: Judge, step_dir: Path, gen_prompt: str, first_frame: Any,
             reference_video: Any, failure_video: Any, hint: str, questions_per_dimension: int,
             min_per_dimension: int, pass_rule: str) -> _Attempt:
    """Steps 1-3 of one attempt; a step whose input already leaves a dimension short is not asked."""
    generated = _ask(
        judge,
        first_frame,
        GEN_SYSTEM,
        [],
        GEN_SCHEMA,
        gen_prompt,
        step_dir / "01_generate.json",
        "generate",
    )
    start = tidy_generated(generated, questions_per_dimension)
    out = _Attempt(start=start, final=start, summary={"generated": len(generated), "start": len(start)})
    if not start or short_dimensions(start, min_per_dimension):
        return out
    out.gt_ans = _ask(
        eval_judge,
        reference_video,
        EVAL_SYSTEM,
        start,
        EVAL_SCHEMA,
        EVAL_USER,
        step_dir / "02_reference.json",
        "reference",
    )
    kept = select_reference_passes(start, out.gt_ans, pass_rule)
    out.summary["reference_pass"] = len(kept)
    out.final = kept
    if not kept or short_dimensions(kept, min_per_dimension):
        return out
    out.fail_ans = _ask(
        eval_judge,
        failure_video,
        EVAL_SYSTEM,
        kept,
        EVAL_SCHEMA,
        EVAL_USER,
        step_dir / "03_failure.json",
        "failure",
    )
    out.hint_ans = _ask(
        eval_judge,
        failure_video,
        EVAL_SYSTEM,
        kept,
        EVAL_SCHEMA,
        EVAL_USER + HINT_SUFFIX.format(hint=hint.strip().strip('"')),
        step_dir / "04_failure_hinted.json",
        "failure_hinted",
    )
    out.final = select_consistent(kept, out.fail_ans, out.hint_ans, pass_rule)
    return out


def _write_bank(out_dir: Path, scene: str, video_id: int, tried: _Attempt, pass_rule: str) -> tuple[Path, dict[str, int]]:
    """The official bank CSV of a successful attempt and its per-dimension question counts."""
    start, final = tried.start, tried.final
    kept_ids = [q["ID"] for q in select_reference_passes(start, tried.gt_ans, pass_rule)]
    kept_q = [q for q in start if q["ID"] in kept_ids]
    bank_path = write_bank_csv(
        out_dir / bank_filename(scene, video_id),
        scene,
        video_id,
        start,
        merge_evaluation(start, tried.gt_ans, pass_rule),
        merge_evaluation(kept_q, tried.fail_ans, pass_rule),
        merge_evaluation(kept_q, tried.hint_ans, pass_rule),
        final,
    )
    counts = {d: sum(q["Dimension"] == d for q in final) for d in DIMENSIONS}
    return bank_path, counts


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
