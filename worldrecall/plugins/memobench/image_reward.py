"""MemoBench prompt consistency (ImageReward): mean sigmoid reward of 5 frames for the clip's prompt."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Value
from worldrecall.core.data import Alignment, Case
from worldrecall.plugins.memobench import rounding, sampling
from worldrecall.plugins.memobench.base import MemoBenchMetric, capped_frames, pick

_NONE = {"score": None, "score_raw": None, "pct": None}


def reward_prompt(case: Case, source: str) -> str | None:
    """The prompt Step 1 scores: ``sheet`` -> the synthetic sheet's prompt cell (real clips: none, and an
    empty cell is the literal "nan" as in the official code); ``case`` -> the case prompt (metadata)."""
    prompt = case.annotations.get("sheet_prompt") if source == "sheet" else case.prompt
    if not prompt or not str(prompt).strip():
        return None
    return str(prompt)


def sigmoid_mean(raw: np.ndarray) -> float | None:
    """Mean of 1 / (1 + exp(-raw)) over frames that scored (non-finite = the frame failed); None if none did."""
    s = [float(1.0 / (1.0 + np.exp(-float(v)))) for v in raw if math.isfinite(float(v))]
    return float(np.mean(s)) if s else None


class ImageRewardScore(MemoBenchMetric):
    """``score`` = ImageRewardScore on 0-1 (4 dp); ``pct`` = the 0-100 leaderboard value."""

    name: ClassVar[str] = "memobench.image_reward"
    description: ClassVar[str] = "ImageReward of 5 evenly spaced frames for the prompt, sigmoid, mean"
    primary: ClassVar[str] = "score"
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                       description="mean sigmoid ImageReward of the sampled frames (4 dp)"),
        "score_raw": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="ImageReward unrounded"),
        "pct": Value(higher_is_better=True, range=(0.0, 100.0), unit="%", description="ImageReward x 100"),
    }
    models: ClassVar[tuple[str, ...]] = ("text_image_reward",)
    params: ClassVar[dict[str, Any]] = {"max_side": 640, "n_sample": 5, "prompt_source": "sheet"}
    thresholds: ClassVar[dict[str, Any]] = {}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Raw rewards of the 5 sampled frames (NaN for a frame the backend failed on)."""
        prompt = reward_prompt(case, self.params["prompt_source"])
        if prompt is None:
            return {"prompt": "", "indices": np.zeros(0, dtype=np.int64), "raw": np.zeros(0)}
        frames = capped_frames(case, self.params["max_side"])
        idx = sampling.image_reward_indices(len(frames), self.params["n_sample"])
        model = ctx.models.get("text_image_reward")
        raw = []
        for f in pick(frames, idx):  # one call per frame: a frame that raises is skipped (official)
            try:
                raw.append(float(np.asarray(model.reward(prompt, [f])).reshape(-1)[0]))
            except Exception:  # noqa: BLE001 — any backend error drops just this frame
                raw.append(math.nan)
        return {"prompt": prompt, "indices": np.asarray(idx, dtype=np.int64), "raw": np.asarray(raw, dtype=np.float64)}

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """``score`` (4 dp), ``score_raw`` and ``pct`` (1-dp percentage, 2-dp composite); None without prompt."""
        s = sigmoid_mean(np.asarray(measurement["raw"]))
        if s is None:
            return dict(_NONE)
        s4 = rounding.round_py(s, 4)
        return {"score": s4, "score_raw": s, "pct": rounding.round_np(rounding.pct_of("ImageRewardScore", s4), 2)}
