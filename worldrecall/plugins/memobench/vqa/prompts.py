"""Prompts and response schemas of MemoBench VQA (evaluation and question-bank generation).

Written in our own words after the structure the official step uses: a judge role, the test video and
the question list (ID / Dimension / Dimension Polarity / Question), Yes/No answers, a polarity reminder
and a JSON-only reply with ID, Dimension, Dimension Polarity, Question, Answer, Verdict, Reasoning.
Changing any text here must bump :data:`PROMPT_VERSION`: it is a metric parameter, so it keys the
measurement cache, and the text itself keys the judge's answer cache.
"""

from __future__ import annotations

from worldrecall.core.judges import QUESTIONS_TOKEN
from worldrecall.plugins.memobench.vqa.bank import DIMENSIONS

PROMPT_VERSION = "memobench-vqa-1"
OFFICIAL_MODEL = "gemini-3.1-pro-preview"  # the judge model of MemoBench's VQA code (all commits)
ALTERNATIVE_MODEL = "gemini-3-flash-preview"  # MemoBench's docs default and its question generator

EVAL_SYSTEM = (
    "You are an expert judge of world-model outputs. You audit AI-generated videos against the text "
    "instructions they were generated from, and you answer strictly from what the video shows."
)

EVAL_USER = (
    "You are given a generated video and a list of yes/no questions about it. Every question has the "
    "fields ID, Dimension, Dimension Polarity and Question; use all of them.\n\n"
    "Task: watch the whole video, then answer each question with exactly Yes or No.\n\n"
    "How answers are judged: for a Positive question, Yes is a Pass and No is a Fail; for a Negative "
    "question, Yes is a Fail and No is a Pass.\n\n"
    f"Questions:\n{QUESTIONS_TOKEN}\n\n"
    "Reply with JSON only: a list with one object per question, each holding ID, Dimension, Dimension "
    "Polarity, Question (copied from the input), Answer (Yes or No), Verdict (Pass or Fail) and Reasoning "
    "(one or two sentences)."
)

HINT_SUFFIX = "\n\nA note from a human reviewer about this video: {hint}"

ANSWER_ITEM = {
    "type": "OBJECT",
    "properties": {
        "ID": {"type": "INTEGER"},
        "Dimension": {"type": "STRING"},
        "Dimension Polarity": {"type": "STRING"},
        "Question": {"type": "STRING"},
        "Answer": {"type": "STRING", "enum": ["Yes", "No"]},
        "Verdict": {"type": "STRING", "enum": ["Pass", "Fail"]},
        "Reasoning": {"type": "STRING"},
    },
    "required": ["ID", "Answer"],
}
EVAL_SCHEMA = {"type": "ARRAY", "items": ANSWER_ITEM}

# -- question generation (bank builder) ----------------------------------------------------------
GEN_SYSTEM = (
    "You design evaluation questions for AI-generated videos. Each question must be answerable with Yes or "
    "No by watching a video generated from the given first frame and text prompt."
)

DIMENSION_GUIDANCE = {
    "Instruction Following": "did the video carry out the camera movements and events the prompt asks for",
    "Object and Background": "do the subject and the background keep their identity and appearance",
    "Continuity of Memory": "object permanence: while the subject is out of view and when it comes back, is "
    "its position, trajectory and state consistent with what it was doing",
    "Physics Adherence": "lighting, shadows, plausible speeds, gravity and contact",
}

GEN_USER = (
    "The image is the first frame of a video; the video was generated from it with this prompt:\n"
    '"{prompt}"\n\n'
    "Write {n} yes/no questions for each of these four dimensions ({total} in all):\n{guidance}\n\n"
    "Mix the polarity within every dimension: about half Positive questions (Yes means the video did well) "
    "and half Negative questions (Yes means the video failed). Ask about things a viewer can check in the "
    "video, and make each question self-contained.\n\n"
    "Reply with JSON only: a list of objects with ID (1..{total}), Dimension (exactly one of: {names}), "
    "Dimension Polarity (Positive or Negative) and Question."
)

REGENERATE_SUFFIX = (
    "\n\nThis is attempt {attempt}. An earlier set left fewer than {min_per_dim} usable questions in: "
    "{short}. Write a fresh set with sharper, more checkable questions there."
)

GEN_ITEM = {
    "type": "OBJECT",
    "properties": {
        "ID": {"type": "INTEGER"},
        "Dimension": {"type": "STRING", "enum": list(DIMENSIONS)},
        "Dimension Polarity": {"type": "STRING", "enum": ["Positive", "Negative"]},
        "Question": {"type": "STRING"},
    },
    "required": ["ID", "Dimension", "Dimension Polarity", "Question"],
}
GEN_SCHEMA = {"type": "ARRAY", "items": GEN_ITEM}


def generation_prompt(
    prompt: str,
    per_dimension: int,
    attempt: int = 1,
    short: list[str] | None = None,
    min_per_dimension: int = 2,
) -> str:
    """The question-generation request for one clip (attempt > 1 names the dimensions that fell short)."""
    guidance = "\n".join(f"- {d}: {g}" for d, g in DIMENSION_GUIDANCE.items())
    text = GEN_USER.format(
        prompt=prompt,
        n=per_dimension,
        total=4 * per_dimension,
        guidance=guidance,
        names=", ".join(DIMENSIONS),
    )
    if attempt > 1:
        text += REGENERATE_SUFFIX.format(
            attempt=attempt, min_per_dim=min_per_dimension, short=", ".join(short or []) or "some dimensions"
        )
    return text
