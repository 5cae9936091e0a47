"""A resumed run's bar starts at the cases already done, and its rate counts only this run's cases."""

from __future__ import annotations

import io

from tqdm import tqdm

from worldrecall.engine.stages.progress import progress_bar


def test_resumed_run_rate_counts_only_new_cases():
    bar = progress_bar(384, "memobench", enabled=True, already=380)
    bar.fp = io.StringIO()
    bar.update(4)
    d = bar.format_dict
    bar.close()
    assert (d["n"], d["initial"], d["total"]) == (384, 380, 384)
    # tqdm's rate is (n - initial) / elapsed: 4 new cases in 2 s -> 2 cases/s, not (380 + 4) / 2 = 192
    line = tqdm.format_meter(d["n"], d["total"], 2.0, unit=d["unit"], initial=d["initial"])
    assert "2.00case/s" in line and "192" not in line


def test_disabled_bar_is_silent(capsys):
    bar = progress_bar(3, "x", enabled=False)
    bar.update(3)
    bar.close()
    assert capsys.readouterr() == ("", "")
