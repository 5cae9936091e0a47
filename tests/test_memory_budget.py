"""Memory proportional to what is compared: videos leave memory with their last case; a video that cannot fit
the per-worker budget (`video.max_bytes`) fails its case with the reason, the others complete."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_config

from worldrecall.engine.stages.runner import Runner
from worldrecall.formats.mp4 import write_video
from worldrecall.registry.host import load_plugins


@pytest.fixture()
def host():
    return load_plugins(extra=[toy_plugin], fresh=True)


def test_each_video_is_released_after_its_last_case_and_decoded_once(tmp_path, host):
    ds = make_dataset(tmp_path, {"good": [0, 10, 20], "bad": [40, 50, 60]})
    runner = Runner(toy_config(tmp_path, ds, workers=1), host)
    res = runner.run()
    assert all(r.status == "ok" for r in res.rows) and len(res.rows) == 6
    assert set(res.decode_counts.values()) == {1} and len(res.decode_counts) == 6
    assert runner.pool.held_bytes == 0  # nothing kept once no later case reads it


def test_a_video_over_the_budget_fails_its_case_with_the_reason(tmp_path, host):
    ds = make_dataset(tmp_path, {"m": [0, 10, 20]})  # 8 frames of 48x32: 36864 bytes decoded each
    big = Path(ds["generations"]) / "m" / "big.mp4"
    write_video(big, np.full((40, 32, 48, 3), 90, np.uint8), fps=8)  # 40 frames: 184320 bytes
    data = Path(ds["data_root"])
    cases = json.loads((data / "cases.json").read_text())["cases"]
    (data / "cases.json").write_text(json.dumps({"cases": [*cases, {"id": "big", "video": "big.mp4"}]}))
    res = Runner(toy_config(tmp_path, ds, workers=1, video={"max_bytes": 100_000}), host).run()
    by = {r.case_id: r for r in res.rows}
    assert all(by[f"c{i}"].status == "ok" for i in range(3))
    assert by["big"].status == "failed"
    assert "decoding 40 declared frames of 48x32 needs 0.2 MiB, over the per-worker frame budget of 0.1 MiB " \
           "(video.max_bytes=100000)" in by["big"].reason
    assert str(big.resolve()) not in res.decode_counts  # refused from the header, never decoded
