"""``wrbench_probe_sidecar``: a judge that reads precomputed probe answers instead of running a VLM (kind sidecar).

For each video ``X.mp4`` it reads ``X.probes.json`` beside it: ``{probe_id: p_yes}`` or the release scorer's
``vlm_probe_results`` form ``{probe_id: {"p_yes": …}}`` — how a run reuses the release's raw probe scores, and
how the synthetic suite ships the answers its scene truth implies. Every row it scores says so (model id
``sidecar:<file>``); it never pretends to be a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from worldrecall.core.data import CaseSkip
from worldrecall.core.judges import JudgeError, JudgeResponse
from worldrecall.formats.safe_json import read_json

SUFFIX = ".probes.json"
# how to configure WRBench's judge: said once when no video has answers beside it, and on each row without them
FIX = ("configure a judge: benchmarks.wrbench.metrics.probes.params.judge=qwen_vl_logprob "
       "+judge_options.qwen_vl_logprob.model_path=<local Qwen-VL folder>, or put <video>.probes.json answer files "
       "({probe_id: p_yes}) beside the videos (docs/wrbench.md)")


def preflight(case: Any) -> str | None:
    """None when the case's video has answers beside it, else which file is missing (the judge is then skipped
    for the run when no case has any)."""
    video = getattr(getattr(case, "video", None), "path", None)
    if video is None:
        return f"{getattr(case, 'case_id', '?')}: no video file to read answers beside"
    path = sidecar_path(Path(video))
    return None if path.is_file() else f"{path}: no probe answers beside the video"


def sidecar_path(video: Path) -> Path:
    """``X.probes.json`` next to ``X.mp4`` (a frame folder ``X/``: ``X.probes.json`` beside it)."""
    v = Path(video)
    return v.with_suffix(SUFFIX) if v.suffix else v.parent / (v.name + SUFFIX)


class ProbeSidecarJudge:
    """Answers ``yes_no_logprob`` questions from the video's ``.probes.json``."""

    model_id = "wrbench_probe_sidecar"

    def ask(self, video: Path | Sequence[Any], system_prompt: str, questions: Sequence[Mapping[str, Any]],
            schema: Mapping[str, Any], *, prompt: str = "") -> JudgeResponse:
        """``[{"id", "p_yes"}]`` for every question the file answers (others are left out: missing answers)."""
        if not isinstance(video, (str, Path)):
            raise JudgeError("wrbench_probe_sidecar reads the answers beside a video file, not frames")
        path = sidecar_path(Path(video))
        if not path.is_file():  # the judge is not configured for this video: a skip saying how, not a failure
            raise CaseSkip(f"{path}: no probe answers beside the video; {FIX}")
        try:
            doc = read_json(path)
        except Exception as e:  # noqa: BLE001  (CaseFailure from the bounded reader): one line, this case
            raise JudgeError(str(e)) from None
        if not isinstance(doc, Mapping):
            raise JudgeError(f"{path}: expected {{probe_id: p_yes}}")
        answers = []
        for q in questions:
            v = doc.get(str(q["id"]))
            v = v.get("p_yes") if isinstance(v, Mapping) else v
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
                raise JudgeError(f"{path}: {q['id']}: p_yes must be a number in [0, 1], got {v!r}")
            answers.append({"id": str(q["id"]), "p_yes": float(v)})
        return JudgeResponse(answers=answers, usage={"source": "sidecar"}, raw="", model_id=f"sidecar:{path.name}")


def make_probe_sidecar_judge(options: Mapping[str, Any]) -> ProbeSidecarJudge:
    """Factory (no options)."""
    return ProbeSidecarJudge()
