"""The ``memobench`` loader: the official release layout plus any model's generated outputs.

The phase sheets decide which clips exist (as in the official Step 1). Every (clip, model) becomes a
:class:`Case`, or a :class:`CaseError` naming the missing/bad file. Models come from the request
(``LoadRequest.generations``: model -> folder); a folder may hold ``Synthetic/`` and ``Real/`` sub-folders
(the documented layout) or the clips directly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from worldrecall.core.components import Loader, LoadRequest, merge_typed
from worldrecall.core.data import Case, CaseError, CaseFailure, one_line
from worldrecall.core.paths import safe_join
from worldrecall.core.video import Video, list_frame_files
from worldrecall.plugins.memobench import discovery, gt, metadata, sheets

log = logging.getLogger(__name__)

BENCHMARK = "memobench"


@dataclass
class GTClip:
    """Everything the release says about one clip, independent of the model being scored."""

    split: str
    clip_id: str
    scene: str
    strata: dict[str, str]
    annotations: dict[str, Any] = field(default_factory=dict)
    reference: Path | None = None
    prompt: str | None = None
    subject: str | None = None
    error: str | None = None          # a GT problem: every model's case for this clip is a CaseError
    declared_skip: bool = False       # excluded on purpose (sheet ``skip``, availability filter): no case at all
    sheet_error: bool = False         # the split's sheet is unreadable: this one entry stands for the split
    warnings: list[str] = field(default_factory=list)  # input anomalies that did not stop the clip: on its rows


def _rel(path: Path, root: Path) -> str:
    """``path`` relative to the data root; a path (or symlink) resolving outside it -> :class:`CaseFailure`."""
    resolved, base = Path(path).resolve(), Path(root).resolve()
    if resolved != base and base not in resolved.parents:
        raise CaseFailure(f"{path}: resolves to {resolved}, outside the data root {base} (symlink?)")
    return str(resolved.relative_to(base))


def _first_frame(meta: metadata.ClipMeta | None, data_root: Path, fallback: Path | None,
                 source: str = "sam3_metadata") -> str | None:
    """The conditioning frame as a data-root-relative path: the metadata path when it names an existing file,
    else the GT folder's first frame. A metadata path escaping the data root raises :class:`CaseFailure`."""
    if meta is not None and meta.first_frame:
        rel = meta.first_frame
        rel = rel.removeprefix("data/")
        # escaping or unusable (NUL byte, name too long): the clip's error, naming the metadata file
        p = safe_join(data_root, rel, what=f"{source}: sam3_metadata first-frame path")
        if p.is_file():
            return _rel(p, data_root)
    return _rel(fallback, data_root) if fallback is not None else None


def _beyond_gt(row: sheets.PhaseRow, g: int, source: str, checks: str, warnings: list[str]) -> str | None:
    """A sheet boundary past the GT clip (G frames, 0-based indices): the official mapping clamps it silently.

    ``r_gt == G`` (one past the end: a 1-based sheet?) is a warning; further out an error (strict) or a
    warning (official). Returns the error, appending warnings in place.
    """
    worst = max(row.h_gt, row.r_gt)
    if worst < g:
        return None
    msg = (f"{row.clip_id}: phase sheet boundary (exits {row.h_gt}, re-enter {row.r_gt}) is past the last GT "
           f"frame {g - 1} (G = {g} from {source})")
    if worst == g or checks == "official":
        warnings.append(msg + "; clamped as the official code does")
        return None
    return msg + " (set loader_options.phase_row_checks=official to score it clamped)"


def _intrinsics_rows(intr: Path) -> int:
    """Rows of ``intrinsics.npy`` (one per GT frame); a forged/truncated/corrupt file -> CaseFailure naming it."""
    try:
        return gt.npy_rows(intr)
    except CaseFailure:  # forged/truncated header, object array: named by formats.arrays
        raise
    except Exception as e:  # a corrupt npy fails this clip only
        raise CaseFailure(f"{intr}: unreadable ({type(e).__name__})") from None


def _guarded(build: Any, split: str, row: sheets.PhaseRow, scene: str, *args: Any) -> GTClip:
    """``build(..., row, ...)``; an unexpected problem with this one row (an unusable path, a number past
    every range, a reader's bug) fails this clip only, never the sheet's other clips."""
    try:
        return build(*args)
    except Exception as e:  # noqa: BLE001 - whatever it is, it belongs to this clip
        reason = one_line(e) if isinstance(e, CaseFailure) else f"{type(e).__name__}: {one_line(e, 300)}"
        sheet = sheets.SYNTHETIC_SHEET if split == "synthetic" else sheets.REAL_SHEET
        return GTClip(split, row.clip_id, scene, {"split": split},
                      error=f"{sheet}: clip {row.clip_id[:120]!r}: {reason}")


def _read_meta(reader: Any, path: Path) -> tuple[dict[str, metadata.ClipMeta], str | None]:
    """A metadata CSV, or ({}, the one-line reason) when it cannot be decoded: the split's clips fail with it."""
    if not path.is_file():
        return {}, None
    try:
        return reader(path), None
    except CaseFailure as e:
        return {}, str(e)


class MemoBenchLoader(Loader):
    """Official MemoBench release (Synthetic_processed/, Real_Raw/, phase sheets, sam3_metadata)."""

    name: ClassVar[str] = "memobench"
    benchmark: ClassVar[str] = BENCHMARK
    reads_request_paths_only = True  # data root and generation folders only (engine/stages/load_memo.py)
    description: ClassVar[str] = "MemoBench release layout + generated outputs (mp4, video.mp4, frame folders)"
    defaults: ClassVar[dict[str, Any]] = {
        "splits": ["synthetic", "real"],
        "gt_frame_source": "step1",      # step1: RGB file count / mp4 frame count; step2: intrinsics rows / FRAMES count
        "sheet_format": "auto",          # auto (xlsx, else csv) | xlsx | csv
        "synthetic_subdir": "Synthetic",
        "real_subdir": "Real",
        "missing_generation": "error",   # error: a CaseError per missing clip | skip: silently left out
        "phase_row_checks": "strict",    # strict: bad/conflicting sheet rows fail the clip | official: clamp/last row wins, warned
        "unlisted_generation": "error",  # error: a generated clip without a sheet row is a CaseError | skip (official)
        "sidecars": True,
    }

    # -- GT side ----------------------------------------------------------------------------------
    def gt_clips(self, data_root: Path, opts: dict[str, Any]) -> list[GTClip]:
        """Every clip of the requested splits with its GT facts (or the GT problem that fails it)."""
        data_root = Path(data_root)
        out: list[GTClip] = []
        meta_dir = data_root / "sam3_metadata"
        for split, name, reader, build in (
                ("synthetic", "synthetic_metadata.csv", metadata.read_synthetic_metadata, self._synthetic),
                ("real", "real_metadata.csv", metadata.read_real_metadata, self._real)):
            if split not in opts["splits"]:
                continue
            meta, meta_error = _read_meta(reader, meta_dir / name)
            clips = build(data_root, opts, meta)
            for c in clips:
                if meta_error and not c.error:  # undecodable metadata: every clip of the split says why
                    c.error = meta_error
            out += clips
        return out

    def _synthetic(self, data_root: Path, opts: dict[str, Any], meta: dict[str, metadata.ClipMeta]) -> list[GTClip]:
        root = data_root / "Synthetic_processed"
        sheet = sheets.find_sheet(root, sheets.SYNTHETIC_SHEET, opts["sheet_format"])
        if sheet is None:
            log.warning("memobench: no %s.xlsx/.csv under %s; no synthetic clips", sheets.SYNTHETIC_SHEET, root)
            return []
        try:
            rows, marked = sheets.phase_sheet(sheet, "synthetic", opts["phase_row_checks"])
        except sheets.SheetError as e:  # the other split still loads; this one is one error row per model
            return [GTClip("synthetic", sheet.name, "", {"split": "synthetic"}, error=str(e), sheet_error=True)]
        skipped = [GTClip("synthetic", clip, "", {"split": "synthetic"}, declared_skip=True)
                   for clip in marked if clip not in rows]
        return [_guarded(self._synthetic_clip, "synthetic", row, "", data_root, root, row,
                         meta.get(row.clip_id), opts) for row in rows.values()] + skipped

    def _synthetic_clip(self, data_root: Path, root: Path, row: sheets.PhaseRow,
                        meta: metadata.ClipMeta | None, opts: dict[str, Any]) -> GTClip:
        clip = row.clip_id
        m = discovery.CLIP_NAME.match(clip)
        scene = m.group(1) if m else ""
        subject = meta.subject if meta else None
        c = GTClip("synthetic", clip, scene, {"split": "synthetic", "scene": scene, "subject": subject or ""},
                   subject=subject)
        if row.error:
            c.error = row.error
            return c
        if m is None:
            c.error = f"{sheets.SYNTHETIC_SHEET}: video_folder {clip!r} is not a <Scene>_<NNN> clip id"
            return c
        n = str(int(m.group(2)))
        try:
            clip_dir = safe_join(root, f"{scene}/{clip}", what=f"{sheets.SYNTHETIC_SHEET}: video_folder")
        except CaseFailure as e:
            c.error = str(e)
            return c
        rgb_dir, intr = clip_dir / f"RGB{n}", clip_dir / n / "intrinsics.npy"
        n_rgb = gt.count_images(rgb_dir)
        if not rgb_dir.is_dir():
            c.error = f"{rgb_dir}: GT frame folder missing"
        elif n_rgb == 0:
            c.error = f"{rgb_dir}: GT frame folder has no .jpg/.png frames"
        elif not intr.is_file() and opts["gt_frame_source"] == "step2":
            c.error = f"{intr}: GT intrinsics missing (gt_frame_source=step2 counts its rows)"
        if c.error:
            return c
        try:  # absent intrinsics cost ORS only (its GT frame count): ORS.missing_inputs names them
            g_step2 = _intrinsics_rows(intr) if intr.is_file() else None
        except CaseFailure as e:
            c.error = str(e)
            return c
        poses, kind = None, None
        for cand, k in ((clip_dir / n / "poses.npy", "npy"), (clip_dir / "poses.npy", "npy"),
                        (clip_dir / f"camera_full{n}.csv", "ue5_csv")):
            if cand.is_file():
                poses, kind = cand, k
                break
        g, src = (n_rgb, "rgb_files") if opts["gt_frame_source"] == "step1" else (g_step2, "intrinsics_rows")
        first = list_frame_files(rgb_dir)[0]
        sheet_prompt = row.prompt
        try:  # every GT path must stay inside the data root (a symlinked folder may point elsewhere)
            paths = {"gt_poses": _rel(poses, data_root) if poses else None,
                     "gt_intrinsics": _rel(intr, data_root) if g_step2 is not None else None,
                     "first_frame": _first_frame(meta, data_root, first, "synthetic_metadata.csv")}
            _rel(rgb_dir, data_root)
        except CaseFailure as e:
            c.error = str(e)
            return c
        c.reference = rgb_dir
        c.prompt = (meta.prompt if meta and meta.prompt else None) or (
            sheet_prompt if sheet_prompt and sheet_prompt.lower() != "nan" else None)
        c.annotations = {
            "split": "synthetic", "clip_id": clip, "scene": scene, "clip_number": int(n),
            "h_gt": row.h_gt, "r_gt": row.r_gt, "frame_num": row.frame_num,
            "G": g, "G_source": src, "G_ors": g_step2, "G_ors_source": "intrinsics_rows",
            "sheet_prompt": sheet_prompt, "subject": subject,
            "ors_query": metadata.ors_query("synthetic", subject, meta.prompt if meta else None),
            "gt_poses": paths["gt_poses"], "gt_poses_kind": kind,
            "gt_intrinsics": paths["gt_intrinsics"],
            "first_frame": paths["first_frame"],
        }
        warnings = list(row.warnings)
        try:  # no score reads GT intrinsics (official: informational fx/fy), so a bad file is a warning
            if g_step2 is not None:
                gt.load_gt_intrinsics(intr)
        except CaseFailure as e:
            warnings.append(f"{e} (unused by the scores)")
        c.error = _beyond_gt(row, g, src, opts["phase_row_checks"], warnings)
        if warnings:
            c.warnings = warnings
        return c

    def _real(self, data_root: Path, opts: dict[str, Any], meta: dict[str, metadata.ClipMeta]) -> list[GTClip]:
        root = data_root / "Real_Raw"
        if not root.is_dir():
            # a data root without Real_Raw/ has no real split (the synthetic suite, by design): nothing is
            # missing. A generated real clip without a sheet row still becomes an error row (unlisted_generation)
            log.debug("memobench: no %s under %s; the data has no real split", root.name, data_root)
            return []
        sheet = sheets.find_sheet(root, sheets.REAL_SHEET, opts["sheet_format"])
        if sheet is None:
            log.warning("memobench: no %s.xlsx/.csv under %s; no real clips", sheets.REAL_SHEET, root)
            return []
        try:
            rows, _ = sheets.phase_sheet(sheet, "real", opts["phase_row_checks"])
        except sheets.SheetError as e:  # the other split still loads; this one is one error row per model
            return [GTClip("real", sheet.name, "real", {"split": "real"}, error=str(e), sheet_error=True)]
        selected: set[str] | None = None
        selection_error: str | None = None
        sel_path = sheets.find_real_selection(data_root)
        if sel_path is not None:
            try:
                selected = sheets.parse_real_selection(sheets.read_table(sel_path))
            except Exception as e:  # noqa: BLE001 - any problem with the filter file is that file's error
                reason = str(e) if isinstance(e, (sheets.SheetError, KeyError)) else f"{type(e).__name__}: {e}"
                selection_error = (f"{sel_path}: availability filter unreadable ({one_line(reason, 300)}); "
                                   "provide Real_Selected.csv")
        out = []
        for row in rows.values():
            if selected is not None and row.clip_id not in selected:
                out.append(GTClip("real", row.clip_id, "real", {"split": "real"}, declared_skip=True))
                continue
            c = _guarded(self._real_clip, "real", row, "real", data_root, root, row,
                         meta.get(row.clip_id), opts)
            if selection_error:  # a global problem outranks the clip's own
                c.error = selection_error
            out.append(c)
        return out

    def _real_clip(self, data_root: Path, root: Path, row: sheets.PhaseRow,
                   meta: metadata.ClipMeta | None, opts: dict[str, Any]) -> GTClip:
        clip = row.clip_id
        subject = meta.subject if meta else None
        c = GTClip("real", clip, "real", {"split": "real", "scene": "real", "subject": subject or ""}, subject=subject)
        if row.error:
            c.error = row.error
            return c
        try:
            gt_dir = safe_join(root, clip, what=f"{sheets.REAL_SHEET}: id")
            npz_fallback = safe_join(data_root, f"mapanything/outputs/real/{clip}_mapanything.npz",
                                     what=f"{sheets.REAL_SHEET}: id")
        except CaseFailure as e:
            c.error = str(e)
            return c
        mp4, npz = gt_dir / f"{clip}.mp4", gt_dir / "raw" / f"{clip}_mapanything.npz"
        if not npz.is_file() and npz_fallback.is_file():
            npz = npz_fallback
        if not mp4.is_file():
            c.error = f"{mp4}: GT video missing"
            return c
        # an absent MapAnything file costs the pose metrics only (their missing_inputs name it)
        has_npz = npz.is_file()
        g_step1 = gt.mp4_frame_count(mp4)
        if g_step1 <= 0:
            c.error = f"{mp4}: cannot read the GT frame count"
            return c
        frames_dir = gt_dir / "FRAMES"
        g_step2 = gt.count_images(frames_dir) or None
        if opts["gt_frame_source"] == "step2" and g_step2:
            g, src = g_step2, "frames_files"
        else:
            g, src = g_step1, "mp4_frame_count"
        first = list_frame_files(frames_dir)[0] if g_step2 else None
        try:  # every GT path must stay inside the data root (a symlinked folder may point elsewhere)
            paths = {"gt_poses": _rel(npz, data_root) if has_npz else None, "first_frame": _first_frame(meta, data_root, first, "real_metadata.csv")}
            _rel(mp4, data_root)
        except CaseFailure as e:
            c.error = str(e)
            return c
        c.reference = mp4
        c.prompt = meta.prompt if meta and meta.prompt else None
        c.annotations = {
            "split": "real", "clip_id": clip, "scene": "real",
            "h_gt": row.h_gt, "r_gt": row.r_gt,
            "G": g, "G_source": src, "G_ors": g_step2, "G_ors_source": "frames_files",
            "sheet_prompt": None,  # the real sheet has no prompt column (official: no ImageReward for real)
            "subject": subject,
            "ors_query": metadata.ors_query("real", subject, c.prompt),
            "gt_poses": paths["gt_poses"], "gt_poses_kind": "mapanything_npz" if has_npz else None,
            "first_frame": paths["first_frame"],
        }
        warnings = list(row.warnings)
        try:  # unused by the scores, as for synthetic clips: a bad matrix is a warning on the row
            if has_npz:
                gt.load_gt_intrinsics(npz)
        except CaseFailure as e:
            warnings.append(f"{e} (unused by the scores)")
        c.error = _beyond_gt(row, g, src, opts["phase_row_checks"], warnings)
        if warnings:
            c.warnings = warnings
        return c

    # -- generation side --------------------------------------------------------------------------
    def load(self, request: LoadRequest) -> Iterator[Case | CaseError]:
        """Yield one Case (or CaseError naming the missing file) per (clip of the sheets, model)."""
        opts = merge_typed(self.defaults, request.options or {}, "memobench.loader_options")
        bad = set(opts["splits"]) - {"synthetic", "real"}
        if bad:
            raise ValueError(f"memobench.loader_options.splits: unknown split(s) {sorted(bad)}")
        if opts["gt_frame_source"] not in ("step1", "step2"):
            raise ValueError("memobench.loader_options.gt_frame_source must be step1 or step2")
        if opts["phase_row_checks"] not in sheets.CHECKS:
            raise ValueError(f"memobench.loader_options.phase_row_checks must be one of {sheets.CHECKS}")
        if opts["unlisted_generation"] not in ("error", "skip"):
            raise ValueError("memobench.loader_options.unlisted_generation must be error or skip")
        data_root = Path(request.data_root)
        clips = self.gt_clips(data_root, opts)
        find_sidecars = _sidecar_finder() if opts["sidecars"] else None
        for model, folder in request.generations.items():
            folder = Path(folder)
            indexes: dict[str, tuple[Path, dict[str, discovery.Generation]]] = {}
            for split, sub, index in (("synthetic", opts["synthetic_subdir"], discovery.index_synthetic),
                                      ("real", opts["real_subdir"], discovery.index_real)):
                if split in opts["splits"]:
                    root = folder / sub if sub and (folder / sub).is_dir() else folder
                    indexes[split] = (root, index(root) if root.is_dir() else {})
            _warn_unmatched(model, folder, indexes, opts, data_root)
            for c in clips:
                if c.declared_skip:
                    continue
                if c.error:
                    yield CaseError(BENCHMARK, c.clip_id, model, "load", c.error, dict(c.strata))
                    continue
                root, index = indexes[c.split]
                gen = index.get(c.clip_id)
                if gen is None:
                    if opts["missing_generation"] == "error":
                        where = discovery.expected_locations(c.split, c.clip_id, root)
                        yield CaseError(BENCHMARK, c.clip_id, model, "load",
                                        f"{where}: no generated video for clip {c.clip_id}", dict(c.strata))
                    continue
                try:
                    yield self._case(request, model, c, gen, data_root, find_sidecars)
                except Exception as e:  # noqa: BLE001 - this (clip, model) only
                    reason = one_line(e) if isinstance(e, CaseFailure) else \
                        f"{type(e).__name__}: {one_line(e, 300)}"
                    yield CaseError(BENCHMARK, c.clip_id, model, "load", f"{gen.path}: {reason}", dict(c.strata))
            if opts["unlisted_generation"] == "error":
                # a generated clip the sheets do not list would silently go unscored: say so on its own row
                listed = {(c.split, c.clip_id) for c in clips}
                unreadable = {c.split for c in clips if c.sheet_error}  # already one error row for the split
                for split, (root, index) in indexes.items():
                    if split in unreadable:
                        continue
                    sheet = sheets.SYNTHETIC_SHEET if split == "synthetic" else sheets.REAL_SHEET
                    no_real = split == "real" and not (data_root / "Real_Raw").is_dir()
                    for clip_id, gen in sorted(index.items()):
                        if (split, clip_id) not in listed:
                            why = (f"the data root has no Real_Raw/ folder ({data_root / 'Real_Raw'})" if no_real
                                   else f"generated clip {clip_id} has no row in {sheet}")
                            yield CaseError(BENCHMARK, clip_id, model, "load",
                                            f"{gen.path}: {why} (not scored; add the row or set unlisted_generation=skip)"
                                            if not no_real else f"{gen.path}: {why}: not scored (add it, or set "
                                            "loader_options.splits=[synthetic])", {"split": split})

    def _case(self, request: LoadRequest, model: str, c: GTClip, gen: discovery.Generation,
              data_root: Path, find_sidecars: Any) -> Case:
        def video(p: Path) -> Video:
            return request.pool.get(p) if request.pool is not None else Video(p)

        sidecars: dict[str, Path] = {}
        if find_sidecars is not None:
            d = find_sidecars(gen.path)
            if d is not None:
                sidecars["vipe"] = Path(d)
        ann = dict(c.annotations, generation_layout=gen.layout)
        return Case(benchmark=BENCHMARK, case_id=c.clip_id, model=model, video=video(gen.path),
                    reference=video(c.reference) if c.reference is not None else None,
                    strata=dict(c.strata), prompt=c.prompt, subject=c.subject, annotations=ann,
                    sidecars=sidecars, data_root=data_root, warnings=list(c.warnings))


def _warn_unmatched(model: str, folder: Path, indexes: dict[str, tuple[Path, dict[str, Any]]],
                    opts: dict[str, Any], data_root: Path) -> None:
    """One warning per model for generated files whose names match no clip (with the names expected), and
    one when the model has real clips but the data root has no ``Real_Raw/`` (the real split is not scored)."""
    def rel(p: Path) -> str:
        try:
            return str(p.relative_to(folder))
        except ValueError:
            return str(p)

    subs = {"synthetic": opts["synthetic_subdir"], "real": opts["real_subdir"]}
    real = indexes.get("real")
    if real is not None and real[1] and not (data_root / "Real_Raw").is_dir():
        log.warning("%s/%s: %d generated real clip(s) under %s are not scored: the data root has no %s folder "
                    "(the real split's GT, phase sheet Real_ExitReenter.xlsx and MapAnything poses); add it, or "
                    "set benchmarks.%s.loader_options.splits=[synthetic]", BENCHMARK, model, len(real[1]),
                    real[0], data_root / "Real_Raw", BENCHMARK)
    stray = discovery.unmatched({split: root for split, (root, _) in indexes.items() if root.is_dir()})
    if stray:
        names = ", ".join(rel(p) + ("/" if p.is_dir() else "") for p in stray[:3])
        expected = " or ".join(discovery.expected_names(split, subs[split] if rel(root) != "." else "")
                               for split, (root, _) in indexes.items())
        log.warning("%s/%s: %d generated file(s) match no case (e.g. %s%s); expected names like %s",
                    BENCHMARK, model, len(stray), names, ", …" if len(stray) > 3 else "", expected)


def _sidecar_finder() -> Any:
    """``worldrecall.formats.vipe.find_sidecar_dir`` when that module is installed, else None."""
    try:
        from worldrecall.formats.vipe import find_sidecar_dir
    except ImportError:
        return None
    return find_sidecar_dir
