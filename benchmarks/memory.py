"""Memory at release scale: the peak RSS of every process of the run a user gets, on MemoBench's release layout.

Builds, in a temp folder (or ``--workdir``, reused across calls), the synthetic suite's MemoBench layout at the
generated size (832x480, 81 generated frames, 300 GT frames, N clips x 8 counterfactual models), then re-writes
every GT frame at 1920x1080 (JPG, as the release ships them). Then runs, per clip count, what a user types:

    worldrecall run suite=none 'only=[memobench]' workers=1 benchmarks.memobench.data_root=… generations=…

with the default outputs on (HTML report, MLflow, tables, submission), and samples every process of the tree
(the main process, forked workers, any helper process) every 20 ms. Each process's peak is the kernel's own
high-water mark (``VmHWM``, so a spike between two samples is not missed); the main process's and its waited
children's largest peak is also read exactly from ``wait4``'s rusage when the run ends.

Prints per run: the peak RSS of each process (largest first), the peak of the tree's sum, wall time, rows, and a
digest of every score (status + values of every row) so two code versions can be compared:
``--save-scores a.json`` / ``--compare a.json`` (exit code 1 on a difference).

    python benchmarks/memory.py [--clips 3,30] [--workers 1] [--workdir DIR] [--set report.enabled=false …]

To measure another checkout (e.g. the commit before a change), run this file with ``PYTHONPATH=<checkout>``:
the runs import the code under test from there.
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
GB = 2**30


def _status(pid: int) -> dict[str, str]:
    try:
        return dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    except OSError:
        return {}


def _kb(field: str | None) -> int:
    return int(field.split()[0]) * 1024 if field else 0


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
    """Samples a process tree in a thread: per process its peak RSS (``VmHWM``) and what it is; the tree's sum."""

    def __init__(self, pid: int, every_s: float = 0.02):
        self.pid, self.every_s = pid, every_s
        self.tree = 0
        self.procs: dict[int, dict[str, object]] = {}
        self._cmdline = self._cmd(pid)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    @staticmethod
    def _cmd(pid: int) -> bytes:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return b""

    def _role(self, pid: int, name: str) -> str:
        if pid == self.pid:
            return "main"
        return "worker (fork)" if self._cmd(pid) == self._cmdline else name

    def _loop(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid in _tree(self.pid):
                st = _status(pid)
                if not st:
                    continue
                total += _kb(st.get("VmRSS"))
                p = self.procs.setdefault(pid, {"pid": pid, "role": self._role(pid, st.get("Name", "?").strip()),
                                                "peak": 0})
                p["peak"] = max(int(p["peak"]), _kb(st.get("VmHWM")), _kb(st.get("VmRSS")))  # type: ignore[call-overload]
            self.tree = max(self.tree, total)
            time.sleep(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._t.join()


def build(root: Path, clips: int) -> Path:
    """The MemoBench layout of ``clips`` clips: up to :data:`RENDERED` rendered by the synthetic suite (832x480,
    every GT frame re-written at 1920x1080); more are copies of those under new clip ids (:func:`replicate`)."""
    if clips <= RENDERED:
        return _render(root, clips)
    return replicate(_render(root, RENDERED), root / f"suite-{clips}", clips)


RENDERED = 3  # clips rendered for real: rendering 300 GT frames x 8 models takes minutes a clip on 2 cores


def replicate(src: Path, dst: Path, clips: int) -> Path:
    """``clips`` clips made from ``src``'s: clip ``<Scene>_<NNN>`` copy ``r`` is ``<Scene>_<NNN + 100 r>`` (its
    ``RGB<n>`` and ``<n>`` folders renamed, sheet and metadata rows added). Each copy's GT JPG frames carry a
    copy-number comment after the image's end marker: the same pixels, another content digest, so no
    measurement, alignment or thumbnail of one copy is a cache hit for another (every clip is evaluated and
    drawn). Generated videos and sidecars are hard links."""
    import csv

    mark = dst / "REPLICATED"
    if mark.exists():
        return dst
    shutil.rmtree(dst, ignore_errors=True)
    data, out = dst / "memobench" / "data" / "Synthetic_processed", dst / "memobench" / "output"
    sdata = src / "memobench" / "data" / "Synthetic_processed"
    with open(sdata / "Synthetic_ExitReenter.csv", newline="") as f:
        sheet = list(csv.DictReader(f))
    with open(src / "memobench" / "data" / "sam3_metadata" / "synthetic_metadata.csv", newline="") as f:
        meta = {f"{r['scene']}_{int(r['video_id']):03d}": r for r in csv.DictReader(f)}
    rows, metas = [], []
    for k in range(clips):
        row = sheet[k % len(sheet)]
        r, clip = k // len(sheet), row["video_folder"]
        scene, num = clip.rsplit("_", 1)
        n = int(num) + 100 * r
        new = f"{scene}_{n:03d}"
        sdir, ddir = sdata / scene / clip, data / scene / new
        for p in sorted(sdir.rglob("*")):
            if p.is_dir():
                continue
            rel = p.relative_to(sdir).parts
            first = {f"RGB{int(num)}": f"RGB{n}", str(int(num)): str(n)}.get(rel[0], rel[0])
            q = ddir.joinpath(first, *rel[1:])
            q.parent.mkdir(parents=True, exist_ok=True)
            if rel[0].startswith("RGB") and p.suffix == ".jpg" and r:
                q.write_bytes(p.read_bytes() + f"worldrecall memory benchmark copy {r}".encode())
            else:
                os.link(p, q)
        for model in sorted(p.name for p in (src / "memobench" / "output").iterdir()):
            sgen = src / "memobench" / "output" / model / "Synthetic" / scene / clip
            for p in sorted(sgen.rglob("*")):
                if p.is_file():
                    q = out / model / "Synthetic" / scene / new / p.relative_to(sgen)
                    q.parent.mkdir(parents=True, exist_ok=True)
                    os.link(p, q)
        rows.append({**row, "video_folder": new})
        m = dict(meta[clip])
        m["video_id"] = str(n)
        m["exr_path"] = m["exr_path"].replace(f"/{clip}/RGB{int(num)}/", f"/{new}/RGB{n}/")
        metas.append(m)
    for path, table in ((data / "Synthetic_ExitReenter.csv", rows),  # csv only: the loader reads it without xlsx
                        (dst / "memobench" / "data" / "sam3_metadata" / "synthetic_metadata.csv", metas)):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)
    mark.write_text(f"{clips} clips copied from {src}\n")
    return dst


def _render(root: Path, clips: int) -> Path:
    """The synthetic MemoBench layout at 832x480, then every GT frame re-written at 1920x1080."""
    import cv2

    from worldrecall.plugins.synthetic.build import ensure_suite

    suite = root / f"suite-{clips}"
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
    """sha256 over every row's (status, values), sorted by (benchmark, model, case, metric); and the rows."""
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
    out.mkdir(parents=True)
    mb = suite / "memobench"
    cmd = [sys.executable, "-m", "worldrecall.engine.cli", "run", "suite=none", "only=[memobench]",
           f"workers={workers}", f"output_root={out}", "progress=false",
           f"benchmarks.memobench.data_root={mb / 'data'}", f"benchmarks.memobench.generations={mb / 'output'}", *extra]
    t0 = time.perf_counter()
    with open(out / "run.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=out)
        peak = PeakRss(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)  # the exact peak of the main process and its waited children
    peak.stop()
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 3):
        raise SystemExit(f"run failed ({code}):\n{(out / 'run.log').read_text()[-4000:]}")
    digest, rows = score_digest(out)
    procs = sorted(peak.procs.values(), key=lambda p: -int(p["peak"]))  # type: ignore[call-overload]
    report = next((out / "results").glob("*/report/index.html"), None)
    return {"clips": clips, "workers": workers, "exit_code": code,
            "peak_rss_gb_per_process": [{"role": p["role"], "pid": p["pid"],
                                         "peak_gb": round(int(p["peak"]) / GB, 3)} for p in procs],  # type: ignore[call-overload]
            "peak_one_process_gb": round(max(int(procs[0]["peak"]) if procs else 0, usage.ru_maxrss * 1024) / GB, 3),  # type: ignore[call-overload]
            "peak_tree_sum_gb": round(peak.tree / GB, 3), "processes": len(procs),
            "wall_s": round(wall, 1), "report_bytes": sum(p.stat().st_size for p in report.parent.glob("*.html")) if report else None,
            "rows": len(rows), "failed_rows": sum(1 for s, _ in rows.values() if s == "failed"),
            "score_digest": digest, "_rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clips", default="3,30", help="clip counts, comma-separated (each builds its own layout)")
    ap.add_argument("--workers", default="1", help="worker counts, comma-separated")
    ap.add_argument("--workdir", default=None, help="keep the built layouts and outputs here (reused)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override for every run (e.g. report.enabled=false, video.max_bytes=1G)")
    ap.add_argument("--save-scores", default=None)
    ap.add_argument("--compare", default=None)
    ap.add_argument("--json", default=None, help="write the figures here too")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="wr-mem-"))
    report: dict = {"dataset": f"N clips x 8 models, GT {GT_SIZE[0]}x{GT_SIZE[1]} x {SUITE['gt_frames']} JPG, "
                               f"generated {SUITE['width']}x{SUITE['height']} x {SUITE['gen_frames']} mp4",
                    "overrides": args.set, "runs": []}
    scores: dict[str, dict] = {}
    for clips in (int(x) for x in args.clips.split(",")):
        t0 = time.perf_counter()
        suite = build(work, clips)
        report[f"build_s_{clips}"] = round(time.perf_counter() - t0, 1)
        for w in (int(x) for x in args.workers.split(",")):
            r = run_once(suite, work / f"out-{clips}-{w}", clips, w, args.set)
            scores[f"{clips}/{w}"] = r.pop("_rows")
            report["runs"].append(r)
            print(f"{clips} clips, {w} worker(s): peak per process " + ", ".join(
                f"{p['role']} {p['peak_gb']:.2f} GB" for p in r["peak_rss_gb_per_process"][:4])
                  + f"; tree sum {r['peak_tree_sum_gb']:.2f} GB; {r['wall_s']} s", flush=True)
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    code = 0
    text = lambda rows: json.dumps(rows, sort_keys=True, allow_nan=True)
    if args.save_scores:
        Path(args.save_scores).write_text(json.dumps({k: text(r) for k, r in scores.items()}))
    if args.compare:  # per clip count and worker count: one process and forked workers may differ in reductions
        before = json.loads(Path(args.compare).read_text())
        for k, rows in scores.items():
            same = before.get(k) == text(rows)
            print(f"scores ({k} clips/workers) vs {args.compare}: "
                  f"{'identical' if same else 'DIFFERENT' if k in before else 'not in that file'}")
            code |= 0 if same or k not in before else 1
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
