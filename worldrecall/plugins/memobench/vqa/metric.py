"""``memobench.vqa``: a VLM judge answers the clip's question bank; pass rates per MemoBench dimension.

measure (expensive, cached): find the case's bank, show the judge the generated video (a frame folder is
encoded to mp4 by the judge) with the bank's final questions, keep the bank and the judge's answers.
score (pure): :func:`~worldrecall.plugins.memobench.vqa.scoring.score_answers`. Values are on 0–1; the
leaderboard multiplies by 100 as the official leaderboard does.
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from worldrecall.core.components import MeasureContext, Metric, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.core.judges import JudgeError, MissingAnswers
from worldrecall.core.models import BackendUnavailable
from worldrecall.core.paths import safe_join
from worldrecall.plugins.memobench.vqa.bank import DIMENSIONS, BankIndex, QuestionBank, read_bank, split_clip
from worldrecall.plugins.memobench.vqa.prompts import (
    EVAL_SCHEMA,
    EVAL_SYSTEM,
    EVAL_USER,
    OFFICIAL_MODEL,
    PROMPT_VERSION,
)
from worldrecall.plugins.memobench.vqa.scoring import DEFAULT_THRESHOLDS, SCORE_KEYS, score_answers

log = logging.getLogger(__name__)


class NoBank(CaseFailure):
    """The case has no question bank (MemoBench VQA covers only the clips with one)."""


class NotCovered(BackendUnavailable):
    """``missing_bank: skip``: the row is recorded as skipped (not failed) with the reason."""


# prompt version -> (system prompt, user prompt, response schema); old versions stay for reproducibility
PROMPTS = {PROMPT_VERSION: (EVAL_SYSTEM, EVAL_USER, EVAL_SCHEMA)}
QUESTION_FIELDS = ("ID", "Dimension", "Dimension Polarity", "Question")


class VQAMetric(Metric):
    """MemoBench VQA: Instruction Following, Object & Background, Continuity of Memory, Physics Adherence."""

    name = "memobench.vqa"
    benchmark = "memobench"
    version = "1"
    description = (
        "VLM-judged yes/no questions per clip (45 synthetic MemoBench clips); pass rate per "
        "dimension on 0-1, polarity from the question bank, judge verdicts ignored."
    )
    primary = "ContinuityOfMemory"
    values: ClassVar[dict[str, Value]] = {
        **{key: Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                      description=f"{dim}: pass rate of the clip's questions (4 dp)")
           for dim, key in DIMENSIONS.items()},
        **{f"{key}_{n}": Value(higher_is_better=None, range=None, unit="questions",
                               description=f"{dim}: questions {n}")
           for dim, key in DIMENSIONS.items() for n in ("count", "passed")},
        **{k: Value(higher_is_better=None, range=None, unit="questions", description=d) for k, d in (
            ("n_questions", "questions in the clip's bank"), ("n_answered", "bank questions the judge answered"),
            ("n_omitted", "bank questions the judge left out"),
            ("n_unexpected", "answers to no question of the bank"), ("n_duplicate", "repeated answers"),
            ("n_unrecognised_answers", "answers that are neither yes nor no"),
            ("n_other_dimension", "answers in a dimension the leaderboard does not read"))},
    }
    judges = ("gemini",)
    params = {
        "judge": "gemini",  # registered judge name
        "model_id": OFFICIAL_MODEL,  # documented alternative: gemini-3-flash-preview
        "prompt_version": PROMPT_VERSION,
        "bank_dir": "",  # "" = <data_root>/vqa_questions; relative = under data_root
        "require_all_answers": True,  # omitted questions after the judge's follow-up fail the case
        "missing_bank": "skip",  # skip: a skipped row (VQA covers only clips with a bank) | fail: a per-case error
    }
    thresholds = dict(DEFAULT_THRESHOLDS)

    def judge_names(self) -> tuple[str, ...]:
        """The judge is a param (``judge``), so the engine asks this, not the class default."""
        return (str(self.params["judge"]),)

    def __init__(self, params: Mapping[str, Any] | None = None, thresholds: Mapping[str, Any] | None = None):
        super().__init__(params, thresholds)
        if self.params["prompt_version"] not in PROMPTS:
            raise ValueError(
                f"{self.name}.params.prompt_version: unknown {self.params['prompt_version']!r} "
                f"(known: {', '.join(PROMPTS)})"
            )
        if self.params["missing_bank"] not in ("fail", "skip"):
            raise ValueError(
                f"{self.name}.params.missing_bank: expected 'fail' or 'skip', "
                f"got {self.params['missing_bank']!r}"
            )
        if self.thresholds["dimension_from"] not in ("bank", "judge"):
            raise ValueError(
                f"{self.name}.thresholds.dimension_from: expected 'bank' or 'judge', "
                f"got {self.thresholds['dimension_from']!r}"
            )
        self._indexes: dict[Path, BankIndex] = {}
        self._warned_model = False

    # -- bank lookup ----------------------------------------------------------------------------
    def bank_root(self, case: Case) -> Path:
        """The bank folder for a case: ``bank_dir`` absolute, or under the case's data root."""
        bank_dir = str(self.params["bank_dir"])
        if bank_dir and Path(bank_dir).is_absolute():
            return Path(bank_dir)
        if case.data_root is None:
            raise CaseFailure(
                f"{case.case_id}: the case has no data_root, so the VQA bank folder "
                f"({bank_dir or 'vqa_questions'}) cannot be located; set bank_dir to an absolute path"
            )
        return safe_join(case.data_root, bank_dir or "vqa_questions", what="VQA bank_dir")

    def clip_names(self, case: Case) -> list[str]:
        """Names the case may go by (clip folder first): ``ZenGarden_010`` style."""
        names = [case.case_id.replace("\\", "/").rsplit("/", 1)[-1]]
        for k in ("video_folder", "clip", "folder"):
            v = case.annotations.get(k) or case.strata.get(k)
            if isinstance(v, str):
                names.append(v)
        if case.video is not None and not any(split_clip(n) for n in names):
            # only when the case id says nothing: the clip folder around the video (``{clip}/video.mp4``,
            # ``{clip}/frames/``, ``{clip}.mp4``)
            p = case.video.path
            names += [p.stem, p.parent.name, p.parent.parent.name]
        return list(dict.fromkeys(n for n in names if n))

    def find_bank(self, case: Case) -> QuestionBank:
        """The case's bank, read and validated; :class:`CaseFailure` naming the expected file otherwise."""
        root = self.bank_root(case)
        idx = self._indexes.get(root)
        if idx is None:
            idx = self._indexes[root] = BankIndex(root)
        path = idx.find(self.clip_names(case))
        if path is None:
            raise NoBank(
                f"{root / idx.expected(self.clip_names(case)[0])}: no VQA question bank for case "
                f"{case.case_id} (scene names compared without underscores; MemoBench VQA covers the clips "
                f"of failure-cases.csv; {len(idx)} banks in {root})"
            )
        return read_bank(path)

    def cache_params(self, case: Case, alignment: Alignment) -> dict[str, Any]:
        """The bank's content hash (banks live outside the case fingerprint)."""
        try:
            bank = self.find_bank(case)
        except CaseFailure as e:
            return {"bank": f"unavailable: {e}"}
        return {"bank_file": bank.path.name, "bank_sha256": bank.sha256}

    # -- stages ---------------------------------------------------------------------------------
    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Ask the judge the bank's final questions about the generated video."""
        try:
            bank = self.find_bank(case)
        except NoBank as e:
            if self.params["missing_bank"] == "skip":
                # the runner records a BackendUnavailable from measure as a *skipped* row with this reason
                raise NotCovered(f"not covered by VQA: {e}") from None
            raise
        if case.video is None:
            raise CaseFailure(f"{case.case_id}: no generated video to show the judge")
        if not case.video.path.exists():
            raise CaseFailure(f"{case.video.path}: generated video does not exist")
        questions = [{k: q[k] for k in QUESTION_FIELDS if k in q} for q in bank.questions]
        if not self.thresholds["official_parity"]:
            unpolarised = [q["ID"] for q in questions if "Dimension Polarity" not in q]
            if unpolarised:  # fail before paying for a judge call the default scorer would reject
                raise CaseFailure(f"{bank.path.name}: question ID {unpolarised[0]} has no 'Dimension Polarity' "
                                  "(set thresholds.official_parity=true to score it as Positive, as the "
                                  "official code does)")
        if ctx.judges is None:
            raise CaseFailure(
                f"{self.name}: no judges configured in this run (needs {self.params['judge']!r})"
            )
        judge = ctx.judges.get(str(self.params["judge"]))  # JudgeUnavailable propagates: metric skipped
        model_id = str(self.params["model_id"])
        if getattr(judge, "model_id", model_id) != model_id:
            for_model = getattr(judge, "for_model", None)
            if for_model is None:
                raise CaseFailure(
                    f"judge {self.params['judge']!r} runs model {judge.model_id!r} but "
                    f"{self.name}.params.model_id is {model_id!r}"
                )
            if not self._warned_model:
                self._warned_model = True
                log.info(
                    "%s asks model %s (params.model_id); the %s judge's own default is %s",
                    self.name,
                    model_id,
                    self.params["judge"],
                    judge.model_id,
                )
            judge = for_model(model_id)
        system, user, schema = PROMPTS[str(self.params["prompt_version"])]
        try:
            resp = judge.ask(case.video.path, system, questions, schema, prompt=user)
        except MissingAnswers as e:
            if self.params["require_all_answers"]:
                raise CaseFailure(f"{bank.path.name}: {e}") from None
            resp = e.response
            ctx.not_kept.append(f"{bank.path.name}: {e}")  # scored as asked, never kept: asked again next run
        except JudgeError as e:
            raise CaseFailure(f"{bank.path.name}: {e}") from None
        answers = [a for a in resp.answers]
        return {
            "questions": questions,
            "answers": answers,
            "bank_file": bank.path.name,
            "bank_sha256": bank.sha256,
            "scene": bank.scene,
            "video_id": bank.video_id,
            "clip": self.clip_names(case)[0],
            "judge": str(self.params["judge"]),
            "judge_model": resp.model_id or model_id,
            "prompt_version": str(self.params["prompt_version"]),
            "usage": _jsonable(resp.usage),
            "raw": resp.raw,
        }

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Pure: pass rate per dimension (0–1, 4 places) and counts."""
        return score_answers(list(measurement["questions"]), list(measurement["answers"]), thresholds)

    def artifacts(
        self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any], out_dir: Path
    ) -> list[Path]:
        """The official per-clip result file ``{scene}-{video_id}.csv`` (scene, video_id, folder, Evaluation,
        score) so the official leaderboard script can read our runs."""
        values = self.score(measurement, thresholds)
        score = {name: values[key] for name, key in DIMENSIONS.items() if values[key] is not None}
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        p = out_dir / f"{measurement['scene']}-{measurement['video_id']}.csv"
        with open(p, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["scene", "video_id", "folder", "Evaluation", "score"])
            w.writerow(
                [
                    measurement["scene"],
                    measurement["video_id"],
                    measurement.get("clip", ""),
                    json.dumps(measurement["answers"], ensure_ascii=False),
                    json.dumps(score),
                ]
            )
        return [p]


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, default=str))


__all__ = ["SCORE_KEYS", "VQAMetric"]
