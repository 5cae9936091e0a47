"""A tiny benchmark used by the core tests: it exercises every hook without any perception model.

Layout: ``data_root/cases.json`` = {"cases": [{"id": "c1", "video": "c1.mp4", "stratum": "a"}, …]} and
``generations/<model>/<video>``. The metric compares mean brightness of the first and second half.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.components import Aligner, Loader, LoadRequest, MeasureContext, Metric, MissingInput, Value
from worldrecall.core.data import Alignment, Case, CaseError, CaseFailure, Phase
from worldrecall.core.hookspecs import hookimpl
from worldrecall.core.paths import safe_join
from worldrecall.formats.mp4 import write_video

MEASURE_CALLS: list[str] = []


class ToyLoader(Loader):
    name = "toy"
    benchmark = "toy"

    def load(self, request: LoadRequest) -> Iterator[Case | CaseError]:
        manifest = json.loads((request.data_root / "cases.json").read_text())
        for model, gen_dir in request.generations.items():
            for c in manifest["cases"]:
                strata = {"subcategory": c.get("stratum", "a"), "domain": "toy"}
                try:
                    path = safe_join(gen_dir, c["video"], what="video")
                except CaseFailure as e:
                    yield CaseError("toy", c["id"], model, "load", str(e), strata)
                    continue
                if not path.exists():
                    yield CaseError("toy", c["id"], model, "load", f"{path}: generation missing", strata)
                    continue
                yield Case("toy", c["id"], model, request.pool.get(path) if request.pool else None, strata=strata)


class HalvesAligner(Aligner):
    name = "toy.halves"
    min_frames = 2  # two halves; the engine fails shorter videos before align() is called

    def align(self, case: Case, params: Mapping[str, Any]) -> Alignment:
        n = case.video.num_frames
        h = n // 2
        return Alignment({"A": Phase("A", 0, h - 1), "B": Phase("B", h, n - 1)}, {"n": n})


class BrightnessDrift(Metric):
    name = "toy.brightness"
    benchmark = "toy"
    version = "1"
    primary = "stable"
    values = {"stable": Value(higher_is_better=True, range=(0.0, 1.0), description="drift within tolerance"),
              "drift": Value(higher_is_better=False, range=(0.0, 255.0), unit="levels",
                             description="mean-brightness change from phase A to B")}
    params = {"max_side": 64}
    thresholds = {"tolerance": 10.0}

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        # a case whose id starts with "needs" reads a notes file beside its video (to test declared inputs)
        if case.case_id.startswith("needs"):
            notes = Path(str(case.video.path) + ".notes.json")
            if not notes.exists():
                return [MissingInput("notes file", str(notes), "write it with `echo {} > <video>.notes.json`")]
        return []

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        MEASURE_CALLS.append(case.key)
        fr = case.video.resized(self.params["max_side"]).astype(np.float64)
        if case.case_id.startswith("boom"):
            raise RuntimeError("metric bug on purpose")
        if case.case_id.startswith("die"):  # a worker killed mid-case (the OOM killer's SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        a, b = alignment.phases["A"], alignment.phases["B"]
        return {"mean_a": float(fr[a.start:a.end + 1].mean()), "mean_b": float(fr[b.start:b.end + 1].mean()),
                "per_frame": fr.mean(axis=(1, 2, 3))}

    def score(self, m: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        drift = abs(m["mean_a"] - m["mean_b"])
        return {"drift": drift, "stable": float(drift <= thresholds["tolerance"])}

    def artifacts(self, m: Mapping[str, Any], thresholds: Mapping[str, Any], out_dir: Path) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        p = out_dir / "per_frame.json"
        p.write_text(json.dumps([float(x) for x in m["per_frame"]]))
        return [p]


@hookimpl
def register_loaders(register):
    """Toy loader."""
    register(ToyLoader())


@hookimpl
def register_aligners(register):
    """Toy aligner."""
    register(HalvesAligner())


@hookimpl
def register_metrics(register):
    """Toy metric."""
    register(BrightnessDrift)


def make_dataset(root: Path, models: dict[str, list[int]], n_frames: int = 8) -> dict[str, Any]:
    """Write a toy dataset: one video per (model, case) whose second half is brighter by ``delta``."""
    cases = [{"id": f"c{i}", "video": f"c{i}.mp4", "stratum": "ab"[i % 2]} for i in range(len(next(iter(models.values()))))]
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "data" / "cases.json").write_text(json.dumps({"cases": cases}))
    for model, deltas in models.items():
        for c, delta in zip(cases, deltas):
            fr = np.full((n_frames, 32, 48, 3), 100, np.uint8)
            fr[n_frames // 2:] += np.uint8(delta)
            fr[:, ::4, ::4] = 30  # texture so the encoder keeps detail
            write_video(root / "gen" / model / c["video"], fr, fps=8)
    return {"data_root": str(root / "data"), "generations": str(root / "gen")}


def toy_config(tmp: Path, ds: Mapping[str, Any], **over: Any) -> dict[str, Any]:
    cfg = {
        "output_root": str(tmp / "out"), "cache_dir": str(tmp / "out" / "cache"), "device": "cpu", "batch_size": 4,
        "progress": False, "artifacts": True, "max_failure_rate": 0.5, "shard": {"count": 1, "index": 0},
        "suite": {"builder": None, "root": None, "params": {}}, "models": {}, "tracking": {"enabled": False},
        "benchmarks": {"toy": {"enabled": True, "loader": "toy", "aligner": "toy.halves", "aligner_params": {},
                               "data_root": ds["data_root"], "generations": ds["generations"],
                               "metrics": {"brightness": {"params": {}, "thresholds": {"tolerance": 10.0}}},
                               "aggregators": []}},
        "aggregators": ["mean", "macro", "bootstrap", "paired", "ranking"],
        "aggregator_params": {"bootstrap": {"replicates": 200, "seed": 0}, "paired": {"reference": "good"}},
    }
    cfg.update(over)
    return cfg


def toy_cli_overrides(ds: Mapping[str, Any], output_root: Path | None = None, *extra: str,
                      max_side: int | None = 64) -> list[str]:
    """The toy benchmark as command-line overrides: its data, the brightness metric at tolerance 10 (frames
    resized to ``max_side``; None: native), no progress bars, then ``extra`` (``key=value``) in order."""
    params = f"{{max_side:{max_side}}}" if max_side else "{}"
    out = [f"output_root={output_root}"] if output_root is not None else []
    return [*out, "suite=none", "only=[toy]", "+benchmarks.toy.loader=toy", "+benchmarks.toy.aligner=toy.halves",
            f"+benchmarks.toy.data_root={ds['data_root']}", f"+benchmarks.toy.generations={ds['generations']}",
            f"+benchmarks.toy.metrics={{brightness:{{params:{params},thresholds:{{tolerance:10.0}}}}}}",
            "progress=false", *extra]
