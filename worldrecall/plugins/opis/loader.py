"""The ``opis`` loader: the OPIS release layout plus any model's generations (spec A.2).

Dataset (``data_root``; a ``final/`` folder inside it is used when present)::

    final/<subcategory>/<case_id>/raw.jpg               conditioning frame, the sole reference
    final/<subcategory>/<case_id>/reference_scene.json  object inventory (metadata.image_size == raw.jpg size)
    final/<subcategory>/<case_id>/text_prompt.txt       and/or conditions.json (camera task)
    final/<subcategory>/<case_id>/masks/...             optional instance masks (mask_path)
    final/<subcategory>/<case_id>/reference_geometry.npz  optional sidecar depth + K of raw.jpg (synthetic)
    domains.json | domains.csv                          subcategory -> domain (O-A11)

Generations (``generations[model]``): ``<case_id>.mp4`` (any video type, or a frame folder), its ViPE
sidecar (``annotations_vipe/<case_id>_vipe_ann/``) when present, and optionally a precomputed
``<case_id>/video_observation.json`` or ``<case_id>.video_observation.json`` (the official example
artifacts' shape), which is scored without running any model.

The domain of a subcategory comes from the mapping file, else from ``reference_scene.json``'s
``metadata.domain``; a subcategory with neither is refused (a per-case error), as is a conflict.
The official example artifacts (a folder holding ``reference_scene.json`` and ``video_observation.json``,
no image) load as one case when ``data_root`` is that folder (strata from ``example_subcategory`` /
``example_domain``); ``raw.jpg`` may be missing only where a precomputed observation makes it unnecessary.
Every problem with one case is a :class:`CaseError` with a one-line reason; the loader never raises for one case.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from worldrecall.core.components import Loader, LoadRequest, merge_typed
from worldrecall.core.data import Case, CaseError, CaseFailure, one_line
from worldrecall.core.paths import safe_join
from worldrecall.core.text import read_csv_rows, read_text
from worldrecall.core.video import IMAGE_SUFFIXES, VIDEO_SUFFIXES, Video
from worldrecall.formats.safe_json import read_json
from worldrecall.plugins.opis.inventory import object_mask_path

log = logging.getLogger(__name__)

BENCHMARK = "opis"
RAW = "raw.jpg"
SCENE = "reference_scene.json"
PROMPT = "text_prompt.txt"
CONDITIONS = "conditions.json"
REFERENCE_GEOMETRY = "reference_geometry.npz"
OBSERVATION = "video_observation.json"
DOMAIN_FILES = ("domains.json", "domains.csv")


def read_domains(path: Path) -> dict[str, str]:
    """Subcategory -> domain from a JSON object (or ``{"domains": {...}}``) or a CSV with those two columns."""
    try:
        if path.suffix.lower() == ".csv":
            rows = read_csv_rows(path)
            if rows and not {"subcategory", "domain"} <= set(rows[0]):
                raise CaseFailure(f"{path}: CSV needs the columns subcategory,domain")
            # a short row gives None, which str() would turn into the domain "None"
            out = {str(r["subcategory"] or "").strip(): str(r["domain"] or "").strip() for r in rows}
        else:
            data = read_json(path)
            data = data.get("domains", data) if isinstance(data, dict) else data
            if not isinstance(data, dict):
                raise CaseFailure(f"{path}: expected an object subcategory -> domain")
            # null, blank or non-text domains are refused (O-A11): str(None) would become domain "None"
            odd = next((k for k, v in data.items() if not isinstance(v, str)), None)
            if odd is not None:
                raise CaseFailure(f"{path}: domain of subcategory {odd!r} is {data[odd]!r}, not a name")
            out = {str(k): v.strip() for k, v in data.items()}
    except (OSError, ValueError, KeyError) as e:
        raise CaseFailure(f"{path}: unreadable domain mapping ({one_line(e)})") from None
    empty = sorted(k for k, v in out.items() if not v)
    if empty:
        raise CaseFailure(f"{path}: empty domain for subcategory {empty[0]!r}")
    return out


def _fps(conditions: Any, where: Path) -> float | None:
    """``conditions.json`` ``fps``: a positive finite number, or None when absent; a boolean (``true`` would
    read as 1 fps), a string or a non-positive value is refused."""
    if not isinstance(conditions, dict) or conditions.get("fps") is None:
        return None
    fps = conditions["fps"]
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise CaseFailure(f"{where}: fps {fps!r} is not a positive number")
    return fps


def image_size(path: Path) -> tuple[int, int]:
    """(W, H) of an image file, read from its header."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return int(im.size[0]), int(im.size[1])
    except (OSError, ValueError) as e:
        raise CaseFailure(f"{path}: unreadable image ({one_line(e)})") from None


def _find_generation(folder: Path, case_id: str) -> Path | None:
    """``<case_id>.<video suffix>`` or a frame folder ``<case_id>/`` of images, else None."""
    for suf in sorted(VIDEO_SUFFIXES):
        p = folder / f"{case_id}{suf}"
        if p.is_file():
            return p
    d = folder / case_id
    if d.is_dir() and any(q.suffix.lower() in IMAGE_SUFFIXES for q in d.iterdir() if q.is_file()):
        return d
    return None


def _warn_unmatched(model: str, folder: Path, case_ids: set[str]) -> None:
    """One warning per model for videos / frame folders whose names match no case id (they would go unscored)."""
    if not folder.is_dir():
        return
    stray = []
    for p in sorted(folder.iterdir(), key=lambda q: q.name):
        if p.name.startswith(".") or p.name == "annotations_vipe" or p.name.endswith("_vipe_ann"):
            continue
        stem = p.name[: -len(p.suffix)] if p.is_file() else p.name
        if (p.is_dir() or p.suffix.lower() in VIDEO_SUFFIXES) and stem not in case_ids:
            stray.append(p)
    if stray:
        names = ", ".join(p.name + ("/" if p.is_dir() else "") for p in stray[:3])
        some = ", ".join(sorted(case_ids)[:2])
        log.warning("%s/%s: %d generated file(s) match no case (e.g. %s%s); expected names like <case_id>.mp4 "
                    "(or a frame folder <case_id>/) for the case folders final/<subcategory>/<case_id>/ (e.g. %s)",
                    BENCHMARK, model, len(stray), names, ", …" if len(stray) > 3 else "", some)


def _find_observation(folder: Path, case_id: str, flat: bool = False) -> Path | None:
    cands = [folder / case_id / OBSERVATION, folder / f"{case_id}.{OBSERVATION}", folder / f"{case_id}_{OBSERVATION}"]
    for p in cands + ([folder / OBSERVATION] if flat else []):
        if p.is_file():
            return p
    return None


def _find_sidecar(folder: Path, case_id: str) -> Path | None:
    for p in (folder / "annotations_vipe" / f"{case_id}_vipe_ann", folder / f"{case_id}_vipe_ann"):
        if p.is_dir():
            return p
    return None


class OpisLoader(Loader):
    """OPIS release layout (or the synthetic suite's copy of it) + generations -> OPIS cases."""

    name = "opis"
    benchmark = BENCHMARK
    reads_request_paths_only = True  # data root and generation folders only (engine/stages/load_memo.py)
    description = "OPIS final/<subcategory>/<case_id>/ layout, domain mapping, generations or video_observation.json"
    defaults: ClassVar[dict[str, Any]] = {
        "final_subdir": "final",        # cases live in data_root/<final_subdir> when it exists
        "domains": None,                # mapping file relative to data_root (None: domains.json/csv if present)
        "missing_generation": "error",  # error: a per-case error naming the file | skip
        "observations": True,           # attach a precomputed video_observation.json when present
        # the official example artifacts: data_root holds reference_scene.json itself (one case, no raw.jpg
        # needed when video_observation.json is given); its strata, since such a folder has no subcategory
        "example_subcategory": "example",
        "example_domain": "example",
    }

    def load(self, request: LoadRequest) -> Iterator[Case | CaseError]:
        """One Case (or CaseError) per (case directory, model)."""
        opts = merge_typed(self.defaults, request.options, "loader_options")
        root = Path(request.data_root)
        final = root / opts["final_subdir"] if opts["final_subdir"] and (root / opts["final_subdir"]).is_dir() else root
        domains: dict[str, str] = {}
        domain_error: str | None = None
        try:
            if opts["domains"]:
                domains = read_domains(safe_join(root, opts["domains"], what="domain mapping"))
            else:
                for name in DOMAIN_FILES:
                    for where in (root / name, final / name):
                        if where.is_file() and not domains:
                            domains = read_domains(where)
        except CaseFailure as e:
            domain_error = str(e)
        if opts["domains"] and not domains and domain_error is None:
            domain_error = f"{opts['domains']}: domain mapping is empty"
        flat = (root / SCENE).is_file()
        if flat:  # the official example: one case folder given as the data root
            sub = str(opts["example_subcategory"])
            domains = {sub: str(opts["example_domain"]), **domains}
            case_dirs = [root]
        else:
            case_dirs = sorted(d for sub in sorted(final.iterdir()) if sub.is_dir() and not sub.name.startswith(".")
                               for d in sub.iterdir() if d.is_dir() and not d.name.startswith(".")) \
                if final.is_dir() else []
        if not case_dirs:
            for model in request.generations:
                yield CaseError(BENCHMARK, "*", model, "load", f"{final}: no <subcategory>/<case_id>/ folders")
            return
        # the release's hierarchy refuses a case listed twice (it would weigh twice): every folder of a case id
        # that appears under more than one subcategory is a per-case error naming them all
        where: dict[str, list[Path]] = {}
        for d in case_dirs:
            where.setdefault(d.name, []).append(d)
        for d in case_dirs:
            subcategory, case_id = (str(opts["example_subcategory"]), d.name) if flat else (d.parent.name, d.name)
            if len(where[case_id]) > 1:
                others = ", ".join(str(x) for x in where[case_id])
                for model in request.generations:
                    yield CaseError(BENCHMARK, case_id, model, "load",
                                    f"case_id {case_id!r} is listed {len(where[case_id])} times ({others}); "
                                    "the OPIS hierarchy counts each case once", {"subcategory": subcategory})
                continue
            try:
                gt = self._gt(d, subcategory, domains, domain_error)
            except Exception as e:  # noqa: BLE001 - any problem with one case folder fails that case only
                strata = {"subcategory": subcategory}
                reason = str(e) if isinstance(e, CaseFailure) else f"{d}: {type(e).__name__}: {one_line(e, 300)}"
                for model in request.generations:
                    yield CaseError(BENCHMARK, case_id, model, "load", reason, strata)
                continue
            for model, folder in request.generations.items():
                try:
                    case = self._case(request, opts, gt, model, Path(folder), d, case_id, flat)
                except Exception as e:  # noqa: BLE001 - this (case, model) only
                    reason = one_line(e) if isinstance(e, CaseFailure) else \
                        f"{Path(folder) / case_id}: {type(e).__name__}: {one_line(e, 300)}"
                    case = CaseError(BENCHMARK, case_id, model, "load", reason, dict(gt["strata"]))
                if case is not None:
                    yield case
        if not flat:
            for model, folder in request.generations.items():
                _warn_unmatched(model, Path(folder), set(where))

    # -- the model-independent part of a case --------------------------------------------------------
    def _gt(self, d: Path, subcategory: str, domains: dict[str, str], domain_error: str | None) -> dict[str, Any]:
        raw, scene_path = d / RAW, d / SCENE
        if not scene_path.is_file():
            raise CaseFailure(f"{scene_path}: missing")
        scene = read_json(scene_path)  # depth and integer size bounded; problems name the file
        if not isinstance(scene, dict):
            raise CaseFailure(f"{scene_path}: expected a JSON object")
        meta = scene.get("metadata") if isinstance(scene.get("metadata"), dict) else {}
        size = meta.get("image_size")
        if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size)):
            raise CaseFailure(f"{scene_path}: metadata.image_size must be [W, H] positive integers, got {size!r}")
        # raw.jpg may be absent only where precomputed observations make it unnecessary (checked per model)
        actual = image_size(raw) if raw.is_file() else tuple(size)
        if tuple(size) != actual:
            raise CaseFailure(f"{scene_path}: metadata.image_size {size} differs from {RAW} size {list(actual)}")
        if not isinstance(scene.get("objects"), list):
            raise CaseFailure(f"{scene_path}: 'objects' must be a list")
        if domain_error is not None:
            raise CaseFailure(domain_error)
        domain = domains.get(subcategory)
        meta_domain = meta.get("domain")
        if domain is None and isinstance(meta_domain, str) and meta_domain:
            domain = meta_domain
        elif domain is not None and isinstance(meta_domain, str) and meta_domain and meta_domain != domain:
            raise CaseFailure(f"{scene_path}: metadata.domain {meta_domain!r} contradicts the mapping "
                              f"({subcategory!r} -> {domain!r})")
        if not domain:
            raise CaseFailure(f"{d.parent}: subcategory {subcategory!r} has no domain (add it to domains.json)")
        prompt = read_text(d / PROMPT).strip() if (d / PROMPT).is_file() else None
        conditions: dict[str, Any] = {}
        if (d / CONDITIONS).is_file():
            conditions = read_json(d / CONDITIONS)
        sidecars = {"reference_scene": scene_path, **({"raw": raw} if raw.is_file() else {})}
        for name, p in (("conditions", d / CONDITIONS), ("reference_geometry", d / REFERENCE_GEOMETRY),
                        ("masks", d / "masks")):
            if p.exists():
                sidecars[name] = p
        # mask files named by the inventory must stay inside the case folder
        for obj in scene["objects"]:
            mp = object_mask_path(obj) if isinstance(obj, dict) else None
            if mp:
                p = safe_join(d, mp, what=f"{SCENE} mask_path")
                if not p.is_file():
                    raise CaseFailure(f"{scene_path}: mask_path {mp!r} of "
                                      f"{obj.get('object_id', '?')} does not exist")
        camera_task = conditions.get("camera_task") if isinstance(conditions, dict) else None
        return {
            "strata": {"domain": str(domain), "subcategory": subcategory},
            "sidecars": sidecars,
            "prompt": prompt,
            "annotations": {
                "image_size": list(actual),
                "n_objects": len(scene["objects"]),
                "camera_task": camera_task if isinstance(camera_task, str) else None,
                "fps": _fps(conditions, d / CONDITIONS),
            },
        }

    # -- one (case, model) ------------------------------------------------------------------------------
    def _case(self, request: LoadRequest, opts: dict[str, Any], gt: dict[str, Any], model: str, folder: Path,
              d: Path, case_id: str, flat: bool = False) -> Case | CaseError | None:
        strata = dict(gt["strata"])
        sidecars = dict(gt["sidecars"])
        annotations = dict(gt["annotations"])
        video_path = _find_generation(folder, case_id)
        obs = _find_observation(folder, case_id, flat) if opts["observations"] else None
        if "raw" not in sidecars and obs is None:
            return CaseError(BENCHMARK, case_id, model, "load", f"{d / RAW}: conditioning image missing", strata)
        if video_path is None and obs is None:
            if opts["missing_generation"] == "skip":
                return None
            return CaseError(BENCHMARK, case_id, model, "load",
                             f"{folder / (case_id + '.mp4')}: generation missing", strata)
        if obs is not None:
            sidecars["video_observation"] = obs
            annotations["precomputed_observation"] = True
        sc = _find_sidecar(folder, case_id)
        if sc is not None:
            sidecars["vipe"] = sc
        video = None
        if video_path is not None:
            video = request.pool.get(video_path) if request.pool is not None else Video(video_path)
        return Case(BENCHMARK, case_id, model, video, strata=strata, prompt=gt["prompt"], annotations=annotations,
                    sidecars=sidecars, data_root=request.data_root)
