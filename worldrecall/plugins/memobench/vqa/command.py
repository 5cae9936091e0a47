"""``worldrecall vqa-bank``: the bank builder's command line (arguments, failure-cases lookup, judges from
the registry's factory, exit codes). The command itself is registered by :mod:`.plugin`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from worldrecall.core.judges import Judge, JudgeError
from worldrecall.plugins.memobench.vqa.bank import read_failure_cases, split_clip
from worldrecall.plugins.memobench.vqa.builder import BankBuildError, build_bank
from worldrecall.plugins.memobench.vqa.prompts import ALTERNATIVE_MODEL

__all__ = ["add_arguments", "main", "run_builder"]


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
