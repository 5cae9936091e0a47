"""Import result folders written by the official MemoBench scripts as worldrecall score rows.

So published numbers (or anyone's official runs) and worldrecall runs share one leaderboard: the
``memobench.leaderboard`` aggregator takes ``official_eval_dir`` / ``official_ors_dir`` / ``official_vqa_dir``
and adds these rows next to the run's own. Folder rules follow the official ``leaderboard.py``
(memobench spec §4):

* ``{eval_dir}/{model}/eval_*.csv`` — only the most recently modified file per model folder;
* ``{ors_dir}/{model}/ors_scores.csv``;
* ``{vqa_dir}/{model}/*.csv`` — files without a ``score`` column (e.g. ``overall.csv``) and rows whose
  ``score`` is not JSON are skipped; folders ending ``_old`` or named ``Lingbot`` are skipped (VQA only);
* model folder names go through the official alias table, else lower-case (:func:`canonical_model`), so
  ``CogVideoX`` and ``cogvideo`` are one model. When two folders map to one name the later one (sorted
  order) wins, as in the official code, with a warning.

Every per-clip value is copied as the official file holds it; the aggregator applies the official scales
(ORS ×100 with ``ors_percent``, VQA ×100, the CameraControllability < 1 heuristic). A clip row with an
``error`` cell becomes a failed row, so it is left out of the means exactly as the official NaNs are.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

from worldrecall.core.data import CaseFailure, ScoreRow, finite_float
from worldrecall.core.text import read_text
from worldrecall.formats.safe_json import parse_json

log = logging.getLogger(__name__)

BENCHMARK = "memobench"

# The official leaderboard's alias table (folder name -> canonical key); any other name is lower-cased.
ALIASES: dict[str, str] = {
    "lingbot-world": "lingbot-world", "LingBot-World": "lingbot-world", "Lingbot": "lingbot-world",
    "wan2.2": "wan2.2", "Wan2.2": "wan2.2",
    "fantasy-world": "fantasy-world", "FantasyWorld": "fantasy-world",
    "matrix-game2": "matrix-game2", "Matrix-Game2": "matrix-game2",
    "stable-virtual-camera": "stable-virtual-camera", "StableVirtualCamera": "stable-virtual-camera",
    "open-sora": "open-sora", "Open-SoRA": "open-sora",
    "ltx-video": "ltx-video", "LTX-Video": "ltx-video",
    "cogvideo": "cogvideo", "CogVideoX": "cogvideo",
}
# canonical key -> the name the official tables print
DISPLAY_NAMES: dict[str, str] = {
    "lingbot-world": "LingBot-World", "wan2.2": "Wan2.2", "fantasy-world": "FantasyWorld",
    "matrix-game2": "Matrix-Game2", "stable-virtual-camera": "SVC", "open-sora": "Open-SoRA",
    "ltx-video": "LTX-Video", "cogvideo": "CogVideoX",
}

# eval CSV column -> (metric, value key); ImageReward prefers the _pct column (errata 3: raw as fallback)
EVAL_COLUMNS: dict[str, tuple[str, str]] = {
    "VisualQuality": ("memobench.visual_quality", "score"),
    "MotionSmoothness": ("memobench.motion_smoothness", "score"),
    "ObjIdentityConsistency": ("memobench.obj_identity", "score"),
    "Geo3DConsistency": ("memobench.geo3d", "score"),
    "CameraControllability": ("memobench.camera_controllability", "pct"),
    "GT_ALL_PSNR": ("memobench.pixel_fidelity", "ALL_PSNR"),
    "GT_ALL_SSIM": ("memobench.pixel_fidelity", "ALL_SSIM"),
    "GT_ALL_LPIPS": ("memobench.pixel_fidelity", "ALL_LPIPS"),
}
VQA_KEYS: dict[str, str] = {
    "Instruction Following": "InstructionFollowing",
    "Object and Background": "ObjectBackground",
    "Continuity of Memory": "ContinuityOfMemory",
    "Physics Adherence": "PhysicsAdherence",
}


def canonical_model(name: str) -> str:
    """The official model key of a folder name: the alias table, else lower-case (``CogVideoX`` -> ``cogvideo``)."""
    return ALIASES.get(name, name.lower())


def display_model(key: str) -> str:
    """The name the official tables print for a canonical key (unknown keys unchanged)."""
    return DISPLAY_NAMES.get(key, key)


def _csv(path: Path) -> Any:
    """A CSV as a DataFrame (UTF-8, BOM tolerated); unreadable -> :class:`CaseFailure` naming the file."""
    import pandas as pd

    text = read_text(path)
    try:
        return pd.read_csv(io.StringIO(text))
    except Exception as e:  # pandas parser errors are many; each means "not a readable CSV"
        raise CaseFailure(f"{path}: not a readable CSV ({type(e).__name__}: {str(e).splitlines()[0][:160]})") \
            from None




def _model_dirs(root: Path, what: str) -> list[Path]:
    if not root.is_dir():
        raise CaseFailure(f"{root}: official {what} folder does not exist")
    return sorted(p for p in root.iterdir() if p.is_dir())


def _keyed(dirs: list[tuple[str, Path, Any]], what: str) -> dict[str, tuple[Path, Any]]:
    """{canonical key: (source, data)}; a later folder with the same key replaces an earlier one (official)."""
    out: dict[str, tuple[Path, Any]] = {}
    for key, src, data in dirs:
        if key in out:
            log.warning("official %s results: %s and %s are both model %r; the later one is used (official rule)",
                        what, out[key][0], src, key)
        out[key] = (src, data)
    return out


def _split(data_type: Any, scene: Any) -> str:
    t = str(data_type).strip().lower() if data_type is not None else ""
    if t in ("synthetic", "real"):
        return t
    return "real" if str(scene).strip().lower() == "real" else "synthetic"


def _clip_id(v: Any) -> str:
    f = finite_float(v)
    return str(int(f)).zfill(3) if f is not None and f == int(f) else str(v).strip()


def read_eval_dir(eval_dir: Path | str) -> dict[str, tuple[Path, Any]]:
    """{model key: (newest eval_*.csv, DataFrame)} of an official Step 1 output folder."""
    found = []
    for d in _model_dirs(Path(eval_dir), "eval"):
        csvs = sorted(d.glob("eval_*.csv"), key=lambda p: p.stat().st_mtime)
        if csvs:
            found.append((canonical_model(d.name), csvs[-1], _csv(csvs[-1])))
    return _keyed(found, "eval")


def read_ors_dir(ors_dir: Path | str) -> dict[str, tuple[Path, Any]]:
    """{model key: (ors_scores.csv, DataFrame)} of an official ORS output folder."""
    found = []
    for d in _model_dirs(Path(ors_dir), "ORS"):
        p = d / "ors_scores.csv"
        if p.is_file():
            found.append((canonical_model(d.name), p, _csv(p)))
    return _keyed(found, "ORS")


def read_vqa_dir(vqa_dir: Path | str) -> dict[str, tuple[Path, list[dict[str, Any]]]]:
    """{model key: (folder, per-clip records)}; skip rules of the official leaderboard (see module doc)."""
    found = []
    for d in _model_dirs(Path(vqa_dir), "VQA"):
        if d.name.endswith("_old") or d.name == "Lingbot":
            continue
        recs: list[dict[str, Any]] = []
        for p in sorted(d.glob("*.csv")):
            try:
                df = _csv(p)
            except CaseFailure as e:  # official: an unreadable file is skipped; here it is also logged
                log.warning("official VQA results: %s; file skipped", e)
                continue
            if "score" not in df.columns:
                continue
            for i, r in df.iterrows():
                try:
                    if not isinstance(r["score"], str):
                        raise CaseFailure("score is not text")
                    scores = parse_json(r["score"], f"{p} row {int(i) + 2} score")
                except CaseFailure:
                    log.warning("%s row %d: score is not JSON; row skipped (official rule)", p, int(i) + 2)
                    continue
                if not isinstance(scores, dict):
                    continue
                folder = r.get("folder")
                clip = (str(folder).strip() if isinstance(folder, str) and folder.strip()
                        else f"{r.get('scene', '')}-{r.get('video_id', '')}")
                values = {VQA_KEYS[k]: finite_float(scores.get(k)) for k in VQA_KEYS}
                recs.append({"case_id": clip, "values": values})
        if recs:
            found.append((canonical_model(d.name), d, recs))
    return _keyed(found, "VQA")


def official_rows(eval_dir: Path | str | None = None, ors_dir: Path | str | None = None,
                  vqa_dir: Path | str | None = None, label: str = "{model} (official)") -> list[ScoreRow]:
    """Score rows for every model and clip of the given official result folders.

    ``label`` formats the model name (``{model}`` = the canonical key) so imported rows never pool with a
    run's own rows of the same model; use ``"{model}"`` to merge them on purpose.
    """
    rows: list[ScoreRow] = []

    def add(model: str, case_id: str, split: str, metric: str, values: dict[str, float | None],
            status: str = "ok", reason: str = "", source: Path | None = None) -> None:
        rows.append(ScoreRow(BENCHMARK, label.format(model=model), case_id, metric, values, status=status,
                             reason=reason, strata={"split": split}, info={"source": str(source or "")}))

    if eval_dir:
        for model, (src, df) in read_eval_dir(eval_dir).items():
            ir_col = "ImageRewardScore_pct" if "ImageRewardScore_pct" in df.columns else "ImageRewardScore"
            for _, r in df.iterrows():
                case_id, split = _clip_id(r.get("id")), _split(r.get("data_type"), r.get("scene"))
                err = r.get("error")
                if isinstance(err, str) and err.strip():
                    add(model, case_id, split, "memobench.official_eval", {}, "failed", err.strip(), src)
                    continue
                per_metric: dict[str, dict[str, float | None]] = {}
                for col, (metric, key) in EVAL_COLUMNS.items():
                    if col in df.columns:
                        per_metric.setdefault(metric, {})[key] = finite_float(r[col])
                if ir_col in df.columns:
                    per_metric["memobench.image_reward"] = {"pct": finite_float(r[ir_col])}
                for metric, values in per_metric.items():
                    add(model, case_id, split, metric, values, source=src)
    if ors_dir:
        for model, (src, df) in read_ors_dir(ors_dir).items():
            if "ors" not in df.columns:
                log.warning("%s: no 'ors' column; model %s has no ORS", src, model)
                continue
            for _, r in df.iterrows():
                add(model, _clip_id(r.get("clip_id")), _split(r.get("data_type"), r.get("scene")), "memobench.ors",
                    {"score": finite_float(r["ors"]), "detection_rate": finite_float(r.get("detection_rate")),
                     "mean_confidence": finite_float(r.get("mean_confidence"))}, source=src)
    if vqa_dir:
        for model, (src, recs) in read_vqa_dir(vqa_dir).items():
            for rec in recs:  # VQA covers synthetic clips only
                add(model, rec["case_id"], "synthetic", "memobench.vqa", rec["values"], source=src)
    return rows


__all__ = ["ALIASES", "DISPLAY_NAMES", "canonical_model", "display_model", "official_rows", "read_eval_dir",
           "read_ors_dir", "read_vqa_dir"]
