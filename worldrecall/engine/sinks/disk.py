"""The run's last lines: how much the output root holds, by part, and how to trim it.

Parts: the cache's kinds (``measurements``, ``synthetic`` — the built suite —, ``artifacts`` …, as
``worldrecall cache info`` names them), the blob store, the results (rows, tables, reports), MLflow (its
database and artifact folder) and the rest (Hydra's job folders). Sizes are bytes on disk as ``du`` counts them:
a file hard-linked in several places (a blob, the report's pictures, MLflow's artifacts) is counted once, in
the first part met in the order above. What can be trimmed: ``worldrecall cache prune`` (least recently used
entries first; results are never touched) and ``worldrecall cache clear --kind <kind>``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.stages.result import RunResult

# the order parts are counted in (a hard-linked file belongs to the first): cache kinds first, then blobs …
_LAST = ("results", "mlflow", "other")


def _walk(path: Path, seen: set[tuple[int, int]]) -> int:
    """Bytes on disk under ``path`` (a file or folder), each inode once."""
    total = 0
    stack = [str(path)]
    while stack:
        top = stack.pop()
        try:
            it = os.scandir(top)
        except NotADirectoryError:
            try:
                st = os.lstat(top)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
            continue
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                        continue
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1:
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def _parts(root: Path, cache: Path) -> list[tuple[str, Path]]:
    """(part, path) in counting order: the cache's kinds, the blob store, the results, then the rest."""
    parts: list[tuple[str, Path]] = []
    if cache.is_dir():
        parts += [(f"cache/{p.name}", p) for p in sorted(cache.iterdir())]
    counted = {cache.resolve()} if cache.is_dir() else set()
    for name in ("blobs", "results"):
        if (root / name).exists():
            parts.append((name, root / name))
            counted.add((root / name).resolve())
    if root.is_dir():
        for p in sorted(root.iterdir()):
            if p.resolve() not in counted:
                parts.append(("mlflow" if p.name.startswith(("mlflow", "mlruns", "mlartifacts")) else "other", p))
    return parts


def _du(paths: list[Path]) -> list[int] | None:
    """Bytes on disk of each path by ``du`` (one process: a hard-linked file counted once, under the first path
    that holds it; about 3x faster than walking in Python), or None where ``du`` cannot say."""
    import shutil
    import subprocess

    exe = shutil.which("du")
    if exe is None or not paths:
        return None
    try:
        res = subprocess.run([exe, "-s", "-B1", "--", *map(str, paths)], capture_output=True, text=True,
                             timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = res.stdout.splitlines()
    if len(lines) != len(paths):  # a path removed meanwhile, or a du without these options
        return None
    try:
        return [int(line.split("\t", 1)[0]) for line in lines]
    except ValueError:
        return None


def usage(output_root: Path, cache_dir: Path | None = None) -> dict[str, int]:
    """Bytes by part of an output root (see the module's docstring); parts that hold nothing are left out."""
    root = Path(output_root)
    parts = _parts(root, Path(cache_dir) if cache_dir is not None else root / "cache")
    sizes = _du([p for _, p in parts])
    if sizes is None:
        seen: set[tuple[int, int]] = set()
        sizes = [_walk(p, seen) for _, p in parts]
    out: dict[str, int] = {}
    for (name, _), n in zip(parts, sizes):
        out[name] = out.get(name, 0) + n
    return {k: v for k, v in out.items() if v}


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n < 10e9 else f"{n / 1e9:.1f} GB"


def disk_lines(output_root: Path, cache_dir: Path | None = None, sizes: Mapping[str, int] | None = None) -> list[str]:
    """The two lines a run ends with: the output root's size by part, and how to trim it."""
    sizes = dict(usage(output_root, cache_dir) if sizes is None else sizes)
    total = sum(sizes.values())
    cache = {k.split("/", 1)[1]: v for k, v in sizes.items() if k.startswith("cache/")}
    parts = []
    if cache:
        big = sorted(cache.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{k} {_mb(v)}" for k, v in big[:4] if v >= 0.05 * total or k == big[0][0])
        parts.append(f"cache {_mb(sum(cache.values()))} ({shown})")
    for k in ("blobs", *_LAST):
        if sizes.get(k):
            parts.append(f"{'MLflow' if k == 'mlflow' else k} {_mb(sizes[k])}")
    root = Path(output_root)
    where = f" output_root={root}"
    return [f"disk: {root} holds {_mb(total)}: " + "; ".join(parts),
            (f"trim it (results are kept): worldrecall cache prune --older-than 7d{where} (or --max-size 1G); "
             f"worldrecall cache info{where} says what each part holds")]


class DiskSink:
    """Prints :func:`disk_lines` after everything else (a sweep's job leaves them to the sweep's end)."""

    name = "disk"

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        if ctx.sweep_dir is not None:
            return []
        print_disk(result.config)
        return []


def print_disk(cfg: Mapping[str, Any]) -> None:
    """Print the disk lines of the config's output root (``cache_dir`` defaults to ``<output_root>/cache``); a
    config that names no output root, or a root that cannot be read, prints nothing: these lines never cost a
    run its exit code."""
    try:
        root = Path(cfg["output_root"])
        cache = cfg.get("cache_dir") if hasattr(cfg, "get") else None
        lines = disk_lines(root, Path(cache) if cache else root / "cache")
    except Exception:  # noqa: BLE001  (a summary line: never an error of the run)
        return
    print("\n" + "\n".join(lines))
