"""Every benchmark that applies, on real world-model videos, as a new user runs it (fresh ``worldrecall``
processes, default backends): what scored, what was skipped and why, the time of a first run and of a rerun
after one manifest field changed, and the rows file's line count after each.

Clips: ``../shared/data/real_outputs`` beside the checkout when it is there (WRBench's 10 go-and-return clips from
7 models, WorldFoundry's 16 rollouts), else the copies under ``tests/data/real_outputs`` (2 + 4).

    python benchmarks/real_outputs.py [--pose sift_pose] [--workdir DIR]

WRBench: one folder per model with a ``videos.json`` written from ``clips.json`` (camera preset, variant, prompt);
no requested trajectories (a user rarely has them), no probe answers. Scene Memory: the rollouts as one
generations folder per model (no ViPE sidecars). The manifest edit: every WRBench record gains a
``look_away_frame`` (the clip's middle frame), the videos untouched.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "real_outputs"
COPIES = ROOT / "tests" / "data" / "real_outputs"


def clips_root() -> Path:
    return SHARED if (SHARED / "wrbench" / "clips.json").is_file() else COPIES


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def wrbench_layout(src: Path, work: Path) -> dict[str, Path]:
    """One folder per model with its clips and a videos.json; {model: folder}."""
    folders: dict[str, Path] = {}
    records: dict[str, list[dict]] = collections.defaultdict(list)
    for clip in json.loads((src / "wrbench" / "clips.json").read_text())["clips"]:
        video = src / "wrbench" / clip["file"]
        if not video.is_file():
            continue
        model = slug(clip["model"])
        folder = folders.setdefault(model, work / "wrbench" / model)
        (folder / "videos").mkdir(parents=True, exist_ok=True)
        shutil.copy(video, folder / "videos" / video.name)
        records[model].append({"video_id": video.stem, "video_path": f"videos/{video.name}", "model": model,
                               "camera_type": clip["camera"]["preset"], "variant_id": clip["variant_id"],
                               "world_state_prompt": clip["world_state_prompt"], "frames": clip["frames"]})
    for model, recs in records.items():
        for r in recs:
            r.pop("frames")
        (folders[model] / "videos.json").write_text(json.dumps(recs, indent=1))
    return folders


def edit_manifests(src: Path, folders: dict[str, Path]) -> None:
    frames = {Path(c["file"]).stem: int(c["frames"])
              for c in json.loads((src / "wrbench" / "clips.json").read_text())["clips"]}
    for folder in folders.values():
        recs = json.loads((folder / "videos.json").read_text())
        for r in recs:
            r["look_away_frame"] = frames[r["video_id"]] // 2
        (folder / "videos.json").write_text(json.dumps(recs, indent=1))


def scene_memory_layout(src: Path, work: Path) -> Path:
    gens = work / "scene_memory"
    for clip in json.loads((src / "worldfoundry" / "clips.json").read_text())["clips"]:
        video = src / "worldfoundry" / clip["file"]
        if video.is_file():
            (gens / slug(video.stem)).mkdir(parents=True, exist_ok=True)
            shutil.copy(video, gens / slug(video.stem) / "rollout.mp4")
    return gens


def cli(args: list[str], cwd: Path) -> tuple[int, float, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    code = "import sys; from worldrecall.engine.cli import main; sys.exit(main())"
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True)
    return res.returncode, time.perf_counter() - t0, res.stdout + res.stderr


def rows_of(out: Path) -> list[dict]:
    return [json.loads(x) for f in sorted(out.glob("results/*/rows-shard-*.jsonl")) for x in f.read_text().splitlines()]


def summary(rows: list[dict]) -> list[str]:
    """Per metric: how many rows ok (with a value), skipped, failed, and the first reason of each."""
    by: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    why: dict[tuple[str, str], str] = {}
    for r in rows:
        by[r["metric"]][r["status"]] += 1
        if r["status"] != "ok":
            why.setdefault((r["metric"], r["status"]), r["reason"][:220])
    out = []
    for metric in sorted(by):
        c = by[metric]
        out.append(f"  {metric:<34} ok {c['ok']:>3}  skipped {c['skipped']:>3}  failed {c['failed']:>3}")
        for st in ("skipped", "failed"):
            if (metric, st) in why:
                out.append(f"      {st}: {why[(metric, st)]}")
    empty = sum(1 for r in rows if r["status"] == "ok" and not any(v is not None for v in r["values"].values()))
    out.append(f"  ok rows without any value: {empty}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pose", default="", help="a pose backend to name (e.g. sift_pose); default: the profile's")
    ap.add_argument("--workdir", default="")
    a = ap.parse_args()
    src = clips_root()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="wr-real-"))
    work.mkdir(parents=True, exist_ok=True)
    folders = wrbench_layout(src, work)
    gens = scene_memory_layout(src, work)
    common = ["suite=none", "progress=false", "tracking=none"] + ([f"models.pose={a.pose}"] if a.pose else [])
    print(f"clips from {src}; work in {work}")

    wr = [f"output_root={work / 'out_wrbench'}", "only=[wrbench]", f"benchmarks.wrbench.data_root={work / 'wrbench'}",
          "benchmarks.wrbench.generations={" + ",".join(f"{m}:{f}" for m, f in folders.items()) + "}", *common]
    code, secs, said = cli(["check", *wr], work)
    print(f"\nWRBench: worldrecall check exit {code} ({secs:.1f} s)")
    print("\n".join("  " + x for x in said.strip().splitlines() if not x.startswith("[")))
    code, secs, said = cli(["run", *wr], work)
    rows = rows_of(work / "out_wrbench")
    print(f"\nWRBench first run: exit {code}, {secs:.1f} s, {len(rows)} rows in the rows file, "
          f"{len(folders)} models / {sum(1 for r in rows if r['metric'] == 'wrbench.visual_integrity')} clips")
    print("\n".join(summary(rows)))
    edit_manifests(src, folders)
    code, secs, said = cli(["run", *wr], work)
    rows = rows_of(work / "out_wrbench")
    forward = [json.loads(p.read_text()).get("model_forward_seconds", {})
               for p in sorted((work / "out_wrbench").glob("results/*/meta/timing.json"))]
    print(f"WRBench rerun after a videos.json edit (look_away_frame on every record): exit {code}, {secs:.1f} s, "
          f"{len(rows)} rows in the rows file; model forward seconds of the runs: {forward}")

    sm = [f"output_root={work / 'out_scene_memory'}", "only=[scene_memory]", f"benchmarks.scene_memory.data_root={gens}",
          f"benchmarks.scene_memory.generations={gens}", *common]
    code, secs, said = cli(["check", *sm], work)
    print(f"\nScene Memory: worldrecall check exit {code} ({secs:.1f} s)")
    print("\n".join("  " + x for x in said.strip().splitlines() if not x.startswith("[")))
    code, secs, said = cli(["run", *sm], work)
    rows = rows_of(work / "out_scene_memory")
    print(f"\nScene Memory run: exit {code}, {secs:.1f} s, {len(rows)} rows")
    print("\n".join(summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
