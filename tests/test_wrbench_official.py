"""The frozen 23-model paper table: imported as official rows, and every cell our aggregation can derive from the
release's per-model values reproduced (the per-video scores that would reproduce the means are not shipped)."""

from __future__ import annotations

import hashlib

import pytest

from worldrecall.core.data import CaseFailure
from worldrecall.plugins.wrbench import official_results as off
from worldrecall.plugins.wrbench import table


def test_bundled_table_is_the_release_file_byte_for_byte():
    # src/wrbench/data/results/wrbench_23model_results.csv at release v0.1.2/0.1.3: 10,342 bytes, 24 lines
    data = off.PAPER_TABLE.read_bytes()
    assert len(data) == 10342 and data.count(b"\n") == 24
    assert hashlib.sha256(data).hexdigest() == off.PAPER_TABLE_SHA256


def test_rows_are_labelled_as_the_frozen_paper_table():
    rows = off.official_rows()
    assert len(rows) == 23
    gen3c = next(r for r in rows if r["model_id"] == "gen3c")
    assert gen3c["model"] == "Gen3C (WRBench paper, frozen v0.1.2)"
    assert "frozen paper table" in gen3c["source"] and "rolling 26-model track" in gen3c["source"]
    assert gen3c["D1_CamAlign_static_hold"] is None and gen3c["D5_n"] == 292


def test_derived_columns_reproduce_every_published_row():
    """Avg = mean(CamAlign common-yaw, D2..D6); gate rate = D5_n / n_outputs; low_n = D5_n < 10 or rate < .1 —
    all 23 rows, Avg to 1e-12 (it is printed unrounded), the rate to the CSV's 12 significant digits."""
    for r in off.read_paper_table():
        d = table.derived(r)
        assert d["Avg"] == pytest.approx(r["Avg"], abs=1e-12), r["model_id"]
        assert table.csv_cell(d["gate_applicable_rate"]) == table.csv_cell(r["gate_applicable_rate"]), r["model_id"]
        assert d["low_n_flag"] == r["low_n_flag"], r["model_id"]


def test_avg_by_hand_for_gen3c():
    # (0.763661 + 0.749128848955 + 0.7226223275 + 0.55832766 + 0.68128519863 + 0.640176664384) / 6
    #   = 4.115201699469 / 6 = 0.6858669499115
    gen3c = next(r for r in off.read_paper_table() if r["model_id"] == "gen3c")
    assert table.derived(gen3c)["Avg"] == pytest.approx(0.6858669499115, abs=1e-13)


def test_benchmark_totals_reproduce_the_published_aggregate_checks():
    """``aggregate_checks`` of wrbench_23model_results.json (its full-precision rows) from the CSV's 12-digit rows:
    the weighted means agree to 1e-11, the n exactly; D1-CamPrec also equals the contract's reporting score."""
    totals = table.weighted_totals(off.read_paper_table())
    published = {"D1_CamPrec": (0.7021636320348325, 7500), "D1_CamAlign_common_yaw": (0.460350666666656, 7800),
                 "D1_CamAlign_static_hold": (0.9229872857142857, 700), "D2": (0.7938633105316238, 9600),
                 "D3": (0.769871366875, 9600), "D4": (0.5906819702083332, 9600), "D5": (0.661169507959479, 2073),
                 "D6": (0.6125557168355041, 2073)}
    for col, (mean, n) in published.items():
        assert totals[col]["n"] == n, col
        assert totals[col]["weighted_mean"] == pytest.approx(mean, abs=1e-11), col
    assert totals["D1_CamPrec"]["weighted_mean"] == pytest.approx(0.7021636320348326, abs=1e-11)  # the contract's
    # the frozen table's denominators: 9600 outputs, D1 7500 = 7600 raw minus GameCraft's 100 static-hold rows
    assert sum(r["n_outputs"] for r in off.read_paper_table()) == 9600


def test_csv_cells_are_twelve_significant_digits():
    # JSON 0.6986732682216313 -> CSV 0.698673268222; JSON 0.06333333333333334 -> CSV 0.0633333333333
    assert table.csv_cell(0.6986732682216313) == "0.698673268222"
    assert table.csv_cell(0.06333333333333334) == "0.0633333333333"
    assert (table.csv_cell(None), table.csv_cell(True), table.csv_cell(400)) == ("NA", "true", "400")
    assert table.md_cell(0.6986732682216313) == "0.699"


def test_a_malformed_table_fails_naming_file_line_and_column(tmp_path):
    bad = tmp_path / "results.csv"
    lines = off.PAPER_TABLE.read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1].replace("0.698673268222", "high")]) + "\n")
    with pytest.raises(CaseFailure, match=r"results\.csv: line 2: D1_CamPrec"):
        off.read_paper_table(bad)
