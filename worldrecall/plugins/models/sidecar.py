"""Sidecar backends: read what the dataset ships next to a generated video instead of running a model.

The case's sidecar folder is ``case.sidecars["vipe"]`` (else the folder next to the video, found with
``find_sidecar_dir``); it is parsed by :func:`worldrecall.formats.vipe.read_sidecar` and memoised per
path (small LRU). Generated-frame indices map to sidecar rows with ``Sidecar.row_for_frame``. Problems
(no sidecar, no row for a frame, no instance masks) fail the case with a one-line reason.

* ``sidecar_depth`` (depth): the metric depth row, at the sidecar's own resolution; pixels outside the
  valid mask become 0 (``output: inverse`` returns 1/depth with 0 where invalid).
* ``sidecar_pose`` (pose): the c2w rows (OpenCV axes, metric translation).
* ``sidecar_segmenter`` (segmenter): instance masks (``instance_masks.npz``/``instances.json``). For a text
  query it returns the case's target instance and every instance whose phrase matches the query words,
  each with score 1.0, in the frames where it is visible; masks are upsampled (nearest) to the frame's size.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure
from worldrecall.core.models import Detection
from worldrecall.plugins.models.options import Options, parse_options

SIDECAR_KEY = "vipe"
DEPTH_DEFAULTS: dict[str, Any] = {"output": "metric"}
_CACHE: OrderedDict[tuple, Any] = OrderedDict()
_CACHE_SIZE = 4
STOPWORDS = frozenset({"a", "an", "the", "of", "and", "or", "in", "on", "at", "to", "from", "with", "is", "are",
                       "subject", "another", "other", "some", "its", "his", "her", "their"})


def _stamp(path: Path) -> tuple:
    """Change detector for a sidecar folder: (name, size, mtime) of its files."""
    try:
        entries = [e for e in os.scandir(path) if e.is_file()]
        return tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in entries))
    except OSError:
        return ()


def load_sidecar(path: Path, *, need_depth: bool, max_pixels: int | None = None) -> Any:
    """The parsed sidecar of ``path``, memoised (LRU of 4); a depth-bearing parse also serves pose reads.
    ``max_pixels``: the per-frame cap of native EXR depth (the case video's ``video.max_pixels``)."""
    from worldrecall.formats.exr import MAX_EXR_PIXELS
    from worldrecall.formats.vipe import read_sidecar

    path = Path(path)
    stamp = _stamp(path)
    cap = MAX_EXR_PIXELS if max_pixels is None else int(max_pixels)
    for nd in ((True,) if need_depth else (False, True)):
        key = (str(path.resolve()), nd, stamp, cap)
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    sc = read_sidecar(path, need_depth=need_depth, **({} if cap == MAX_EXR_PIXELS else {"max_pixels": cap}))
    _CACHE[(str(path.resolve()), need_depth, stamp, cap)] = sc
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return sc


def clear_cache() -> None:
    """Forget every memoised sidecar."""
    _CACHE.clear()


def sidecar_dir(case: Any, name: str) -> Path:
    """The case's sidecar folder; CaseFailure naming the backend when there is none."""
    if case is None:
        raise CaseFailure(f"{name}: needs the case (sidecar backends read the case's files, not pixels)")
    d = (getattr(case, "sidecars", None) or {}).get(SIDECAR_KEY)
    if d is None and getattr(case, "video", None) is not None:
        from worldrecall.formats.vipe import find_sidecar_dir

        d = find_sidecar_dir(case.video.path)
    if d is None:
        where = getattr(getattr(case, "video", None), "path", getattr(case, "case_id", "?"))
        raise CaseFailure(f"{where}: no sidecar folder (annotations_vipe/<name>_vipe_ann) for backend {name}")
    return Path(d)


def preflight(case: Any) -> str | None:
    """None when the case has a sidecar folder these backends can read, else why not (no file is parsed)."""
    try:
        sidecar_dir(case, "sidecar")
    except CaseFailure as e:
        return str(e)
    return None


def report_notes(case: Any, sc: Any) -> None:
    """Copy the sidecar reader's notes (e.g. a corrupt depth frame read as all-NaN) onto ``case.warnings``,
    where the engine picks them up for the rows of the metric that used the data."""
    warnings = getattr(case, "warnings", None)
    if warnings is None:
        return
    for note in getattr(sc, "notes", ()):
        if note not in warnings:
            warnings.append(note)


def _indices(frames: Sequence[np.ndarray], indices: Sequence[int] | None) -> list[int]:
    if indices is None:
        return list(range(len(frames)))
    idx = [int(i) for i in indices]
    if frames is not None and len(frames) and len(idx) != len(frames):
        raise ValueError(f"{len(idx)} indices for {len(frames)} frames")
    return idx


class SidecarDepth:
    """Metric depth from the sidecar."""

    def __init__(self, options: Options):
        if options["output"] not in ("metric", "inverse"):
            raise ValueError(f"{options.name}: output must be 'metric' or 'inverse'")
        self.opts = options

    def depth(self, frames: Sequence[np.ndarray], *, case: Any = None,
              indices: Sequence[int] | None = None) -> list[np.ndarray]:
        """One float32 ``[h, w]`` map per frame (sidecar resolution); 0 where the sidecar marks it invalid."""
        sc = load_sidecar(sidecar_dir(case, self.opts.name), need_depth=True,
                          max_pixels=getattr(getattr(case, "video", None), "max_pixels", None))
        out = []
        for i in _indices(frames, indices):
            row = sc.row_for_frame(i)
            d = np.array(sc.depth[row], dtype=np.float32)
            valid = np.asarray(sc.valid[row], dtype=bool) if sc.valid is not None else np.isfinite(d) & (d > 0)
            if self.opts["output"] == "inverse":
                d = np.divide(1.0, d, out=np.zeros_like(d), where=valid)
            d[~valid] = 0.0
            out.append(d)
        report_notes(case, sc)
        return out


class SidecarPose:
    """Camera-to-world poses from the sidecar."""

    def __init__(self, options: Options):
        self.opts = options

    def poses(self, frames: Sequence[np.ndarray], *, case: Any = None,
              indices: Sequence[int] | None = None) -> np.ndarray:
        """``[N, 4, 4]`` float64 c2w rows of the requested frames."""
        sc = load_sidecar(sidecar_dir(case, self.opts.name), need_depth=False)
        idx = _indices(frames, indices)
        if not idx:
            return np.zeros((0, 4, 4))
        return np.stack([np.asarray(sc.poses_c2w[sc.row_for_frame(i)], dtype=np.float64) for i in idx])


def words(text: str) -> set[str]:
    """Lower-case content words of a phrase (stop-words and the literal ``subject`` removed)."""
    return {w for w in re.findall(r"[a-z0-9]+", str(text).lower()) if w not in STOPWORDS}


def matching_instances(instances: Mapping[str, Any], query: str) -> list[int]:
    """Target id first, then every instance whose phrase's content words all occur in the query."""
    phrases = {int(k): str(v) for k, v in (instances.get("instances") or {}).items()}
    target = instances.get("target")
    q = words(query)
    out = [int(target)] if target is not None else []
    for iid, phrase in sorted(phrases.items()):
        w = words(phrase)
        if iid not in out and w and w <= q:
            out.append(iid)
    return out


def upsample_nearest(mask: np.ndarray, h: int, w: int) -> np.ndarray:
    """Nearest-neighbour resize of a bool mask to ``[h, w]`` (pixel-centre sampling)."""
    mh, mw = mask.shape
    if (mh, mw) == (h, w):
        return mask.copy()
    rows = np.minimum(((np.arange(h) + 0.5) * mh / h).astype(np.int64), mh - 1)
    cols = np.minimum(((np.arange(w) + 0.5) * mw / w).astype(np.int64), mw - 1)
    return mask[rows[:, None], cols[None, :]]


class SidecarSegmenter:
    """Instance masks from the sidecar, as text-prompted detections."""

    def __init__(self, options: Options):
        self.opts = options

    def segment(self, frames: Sequence[np.ndarray], text: str, *, case: Any = None,
                indices: Sequence[int] | None = None) -> list[list[Detection]]:
        """Per frame: the target and query-matching instances present in it (score 1.0), else nothing."""
        d = sidecar_dir(case, self.opts.name)
        sc = load_sidecar(d, need_depth=False)
        if sc.instance_ids is None or sc.instances is None:
            raise CaseFailure(f"{d / 'instance_masks.npz'}: missing (sidecar_segmenter needs instance_masks.npz "
                              "and instances.json)")
        ids = matching_instances(sc.instances, text)
        out: list[list[Detection]] = []
        for k, i in enumerate(_indices(frames, indices)):
            h, w = np.asarray(frames[k]).shape[:2]
            row = np.asarray(sc.instance_ids[sc.row_for_frame(i)])
            dets = []
            for iid in ids:
                m = row == iid
                if m.any():
                    mask = upsample_nearest(m, h, w)
                    ys, xs = np.nonzero(mask)
                    box = (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))
                    dets.append(Detection(mask=mask, score=1.0, box=box))
            out.append(dets)
        return out


def build_depth(opts: Mapping[str, Any]) -> SidecarDepth:
    """Factory: ``sidecar_depth``."""
    return SidecarDepth(parse_options("sidecar_depth", opts, DEPTH_DEFAULTS))


def build_pose(opts: Mapping[str, Any]) -> SidecarPose:
    """Factory: ``sidecar_pose``."""
    return SidecarPose(parse_options("sidecar_pose", opts, {}))


def build_segmenter(opts: Mapping[str, Any]) -> SidecarSegmenter:
    """Factory: ``sidecar_segmenter``."""
    return SidecarSegmenter(parse_options("sidecar_segmenter", opts, {}))
