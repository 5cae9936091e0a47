"""Colour shift between the Visible and Reappear phases: does the scene come back in the same colours?"""

from typing import Any, Mapping

import numpy as np

from worldrecall import Metric, Value


class ColourShift(Metric):
    name = "memobench.colour_shift"   # "<benchmark>.<metric>": it joins MemoBench's cases and phases
    benchmark = "memobench"
    version = "1"
    description = "mean-RGB distance between the Visible and Reappear phases, as a 0-1 score"
    primary = "score"
    values = {  # every emitted value, with its direction and range (registration refuses an undeclared one)
        "score": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="1 - shift / max_shift, ≥ 0"),
        "shift": Value(higher_is_better=False, range=(0.0, 255 * 3 ** 0.5), unit="RGB levels",
                       description="distance of the phases' mean colours"),
    }
    params = {"max_side": 160}        # measurement parameters: part of the cache key
    thresholds = {"max_shift": 30.0}  # scoring parameters: sweeping them runs no measurement

    def measure(self, case, alignment, ctx) -> dict[str, Any]:
        frames = case.video.resized(self.params["max_side"]).astype(np.float32)
        v, r = alignment.phases["V"], alignment.phases["R"]
        return {"v_rgb": frames[v.start:v.end + 1].mean(axis=(0, 1, 2)),
                "r_rgb": frames[r.start:r.end + 1].mean(axis=(0, 1, 2))}

    def score(self, m: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        shift = float(np.linalg.norm(np.asarray(m["r_rgb"]) - np.asarray(m["v_rgb"])))
        return {"shift": shift, "score": max(0.0, 1.0 - shift / thresholds["max_shift"])}
