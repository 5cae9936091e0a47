"""Small data-model helpers with exact expected values."""

from __future__ import annotations

import math

from worldrecall.core.data import finite_float, one_line


def test_finite_float_reads_only_finite_numbers():
    assert finite_float("0.75") == 0.75 and finite_float(3) == 3.0 and finite_float(True) == 1.0
    for bad in (None, "", "x", float("nan"), math.inf, -math.inf, [1.0], {}):
        assert finite_float(bad) is None, bad


def test_one_line_collapses_whitespace_and_caps_length():
    assert one_line("a\n  b\tc") == "a b c"
    assert one_line(ValueError("x" * 600)) == "x" * 500 and len(one_line("y" * 300, 200)) == 200
