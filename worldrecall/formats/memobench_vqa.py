"""The MemoBench VQA question-bank file format: written by the synthetic suite, read by the MemoBench VQA
plugin (one definition, two plugins).

A bank is ``<scene>-<video_id>-questions.csv`` with :data:`BANK_COLUMNS`; ``Final questions`` holds the JSON
list of questions, each with ID, Dimension (one of :data:`DIMENSIONS`), Dimension Polarity and Question.
``failure-cases.csv`` (:data:`FAILURE_COLUMNS`) lists the clips and their failure hints.
"""

from __future__ import annotations

# official dimension names -> leaderboard column / score key
DIMENSIONS: dict[str, str] = {
    "Instruction Following": "InstructionFollowing",
    "Object and Background": "ObjectBackground",
    "Continuity of Memory": "ContinuityOfMemory",
    "Physics Adherence": "PhysicsAdherence",
}
POLARITIES = ("Positive", "Negative")
BANK_COLUMNS = [
    "scene",
    "video_id",
    "Start Questions",
    "Evaluation on ground truth",
    "Evaluation on failure",
    "Revised Evaluation on failure",
    "Final questions",
]
FAILURE_COLUMNS = ["scene", "video_id", "hint", "folder", "Finished", "prompt"]
FAILURE_CASES = "failure-cases.csv"
