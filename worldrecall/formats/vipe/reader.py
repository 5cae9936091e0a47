"""Finding a video's sidecar folder and reading it: :func:`read_sidecar` dispatches on the layout it finds,
then cross-checks the record."""

from __future__ import annotations

from pathlib import Path

from worldrecall.core.data import CaseFailure
from worldrecall.formats.exr import MAX_EXR_PIXELS
from worldrecall.formats.vipe.converted import read_converted
from worldrecall.formats.vipe.native import is_native, read_native
from worldrecall.formats.vipe.record import Sidecar
from worldrecall.formats.vipe.validation import validate_sidecar

__all__ = ["find_sidecar_dir", "read_sidecar"]


def find_sidecar_dir(video_path: Path) -> Path | None:
    """``<video_dir>/annotations_vipe/<stem>_vipe_ann/`` or else ``<video_dir>/<stem>_vipe_ann/``; None if neither."""
    video_path = Path(video_path)
    stem = video_path.name if video_path.is_dir() else video_path.stem
    for cand in (video_path.parent / "annotations_vipe" / f"{stem}_vipe_ann",
                 video_path.parent / f"{stem}_vipe_ann"):
        if cand.is_dir():
            return cand
    return None


def read_sidecar(path: Path, *, need_depth: bool = True, name: str | None = None,
                 validate_depth: bool = True, need_instances: bool = True,
                 max_pixels: int = MAX_EXR_PIXELS, need_intrinsics: bool = True) -> Sidecar:
    """Read and validate a sidecar folder (converted layout or native ViPE output).

    ``name`` picks one video of a native ViPE output folder holding several (default: the only one).
    ``need_depth=False`` skips depth/mask (pose-only consumers); ``validate_depth=False`` skips the
    per-pixel NaN/mask scan of a memory-mapped depth stack; ``need_instances=False`` skips the
    full-resolution instance masks (large for long videos). ``max_pixels`` caps a native EXR depth frame
    (the run's ``video.max_pixels``; a larger data window fails the case before it is decoded).
    ``need_intrinsics=False`` lets a converted folder without any intrinsics file be read (``intrinsics``
    None) by a consumer that can do without them; intrinsics that are present are still read and checked.
    """
    path = Path(path)
    if not path.exists():
        raise CaseFailure(f"{path}: sidecar folder does not exist")
    if not path.is_dir():
        raise CaseFailure(f"{path}: sidecar is not a folder")
    if is_native(path):
        sc = read_native(path, need_depth=need_depth, name=name, max_pixels=max_pixels)
    else:
        sc = read_converted(path, need_depth=need_depth, need_instances=need_instances,
                            need_intrinsics=need_intrinsics)
    validate_sidecar(sc, validate_depth=validate_depth)
    return sc
