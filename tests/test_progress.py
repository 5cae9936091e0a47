"""A resumed run's bar starts at the cases already done, and its rate counts only this run's cases."""

from __future__ import annotations

import io

from worldrecall.engine.progress import progress_bar


def test_resumed_run_rate_counts_only_new_cases(monkeypatch):
    import time

    clock = [1000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    bar = progress_bar(384, "memobench", enabled=True, already=380)
    bar.fp = io.StringIO()
    clock[0] += 2.0
    bar.update(4)  # 4 new cases in 2 s
    d = bar.format_dict
    assert (d["n"], d["initial"], d["total"]) == (384, 380, 384)
    rate = (d["n"] - d["initial"]) / d["elapsed"]
    assert rate == 2.0  # not (380 + 4) / 2 s = 192 cases/s
    assert "2.00case/s" in bar.format_meter(**{**d, "rate": None})
    bar.close()


def test_disabled_bar_is_silent(capsys):
    bar = progress_bar(3, "x", enabled=False)
    bar.update(3)
    bar.close()
    assert capsys.readouterr() == ("", "")
