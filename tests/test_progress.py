"""Progress: a tqdm bar on a terminal (a resumed run's rate counts only this run's cases); without a terminal
(CI, tee, a SLURM log) one plain line per stage at most every few seconds, plus a final line."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from tqdm import tqdm

from worldrecall.engine.stages.progress import LINE_EVERY_S, LineProgress, progress_bar


def test_resumed_run_rate_counts_only_new_cases():
    bar = progress_bar(384, "memobench", enabled=True, already=380, terminal=True)
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


def test_without_a_terminal_the_bar_is_plain_lines():
    assert isinstance(progress_bar(3, "x", enabled=True, terminal=False), LineProgress)
    assert isinstance(progress_bar(3, "x", enabled=True, terminal=True), tqdm)


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_one_line_per_interval_and_a_final_line():
    out, clock = io.StringIO(), _Clock()
    bar = LineProgress(200, "memobench", every=10.0, stream=out, clock=clock)
    for _ in range(199):  # one case every 0.5 s: 99.5 s of work
        bar.update(1)
        clock.t += 0.5
    bar.update(1)
    bar.close()
    bar.close()  # closing twice writes nothing more
    lines = out.getvalue().splitlines()
    # the clock starts at the first case: a line every 10 s of the ~100 s (never more often), then the final one
    assert 8 <= len(lines) - 1 <= 10, lines
    assert lines[0] == "memobench: 21/200 cases (10%), 2.0 cases/s, ~1m30s left"
    assert lines[-1] == "memobench: 200/200 cases in 1m40s"
    assert all("\r" not in line for line in lines)


def test_a_resumed_stage_says_what_was_done_before():
    out, clock = io.StringIO(), _Clock()
    bar = LineProgress(10, "opis", already=7, every=10.0, stream=out, clock=clock)
    bar.update(3)
    bar.close()
    assert out.getvalue() == "opis: 10/10 cases in 0 s (7 done before)\n"


def test_a_run_without_a_terminal_writes_few_progress_lines(tmp_path):
    """The path users take: `worldrecall run` with stderr to a file (a 2-case suite, every benchmark)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TQDM_")}
    cmd = [sys.executable, "-m", "worldrecall.engine.cli", "run", "experiment=[smoke,quiet]", "progress=true",
           f"output_root={tmp_path}"]
    with open(tmp_path / "err.log", "w") as err:
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, timeout=600, check=False)
    log = (tmp_path / "err.log").read_text()
    assert done.returncode == 0, log[-2000:]
    stages = [line for line in log.split("\n") if line.startswith(("memobench:", "opis:", "scene_memory:", "wrbench:", "mind:"))]
    finals = [line for line in stages if " cases in " in line]
    assert sorted(line.split(":")[0] for line in finals) == ["memobench", "mind", "opis", "scene_memory", "wrbench"]
    assert "\r" not in "\n".join(stages)  # plain lines, no redrawn bar
    # the suite build (a plugin's own tqdm bar) redraws at most every LINE_EVERY_S seconds, not every case
    assert log.count("building the synthetic suite") <= 2 + 60 / LINE_EVERY_S
