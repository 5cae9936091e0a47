"""Warm rerun and re-score of two code versions, interleaved, on a shared (busy) machine: wall and CPU seconds.

``pipeline.py`` times each figure in its own fresh folder, one code version after the other; on a machine other
work also loads, the two versions then meet different loads. This script takes two output roots that each hold
a cold default run made by one version (``pipeline.py --workdir …`` leaves them: ``<dir>/run-1/single``), and
alternates the versions run by run — A, B, A, B … —, each a fresh ``worldrecall run`` process as users run it:

  - warm rerun: the cold run's command again;
  - re-score: the same command with a new ORS ``area_min`` (a value neither run scored before).

It prints, per version and figure, the median and range of wall seconds and of CPU seconds (user + system of
the process and its children: what the job itself cost, whatever else ran), and B / A of the medians.

    python benchmarks/interleaved.py --a /tmp/snap-base --b /tmp/snap-new \\
        --root-a /tmp/bench-base/run-1/single --root-b /tmp/bench-new/run-1/single --suite <suite> [--repeat 3]

``--a``/``--b`` are source trees (checkouts) put first on ``PYTHONPATH`` for their runs; each is started as its
own ``worldrecall`` console script starts it (its ``pyproject.toml``'s ``[project.scripts]``), so an older
checkout whose command was another function runs as its users ran it. ``--suite-a``/``--suite-b``: a suite per
version, where their built-in suites differ (an older version builds its own in its root's cold run).

A machine that is slower or busier than the one where A was timed slows both versions alike: ``--a-reference``
(``"re-score=7.7"``, ``"warm rerun=5.5"``: A's seconds measured elsewhere, e.g. in an issue) adds B's median
scaled to that machine — B / A here times A there —, the figure to hold against a target set there.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from pipeline import SWEEP_KEY, user_env


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one process and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def console_command(tree: Path) -> list[str]:
    """How ``tree``'s ``worldrecall`` console script starts: ``python -c`` calling its ``module:function``."""
    import tomllib

    target = tomllib.loads((tree / "pyproject.toml").read_text())["project"]["scripts"]["worldrecall"]
    module, func = target.split(":")
    return [sys.executable, "-c", f"import sys; from {module} import {func}; sys.exit({func}())"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--root-a", required=True)
    ap.add_argument("--root-b", required=True)
    ap.add_argument("--suite", help="the suite both versions read (else --suite-a and --suite-b)")
    ap.add_argument("--suite-a")
    ap.add_argument("--suite-b")
    ap.add_argument("--a-reference", action="append", default=[], metavar="FIGURE=SECONDS",
                    help="A's median measured on another machine: B's is scaled to it (repeatable)")
    ap.add_argument("--n-cases", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    suites = {v: getattr(args, f"suite_{v}") or args.suite for v in ("a", "b")}
    if not all(suites.values()):
        ap.error("give --suite, or both --suite-a and --suite-b")
    reference = {}
    for item in args.a_reference:
        fig, _, secs = item.rpartition("=")
        if fig not in ("warm rerun", "re-score"):
            ap.error(f"--a-reference {item!r}: the figure is 'warm rerun' or 're-score'")
        try:
            reference[fig] = float(secs)
        except ValueError:
            ap.error(f"--a-reference {item!r}: {secs!r} is not a number of seconds")
    got: dict[str, dict[str, list[tuple[float, float]]]] = {"a": {}, "b": {}}
    salt = int(time.time()) % 100_000  # each invocation's re-scores use values no earlier run scored
    for i in range(args.repeat):
        for v in ("a", "b"):
            env = user_env()
            env["PYTHONPATH"] = os.pathsep.join([str(Path(getattr(args, v)).resolve()), env.get("PYTHONPATH", "")])
            base = [*console_command(Path(getattr(args, v)).resolve()), "run",
                    f"output_root={getattr(args, 'root_' + v)}",
                    f"suite.root={Path(suites[v]).resolve()}", f"suite.params.n_cases={args.n_cases}",
                    "progress=false"]
            got[v].setdefault("warm rerun", []).append(timed(base, env))
            value = f"{0.004 + (salt * 10 + i) * 1e-9:.9f}"  # new to both roots: a pure re-score each time
            got[v].setdefault("re-score", []).append(timed([*base, f"{SWEEP_KEY}={value}"], env))
    out: dict[str, dict] = {}
    for fig in ("warm rerun", "re-score"):
        row = {}
        for v in ("a", "b"):
            walls = [w for w, _ in got[v][fig]]
            cpus = [c for _, c in got[v][fig]]
            row[v] = {"wall s median [min, max]": [round(statistics.median(walls), 2), round(min(walls), 2),
                                                   round(max(walls), 2)],
                      "cpu s median [min, max]": [round(statistics.median(cpus), 2), round(min(cpus), 2),
                                                  round(max(cpus), 2)]}
        row["b / a wall"] = round(row["b"]["wall s median [min, max]"][0] / row["a"]["wall s median [min, max]"][0], 3)
        row["b / a cpu"] = round(row["b"]["cpu s median [min, max]"][0] / row["a"]["cpu s median [min, max]"][0], 3)
        if fig in reference:
            row["b scaled to a's reference machine s"] = round(row["b / a wall"] * reference[fig], 2)
        out[fig] = row
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
