"""Memory at release scale: peak RSS of a MemoBench-layout run with 1920x1080 x 300-frame GT clips.

Builds, in a temp folder (or ``--workdir``), the synthetic suite's MemoBench layout at the generated size
(832x480, 81 generated frames, 300 GT frames, ``--clips`` clips x 8 counterfactual models), then re-writes
every GT frame at 1920x1080 (JPG, as the release ships them). Runs ``worldrecall run only=[memobench]``
on the classical backends with 1 and 2 workers, sampling the RSS of the whole process tree every 20 ms,
and prints per run: peak tree RSS, peak RSS of any one process, seconds per clip, and a digest of every
score (status + values of every row) so two code versions can be compared: ``--save-scores a.json`` /
``--compare a.json`` (exit code 1 on a difference).

    python benchmarks/memory.py [--clips 3] [--workers 1,2] [--workdir DIR] [--max-bytes 1G]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

GT_SIZE = (1920, 1080)
SUITE = {"n_cases": 3, "width": 832, "height": 480, "gt_frames": 300, "gen_frames": 81}


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree(root: int) -> list[int]:
    parent: dict[int, int] = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                raw = Path(f"/proc/{e}/stat").read_text()
                parent[int(e)] = int(raw[raw.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                continue
    out, frontier = [root], {root}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier}
        out += sorted(frontier)
    return out


class PeakRss:
    """Samples a process tree's RSS in a thread: ``tree`` = peak of the sum, ``one`` = peak of any process."""

    def __init__(self, pid: int, every_s: float = 0.02):
        self.pid, self.every_s = pid, every_s
        self.tree = self.one = 0
        self.n_procs = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            pids = _tree(self.pid)
            sizes = [_rss_bytes(p) for p in pids]
            self.tree = max(self.tree, sum(sizes))
            self.one = max(self.one, max(sizes, default=0))
            self.n_procs = max(self.n_procs, sum(1 for s in sizes if s))
            time.sleep(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._t.join()


def build(root: Path, clips: int) -> Path:
    """The synthetic MemoBench layout at 832x480, then every GT frame re-written at 1920x1080."""
    import cv2

    from worldrecall.plugins.synthetic.build import ensure_suite

    suite = root / "suite"
    ensure_suite(suite, seed=0, **{**SUITE, "n_cases": clips})
    mark = suite / "GT_1080P"
    if not mark.exists():
        for f in sorted((suite / "memobench" / "data").rglob("RGB*/*.jpg")):
            img = cv2.imread(str(f), cv2.IMREAD_COLOR)
            if img.shape[1::-1] != GT_SIZE:
                cv2.imwrite(str(f), cv2.resize(img, GT_SIZE, interpolation=cv2.INTER_CUBIC),
                            [cv2.IMWRITE_JPEG_QUALITY, 95])
        mark.write_text("GT frames re-written at 1920x1080\n")
    return suite


def score_digest(out: Path) -> tuple[str, dict]:
    """sha256 over every row's (key, status, values), sorted; and the rows themselves."""
    rows = {}
    for f in sorted((out / "results").rglob("rows-shard-*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip().endswith("}"):
                r = json.loads(line)
                rows["|".join((r["benchmark"], r["model"], r["case_id"], r["metric"]))] = [r["status"], r["values"]]
    text = json.dumps(rows, sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest(), rows


def run_once(suite: Path, out: Path, clips: int, workers: int, extra: list[str]) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    params = [f"suite.params.{k}={v}" for k, v in {**SUITE, "n_cases": clips}.items()]
    cmd = [sys.executable, "-m", "worldrecall.engine.cli", "run", f"suite.root={suite}", *params,
           "only=[memobench]", f"workers={workers}", f"output_root={out}", "tracking=none", "progress=false",
           "report.enabled=false", *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = PeakRss(proc.pid)
    log, _ = proc.communicate()
    peak.stop()
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 3):
        raise SystemExit(f"run failed ({proc.returncode}):\n{log[-4000:]}")
    digest, rows = score_digest(out)
    timing = json.loads(next((out / "results").rglob("meta/timing.json")).read_text())
    return {"workers": workers, "peak_tree_rss_gb": round(peak.tree / 2**30, 3),
            "peak_one_process_rss_gb": round(peak.one / 2**30, 3), "processes": peak.n_procs,
            "wall_s": round(wall, 1), "s_per_clip": round(wall / clips, 1),
            "runner_s": round(timing.get("total", 0.0), 1), "rows": len(rows),
            "failed_rows": sum(1 for s, _ in rows.values() if s == "failed"), "score_digest": digest,
            "_rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clips", type=int, default=3)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--max-bytes", default=None, help="video.max_bytes for the runs (default: the config's)")
    ap.add_argument("--save-scores", default=None)
    ap.add_argument("--compare", default=None)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="wr-mem-"))
    t0 = time.perf_counter()
    suite = build(work, args.clips)
    report: dict = {"dataset": f"{args.clips} clips x 8 models, GT {GT_SIZE[0]}x{GT_SIZE[1]} x {SUITE['gt_frames']} "
                               f"JPG, generated {SUITE['width']}x{SUITE['height']} x {SUITE['gen_frames']} mp4",
                    "build_s": round(time.perf_counter() - t0, 1), "runs": []}
    extra = [f"video.max_bytes={args.max_bytes}"] if args.max_bytes else []
    scores: dict[str, dict] = {}
    for w in (int(x) for x in args.workers.split(",")):
        r = run_once(suite, work / f"out-{w}", args.clips, w, extra)
        scores[str(w)] = r.pop("_rows")
        report["runs"].append(r)
    print(json.dumps(report, indent=2))
    code = 0
    text = lambda rows: json.dumps(rows, sort_keys=True, allow_nan=True)
    if args.save_scores:
        Path(args.save_scores).write_text(json.dumps({w: text(r) for w, r in scores.items()}))
    if args.compare:  # per worker count: one process and forked workers differ in float-reduction threads
        before = json.loads(Path(args.compare).read_text())
        for w, rows in scores.items():
            same = before.get(w) == text(rows)
            print(f"scores with {w} worker(s) vs {args.compare}: "
                  f"{'identical' if same else 'DIFFERENT' if w in before else 'not in that file'}")
            code |= 0 if same or w not in before else 1
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
