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
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from stat import S_ISDIR
from typing import Any

from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.stages.result import RunResult

# the order parts are counted in (a hard-linked file belongs to the first): cache kinds first, then blobs …
_LAST = ("results", "mlflow", "other")


def _walk_rest(paths: list[Path]) -> dict[Path, int]:
    """Bytes on disk under each of ``paths`` (the parts :class:`EarlyUsage` left: the results, the cache's own
    files, Hydra's folders), given that ``du`` counted the other parts: a file with several links is counted here
    (once, under the first path) only when all its links are under ``paths``; else ``du`` counted it with a blob,
    a cache entry or MLflow's artifacts."""
    out = dict.fromkeys(paths, 0)
    linked: dict[tuple[int, int], list[Any]] = {}  # inode -> [its links seen, its links, bytes, first path]
    for path in paths:
        for st in _entries(path):
            if st.st_nlink == 1 or S_ISDIR(st.st_mode):  # a folder's links are its entries, not other names
                out[path] += st.st_blocks * 512
            else:
                linked.setdefault((st.st_dev, st.st_ino), [0, st.st_nlink, st.st_blocks * 512, path])[0] += 1
    for seen, nlink, size, path in linked.values():
        if seen >= nlink:
            out[path] += size
    return out


def _walk(path: Path, seen: set[tuple[int, int]]) -> int:
    """Bytes on disk under ``path`` (a file or folder), each inode once."""
    total = 0
    for st in _entries(path):
        if st.st_nlink > 1 and not S_ISDIR(st.st_mode):
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
        total += st.st_blocks * 512
    return total


def _entries(path: Path) -> Iterator[os.stat_result]:
    """The ``lstat`` of ``path`` and, for a folder, of everything under it, folders included (as ``du`` counts)."""
    stack = [str(path)]
    while stack:
        top = stack.pop()
        try:
            st = os.lstat(top)
        except OSError:
            continue
        yield st
        if not S_ISDIR(st.st_mode):
            continue
        try:
            it = os.scandir(top)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                        continue
                    yield e.stat(follow_symlinks=False)
                except OSError:
                    continue


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


def usage(output_root: Path, cache_dir: Path | None = None, early: EarlyUsage | None = None) -> dict[str, int]:
    """Bytes by part of an output root (see the module's docstring); parts that hold nothing are left out.
    ``early``: what a job never writes (or writes no more), measured while it worked; only the rest is walked."""
    root = Path(output_root)
    parts = _parts(root, Path(cache_dir) if cache_dir is not None else root / "cache")
    known = early.sizes(parts) if early is not None else None
    out: dict[str, int] = {}
    if known is not None:
        assert early is not None
        rest = _walk_rest(list(early.late))
        for path, n in [*known.items(), *rest.items()]:
            out[early.owner[path]] = out.get(early.owner[path], 0) + n
        for path in early.dirs:  # the folders on the way down to the job's own ones: their own entry only
            try:
                out[early.owner[path]] = out.get(early.owner[path], 0) + os.lstat(path).st_blocks * 512
            except OSError:
                pass
        return {k: v for k, v in out.items() if v}
    sizes = _du([p for _, p in parts])
    if sizes is None:
        seen: set[tuple[int, int]] = set()
        sizes = [_walk(p, seen) for _, p in parts]
    for (name, _), n in zip(parts, sizes):
        out[name] = out.get(name, 0) + n
    return {k: v for k, v in out.items() if v}


def _unwritten(name: str, path: Path) -> bool:
    """A part a job whose outputs are unchanged does not write: a kind of the cache (it reads entries, writes
    none), the blob store, MLflow's store (its process is never started)."""
    return (name.startswith("cache/") and path.is_dir()) or name in ("blobs", "mlflow")


def _written_out(name: str, path: Path) -> bool:
    """A part a job no longer writes once its outputs are written and handed to MLflow (whose process still
    writes its store, and the job its records in the results): the cache's kinds and the blob store."""
    return (name.startswith("cache/") and path.is_dir()) or name == "blobs"


class _Split:
    """Which paths of an output root an early ``du`` measures (``early``), which its end walks (``late``: what the
    job may still write), and the folders counted by their own entry only (``dirs``: the way down to a folder of
    the job's own, split into what they hold); ``owner``: each path's part."""

    def __init__(self, parts: list[tuple[str, Path]], settled: Any, own: tuple[Path, ...],
                 since: float | None = None) -> None:
        self.early: list[Path] = []
        self.late: list[Path] = []
        self.dirs: list[Path] = []
        self.owner: dict[Path, str] = {}
        for name, path in parts:
            if settled(name, path):
                self._add(self.early, path, name)
            elif own and name in ("results", "other"):  # nothing of the job's there but its own folders
                self._folder(path, name, own)
            elif since is not None and name == "mlflow" and path.is_dir() and not path.is_symlink():
                self._runs(path, name, since)
            else:
                self._add(self.late, path, name)

    def _runs(self, path: Path, name: str, since: float) -> None:
        """MLflow's artifact folder: a run's folder unchanged since before the job began (its change time: a
        folder's changes when an entry is added or removed in it) is measured early; MLflow writes the job's
        runs, new folders, meanwhile. A second of slack for file systems whose clock ticks coarsely."""
        self._add(self.dirs, path, name)
        for child in _listing(path):
            try:
                old = os.lstat(path / child).st_ctime < since - 1.0
            except OSError:
                continue
            self._add(self.early if old else self.late, path / child, name)

    def _add(self, where: list[Path], path: Path, name: str) -> None:
        where.append(path)
        self.owner[path] = name

    def _folder(self, path: Path, name: str, own: tuple[Path, ...]) -> None:
        if path in own:
            self._add(self.late, path, name)
        elif not any(path in o.parents for o in own):
            self._add(self.early, path, name)
        else:
            self._add(self.dirs, path, name)
            for child in _listing(path):
                self._folder(path / child, name, own)


def _listing(path: Path) -> list[str]:
    """The names in a folder, sorted (none where it cannot be read)."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


class EarlyUsage:
    """``du`` of the parts a job writes no more — nearly all of an output root's files —, started while the job
    still works, on another core (0.4-0.7 s for a default run's 140,000 files), instead of after it; the job's end
    measures the rest (:func:`usage`). Started as a job that may turn out unchanged begins (:func:`_unwritten`; one
    that writes its outputs after all drops it, :meth:`discard`), or as a job's MLflow process logs its files
    (:func:`_written_out`, :meth:`DiskSink.start`). ``own``: the folders the job writes in the results and the
    rest (its results folder, its Hydra folder); given, every other folder there is measured early too, so the
    end walks what this job wrote, not every earlier job's results (each re-score adds ~2,000 files)."""

    def __init__(self, output_root: Path, cache_dir: Path | None = None, settled: Any = _unwritten,
                 own: Iterable[Path | str | None] = (), since: float | None = None):
        """``settled(part name, path)``: whether the job writes nothing more in that part (:func:`_unwritten`;
        :func:`_written_out` once its outputs are written, while MLflow logs them). ``since``: when the job
        began (epoch seconds): MLflow's runs older than that are measured early too."""
        import shutil
        import subprocess

        root = _absolute(Path(output_root))
        self.cache_dir = _absolute(Path(cache_dir)) if cache_dir else root / "cache"
        self.settled, self.since = settled, since
        self.own = tuple(_absolute(Path(p)) for p in own if p)
        self.split = _Split(_parts(root, self.cache_dir), settled, self.own, since)
        self.paths = self.split.early
        exe = shutil.which("du")
        self.proc = None
        if exe is not None and self.paths:
            try:
                self.proc = subprocess.Popen([exe, "-s", "-B1", "--", *map(str, self.paths)], text=True,
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            except OSError:
                self.proc = None

    @property
    def late(self) -> list[Path]:
        return self.split.late

    @property
    def dirs(self) -> list[Path]:
        return self.split.dirs

    @property
    def owner(self) -> dict[Path, str]:
        return self.split.owner

    def sizes(self, parts: list[tuple[str, Path]]) -> dict[Path, int] | None:
        """Path -> bytes of the early paths, when ``du`` answered for each and they are still what the root
        splits into now (else None: measure all; a part or a folder that appeared or went meanwhile)."""
        import subprocess

        now = _Split([(n, _absolute(p)) for n, p in parts], self.settled, self.own, self.since)
        if self.proc is None or now.early != self.paths:
            self.discard()
            return None
        self.split = now  # what is left to walk now: MLflow's runs made meanwhile among it
        try:
            out, _ = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.discard()
            return None
        code, self.proc = self.proc.returncode, None  # read once
        lines = out.splitlines()
        if code != 0 or len(lines) != len(self.paths):
            return None
        try:
            return {p: int(line.split("\t", 1)[0]) for p, line in zip(self.paths, lines)}
        except ValueError:
            return None

    def discard(self) -> None:
        """Stop ``du`` if it still runs (nothing is kept); a no-op once its answer was read."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.communicate()
            self.proc = None


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n < 10e9 else f"{n / 1e9:.1f} GB"


def disk_lines(output_root: Path, cache_dir: Path | None = None, sizes: Mapping[str, int] | None = None,
               early: EarlyUsage | None = None) -> list[str]:
    """The two lines a run ends with: the output root's size by part, and how to trim it."""
    sizes = dict(usage(output_root, cache_dir, early) if sizes is None else sizes)
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

    def __init__(self, early: EarlyUsage | None = None) -> None:
        self.early = early  # an unchanged job's (:class:`EarlyUsage`), or started by :meth:`start`

    def start(self, result: RunResult, ctx: SinkContext) -> None:
        """Measure the parts the job writes no more while its MLflow process logs its files (the job waits for
        that answer; called then by the MLflow sink)."""
        if ctx.sweep_dir is None and self.early is None:
            self.early = start_usage(result.config, _written_out, own=(result.results_dir, ctx.job_dir),
                                     since=result.started_at)

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        early, self.early = self.early, None
        if ctx.sweep_dir is not None:
            return []
        print_disk(result.config, early)
        return []


def start_usage(cfg: Mapping[str, Any], settled: Any = _unwritten, own: Iterable[Path | str | None] = (),
                since: float | None = None) -> EarlyUsage | None:
    """:class:`EarlyUsage` of the config's output root, or None where it cannot be had (never an error)."""
    try:
        root = Path(cfg["output_root"])
        cache = cfg.get("cache_dir") if hasattr(cfg, "get") else None
        return EarlyUsage(root, Path(cache) if cache else root / "cache", settled, own, since)
    except Exception:  # noqa: BLE001  (a summary line: never an error of the run)
        return None


def print_disk(cfg: Mapping[str, Any], early: EarlyUsage | None = None) -> None:
    """Print the disk lines of the config's output root (``cache_dir`` defaults to ``<output_root>/cache``); a
    config that names no output root, or a root that cannot be read, prints nothing: these lines never cost a
    run its exit code."""
    try:
        root = Path(cfg["output_root"])
        cache = cfg.get("cache_dir") if hasattr(cfg, "get") else None
        lines = disk_lines(root, Path(cache) if cache else root / "cache", early=early)
    except Exception:  # noqa: BLE001  (a summary line: never an error of the run)
        return
    print("\n" + "\n".join(lines))
