"""Loader for memory-loop rollouts (Scene Memory F1).

Per model folder (``LoadRequest.generations[model]``) a case is one rollout ``<case>.mp4`` (or another
video type, or a folder of frames) and/or a bundled ``<case>_scene_memory.npz`` of precomputed clouds.
Next to it: the ViPE sidecar (``annotations_vipe/<case>_vipe_ann/`` or ``<case>_vipe_ann/``, converted or
native layout) and, for the experimental split, ``<case>_actions.json``.

With ``loader_options.manifest`` (a JSON list / ``{"cases": [...]}`` or CSV, relative to the data root)
cases are listed explicitly instead: ``case_id`` plus optional ``model``, ``video``, ``sidecar``,
``scene_memory_npz``, ``observation_point_cloud_path``, ``revisit_point_cloud_path``, ``actions``, ``fps``,
``loop``. Manifest paths are relative to the model's generations folder and may not leave it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from worldrecall.core.components import Loader, LoadRequest
from worldrecall.core.data import Case, CaseError, CaseFailure, one_line
from worldrecall.core.digests import content_memo
from worldrecall.core.paths import safe_join
from worldrecall.core.text import read_csv_rows
from worldrecall.core.video import IMAGE_SUFFIXES, VIDEO_SUFFIXES, Video, VideoError, list_frame_files
from worldrecall.formats.safe_json import read_json
from worldrecall.formats.vipe import find_sidecar_dir
from worldrecall.plugins.scene_memory.actions import loop_name_of, read_program

BENCHMARK = "scene_memory"
BUNDLE_SUFFIX = "_scene_memory.npz"
ACTIONS_SUFFIX = "_actions.json"
_SKIP_DIRS = {"annotations_vipe", "pose", "intrinsics", "depth", "rgb", "mask", "vipe"}


def _is_frame_folder(p: Path) -> bool:
    if not p.is_dir() or p.name in _SKIP_DIRS or p.name.endswith("_vipe_ann") or p.name.startswith("."):
        return False
    return any(q.is_file() and q.suffix.lower() in IMAGE_SUFFIXES for q in p.iterdir())


def discover(folder: Path) -> dict[str, dict[str, Path]]:
    """Case id -> found files (``video``, ``scene_memory_npz``) of one model's generations folder."""
    cases: dict[str, dict[str, Path]] = {}
    if not folder.is_dir():
        return cases
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES:
            cases.setdefault(p.stem, {}).setdefault("video", p)
        elif p.is_file() and p.name.endswith(BUNDLE_SUFFIX):
            cases.setdefault(p.name[: -len(BUNDLE_SUFFIX)], {})["scene_memory_npz"] = p
        elif _is_frame_folder(p):
            cases.setdefault(p.name, {}).setdefault("video", p)
    return cases


def _read_manifest(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise CaseFailure(f"{path}: manifest missing")
    try:
        if path.suffix.lower() == ".csv":
            # utf-8-sig via core.text: a BOM would otherwise rename the first column; non-UTF-8 names the line
            rows = [{k: v for k, v in r.items() if v not in (None, "")} for r in read_csv_rows(path)]
        else:
            data = read_json(path)
            rows = data.get("cases") if isinstance(data, dict) else data
    except (OSError, ValueError) as e:
        raise CaseFailure(f"{path}: unreadable manifest ({' '.join(str(e).split())})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and r.get("case_id") for r in rows):
        raise CaseFailure(f"{path}: expected a list of objects with a case_id")
    return rows


def _guarded(case_id: str, model: str, folder: Path, build: Any, *args: Any) -> Case | CaseError:
    """``build(*args)``; any unexpected problem with this one case (an unusable path, a reader's bug) is its
    CaseError, never the end of the other cases."""
    try:
        return build(*args)
    except Exception as e:  # noqa: BLE001 - whatever it is, it belongs to this case
        reason = one_line(e) if isinstance(e, CaseFailure) else f"{folder}/{case_id[:120]}: {type(e).__name__}: " \
            f"{one_line(e, 300)}"
        return CaseError(BENCHMARK, case_id, model, "load", reason)


def _probe_frame_count(path: Path) -> int | None:
    """Frame count from the container (or the frame folder) without decoding; None when unknown."""
    if path.is_dir():
        return len(list_frame_files(path)) or None
    # opened once per file state (path, size, mtime), not once per job of a sweep
    return content_memo(path, "container.frame_count", lambda: _container_frame_count(path), persist=True)


def _container_frame_count(path: Path) -> int | None:
    import cv2

    cap = cv2.VideoCapture(str(path))
    try:
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) if cap.isOpened() else 0
    finally:
        cap.release()
    return n if n > 0 else None


class SceneMemoryLoader(Loader):
    """Memory-loop rollouts + ViPE sidecars + action programs -> Scene-Memory-F1 cases."""

    name = "scene_memory"
    benchmark = BENCHMARK
    reads_request_paths_only = True  # data root and generation folders only (engine/stages/load_memo.py)
    description = "memory-loop rollouts with ViPE sidecars (converted or native), action programs, bundled clouds"
    defaults: ClassVar[dict[str, Any]] = {"manifest": None}

    def load(self, request: LoadRequest) -> Iterator[Case | CaseError]:
        """One case per (rollout, model); an unreadable file is a CaseError, a missing sidecar is not (its
        metrics are not applicable, as released)."""
        manifest = request.options.get("manifest")
        rows: list[dict[str, Any]] | None = None
        if manifest:
            try:
                rows = _read_manifest(safe_join(request.data_root, manifest, what="manifest"))
            except CaseFailure as e:
                for model in request.generations:
                    yield CaseError(BENCHMARK, "*", model, "load", str(e))
                return
        for model, folder in request.generations.items():
            folder = Path(folder)
            if rows is None:
                for case_id, found in discover(folder).items():
                    yield _guarded(case_id, model, folder, self._case, request, model, folder, case_id, found, {})
            else:
                for r in rows:
                    if r.get("model") not in (None, model):
                        continue
                    yield _guarded(str(r["case_id"]), model, folder, self._manifest_case, request, model, folder, r)

    # -- one case --------------------------------------------------------------------------------
    def _manifest_case(self, request: LoadRequest, model: str, folder: Path, r: dict[str, Any]) -> Case | CaseError:
        case_id = str(r["case_id"])
        found: dict[str, Path] = {}
        try:
            for key, name in (("video", "video"), ("sidecar", "vipe"), ("scene_memory_npz", "scene_memory_npz"),
                              ("observation_point_cloud_path", "observation_cloud"),
                              ("revisit_point_cloud_path", "revisit_cloud"), ("actions", "actions")):
                if r.get(key):
                    found[name] = safe_join(folder, str(r[key]), what=key)
        except CaseFailure as e:
            return CaseError(BENCHMARK, case_id, model, "load", str(e))
        extra = {k: r[k] for k in ("fps", "loop") if k in r}
        return self._case(request, model, folder, case_id, found, extra)

    def _case(self, request: LoadRequest, model: str, folder: Path, case_id: str, found: dict[str, Path],
              extra: dict[str, Any]) -> Case | CaseError:
        strata = {"domain": "memory_loop", "subcategory": str(extra.get("loop") or loop_name_of(case_id) or "unknown")}
        video_path = found.get("video")
        sidecars: dict[str, Path] = {}
        for key in ("scene_memory_npz", "observation_cloud", "revisit_cloud"):
            if key in found:
                if not found[key].is_file():
                    return CaseError(BENCHMARK, case_id, model, "load", f"{found[key]}: missing", strata)
                sidecars[key] = found[key]
        if ("observation_cloud" in sidecars) != ("revisit_cloud" in sidecars):
            return CaseError(BENCHMARK, case_id, model, "load",
                             f"{case_id}: observation and revisit point clouds must be given together", strata)

        vipe = found.get("vipe")
        if vipe is None and video_path is not None:
            vipe = find_sidecar_dir(video_path)
        if vipe is None:
            vipe = find_sidecar_dir(folder / f"{case_id}.mp4")
        if vipe is not None:
            if not vipe.is_dir():
                return CaseError(BENCHMARK, case_id, model, "load", f"{vipe}: ViPE sidecar folder missing", strata)
            sidecars["vipe"] = vipe
        # no sidecar and no clouds: still a case — the release reports its metrics as not applicable
        # (a missing pose sidecar is a FileNotFoundError there), and so do the aligners here

        video = None
        if video_path is not None:
            if not video_path.exists():
                return CaseError(BENCHMARK, case_id, model, "load", f"{video_path}: generation missing", strata)
            video = request.pool.get(video_path) if request.pool is not None else Video(video_path)

        annotations: dict[str, Any] = {}  # JSON-able and path-free: it is part of the case fingerprint
        fps, src = None, "default"
        if isinstance(extra.get("fps"), (int, float, str)):
            try:
                fps, src = float(extra["fps"]), "manifest"
            except ValueError:
                return CaseError(BENCHMARK, case_id, model, "load", f"{case_id}: fps {extra['fps']!r} is not a number",
                                 strata)
        actions_path = found.get("actions") or folder / f"{case_id}{ACTIONS_SUFFIX}"
        annotations["actions_file"] = actions_path.name
        if actions_path.is_file():
            sidecars["actions"] = actions_path
            try:
                program = read_program(actions_path)
            except CaseFailure as e:
                annotations["actions_error"] = str(e)  # only the experimental split needs it
            else:
                annotations["actions"] = program
                if program.get("loop") and strata["subcategory"] == "unknown":
                    strata["subcategory"] = str(program["loop"])
                if fps is None and isinstance(program.get("fps"), (int, float)) and program["fps"] > 0:
                    fps, src = float(program["fps"]), "actions"
        if fps is None and video is not None and not video.is_frame_folder:
            try:
                fps, src = video.fps, "video"
            except VideoError:
                fps = None
        n_frames = _probe_frame_count(video_path) if video_path is not None else None
        if n_frames:  # the experimental split expands actions to the video's frame count (no decoding)
            annotations["num_frames"] = n_frames
        annotations["fps"] = fps if fps and fps > 0 else None
        annotations["fps_source"] = src if annotations["fps"] else "default"
        return Case(BENCHMARK, case_id, model, video, strata=strata, annotations=annotations, sidecars=sidecars,
                    data_root=request.data_root)
