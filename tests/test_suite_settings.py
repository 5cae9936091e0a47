"""A built-in suite's departures from a benchmark's official settings come with the suite
(``conf/suite_settings/<suite>.yaml``), never with the benchmark: on real data (``suite=none``) every MIND switch
is the release's, and a command-line override still wins over the suite's."""

from __future__ import annotations

from worldrecall.engine.cli import compose


def _mind(overrides: list[str]) -> tuple[dict, dict, dict]:
    m = compose(overrides)["benchmarks"]["mind"]
    return m["aligner_params"], m["metrics"]["action"]["params"], m["metrics"]["action_gate"]["params"]


def test_real_data_gets_the_release_settings():
    aligner, action, gate = _mind(["suite=none"])
    assert (aligner["release_batches"], aligner["frame_size"]) == (True, "release")
    assert action["gt_images_min"] == gate["gt_images_min"] == "release"


def test_the_synthetic_suite_brings_its_own_departures():
    aligner, action, gate = _mind([])
    assert (aligner["release_batches"], aligner["frame_size"]) == (False, "native")
    assert action["gt_images_min"] == gate["gt_images_min"] == "available"


def test_a_command_line_override_beats_the_suite_settings():
    aligner, _, _ = _mind(["benchmarks.mind.aligner_params.release_batches=true"])
    assert aligner["release_batches"] is True and aligner["frame_size"] == "native"
