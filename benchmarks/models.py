"""Speed of every perception backend: frames/s at batch 1 and batched, and their ratio.

Reference backends are built at FULL size with random weights (same FLOPs as the real ones, no weight
files); classical and sidecar backends run as shipped. Frames are 640×360 (MemoBench's 640-capped
generations). Each backend gets one warm-up call, then times ``--frames`` frames at batch 1 and at
``--batch``. The default (``--quick``) times 2 frames at batch 1 and 2 — a few minutes on 2 CPU cores;
pass more frames for steadier figures.

    python benchmarks/models.py                      # --quick: 2 frames, batch 2, SAM-3 skipped
    python benchmarks/models.py --frames 16 --batch 8 --device cuda --dtype bfloat16
    python benchmarks/models.py --only dinov2_base,raft_large --include-sam3

SAM-3 at full size costs ~40 s per frame on a CPU, so it runs only with ``--include-sam3``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from pathlib import Path as _P
from typing import Any

import numpy as np

from worldrecall.core.data import Case

sys.path.insert(0, str(_P(__file__).resolve().parents[1] / "tests"))
from helpers import tiny_models as testing

from worldrecall.plugins.models import plugin

PROMPT = "a red car drives along the road under a cloudy sky"


def frames(n: int, h: int, w: int) -> list[np.ndarray]:
    """A slowly panning textured scene (so flow / matching have something to find)."""
    big = testing.textured_image(h + 8 * n, w + 8 * n, seed=0)
    return [np.ascontiguousarray(big[4 * i:4 * i + h, 8 * i:8 * i + w]) for i in range(n)]


def sidecar_case(folder: Path, n: int, h: int, w: int) -> Case:
    """A converted-layout sidecar with n rows (depth 80×45, target instance id 1)."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "poses_c2w.npy", np.repeat(np.eye(4, dtype=np.float32)[None], n, axis=0))
    k = np.array([[60.0, 0, 40], [0, 60.0, 22.5], [0, 0, 1]], np.float32)
    np.save(folder / "intrinsics.npy", np.repeat(k[None], n, axis=0))
    np.save(folder / "depth_metric.npy", np.full((n, 45, 80), 3.0, np.float32))
    np.save(folder / "frame_indices.npy", np.arange(n, dtype=np.int32))
    ids = np.zeros((n, h, w), np.uint8)
    ids[:, h // 3: h // 2, w // 3: w // 2] = 1
    np.savez(folder / "instance_masks.npz", ids=ids)
    (folder / "instances.json").write_text(json.dumps({"instances": {"1": "a red car"}, "target": 1}))
    return Case(benchmark="bench", case_id="c", model="m", video=None, sidecars={"vipe": folder})


def caller(role: str, obj: Any, case: Case) -> Callable[[list[np.ndarray]], Any]:
    """One role call over a frame list (pairs for flow/perceptual, a sequence for pose)."""
    if role == "flow":
        return lambda fr: obj.flow(list(zip(fr, fr[1:] + fr[:1])), case=case)
    if role == "patch_embedder":
        return lambda fr: obj.patch_tokens(fr, case=case, indices=list(range(len(fr))))
    if role == "depth":
        return lambda fr: obj.depth(fr, case=case, indices=list(range(len(fr))))
    if role == "segmenter":
        return lambda fr: obj.segment(fr, "red car", case=case, indices=list(range(len(fr))))
    if role in ("aesthetic", "iqa"):
        return lambda fr: obj.score_frames(fr, case=case)
    if role == "perceptual":
        return lambda fr: obj.distance(fr, fr[1:] + fr[:1])
    if role == "text_image_reward":
        return lambda fr: obj.reward(PROMPT, fr)
    if role == "image_embedder":
        return lambda fr: obj.embed(fr, case=case)
    if role == "pose":
        return lambda fr: obj.poses(fr, case=case, indices=list(range(len(fr))))
    raise KeyError(role)


def set_batch(obj: Any, batch: int) -> None:
    opts = getattr(obj, "opts", None) or getattr(getattr(obj, "encoder", None), "opts", None)
    if opts is not None:
        opts.batch_size = batch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", default=True, help="2 frames, batch 2 (the default)")
    ap.add_argument("--frames", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--size", default="640x360", help="WxH of the frames")
    ap.add_argument("--only", default="", help="comma-separated backend names")
    ap.add_argument("--include-sam3", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = ap.parse_args()

    import torch

    w, h = (int(v) for v in args.size.lower().split("x"))
    specs = {s.name: s for s in plugin.specs()}
    only = [n for n in args.only.split(",") if n]
    names = only or [n for n in specs if n != "mapanything"]
    if "sam3" in names and not args.include_sam3:
        names.remove("sam3")
        print("sam3: skipped (full size is ~40 s/frame on a CPU; pass --include-sam3)")
    fr = frames(args.frames, h, w)
    tmp = Path(tempfile.mkdtemp(prefix="wr-bench-models-"))
    case = sidecar_case(tmp / "annotations_vipe" / "video_vipe_ann", args.frames, h, w)
    opts = {"device": args.device, "dtype": args.dtype}
    print(f"device={args.device} dtype={args.dtype} torch threads={torch.get_num_threads()} "
          f"frames={args.frames} of {w}x{h}, batch {args.batch}")
    print(f"{'backend':24s} {'kind':9s} {'build s':>8s} {'fps@1':>8s} {f'fps@{args.batch}':>8s} {'ratio':>6s}")
    for name in names:
        spec = specs[name]
        t0 = time.perf_counter()
        try:
            if spec.kind == "reference":
                obj = testing.full_size_backend(name, opts)
            else:
                obj = spec.factory({**spec.defaults, "device": args.device})
        except Exception as e:  # a missing optional package: say so, go on
            print(f"{name:24s} unavailable: {type(e).__name__}: {e}")
            continue
        build = time.perf_counter() - t0
        call = caller(spec.role, obj, case)
        set_batch(obj, 1)
        call(fr[:2] if spec.role == "pose" else fr[:1])  # warm-up (lazy imports, allocator)
        fps = []
        for b in (1, args.batch):
            set_batch(obj, b)
            t0 = time.perf_counter()
            call(fr)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            fps.append(len(fr) / (time.perf_counter() - t0))
        print(f"{name:24s} {spec.kind:9s} {build:8.1f} {fps[0]:8.2f} {fps[1]:8.2f} {fps[1] / fps[0]:6.2f}",
              flush=True)
        del obj
    return 0


if __name__ == "__main__":
    sys.exit(main())
