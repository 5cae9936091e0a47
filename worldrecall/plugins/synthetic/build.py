"""Building the synthetic revisit suite on disk: :func:`ensure_suite` (idempotent, atomic, locked, parallel).

One case = one story (camera program, target, change while unseen, props) rendered as a GT clip and as
eight counterfactual generations, written into the MemoBench, Scene Memory F1, OPIS, WRBench and MIND layouts plus VQA
banks and truth files. ``root/manifest.json`` lists every case, its facts and its relative paths.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

GENERATOR_VERSION = "5"  # 2: OPIS layout gains reference_geometry.npz, linked sidecars, domains.json; 3: WRBench layout; 4: hit distances and normals computed CPU-independently (render.exact_hits); 5: MIND layout (mind_layout.py)
MANIFEST = "manifest.json"
COMPLETE = "COMPLETE"


def suite_params(seed: int, n_cases: int, width: int, height: int, gt_frames: int, gen_frames: int) -> dict:
    """The parameters that decide the suite's content (the manifest's hash covers exactly these)."""
    return {
        "generator_version": GENERATOR_VERSION,
        "seed": int(seed),
        "n_cases": int(n_cases),
        "width": int(width),
        "height": int(height),
        "gt_frames": int(gt_frames),
        "gen_frames": int(gen_frames),
    }


def params_digest(params: dict) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()


def is_complete(root: Path, digest: str) -> bool:
    """A finished suite for these parameters is at ``root`` (manifest hash matches and completion marker)."""
    root = Path(root)
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        marker = (root / COMPLETE).read_text().strip()
    except (OSError, ValueError):
        return False
    return manifest.get("params_digest") == digest and marker == digest


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_suite(
    root: Path | str,
    *,
    seed: int = 0,
    n_cases: int = 24,
    width: int = 320,
    height: int = 240,
    gt_frames: int = 90,
    gen_frames: int = 72,
    workers: int | None = None,
    progress: bool = False,
) -> Path:
    """Build the synthetic suite at ``root`` unless a complete one with the same parameters is there.

    Safe to call from several processes at once (a file lock on ``root.parent/.lock``); the suite is built
    in a temporary folder beside ``root`` and renamed into place, so ``root`` is either absent, stale (and
    replaced) or complete. ``workers`` processes render cases in parallel (default: up to 2).
    """
    if width % 2 or height % 2 or width < 32 or height < 24:
        raise ValueError(f"suite size {width}x{height}: width and height must be even and at least 32x24")
    if gt_frames < 16 or gen_frames < 12 or n_cases < 1:
        raise ValueError("suite needs gt_frames >= 16, gen_frames >= 12 and n_cases >= 1")
    root = Path(root).expanduser().absolute()
    params = suite_params(seed, n_cases, width, height, gt_frames, gen_frames)
    digest = params_digest(params)
    if is_complete(root, digest):
        return root
    with _locked(root.parent / ".lock"):
        if is_complete(root, digest):  # another process finished it while we waited
            return root
        tmp = root.parent / f".{root.name}.building-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            _build(tmp, params, digest, workers, progress)
            stale = None
            if root.exists():
                stale = root.parent / f".{root.name}.stale-{uuid.uuid4().hex[:8]}"
                os.rename(root, stale)
            os.rename(tmp, root)
            if stale is not None:
                shutil.rmtree(stale, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return root


def _build_case_job(job: tuple) -> dict:
    from worldrecall.plugins.synthetic.case import build_case

    return build_case(*job)


def _worker_init() -> None:
    import cv2

    cv2.setNumThreads(1)


def _build(tmp: Path, params: dict, digest: str, workers: int | None, progress: bool = False) -> None:
    """Render every case into ``tmp`` (a process pool when ``workers`` > 1), then the sheets and manifest.

    ``progress``: a bar over rendered cases (a cold build takes minutes; it must not look stuck)."""
    from worldrecall.plugins.synthetic.case import GEN_FPS, depth_size
    from worldrecall.plugins.synthetic.counterfactuals import MODELS
    from worldrecall.plugins.synthetic.programs import PROGRAMS

    t0 = time.perf_counter()
    tmp.mkdir(parents=True)
    n = params["n_cases"]
    n_workers = max(1, min(workers or min(2, os.cpu_count() or 1), n))
    records = _render_cases(tmp, params, n_workers, progress)
    layout_files = _write_layout_files(tmp, params, records)
    manifest = {
        "suite": "worldrecall synthetic revisit suite",
        "params": params,
        "params_digest": digest,
        "models": list(MODELS),
        "programs": list(PROGRAMS),
        "gen_fps": GEN_FPS,
        "depth_size": list(depth_size(params["width"], params["height"])),
        "layouts": {
            "memobench_data": "memobench/data",
            "memobench_output": "memobench/output",
            "memobench_vqa_truth": "memobench/vqa_truth",
            "scene_memory": "scene_memory",
            "opis_final": "opis/final",
            "opis_generations": "opis/generations",
            "wrbench_release": "wrbench/release",
            "wrbench_videos": "wrbench/videos",
            "mind_data": "mind/MIND-Data",
            "mind_generations": "mind/generations",
        },
        "files": layout_files,
        "cases": records,
        # what was rendered, byte for byte: two machines agree on the suite exactly when this agrees
        "content_digest": content_digest(tmp),
        "build_seconds": round(time.perf_counter() - t0, 2),
        "workers": n_workers,
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    (tmp / COMPLETE).write_text(digest + "\n")


def _render_cases(tmp: Path, params: dict, n_workers: int, progress: bool) -> list[dict]:
    """Every case's manifest record, in case order (serial, or a spawn pool of ``n_workers``)."""
    from worldrecall.plugins.synthetic.case import build_case

    n = params["n_cases"]
    jobs = [(str(tmp), i, params, 1 if n_workers > 1 else 0) for i in range(n)]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, desc="building the synthetic suite", unit="case", dynamic_ncols=True)
    if n_workers == 1:
        records = []
        for j in jobs:
            records.append(build_case(*j))
            if bar is not None:
                bar.update(1)
    else:
        import multiprocessing as mp

        # spawn: open3d/TBB thread pools do not survive fork reliably
        with mp.get_context("spawn").Pool(n_workers, initializer=_worker_init) as pool:
            records = []
            for r in pool.imap(_build_case_job, jobs, chunksize=1):  # in case order
                records.append(r)
                if bar is not None:
                    bar.update(1)
    if bar is not None:
        bar.close()
    return records


def _write_layout_files(tmp: Path, params: dict, records: list[dict]) -> list[str]:
    """The suite-wide files of each layout (MemoBench sheets and metadata, OPIS domains, VQA failure cases)."""
    from worldrecall.plugins.synthetic import memobench_layout as mb
    from worldrecall.plugins.synthetic import opis_layout, vqa_bank
    from worldrecall.plugins.synthetic.files import SuiteFiles

    sheet_rows, meta_rows, failure_rows = [], [], []
    for r in records:
        ann = r["annotations"]
        sheet_rows.append(
            {
                "video_folder": r["case_id"],
                "exits": ann["exits"],
                "re-enter": ann["re_enter"],
                "frame_num": params["gt_frames"],
                "skip": "no",
                "prompt": r["prompt"],
            }
        )
        meta_rows.append(
            {
                "scene": r["scene"],
                "video_id": r["clip"],
                "subject": r["target"]["phrase"],
                "exr_path": r["paths"]["first_frame_release"],
                "prompt": r["prompt"],
            }
        )
        failure_rows.append(
            {
                "scene": r["scene"],
                "video_id": r["clip"],
                "hint": r["vqa"]["failure_hint"],
                "folder": r["case_id"],
                "Finished": "Yes",
                "prompt": r["prompt"],
            }
        )
    layout_files = mb.write_sheets(tmp, sheet_rows) + [mb.write_metadata(tmp, meta_rows)]
    layout_files.append(opis_layout.write_domains(SuiteFiles(tmp), [r["scene"].lower() for r in records]))
    fc = tmp / vqa_bank.FAILURES_PATH
    fc.parent.mkdir(parents=True, exist_ok=True)
    fc.write_text(vqa_bank.csv_text(vqa_bank.FAILURE_COLUMNS, failure_rows))
    layout_files.append(vqa_bank.FAILURES_PATH)
    from worldrecall.plugins.synthetic import wrbench_layout

    layout_files += wrbench_layout.write_layout(tmp, records)
    from worldrecall.plugins.synthetic import mind_layout

    mind_files, mind_facts = mind_layout.write_layout(tmp, records)
    layout_files += mind_files
    for r in records:  # the manifest's record of each case says where MIND put it
        r["mind"] = mind_facts[r["case_id"]]
    return layout_files


def content_digest(root: Path) -> str:
    """SHA-256 over every file under ``root`` (relative path and bytes; a link by its target text), in path
    order — the suite's content, independent of where and how fast it was built."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted(x for x in Path(root).rglob("*") if x.is_file() or x.is_symlink()):
        rel = p.relative_to(root).as_posix()
        if rel in (MANIFEST, COMPLETE):
            continue
        h.update(rel.encode() + b"\0")
        if p.is_symlink():
            h.update(b"link:" + str(p.readlink()).encode())
        else:
            with p.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()
