"""A generated video too short for the phases it must cover is a per-case error (the aligner's declared
``min_frames``), or — under ``official_parity`` — scored as the official code does and flagged on the row."""

from __future__ import annotations

import numpy as np
import pytest

from worldrecall.core.data import Case, CaseFailure
from worldrecall.core.judges import JudgeHub
from worldrecall.core.models import ModelHub
from worldrecall.core.video import VideoPool
from worldrecall.engine.stages.pipeline import CasePipeline
from worldrecall.formats.mp4 import write_video
from worldrecall.plugins.memobench.aligner import PhaseAligner
from worldrecall.registry.host import load_plugins


def _case(tmp_path, n: int) -> Case:
    path = tmp_path / f"gen{n}.mp4"
    write_video(path, np.full((n, 32, 48, 3), 90, np.uint8), fps=8)
    return Case("memobench", f"clip{n}", "m", VideoPool().get(path),
                annotations={"h_gt": 30, "r_gt": 60, "G": 90, "G_source": "test"})


@pytest.fixture()
def pipeline(tmp_path):
    host = load_plugins()
    return CasePipeline(host, ModelHub({}, {}), JudgeHub({}), VideoPool(), tmp_path / "cache", artifacts=False,
                        device="cpu", batch_size=4)


def test_memobench_declares_its_minimum():
    assert PhaseAligner.min_frames == 6  # h <= N-4 and r >= h+2 <= N-1 only hold from N = 6


@pytest.mark.parametrize("n", [1, 3, 5])
def test_short_generated_video_is_a_clear_case_error(tmp_path, pipeline, n):
    got = pipeline.align("memobench.phases", _case(tmp_path, n), {})
    assert isinstance(got, CaseFailure)
    assert str(got) == f"{tmp_path / f'gen{n}.mp4'}: {n} frame(s); the memobench.phases aligner needs at least 6"


def test_official_parity_scores_it_but_flags_the_row(tmp_path, pipeline):
    got = pipeline.align("memobench.phases", _case(tmp_path, 3), {"official_parity": True})
    assert not isinstance(got, CaseFailure)
    # the official clamps: h = max(2, min(10, -1)) = 2, r = max(4, min(20, 2)) = 4 -> R starts past the end
    assert (got.info["h"], got.info["r"], got.info["N"]) == (2, 4, 3)
    assert got.info["warnings"] == [f"{tmp_path / 'gen3.mp4'}: 3 frame(s); the memobench.phases aligner needs at "
                                    "least 6; scored anyway (official_parity)"]


def test_six_frames_align_without_warning(tmp_path, pipeline):
    got = pipeline.align("memobench.phases", _case(tmp_path, 6), {})
    # h = round(30/90*6) = 2 -> max(2, min(2, 2)) = 2; r = round(60/90*6) = 4 -> max(4, min(4, 5)) = 4
    assert (got.info["h"], got.info["r"]) == (2, 4) and "warnings" not in got.info
