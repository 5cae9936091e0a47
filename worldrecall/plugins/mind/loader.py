"""The ``mind`` loader: MIND-Data's GT clips and a model's outputs in the release's layout.

GT (``data_root``, as CSU-JPG/MIND's ``process.py`` reads it)::

    {data_root}/{1st_data,3rd_data}/test/{mem_test,action_space_test}/<clip>/{video.mp4, action.json[, images.txt]}

(a layout without the ``test`` level is read too). A model's outputs (``generations[model]``)::

    {model}/{1st_data,3rd_data}/{mem_test,action_space_test}/<clip>/video.mp4
    {model}/{1st_data,3rd_data}/mirror_test/<name>/*.mp4          (path-1.mp4 … path-10.mp4)

As released, the clips are those of the model's folders (sorted); a clip whose GT folder is missing is dropped
by the release without a word — here ``missing_gt: skip`` (the default, as released) keeps it as a case whose
metrics are skipped with a reason naming the folder, and ``missing_gt: error`` fails it. Every unreadable file
(``action.json``, a missing ``video.mp4``) is one per-case error naming it. One case per clip
(``<perspective>/<test_type>/<clip>``) and one per mirror video (``<perspective>/mirror_test/<name>/<stem>``).
Case fields are listed in docs/mind.md ("Cases").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from worldrecall.core.components import Loader, LoadRequest
from worldrecall.core.data import Case, CaseError, CaseFailure, one_line
from worldrecall.core.video import Video
from worldrecall.formats.vipe import find_sidecar_dir
from worldrecall.plugins.mind import records
from worldrecall.plugins.mind.records import (
    ACTION_FILE,
    ACTION_MAX_FRAMES,
    IMAGES_FILE,
    LABEL_SCHEMES,
    MIRROR,
    PERSPECTIVES,
    TEST_TYPES,
    VIDEO_FILE,
)

BENCHMARK = "mind"
MISSING_GT = ("skip", "error")


def _entries(folder: Path) -> list[Path]:
    """The folder's entries by name; hidden ones (``.DS_Store``, ``.ipynb_checkpoints``) are no clips."""
    try:
        return sorted((p for p in folder.iterdir() if not p.name.startswith(".")), key=lambda p: p.name)
    except OSError:
        return []


class MindLoader(Loader):
    """Cases from a model's ``{1st,3rd}_data/{mem_test,action_space_test,mirror_test}`` folders + MIND-Data's GT."""

    name: ClassVar[str] = "mind"
    benchmark: ClassVar[str] = BENCHMARK
    description: ClassVar[str] = "MIND-Data GT clips (action.json, video.mp4, images.txt) + model outputs per " \
                                 "perspective and test type, mirror-test paths"
    reads_request_paths_only: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {
        "action_labels": "ternary",   # ternary (0 none / 1 / 2; vendored release 219f458b) | binary (8f9c59c)
        "missing_gt": "skip",         # skip (as released: the clip is not scored; here a skipped row) | error
        "test_types": ["mem_test", "action_space_test", "mirror_test"],
        "perspectives": ["1st_data", "3rd_data"],
    }

    def load(self, request: LoadRequest) -> Iterator[Case | CaseError]:
        """One case per (clip or mirror video, model); a problem is a CaseError naming the file."""
        opts = {**self.defaults, **dict(request.options or {})}
        bad = self._bad_options(opts)
        if bad:
            for model in sorted(request.generations):
                yield CaseError(BENCHMARK, "*", model, "load", bad)
            return
        root = Path(request.data_root) if request.data_root else None
        for model, gen in sorted(request.generations.items()):
            folder = Path(gen)
            if not folder.is_dir():
                yield CaseError(BENCHMARK, "*", model, "load", f"{folder}: generations folder missing")
                continue
            n = 0
            for persp in [p for p in PERSPECTIVES if p in opts["perspectives"]]:
                for test_type in [t for t in (*TEST_TYPES, MIRROR) if t in opts["test_types"]]:
                    for entry in _entries(folder / persp / test_type):
                        if test_type == MIRROR:
                            for item in self._mirror(request, model, persp, entry):
                                n += 1
                                yield item
                        else:
                            n += 1
                            yield self._guarded(request, model, persp, test_type, entry, root, opts)
            if n == 0:
                yield CaseError(BENCHMARK, "*", model, "load",
                                f"{folder}: no MIND outputs ({{1st_data,3rd_data}}/{{mem_test,action_space_test,"
                                f"mirror_test}}/<clip>/...)")

    @staticmethod
    def _bad_options(opts: dict[str, Any]) -> str:
        if opts["action_labels"] not in LABEL_SCHEMES:
            return (f"loader_options.action_labels {opts['action_labels']!r}: expected one of "
                    f"{', '.join(LABEL_SCHEMES)}")
        if opts["missing_gt"] not in MISSING_GT:
            return f"loader_options.missing_gt {opts['missing_gt']!r}: expected one of {', '.join(MISSING_GT)}"
        unknown = [t for t in opts["test_types"] if t not in (*TEST_TYPES, MIRROR)]
        unknown += [p for p in opts["perspectives"] if p not in PERSPECTIVES]
        if unknown:
            return f"loader_options: unknown test type or perspective {unknown!r}"
        return ""

    @staticmethod
    def _video(request: LoadRequest, path: Path) -> Video:
        return request.pool.get(path) if request.pool is not None else Video(path)

    def _guarded(self, request: LoadRequest, model: str, persp: str, test_type: str, clip_dir: Path,
                 root: Path | None, opts: dict[str, Any]) -> Case | CaseError:
        case_id = f"{persp}/{test_type}/{clip_dir.name}"
        strata = {"perspective": persp, "test_type": test_type}
        try:
            return self._clip(request, model, persp, test_type, clip_dir, root, opts, case_id, strata)
        except CaseFailure as e:
            return CaseError(BENCHMARK, case_id, model, "load", str(e), strata)
        except Exception as e:  # one odd clip never ends the run
            return CaseError(BENCHMARK, case_id, model, "load", f"{clip_dir}: {type(e).__name__}: {one_line(e)}",
                             strata)

    def _clip(self, request: LoadRequest, model: str, persp: str, test_type: str, clip_dir: Path,
              root: Path | None, opts: dict[str, Any], case_id: str, strata: dict[str, str]) -> Case | CaseError:
        if not clip_dir.is_dir():
            raise CaseFailure(f"{clip_dir}: expected a clip folder holding {VIDEO_FILE}")
        video_path = clip_dir / VIDEO_FILE
        if not video_path.is_file():
            raise CaseFailure(f"{video_path}: generated video missing")
        video = self._video(request, video_path)
        sidecars: dict[str, Path] = {}
        vipe = find_sidecar_dir(video_path)
        if vipe is not None:
            sidecars["vipe"] = vipe
        gt_dir = records.gt_clip_dir(root, persp, test_type, clip_dir.name) if root is not None else None
        annotations: dict[str, Any] = {"clip": clip_dir.name, "action_labels": opts["action_labels"],
                                       "action_max_frames": ACTION_MAX_FRAMES}
        if gt_dir is None or not gt_dir.is_dir():
            where = gt_dir if gt_dir is not None else "(no data_root)"
            if opts["missing_gt"] == "error":
                raise CaseFailure(f"{where}: GT clip folder missing for {video_path}")
            annotations["gt_missing"] = f"{where}: GT clip folder missing (the release does not score this clip)"
            annotations["gt_expected"] = str(where)
            return Case(BENCHMARK, case_id, model, video, strata=strata, annotations=annotations, sidecars=sidecars,
                        data_root=root)
        annotations["gt_clip"] = gt_dir.relative_to(root).as_posix() if root is not None else gt_dir.name
        action_json = gt_dir / ACTION_FILE
        facts = records.action_facts(action_json, opts["action_labels"])
        gt_video = gt_dir / VIDEO_FILE
        if not gt_video.is_file():
            raise CaseFailure(f"{gt_video}: GT video missing")
        sidecars["action_json"] = action_json
        if (gt_dir / IMAGES_FILE).is_file():
            sidecars["gt_images_txt"] = gt_dir / IMAGES_FILE
        gt_vipe = find_sidecar_dir(gt_video)
        if gt_vipe is not None:
            sidecars["gt_vipe"] = gt_vipe
        annotations.update({"mark_time": facts["mark_time"], "total_time": facts["total_time"],
                            "action_frames": facts["n_frames"]})
        if facts["labels"] is not None:
            annotations["actions"] = facts["labels"]
        else:  # only the action metric reads the labels: it fails with the line naming the frame
            try:
                record = records.read_action_json(action_json)
                records.frame_labels(record, record.mark_time, ACTION_MAX_FRAMES, opts["action_labels"])
                annotations["actions_error"] = f"{action_json}: changed while it was read; run again"
            except CaseFailure as e:
                annotations["actions_error"] = str(e)
        return Case(BENCHMARK, case_id, model, video, reference=self._video(request, gt_video), strata=strata,
                    annotations=annotations, sidecars=sidecars, data_root=root)

    def _mirror(self, request: LoadRequest, model: str, persp: str, entry: Path) -> Iterator[Case | CaseError]:
        strata = {"perspective": persp, "test_type": MIRROR}
        if not entry.is_dir():
            yield CaseError(BENCHMARK, f"{persp}/{MIRROR}/{entry.name}", model, "load",
                            f"{entry}: expected a folder of path-<k>.mp4 videos", strata)
            return
        videos = [p for p in _entries(entry) if p.suffix == ".mp4"]
        if not videos:
            yield CaseError(BENCHMARK, f"{persp}/{MIRROR}/{entry.name}", model, "load",
                            f"{entry}: no .mp4 videos in this mirror-test folder", strata)
            return
        for v in videos:
            case_id = f"{persp}/{MIRROR}/{entry.name}/{v.stem}"
            try:
                sidecars: dict[str, Path] = {}
                vipe = find_sidecar_dir(v)
                if vipe is not None:
                    sidecars["vipe"] = vipe
                yield Case(BENCHMARK, case_id, model, self._video(request, v), strata=strata,
                           annotations={"mirror": True, "name": entry.name, "video_name": v.name},
                           sidecars=sidecars, data_root=Path(request.data_root) if request.data_root else None)
            except Exception as e:
                yield CaseError(BENCHMARK, case_id, model, "load", f"{v}: {type(e).__name__}: {one_line(e)}", strata)
