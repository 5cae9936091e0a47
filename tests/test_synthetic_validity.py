"""The validity-matrix aggregator on hand-built score rows (fractions computed by hand)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from worldrecall.core.data import ScoreRow
from worldrecall.plugins.synthetic.validity import (
    EXPECTED_CATCHES,
    ValidityMatrix,
    expectations,
    plot_validity,
)

CC = "memobench.camera_controllability"
PF = "memobench.pixel_fidelity"
GATE = "memobench.camera_gate"
F1 = "scene_memory.memory_scene_f1"


def row(model, case, metric, values, status="ok", backend=None):
    return ScoreRow(metric.split(".")[0], model, case, metric, values, status, backend=backend or {})


def cell(df: pd.DataFrame, metric: str, value: str, cf: str) -> pd.Series:
    hit = df[(df.metric == metric) & (df.value == value) & (df.counterfactual == cf)]
    assert len(hit) == 1, (metric, value, cf)
    return hit.iloc[0]


def rows_fixture() -> list[ScoreRow]:
    return [
        # camera controllability: oracle 1.0 / 0.9 / 0.8; frozen 0.2 / 0.95 / 0.1 -> oracle wins a, c: 2 of 3
        row("oracle", "a", CC, {"score": 1.0}),
        row("oracle", "b", CC, {"score": 0.9}),
        row("oracle", "c", CC, {"score": 0.8}),
        row("frozen_camera", "a", CC, {"score": 0.2}),
        row("frozen_camera", "b", CC, {"score": 0.95}),
        row("frozen_camera", "c", CC, {"score": 0.1}),
        # wrong trajectory: 0.5 / 0.5 / (failed row, ignored) -> oracle wins a, b: 2 of 2
        row("wrong_trajectory", "a", CC, {"score": 0.5}),
        row("wrong_trajectory", "b", CC, {"score": 0.5}),
        row("wrong_trajectory", "c", CC, {"score": 0.99}, status="failed"),
        # forgetful is not targeted by camera controllability: 1.0 vs 1.0 (a tie is not better),
        # 0.9 vs 0.3 -> 1 of 2
        row("forgetful", "a", CC, {"score": 1.0}),
        row("forgetful", "b", CC, {"score": 0.3}),
        # pixel fidelity: LPIPS lower is better. oracle 0.10 / 0.20; state_reset 0.30 / 0.15 -> only a: 1 of 2
        row("oracle", "a", PF, {"R_PSNR": 30.0, "R_LPIPS": 0.10}),
        row("oracle", "b", PF, {"R_PSNR": 28.0, "R_LPIPS": 0.20}),
        row("state_reset", "a", PF, {"R_PSNR": 25.0, "R_LPIPS": 0.30}),
        row("state_reset", "b", PF, {"R_PSNR": 27.5, "R_LPIPS": 0.15}),
        # PSNR None on one case: only a counts for teleport -> 1 of 1
        row("teleport", "a", PF, {"R_PSNR": 20.0, "R_LPIPS": None}),
        row("teleport", "b", PF, {"R_PSNR": None, "R_LPIPS": None}),
        # gate as booleans: oracle passes both, frozen fails both -> 2 of 2
        row("oracle", "a", GATE, {"passed": True}),
        row("oracle", "b", GATE, {"passed": True}),
        row("frozen_camera", "a", GATE, {"passed": False}),
        row("frozen_camera", "b", GATE, {"passed": False}),
        # scene F1 with a second rule on the same metric ("gate")
        row("oracle", "a", F1, {"f1": 0.8, "gate": 1.0}),
        row("oracle", "b", F1, {"f1": 0.7, "gate": 1.0}),
        row("hallucinated_background", "a", F1, {"f1": 0.6, "gate": 1.0}),
        row("hallucinated_background", "b", F1, {"f1": 0.65, "gate": 1.0}),
        row("frozen_camera", "a", F1, {"f1": None, "gate": 0.0}),
        # a case whose true trajectory fails the gate itself (a U-turn): not counted for the gate rule
        row("oracle", "u", F1, {"f1": None, "gate": 0.0}),
        row("frozen_camera", "u", F1, {"f1": None, "gate": 0.0}),
        row("oracle", "u", GATE, {"passed": False}),
        row("frozen_camera", "u", GATE, {"passed": False}),
        # a metric not in the table is ignored
        row("oracle", "a", "memobench.other", {"score": 1.0}),
        row("forgetful", "a", "memobench.other", {"score": 0.0}),
    ]


def test_fractions_and_direction():
    from worldrecall.engine.stages.aggregate import value_meta
    from worldrecall.registry.host import load_plugins

    rows = rows_fixture()  # directions come from the metrics' declared metadata, as the engine passes them
    params = {**ValidityMatrix.defaults, "value_meta": value_meta(load_plugins(), rows)}
    df = ValidityMatrix().aggregate(rows, params)["validity"]
    assert list(df.columns) == [
        "metric",
        "value",
        "counterfactual",
        "backend",
        "n_cases",
        "n_oracle_better",
        "fraction",
        "targeted",
        "holds",
        "direction",
        "note",
    ]
    c = cell(df, CC, "score", "frozen_camera")
    assert (c.n_cases, c.n_oracle_better) == (3, 2) and np.isclose(c.fraction, 2 / 3)
    assert c.targeted and c.holds is False
    assert "dolly" in c.note  # a documented exception says why it does not hold everywhere
    c = cell(df, CC, "score", "wrong_trajectory")
    assert (c.n_cases, c.n_oracle_better, c.fraction) == (2, 2, 1.0) and c.holds
    c = cell(df, CC, "score", "forgetful")
    assert (c.n_cases, c.n_oracle_better, c.fraction) == (2, 1, 0.5)
    assert not c.targeted and c.holds is None
    c = cell(df, PF, "R_LPIPS", "state_reset")
    assert (c.n_cases, c.n_oracle_better, c.direction) == (2, 1, "lower") and c.fraction == 0.5
    c = cell(df, PF, "R_PSNR", "state_reset")  # 30 > 25, 28 > 27.5
    assert (c.n_cases, c.n_oracle_better, c.direction) == (2, 2, "higher") and c.holds
    c = cell(df, PF, "R_PSNR", "teleport")
    assert (c.n_cases, c.n_oracle_better) == (1, 1)
    assert df[(df.value == "R_LPIPS") & (df.counterfactual == "teleport")].empty  # LPIPS missing: skipped
    assert df[df.value == "R_SSIM"].empty
    c = cell(df, GATE, "passed", "frozen_camera")
    assert (c.n_cases, c.n_oracle_better) == (2, 2) and c.holds
    c = cell(df, F1, "f1", "hallucinated_background")
    assert (c.n_cases, c.n_oracle_better) == (2, 2) and c.targeted and c.holds
    c = cell(df, F1, "gate", "frozen_camera")  # case u excluded: the oracle fails the gate there too
    assert (c.n_cases, c.n_oracle_better) == (1, 1) and c.targeted and c.holds
    assert not cell(df, F1, "gate", "hallucinated_background").targeted  # 1.0 vs 1.0: 0 of 2
    assert cell(df, F1, "gate", "hallucinated_background").n_oracle_better == 0
    assert "memobench.other" not in set(df.metric)


def test_tolerance_undefined_cases_and_manifest(tmp_path):
    rows = rows_fixture()
    # a 0.45 margin: frozen a (by 0.8) and c (by 0.7) still count; wrong_trajectory (0.5, 0.4) -> a only
    df = ValidityMatrix().aggregate(rows, {"tolerance": 0.45})["validity"]
    assert cell(df, CC, "score", "frozen_camera").n_oracle_better == 2
    assert cell(df, CC, "score", "wrong_trajectory").n_oracle_better == 1
    # case b of frozen_camera declared undefined: 2 cases left (a, c), both won
    df = ValidityMatrix().aggregate(rows, {"undefined": {"frozen_camera": ["b"]}})["validity"]
    c = cell(df, CC, "score", "frozen_camera")
    assert (c.n_cases, c.n_oracle_better, c.holds) == (2, 2, True)
    manifest = {
        "cases": [
            {
                "case_id": "b",
                "counterfactuals": {"frozen_camera": {"defined": False}, "forgetful": {"defined": True}},
            }
        ]
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    df2 = ValidityMatrix().aggregate(rows, {"manifest": str(tmp_path / "manifest.json")})["validity"]
    assert cell(df2, CC, "score", "frozen_camera").n_cases == 2
    assert cell(df2, CC, "score", "forgetful").n_cases == 2


def test_backends_are_not_mixed_and_custom_table():
    rows = [
        row("oracle", "a", CC, {"score": 1.0}, backend={"pose": "sidecar"}),
        row("frozen_camera", "a", CC, {"score": 0.0}, backend={"pose": "sidecar"}),
        row("oracle", "a", CC, {"score": 0.1}, backend={"pose": "sift"}),
        row("frozen_camera", "a", CC, {"score": 0.5}, backend={"pose": "sift"}),
    ]
    df = ValidityMatrix().aggregate(rows, {})["validity"]
    assert sorted(zip(df.backend, df.n_oracle_better)) == [("pose=sidecar", 1), ("pose=sift", 0)]
    custom = {CC: {"value": "score", "catches": []}}
    df = ValidityMatrix().aggregate(rows, {"catches": custom, "lower_is_better": ["score"]})["validity"]
    assert not df.targeted.any() and set(df.direction) == {"lower"}
    assert sorted(zip(df.backend, df.n_oracle_better)) == [("pose=sidecar", 0), ("pose=sift", 1)]


def test_table_covers_the_required_metrics():
    rules = {(e.metric, e.value): set(e.catches) for e in expectations()}
    assert rules[(CC, "score")] == {"frozen_camera", "wrong_trajectory"}
    assert rules[("memobench.ors", "score")] == {"forgetful"}
    for v in ("R_PSNR", "R_SSIM", "R_LPIPS"):
        assert rules[(PF, v)] == {"state_reset", "teleport"}
    assert rules[("memobench.obj_identity", "score")] == {"appearance_drift"}
    assert rules[(GATE, "passed")] == {"frozen_camera"}
    assert rules[("opis.camera_gate", "passed")] == rules[("scene_memory.camera_gate", "passed")] == {"frozen_camera"}
    assert rules[(F1, "f1")] == {"hallucinated_background"} and rules[(F1, "gate")] == {"frozen_camera"}
    assert rules[("memobench.vqa", "ContinuityOfMemory")] == {"forgetful", "state_reset"}
    assert set(EXPECTED_CATCHES) == {m for m, _ in rules}


def test_plot_writes_a_png(tmp_path):
    df = ValidityMatrix().aggregate(rows_fixture(), {})["validity"]
    p = plot_validity(df, tmp_path / "validity.png")
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 2000
    empty = plot_validity(df.iloc[0:0], tmp_path / "empty.png")
    assert empty.read_bytes()[:4] == b"\x89PNG"


def test_the_heatmap_has_one_row_per_metric_value_and_draws_what_its_cells_say(tmp_path):
    """Metrics that share a short name (each benchmark's camera_gate) get a row each; a counterfactual with
    no comparable case is grey; a targeted cell that holds is outlined solid, one that does not dashed."""
    import numpy as np
    from PIL import Image

    from worldrecall.plugins.synthetic.heatmap import CELL_H, CELL_W, MISSING
    from worldrecall.plugins.synthetic.validity import COLUMNS, heatmap_cells

    def rec(metric, cf, frac, targeted=False, holds=None):
        return {"metric": metric, "value": "passed", "counterfactual": cf, "backend": "-", "n_cases": 4,
                "n_oracle_better": int(frac * 4), "fraction": frac, "targeted": targeted, "holds": holds,
                "direction": "higher", "note": ""}

    df = pd.DataFrame([rec("memobench.camera_gate", "frozen_camera", 1.0, True, True),
                       rec("memobench.camera_gate", "forgetful", 0.0),
                       rec("opis.camera_gate", "frozen_camera", 0.5, True, False),
                       rec("scene_memory.memory_scene_f1", "forgetful", 0.25)], columns=COLUMNS)
    rows, cols, cells = heatmap_cells(df)
    assert rows == ["memobench.camera_gate:passed", "opis.camera_gate:passed", "memory_scene_f1:passed"]
    assert cols == ["frozen_camera", "forgetful"]
    assert [(c.row, c.col, c.outline) for c in cells] == [(0, 0, "solid"), (0, 1, ""), (1, 0, "dashed"), (2, 1, "")]
    img = np.asarray(Image.open(plot_validity(df, tmp_path / "v.png")).convert("RGB"))
    assert (img == MISSING).all(axis=2).sum() > CELL_W * CELL_H // 2  # two cells without a record
    green = (img[..., 1] > 90) & (img[..., 0] < 40)  # RdYlGn at 1.0
    red = (img[..., 0] > 150) & (img[..., 1] < 20)  # RdYlGn at 0.0
    assert green.sum() > CELL_W * CELL_H // 2 and red.sum() > CELL_W * CELL_H // 2


def test_the_heatmap_colours_and_font_are_matplotlibs_without_importing_it(tmp_path):
    """The colour map computed here is matplotlib's RdYlGn to the bit (its table, and the cell colour of any
    fraction, ends and table boundaries included); the font is the file matplotlib picks; drawing a heat map in
    a fresh process imports no matplotlib (0.15-0.3 s of a re-score that redraws it)."""
    import subprocess
    import sys

    from matplotlib import colormaps, font_manager

    from worldrecall.plugins.synthetic import heatmap

    cmap = colormaps["RdYlGn"]
    table = cmap(np.arange(256) / 256)[:, :3]  # entry i is what [i/256, (i+1)/256) maps to
    assert np.array_equal(heatmap._rdylgn_table(), table)
    xs = np.concatenate([np.linspace(0, 1, 2049), np.arange(257) / 256, [0.0, 1.0, -0.5, 1.5, 1 - 1e-12, 1e-12],
                         np.random.default_rng(0).random(2000)])
    want = [(round(255 * r), round(255 * g), round(255 * b)) for r, g, b, _ in cmap(np.clip(xs, 0.0, 1.0))]
    assert heatmap._colours(xs) == want
    assert heatmap._colours([0.0, 1.0]) == [(165, 0, 38), (0, 104, 55)]
    assert str(heatmap._font_file()) == font_manager.findfont("DejaVu Sans")
    script = ("import sys; from pathlib import Path; from worldrecall.plugins.synthetic.heatmap import Cell, "
              "draw_heatmap; draw_heatmap(Path(sys.argv[1]), ['a'], ['b'], [Cell(0, 0, 0.5, '1/2')], title='t', "
              "xlabel='x', legend=['l'], ylabel='y', bar_label='f'); print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "h.png")], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False" and (tmp_path / "h.png").stat().st_size > 1000


def test_registered_through_the_plugin_host():
    from worldrecall.registry.host import PluginHost

    host = PluginHost(strict=True)
    host.load_entry_points()
    agg = host.get("aggregator", "synthetic.validity")
    assert isinstance(agg, ValidityMatrix)


def test_gate_neutrality_rows():
    from worldrecall.plugins.synthetic.validity import gate_neutrality

    decl = {"memobench": {"gate": "memobench.camera_gate:passed"}, "other": {"gate": ""}}
    passed = {"oracle": [1, 1, 0], "frozen_camera": [0, 0, 0], "forgetful": [1, 1, 0], "teleport": [1, 0, 0],
              "wrong_trajectory": [1, 0, 0], "state_reset": [1, 1, None]}
    rows = [row(m, f"c{i}", GATE, {"passed": v}) for m, vs in passed.items() for i, v in enumerate(vs)]
    df = gate_neutrality(rows, decl, "oracle", {"state_reset": {"c2"}}).set_index("model")
    assert list(df.index)[0] == "oracle" and set(df["benchmark"]) == {"memobench"}
    # the oracle must pass everything: it fails c2 here, so that row does not hold
    assert (df.loc["oracle", "n_passed"], df.loc["oracle", "n_cases"], df.loc["oracle", "holds"]) == (2, 3, False)
    assert df.loc["frozen_camera", "holds"] and df.loc["frozen_camera", "n_passed"] == 0
    # a true-camera counterfactual must decide exactly as the oracle does, case by case
    assert df.loc["forgetful", "holds"] and df.loc["forgetful", "n_same_as_oracle"] == 3
    assert not df.loc["teleport", "holds"] and df.loc["teleport", "n_same_as_oracle"] == 2
    assert df.loc["wrong_trajectory", "holds"] is None and df.loc["wrong_trajectory", "camera"] == "wrong"
    # state_reset's c2 is undefined (skipped): 2 cases, both as the oracle
    assert (df.loc["state_reset", "n_cases"], df.loc["state_reset", "holds"]) == (2, True)


def test_gate_neutrality_leaves_out_cases_the_oracle_gate_cannot_judge():
    """A case where even the oracle's gate is not measured (a still reference, a mirror-test video without a GT
    camera) counts for no model: it is neither a failure of the oracle nor a pass of the frozen camera."""
    from worldrecall.plugins.synthetic.validity import gate_neutrality

    decl = {"memobench": {"gate": "memobench.camera_gate:passed"}}
    passed = {"oracle": [1, 1, None], "frozen_camera": [0, 0, None], "forgetful": [1, None, None]}
    rows = [row(m, f"c{i}", GATE, {"passed": v}) for m, vs in passed.items() for i, v in enumerate(vs)]
    df = gate_neutrality(rows, decl, "oracle", {}).set_index("model")
    assert (df.loc["oracle", "n_passed"], df.loc["oracle", "n_cases"], df.loc["oracle", "holds"]) == (2, 2, True)
    assert (df.loc["frozen_camera", "n_cases"], df.loc["frozen_camera", "holds"]) == (2, True)
    # forgetful's c1 is not measured where the oracle's was: counted, and it differs from the oracle there
    assert (df.loc["forgetful", "n_cases"], df.loc["forgetful", "n_not_applicable"]) == (2, 1)
    assert not df.loc["forgetful", "holds"]


def test_two_rules_on_one_metric_value_give_one_record_per_counterfactual():
    """A metric value caught by two rules (one with a note on why it is not always caught) is one row per
    counterfactual: targeted where either rule catches it, with that rule's note — not two contradicting rows."""
    catches = {CC: {"value": "score", "catches": ["frozen_camera"],
                    "also": [{"value": "score", "catches": ["wrong_trajectory"], "note": "why"}]}}
    df = ValidityMatrix().aggregate(rows_fixture(), {"catches": catches})["validity"]
    got = {r.counterfactual: (bool(r.targeted), r.note) for r in df.itertuples()}
    assert len(df) == len(got) == 3  # frozen_camera, wrong_trajectory, forgetful: once each
    assert got == {"frozen_camera": (True, ""), "wrong_trajectory": (True, "why"), "forgetful": (False, "")}
