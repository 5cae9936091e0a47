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

CLI: ``worldrecall vqa-bank --help`` (a plugin command).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall.core.judges import Judge, JudgeError, JudgeResponse, MissingAnswers, id_key, media_digest
from worldrecall.plugins.memobench.vqa.bank import (
    DIMENSIONS,
    bank_filename,
    polarity_is_positive,
    read_failure_cases,
    split_clip,
    write_bank_csv,
)
from worldrecall.plugins.memobench.vqa.prompts import (
    ALTERNATIVE_MODEL,
    EVAL_SCHEMA,
    EVAL_SYSTEM,
    EVAL_USER,
    GEN_SCHEMA,
    GEN_SYSTEM,
    HINT_SUFFIX,
    PROMPT_VERSION,
    generation_prompt,
)
from worldrecall.plugins.memobench.vqa.scoring import normalise_answer

log = logging.getLogger(__name__)
QUESTION_FIELDS = ("ID", "Dimension", "Dimension Polarity", "Question")


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


# -- pure selection rules (tested against the 45 shipped banks) -------------------------------------
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
        summary: dict[str, Any] = {"attempt": attempt, "generated": len(generated), "start": len(start)}
        final: list[dict[str, Any]] = []
        gt_ans: list[Any] = []
        fail_ans: list[Any] = []
        hint_ans: list[Any] = []
        if start and not short_dimensions(start, min_per_dimension):
            gt_ans = _ask(
                eval_judge,
                reference_video,
                EVAL_SYSTEM,
                start,
                EVAL_SCHEMA,
                EVAL_USER,
                step_dir / "02_reference.json",
                "reference",
            )
            kept = select_reference_passes(start, gt_ans, pass_rule)
            summary["reference_pass"] = len(kept)
            if kept and not short_dimensions(kept, min_per_dimension):
                fail_ans = _ask(
                    eval_judge,
                    failure_video,
                    EVAL_SYSTEM,
                    kept,
                    EVAL_SCHEMA,
                    EVAL_USER,
                    step_dir / "03_failure.json",
                    "failure",
                )
                hint_ans = _ask(
                    eval_judge,
                    failure_video,
                    EVAL_SYSTEM,
                    kept,
                    EVAL_SCHEMA,
                    EVAL_USER + HINT_SUFFIX.format(hint=hint.strip().strip('"')),
                    step_dir / "04_failure_hinted.json",
                    "failure_hinted",
                )
                final = select_consistent(kept, fail_ans, hint_ans, pass_rule)
            else:
                final = kept
        else:
            final = start
        short = short_dimensions(final, min_per_dimension)
        summary.update({"final": len(final), "short_dimensions": short})
        _write_json(
            step_dir / "05_select.json",
            {
                "step": "select",
                "pass_rule": pass_rule,
                "min_per_dimension": min_per_dimension,
                "final_questions": final,
                **summary,
            },
        )
        history.append(summary)
        if not short:
            kept_ids = [q["ID"] for q in select_reference_passes(start, gt_ans, pass_rule)]
            kept_q = [q for q in start if q["ID"] in kept_ids]
            bank_path = write_bank_csv(
                out_dir / bank_filename(scene, video_id),
                scene,
                int(video_id),
                start,
                merge_evaluation(start, gt_ans, pass_rule),
                merge_evaluation(kept_q, fail_ans, pass_rule),
                merge_evaluation(kept_q, hint_ans, pass_rule),
                final,
            )
            counts = {d: sum(q["Dimension"] == d for q in final) for d in DIMENSIONS}
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
            return BuildResult(bank_path, audit, final, attempt, counts)
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


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1, default=str), encoding="utf-8")


# -- CLI ---------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The bank builder's arguments (``worldrecall vqa-bank --help``)."""
    p.add_argument("--out", required=True, type=Path, help="folder for the bank CSV and the audit trail")
    p.add_argument("--first-frame", required=True, type=Path, help="the clip's first frame (jpg/png)")
    p.add_argument("--reference", required=True, type=Path, help="ground-truth video (file or frame folder)")
    p.add_argument("--failure", required=True, type=Path, help="known failure video (file or frame folder)")
    p.add_argument("--failure-cases", type=Path, help="failure-cases.csv to read scene/id/hint/prompt from")
    p.add_argument("--folder", help="clip folder (e.g. ZenGarden_010): the failure-cases.csv row to use")
    p.add_argument("--scene", help="bank scene name (e.g. Zen_Garden)")
    p.add_argument("--video-id", type=int)
    p.add_argument("--prompt", help="generation prompt of the clip")
    p.add_argument("--hint", help="failure hint (what goes wrong in the failure video)")
    p.add_argument(
        "--model-id", default=ALTERNATIVE_MODEL, help="question generator model (official: %(default)s)"
    )
    p.add_argument("--eval-model-id", help="model answering the questions (default: --model-id)")
    p.add_argument("--cache-dir", type=Path, help="judge answer cache (default: <out>/judge_cache)")
    p.add_argument("--per-dimension", type=int, default=6)
    p.add_argument("--min-per-dimension", type=int, default=2)
    p.add_argument("--max-attempts", type=int, default=3)
    p.add_argument("--pass-rule", choices=("verdict", "answer"), default="verdict")
    p.add_argument("--base-url", default="", help="API endpoint override (proxies, tests)")
    p.add_argument("--api-version", default="")


def main(argv: Sequence[str] | None, *, make_judge: Callable[[Mapping[str, Any]], Judge]) -> int:
    """Parse ``argv`` and build the bank with judges from ``make_judge`` (what ``worldrecall vqa-bank`` runs)."""
    p = argparse.ArgumentParser(prog="worldrecall vqa-bank",
                                description="Build a MemoBench VQA question bank (asks a VLM judge).")
    add_arguments(p)
    return run_builder(p.parse_args(argv), make_judge)


def run_builder(args: argparse.Namespace, make_judge: Callable[[Mapping[str, Any]], Judge]) -> int:
    """Build the bank for parsed arguments; returns the exit code (0 built, 1 build failed, 2 bad arguments /
    no judge). Judges come from ``make_judge`` (the registry's judge factory), never from an import."""
    scene, video_id, prompt, hint = args.scene, args.video_id, args.prompt, args.hint
    if args.failure_cases:
        sc = split_clip(args.folder or "")
        rows = read_failure_cases(args.failure_cases)
        row = next((r for r in rows if r.get("folder") == args.folder), None)
        if row is None and sc is not None:
            row = next(
                (
                    r
                    for r in rows
                    if r.get("scene", "").replace("_", "").lower() == sc[0].replace("_", "").lower()
                    and int(r.get("video_id") or -1) == sc[1]
                ),
                None,
            )
        if row is None:
            print(f"error: {args.failure_cases}: no row for folder {args.folder!r}", file=sys.stderr)
            return 2
        scene = scene or row["scene"]
        video_id = video_id if video_id is not None else int(row["video_id"])
        prompt = prompt or row["prompt"]
        hint = hint or row["hint"]
    missing = [
        n
        for n, v in (("--scene", scene), ("--video-id", video_id), ("--prompt", prompt), ("--hint", hint))
        if v in (None, "")
    ]
    if missing:
        print(f"error: missing {', '.join(missing)} (or give --failure-cases and --folder)", file=sys.stderr)
        return 2
    opts = {
        "cache_dir": str(args.cache_dir or args.out / "judge_cache"),
        "base_url": args.base_url,
        "api_version": args.api_version,
    }
    try:
        judge = make_judge({**opts, "model_id": args.model_id})
        eval_judge = judge if not args.eval_model_id else make_judge({**opts, "model_id": args.eval_model_id})
    except JudgeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        res = build_bank(
            judge,
            scene=scene,
            video_id=int(video_id),
            prompt=prompt,
            first_frame=args.first_frame,
            reference_video=args.reference,
            failure_video=args.failure,
            hint=hint,
            out_dir=args.out,
            eval_judge=eval_judge,
            questions_per_dimension=args.per_dimension,
            min_per_dimension=args.min_per_dimension,
            max_attempts=args.max_attempts,
            pass_rule=args.pass_rule,
        )
    except (BankBuildError, JudgeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{res.bank_path} ({len(res.final)} questions, {res.attempts} attempt(s); audit {res.audit_dir})")
    return 0

