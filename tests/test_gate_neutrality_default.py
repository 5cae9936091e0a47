"""Gate neutrality on the default suite with the default backends: a camera gate tests the camera only.

Builds the default synthetic suite (24 cases; the same one `worldrecall run` builds) and runs only the three
benchmarks' camera gates. The counts are pinned: the oracle passes 24/24, the frozen camera 0/24, every
counterfactual that executes the true camera and breaks something else passes on exactly the oracle's cases,
and the wrong trajectory fails where its path does not follow the reference.
"""

from __future__ import annotations

import pytest

from worldrecall.engine.cli import compose
from worldrecall.engine.stages.runner import Runner
from worldrecall.registry.host import load_plugins

pytest.importorskip("open3d")

GATES = {"memobench": "camera_gate", "opis": "camera_gate", "scene_memory": "camera_gate"}
# wrong_trajectory on the default suite (measured): its 0.5x turns never depart far enough; its 1.6x turns and
# veering dollies pass where they come back within tolerance of the reference pose
WRONG_PASSES = {"memobench": 9, "opis": 10, "scene_memory": 10}


@pytest.fixture(scope="module")
def gate_tables(tmp_path_factory):
    out = tmp_path_factory.mktemp("default")
    cfg = compose([f"output_root={out}", "tracking=none", "progress=false", "report.enabled=false"])
    for bench, metric in GATES.items():
        b = cfg["benchmarks"][bench]
        b["metrics"] = {metric: b["metrics"][metric]}
        b["aggregators"] = []
    cfg["aggregators"] = []
    res = Runner(cfg, load_plugins(fresh=True)).run()
    assert res.n_failed_cases == 0, [r.reason for r in res.rows if r.status == "failed"][:5]
    return res.tables["validity_gates"].set_index(["benchmark", "model"])


@pytest.mark.slow
@pytest.mark.parametrize("bench", sorted(GATES))
def test_gate_neutrality_counts(gate_tables, bench):
    t = gate_tables.loc[bench]
    assert (t.loc["oracle", "n_passed"], t.loc["oracle", "n_cases"]) == (24, 24)
    assert (t.loc["frozen_camera", "n_passed"], t.loc["frozen_camera", "n_cases"]) == (0, 24)
    for model in ("forgetful", "state_reset", "teleport", "appearance_drift", "hallucinated_background"):
        row = t.loc[model]
        # state_reset / hallucinated_background are not defined on every case (the manifest says where)
        assert row["holds"] and row["n_same_as_oracle"] == row["n_cases"] == row["n_passed"], (bench, model)
    assert t.loc["wrong_trajectory", "n_passed"] == WRONG_PASSES[bench]
    assert t.loc["wrong_trajectory", "n_not_applicable"] == 0
