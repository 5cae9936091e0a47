"""The printed leaderboard: gated view first, failed-gate models marked and never ranked above the others."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from worldrecall.core.data import ScoreRow
from worldrecall.engine.leaderboard_view import leaderboard_views, print_leaderboard
from worldrecall.engine.pipe_table import pipe_table
from worldrecall.plugins.memobench.leaderboard import MemoBenchLeaderboard


def _rows() -> list[ScoreRow]:
    """Two models x two cases: "frozen" never passes the gate but has the higher all-cases ORS."""
    rows = []
    vals = {("good", "c0"): (0.6, 1.0, 30.0), ("good", "c1"): (0.8, 1.0, 20.0),
            ("frozen", "c0"): (1.0, 0.0, 10.0), ("frozen", "c1"): (1.0, 0.0, 12.0)}
    for (model, case), (ors, gate, psnr) in vals.items():
        s = {"split": "synthetic"}
        rows.append(ScoreRow("memobench", model, case, "memobench.ors", {"score": ors}, strata=s))
        rows.append(ScoreRow("memobench", model, case, "memobench.camera_gate", {"passed": gate}, strata=s))
        rows.append(ScoreRow("memobench", model, case, "memobench.pixel_fidelity", {"ALL_PSNR": psnr}, strata=s))
    return rows


def _result(tmp_path: Path) -> SimpleNamespace:
    rows = _rows()
    tables = MemoBenchLeaderboard().aggregate(rows, {"replicates": 50, "splits": ["all"]})
    return SimpleNamespace(rows=rows, tables=tables, results_dir=tmp_path)


HOST = SimpleNamespace(components={"aggregator": {"memobench.leaderboard": MemoBenchLeaderboard}}, metrics={})


def test_gated_view_leads_and_failed_gate_models_are_marked_last(tmp_path):
    views = leaderboard_views(_result(tmp_path), HOST)
    assert [t.split(" · ")[1].split(" (")[0] for t, _, _ in views] == ["camera-gated view", "all cases"]
    gated, everything = views[0][1], views[1][1]
    assert list(gated["model"]) == ["good", "frozen ✗"]  # frozen: gate 0/2 -> marked, listed last
    # ORS over gated cases of "good": (0.6 + 0.8) / 2 = 0.7; frozen has no gated case -> "—", no number
    ors = "ORS (0–1 ↑)"
    assert gated.loc[0, ors].startswith("0.700 [") and gated.loc[1, ors] == "—"
    assert "PSNR (dB ↑)" in gated.columns and "GatePass (fraction ↑)" in gated.columns
    # all cases: frozen's ORS (1.0) is shown beside it, still marked; good's PSNR (30 + 20) / 2 = 25.00
    assert everything.loc[everything["model"] == "frozen ✗", ors].iloc[0].startswith("1.000")
    assert everything.loc[everything["model"] == "good", "PSNR (dB ↑)"].iloc[0].startswith("25.00 [")


def test_print_leaderboard_prints_the_gated_view_first(tmp_path, capsys):
    print_leaderboard(_result(tmp_path), HOST)
    out = capsys.readouterr().out
    assert out.index("camera-gated view") < out.index("all cases")
    assert "✗ = the model never passed the camera gate" in out


def test_pipe_table_is_real_markdown():
    df = pd.DataFrame({"model": ["a|b", "c"], "score": [0.123456, float("nan")], "ok": [True, False]})
    assert pipe_table(df, digits=3) == ("| model | score | ok |\n|:---|---:|:---|\n"
                                        "| a\\|b | 0.123 | True |\n| c |  | False |\n")
