"""VQA question banks for the synthetic cases, in the official MemoBench CSV format, plus perfect answers.

Every question's true answer on a counterfactual's video is a function of that video's observed facts
(:func:`~worldrecall.plugins.synthetic.counterfactuals.observed_facts`), so the truth files say what a
perfect judge would answer. Continuity-of-Memory questions are built from what the story changes while
the target is unseen, so the oracle passes them all and forgetting / resetting models fail some.

Bank files: ``memobench/data/vqa_questions/{Scene}-{n}-questions.csv`` with columns ``scene, video_id,
Start Questions, Evaluation on ground truth, Evaluation on failure, Revised Evaluation on failure,
Final questions`` (JSON lists in the cells). Truth: ``memobench/vqa_truth/{model}/{Scene}_{NNN}.json``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from worldrecall.formats.memobench_vqa import BANK_COLUMNS as _BANK_COLUMNS
from worldrecall.formats.memobench_vqa import DIMENSIONS as _BANK_DIMENSIONS
from worldrecall.formats.memobench_vqa import FAILURE_COLUMNS as _FAILURE_COLUMNS
from worldrecall.plugins.synthetic.programs import describe
from worldrecall.plugins.synthetic.story import CaseStory

# the official bank format is defined once, in formats/ (the MemoBench VQA plugin reads the same)
DIMENSIONS = tuple(_BANK_DIMENSIONS)
IF, OB, CM, PA = DIMENSIONS
BANK_COLUMNS = tuple(_BANK_COLUMNS)
FAILURE_COLUMNS = tuple(_FAILURE_COLUMNS)
NEAR = 0.35  # metres: "at that position"


@dataclass(frozen=True)
class Question:
    """A Yes/No question whose true answer is ``answer(facts)`` for a video with those facts."""

    id: int
    dimension: str
    polarity: str  # Positive: Yes passes; Negative: No passes
    text: str
    answer: Callable[[dict], bool]

    def as_json(self) -> dict[str, Any]:
        return {
            "ID": self.id,
            "Dimension": self.dimension,
            "Dimension Polarity": self.polarity,
            "Question": self.text,
        }

    def passes(self, facts: dict) -> bool:
        yes = self.answer(facts)
        return yes if self.polarity == "Positive" else not yes


# one question before numbering: (dimension, polarity, text, true answer from the video's observed facts)
_Entry = tuple[str, str, str, Callable[[dict], bool]]


def build_questions(story: CaseStory, scene_props: list[str]) -> list[Question]:
    """The case's question list (IDs 1..k, grouped by dimension, mixed polarity in each)."""
    qs = [*_instruction_following(story), *_object_and_background(story, scene_props),
          *_continuity_of_memory(story), *_physics_adherence(story)]
    return [Question(i + 1, d, p, t, a) for i, (d, p, t, a) in enumerate(qs)]


def _instruction_following(story: CaseStory) -> list[_Entry]:
    """IF: the camera program was followed, the camera moved, the target left and came back, end heading."""
    noun = story.target.spec.noun
    qs: list[_Entry] = []
    motion = describe(story.program, noun)
    motion = motion[0].lower() + motion[1:]
    qs.append(
        (IF, "Positive", f"Does the camera follow this motion: {motion}?", lambda f: f["follows_program"])
    )
    qs.append(
        (IF, "Negative", "Does the camera stay still for the whole video?", lambda f: not f["camera_moves"])
    )
    qs.append(
        (
            IF,
            "Positive",
            f"Does the {noun} leave the view at some point and later come back into view?",
            lambda f: f["target_leaves_and_returns"],
        )
    )
    if story.program.name == "u_turn":
        qs.append(
            (
                IF,
                "Positive",
                "Does the camera end up facing roughly the opposite direction to where it started?",
                lambda f: f["end_rotation_deg"] > 150.0,
            )
        )
    else:
        qs.append(
            (
                IF,
                "Negative",
                "Does the camera end up facing a clearly different direction than at the start?",
                lambda f: f["end_rotation_deg"] > 15.0,
            )
        )
    return qs


def _object_and_background(story: CaseStory, scene_props: list[str]) -> list[_Entry]:
    """OB: the target at the start, the background props staying put and in colour, no appearance drift."""
    tl = story.target
    noun, phrase = tl.spec.noun, tl.spec.phrase
    qs: list[_Entry] = []
    qs.append(
        (
            OB,
            "Positive",
            f"At the start of the video, is there a {tl.colour0} {phrase} on the floor?",
            lambda f: True,
        )
    )
    if len(scene_props) >= 2:
        qs.append(
            (
                OB,
                "Positive",
                (
                    f"Do the {scene_props[0]} and the {scene_props[1]} stay in the same places "
                    "throughout the video?"
                ),
                lambda f: not f["props_moved"],
            )
        )
    elif scene_props:
        qs.append(
            (
                OB,
                "Positive",
                f"Does the {scene_props[0]} stay in the same place throughout the video?",
                lambda f: not f["props_moved"],
            )
        )
    qs.append(
        (
            OB,
            "Negative",
            "Does any background object change its colour during the video?",
            lambda f: f["props_moved"],
        )
    )
    qs.append(
        (
            OB,
            "Negative",
            f"Do the {noun}'s colour or surface pattern keep drifting after it comes back into view?",
            lambda f: f["appearance_drifts"],
        )
    )
    return qs


def _continuity_of_memory(story: CaseStory) -> list[_Entry]:
    """CM: built from what the story changes while the target is unseen (the oracle passes them all)."""
    tl = story.target
    noun = tl.spec.noun
    qs: list[_Entry] = []
    qs.append(
        (
            CM,
            "Positive",
            f"When the camera returns, is the {noun} still there?",
            lambda f: f["target_present_at_return"],
        )
    )
    qs.append(
        (
            CM,
            "Negative",
            f"When the camera comes back, has the {noun} vanished?",
            lambda f: not f["target_present_at_return"],
        )
    )
    if tl.recolours:
        qs += _recolour_questions(story)
    if tl.moves:
        qs += _move_questions(story)
    if tl.resizes:
        qs += _resize_questions(story)
    if not tl.moves:
        qs.append(
            (
                CM,
                "Negative",
                f"Does the {noun} reappear in a different place from where it was left?",
                lambda f: f["target_present_at_return"] and f.get("dist_to_true_position", 0) >= NEAR,
            )
        )
    else:
        qs.append(
            (
                CM,
                "Negative",
                f"Does the {noun} reappear somewhere its movement could not have taken it?",
                lambda f: f["target_present_at_return"] and f.get("dist_to_true_position", 0) >= NEAR,
            )
        )
    return qs


def _recolour_questions(story: CaseStory) -> list[_Entry]:
    """CM for a target recoloured while unseen: the new colour, not the original one."""
    tl = story.target
    noun = tl.spec.noun
    qs: list[_Entry] = []
    c0, c1 = tl.colour0, tl.colour1
    qs.append(
        (
            CM,
            "Positive",
            f"When the camera returns, is the {noun} {c1}?",
            lambda f, c1=c1: f["target_present_at_return"] and f.get("colour_at_return") == c1,
        )
    )
    qs.append(
        (
            CM,
            "Negative",
            f"Has the {noun} gone back to its original {c0} colour when the camera returns?",
            lambda f, c0=c0: f["target_present_at_return"] and f.get("colour_at_return") == c0,
        )
    )
    return qs


def _move_questions(story: CaseStory) -> list[_Entry]:
    """CM for a target moved while unseen: at its new place, not at its start."""
    noun = story.target.spec.noun
    qs: list[_Entry] = []
    d = story.move_direction()
    qs.append(
        (
            CM,
            "Positive",
            f"When the camera returns, has the {noun} moved to the {d} of where it was before?",
            lambda f: f["target_present_at_return"] and f.get("dist_to_true_position", 1e9) < NEAR,
        )
    )
    qs.append(
        (
            CM,
            "Negative",
            f"When the camera returns, is the {noun} exactly where it was before the camera turned away?",
            lambda f: f["target_present_at_return"] and f.get("dist_to_start_position", 1e9) < NEAR,
        )
    )
    return qs


def _resize_questions(story: CaseStory) -> list[_Entry]:
    """CM for a target resized while unseen: at its new size, not its original one."""
    tl = story.target
    noun = tl.spec.noun
    qs: list[_Entry] = []
    word = "larger" if tl.scale1 > tl.scale0 else "smaller"
    s0, s1 = tl.scale0, tl.scale1
    qs.append(
        (
            CM,
            "Positive",
            f"When the camera returns, is the {noun} clearly {word} than before?",
            lambda f, s1=s1: (
                f["target_present_at_return"] and abs(f.get("scale_at_return", 0) - s1) < 0.05
            ),
        )
    )
    qs.append(
        (
            CM,
            "Negative",
            f"When the camera returns, is the {noun} back to its original size?",
            lambda f, s0=s0: (
                f["target_present_at_return"] and abs(f.get("scale_at_return", 0) - s0) < 0.05
            ),
        )
    )
    return qs


def _physics_adherence(story: CaseStory) -> list[_Entry]:
    """PA: fixed facts of the renderer (floor contact, steady light, no interpenetration, smooth camera)."""
    noun = story.target.spec.noun
    qs: list[_Entry] = []
    qs.append(
        (
            PA,
            "Positive",
            f"Does the {noun} stay on the floor rather than floating in the air?",
            lambda f: True,
        )
    )
    qs.append(
        (PA, "Negative", "Does the lighting of the room change abruptly during the video?", lambda f: False)
    )
    qs.append(
        (PA, "Negative", "Do any objects pass through each other or through the walls?", lambda f: False)
    )
    qs.append((PA, "Positive", "Does the camera move smoothly without sudden jumps?", lambda f: True))
    return qs



def answers(questions: list[Question], facts: dict) -> dict[str, str]:
    """``{"<ID>": "Yes"|"No"}``: what a perfect judge answers on a video with ``facts``."""
    return {str(q.id): "Yes" if q.answer(facts) else "No" for q in questions}


def _evaluation(questions: list[Question], facts: dict, who: str) -> list[dict[str, Any]]:
    out = []
    for q in questions:
        yes = q.answer(facts)
        out.append(
            {
                **q.as_json(),
                "Answer": "Yes" if yes else "No",
                "Verdict": "Pass" if q.passes(facts) else "Fail",
                "Reasoning": f"Known from the generator for the {who} video.",
            }
        )
    return out


def bank_row(
    story: CaseStory, questions: list[Question], facts_by_model: dict[str, dict], failure_model: str
) -> dict[str, str]:
    """One CSV row of the official bank format; Final = questions that pass on the ground truth."""
    gt = facts_by_model["oracle"]
    final = [q for q in questions if q.passes(gt)]
    dump = json.dumps
    return {
        "scene": story.scene,
        "video_id": str(story.clip),
        "Start Questions": dump([q.as_json() for q in questions]),
        "Evaluation on ground truth": dump(_evaluation(questions, gt, "ground-truth")),
        "Evaluation on failure": dump(_evaluation(final, facts_by_model[failure_model], failure_model)),
        "Revised Evaluation on failure": dump(
            _evaluation(final, facts_by_model[failure_model], failure_model)
        ),
        "Final questions": dump([q.as_json() for q in final]),
    }


def csv_text(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r[k] for k in columns})
    return buf.getvalue()


def bank_path(scene: str, clip: int) -> str:
    return f"memobench/data/vqa_questions/{scene}-{clip}-questions.csv"


def truth_path(model: str, case: str) -> str:
    return f"memobench/vqa_truth/{model}/{case}.json"


FAILURES_PATH = "memobench/data/vqa_questions/failure-cases.csv"
