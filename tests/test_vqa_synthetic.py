"""memobench.vqa on the synthetic suite, with a fake judge that answers from each counterfactual's truth.

The fake identifies the clip from the sha256 of the video bytes it receives (a map prepared here from
``R/memobench/output/{model}/...``) and answers the bank's questions from
``R/memobench/vqa_truth/{model}/{Scene}_{NNN}.json``. This proves the plumbing and that the scores move
the right way; real scores need a real judge.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from helpers.fake_gemini import FakeGemini, truth_answerer

from worldrecall.core.components import MeasureContext
from worldrecall.core.data import Alignment, Case
from worldrecall.core.judges import JudgeHub
from worldrecall.core.video import Video
from worldrecall.plugins.judges import plugin as judges_plugin
from worldrecall.plugins.memobench.vqa.metric import VQAMetric
from worldrecall.registry.host import load_plugins

KEY = "wr-synthetic-key-3c77e2"
MODELS = ("oracle", "forgetful", "state_reset")


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    build = pytest.importorskip("worldrecall.plugins.synthetic.build")
    tmp = tmp_path_factory.mktemp("suite") / "root"
    got = build.ensure_suite(tmp, n_cases=2, width=96, height=72, gt_frames=24, gen_frames=20)
    root = Path(got) if isinstance(got, (str, Path)) else Path(getattr(got, "root", tmp))
    assert (root / "memobench" / "data" / "vqa_questions").is_dir(), "suite has no VQA banks"
    return root


def _clip_video(root: Path, model: str, clip: str) -> Path:
    scene = clip.rsplit("_", 1)[0]
    return root / "memobench" / "output" / model / "Synthetic" / scene / clip / "video.mp4"


def _truth_by_sha(suite: Path) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for tf in sorted((suite / "memobench" / "vqa_truth").glob("*/*.json")):
        video = _clip_video(suite, tf.parent.name, tf.stem)
        digest = hashlib.sha256(video.read_bytes()).hexdigest()
        truth = {str(k): v for k, v in json.loads(tf.read_text()).items()}
        assert out.setdefault(digest, truth) == truth, f"{video}: same bytes, different truth"
    return out


def test_continuity_of_memory_ranks_oracle_first(suite, tmp_path, monkeypatch):
    truth_by_sha: dict[str, dict[str, str]] = {}
    cases: dict[str, list[Case]] = {m: [] for m in MODELS}
    for model in MODELS:
        for tf in sorted((suite / "memobench" / "vqa_truth" / model).glob("*.json")):
            video = _clip_video(suite, model, tf.stem)
            assert video.is_file(), video
            digest = hashlib.sha256(video.read_bytes()).hexdigest()
            truth = {str(k): v for k, v in json.loads(tf.read_text()).items()}
            assert truth_by_sha.setdefault(digest, truth) == truth, f"{video}: same bytes, different truth"
            cases[model].append(
                Case(
                    benchmark="memobench",
                    case_id=tf.stem,
                    model=model,
                    video=Video(video),
                    data_root=suite / "memobench" / "data",
                )
            )
    assert all(len(c) >= 1 for c in cases.values()), {m: len(c) for m, c in cases.items()}

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    specs = []
    judges_plugin.register_judges(specs.append)
    with FakeGemini(KEY, truth_answerer(truth_by_sha, default="Maybe")) as fake:
        hub = JudgeHub(
            {s.name: s for s in specs},
            {"gemini": {"base_url": fake.base_url, "cache_dir": str(tmp_path / "judge_cache")}},
        )
        ctx = MeasureContext(models=None, judges=hub)
        metric = VQAMetric()
        cm: dict[str, float] = {}
        for model, cs in cases.items():
            values = []
            for case in cs:
                meas = metric.measure(case, Alignment(), ctx)
                s = metric.score(meas, metric.thresholds)
                assert (
                    s["n_omitted"] == 0 and s["n_unrecognised_answers"] == 0
                )  # every truth table is complete
                values.append(s["ContinuityOfMemory"])
            cm[model] = float(np.mean(values))
        assert fake.generate_calls == sum(len(c) for c in cases.values())
    print("CM means:", cm)
    assert cm["oracle"] > cm["forgetful"], cm
    assert cm["oracle"] > cm["state_reset"], cm


@pytest.mark.slow
def test_runner_and_leaderboard_on_the_suite(suite, tmp_path, monkeypatch):
    """The whole path: memobench loader + aligner + runner + cache + leaderboard (x100), judge faked."""
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    with FakeGemini(KEY, truth_answerer(_truth_by_sha(suite), default="Maybe")) as fake:
        out = tmp_path / "out"
        cfg = {
            "output_root": str(out),
            "cache_dir": str(out / "cache"),
            "device": "cpu",
            "batch_size": 4,
            "progress": False,
            "artifacts": True,
            "max_failure_rate": 0.5,
            "shard": {"count": 1, "index": 0},
            "suite": {"builder": None, "root": None, "params": {}},
            "models": {},
            "tracking": {"enabled": False},
            "judge_options": {
                "gemini": {"base_url": fake.base_url, "cache_dir": str(out / "cache" / "judge")}
            },
            "models_only": list(MODELS),
            "aggregators": [],
            "aggregator_params": {},
            "benchmarks": {
                "memobench": {
                    "enabled": True,
                    "loader": "memobench",
                    "aligner": "memobench.phases",
                    "aligner_params": {},
                    "loader_options": {},
                    "data_root": str(suite / "memobench" / "data"),
                    "generations": str(suite / "memobench" / "output"),
                    "metrics": {"vqa": {"params": {}, "thresholds": {}}},
                    "aggregators": ["memobench.leaderboard"],
                }
            },
        }
        from worldrecall.engine.stages.runner import Runner

        res = Runner(cfg, load_plugins(fresh=True)).run()
        rows = [r for r in res.rows if r.metric == "memobench.vqa"]
        assert rows and all(r.status == "ok" for r in rows), [(r.case_id, r.reason) for r in rows]
        calls = fake.generate_calls
        assert calls == len(rows)
        # sweeping a threshold re-scores from the measurement cache: no judge call
        cfg["benchmarks"]["memobench"]["metrics"]["vqa"]["thresholds"] = {"official_answer_match": True}
        again = Runner(cfg, load_plugins(fresh=True)).run()
        assert fake.generate_calls == calls
        assert again.cache_stats["hits"] == len(rows) and again.cache_stats["misses"] == 0
    cm = {m: float(np.mean([r.values["ContinuityOfMemory"] for r in rows if r.model == m])) for m in MODELS}
    assert cm["oracle"] > cm["forgetful"] and cm["oracle"] > cm["state_reset"], cm
    assert res.exit_code == 0
