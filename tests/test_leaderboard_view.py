"""The printed leaderboard: declared views, gated first, ranked by the headline, ties shared, ✗ last."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from worldrecall.core.data import ScoreRow
from worldrecall.engine.sinks.leaderboard_view import (
    WIDTH,
    compact_text,
    compact_text_of,
    leaderboard_text,
    leaderboard_views,
    print_leaderboard,
)
from worldrecall.engine.sinks.pipe_table import pipe_table
from worldrecall.engine.stages.aggregate import aggregate_rows
from worldrecall.registry.host import load_plugins


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


def _result(tmp_path: Path) -> tuple[SimpleNamespace, object]:
    host = load_plugins(fresh=True)
    rows = _rows()
    cfg = {"suite": {}, "aggregator_params": {"ranking": {"replicates": 200},
                                              "memobench.leaderboard": {"replicates": 50, "splits": ["all"]}},
           "aggregators": ["mean", "ranking"], "benchmarks": {"memobench": {"aggregators": ["memobench.leaderboard"]}}}
    return SimpleNamespace(rows=rows, tables=aggregate_rows(host, rows, cfg), results_dir=tmp_path), host


def test_gated_view_leads_ranks_by_ors_and_marks_never_gated_models_last(tmp_path):
    result, host = _result(tmp_path)
    views = leaderboard_views(result, host)
    assert [t.split(" · ")[1].split(" (")[0] for t, _, _ in views] == ["camera-gated view", "all cases"]
    gated, everything = views[0][1], views[1][1]
    assert list(gated["model"]) == ["good", "frozen"] and list(gated["rank"]) == ["1", "✗"]
    # ORS over gated cases of "good": (0.6 + 0.8) / 2 = 0.7; frozen has no gated case -> "—", no number
    ors = "ORS (0–1 ↑)"
    assert gated.loc[0, ors].startswith("0.700 [") and gated.loc[1, ors] == "—"
    assert gated.loc[1, "camera gate passed (fraction ·)"] == "0.00"  # the diagnostic stays visible
    assert "PSNR (dB ↑)" in gated.columns and "Official mean (mixed ↑)" in gated.columns
    # all cases: the published number, ranked by ORS: frozen (1.0) first — the paired differences 0.4 and 0.2
    # never contain 0, so it is no tie — and good second; good's PSNR (30 + 20) / 2 = 25.00
    assert list(everything["model"]) == ["frozen", "good"] and list(everything["rank"]) == ["1", "2"]
    assert everything.loc[everything["model"] == "good", "PSNR (dB ↑)"].iloc[0].startswith("25.00 [")


def test_no_view_sorts_by_the_gate_pass_rate(tmp_path):
    result, host = _result(tmp_path)
    for _, df, _ in leaderboard_views(result, host):
        assert "GatePass (fraction ↑)" not in df.columns  # the gate is a diagnostic column (·), never a key


def test_full_view_prints_every_view_gated_first(tmp_path, capsys):
    result, host = _result(tmp_path)
    print_leaderboard(result, host, view="full")
    out = capsys.readouterr().out
    assert out.index("camera-gated view") < out.index("all cases")
    assert "✗ = no case of that model passed the camera gate" in out
    assert out.startswith(leaderboard_text(result, host))


def test_compact_view_is_rank_model_headline_gate_and_all_cases_rank(tmp_path, capsys):
    result, host = _result(tmp_path)
    print_leaderboard(result, host)
    out = capsys.readouterr().out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("rank "))
    assert lines[head].split() == ["rank", "model", "ORS", "ranked", "(failed", "gate", "=", "0)", "(0–1", "↑)",
                                   "gate", "passed", "all-cases", "rank"]
    # good: 0.7 over its 2 passed cases; gate 2/2; second over all cases. frozen: ✗, no value, 0/2, first overall
    assert lines[head + 1].split()[:3] == ["1", "good", "0.700"] and lines[head + 1].split()[-2:] == ["2/2", "2"]
    assert lines[head + 2].split() == ["✗", "frozen", "—", "0/2", "1"]
    assert "all cases ·" not in out and "PSNR" not in out  # the wide columns are in the full tables only
    assert f"full tables (view=full): {tmp_path / 'tables' / 'leaderboard.txt'}\n" in out
    # every line fits 120 columns but the path's own (as long as the output folder's name)
    assert max(len(line) for line in out.splitlines() if str(tmp_path) not in line) <= WIDTH


def test_compact_view_reads_the_same_from_the_written_table(tmp_path):
    """`scripts/readme_validity.py` renders the README's printout from a run's tables/ranking.csv."""
    result, host = _result(tmp_path)
    result.tables["ranking"].to_csv(tmp_path / "ranking.csv", index=False)
    assert compact_text_of(pd.read_csv(tmp_path / "ranking.csv")) == compact_text(result, host)


def test_compact_view_keeps_its_width_with_long_model_names(tmp_path):
    result, _ = _result(tmp_path)
    views = result.tables["ranking"].copy()
    views["model"] = views["model"].map({"good": "g" * 80, "frozen": "f" * 80})
    text = compact_text_of(views)
    assert max(len(line) for line in text.splitlines()) <= WIDTH and "g" * 31 + "…" in text


def test_pipe_table_is_real_markdown():
    df = pd.DataFrame({"model": ["a|b", "c"], "score": [0.123456, float("nan")], "ok": [True, False]})
    assert pipe_table(df, digits=3) == ("| model | score | ok |\n|:---|---:|:---|\n"
                                        "| a\\|b | 0.123 | True |\n| c |  | False |\n")


def test_pipe_rows_render_each_cell_as_the_row_by_row_definition():
    """Column by column, the same text as :func:`_cell` of each value of ``itertuples``: numpy floats (NaN, inf,
    large and tiny numbers, ties the rounding decides), ints, and extension columns whose values are numpy
    scalars (``Float64`` yields np.float64, whose round() differs from a Python float's)."""
    import numpy as np

    from worldrecall.engine.sinks.pipe_table import _cell, pipe_rows

    df = pd.DataFrame({
        "f": [77.97375, float("nan"), 1e7, 1e-5, 0.0, -0.0, float("inf"), 0.9625, 29.797349999999998, 5e-5],
        "i": np.arange(10, dtype=np.int64) * -3, "u": np.arange(10, dtype=np.uint8), "b": [True, False] * 5,
        "o": [None, "a|b", "x\ny", 1.5, float("nan"), 3, pd.NA, "  sp  ", (1, 2), np.float64(2.5)],
        "s": pd.array(["a", None, "b|c", "d e", "", "f", "g", None, "h", "i"], dtype="string"),
        "I": pd.array([1, None, 3, 4, 5, 6, 7, 8, 9, 10], dtype="Int64"),
        "F": pd.array([77.97375, None, 0.9625, 30.5735, 5, 6, 7, 8, 9, float("nan")], dtype="Float64"),
        "dt": pd.date_range("2020-01-01", periods=10), "c": pd.Categorical(list("abcabcabca")),
    })
    for digits in (3, 4, 6):
        want = ["| " + " | ".join(_cell(v, digits) for v in row) + " |" for row in df.itertuples(index=False)]
        assert pipe_rows(df, digits) == want
    # 77.97375 is 77.97374999… as a float: Python's round() gives ...37, numpy's (scaled, then even) ...38
    assert pipe_rows(df, 4)[0] == "| 77.9737 | 0 | 0 | True |  | a | 1 | 77.9738 | 2020-01-01 00:00:00 | a |"
    assert pipe_rows(df.iloc[:0]) == [] and pipe_rows(pd.DataFrame(index=range(2))) == ["|  |", "|  |"]


def test_cases_column_says_how_many_cases_the_mean_covers(tmp_path):
    """Issue 43: ``cases`` said 10 where the mean covered 3. A model whose headline has a value on fewer cases
    than it has shows ``n/N``; a model with a value everywhere keeps its plain count."""
    host = load_plugins(fresh=True)
    rows = [r for r in _rows() if not (r.model == "good" and r.case_id == "c1" and r.metric == "memobench.ors")]
    rows.append(ScoreRow("memobench", "good", "c1", "memobench.ors", {}, status="skipped", reason="no segmenter",
                         strata={"split": "synthetic"}))
    cfg = {"suite": {}, "aggregator_params": {"ranking": {"replicates": 50},
                                              "memobench.leaderboard": {"replicates": 20, "splits": ["all"]}},
           "aggregators": ["mean", "ranking"], "benchmarks": {"memobench": {"aggregators": ["memobench.leaderboard"]}}}
    result = SimpleNamespace(rows=rows, tables=aggregate_rows(host, rows, cfg), results_dir=tmp_path)
    everything = leaderboard_views(result, host)[1][1]
    cases = dict(zip(everything["model"], everything["cases"]))
    assert cases == {"good": "1/2", "frozen": 2}
