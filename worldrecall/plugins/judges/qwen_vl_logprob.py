"""``qwen_vl_logprob``: a local Qwen-VL judge that answers yes/no questions with next-token probabilities.

The route of WRBench's ``run_local_qwen35_probe_logprob_scorer.py``: one forward pass per question with the
video and the question as one user turn, the generation prompt appended (``enable_thinking=False`` where the
chat template knows it), and ``P(Yes | Yes or No)`` from the last position's logits over the single-token
spellings of yes and no (``schema["yes"]`` / ``schema["no"]``): ``exp(lse(yes) - lse(lse(yes), lse(no)))``,
rounded to 6 decimals. The processor samples the frames (``do_sample_frames`` at ``fps``, the release's 2).

Loading goes through the transformers classes (``AutoProcessor`` + ``AutoModelForImageTextToText``, or a named
``Qwen2VL`` / ``Qwen2_5_VL`` / ``Qwen3VL`` class) from a local folder, offline. The release runs bfloat16 with
flash-attention 2 on CUDA only; ``dtype: auto`` / ``attn_implementation: auto`` choose that on CUDA (when
``flash_attn`` imports) and float32 with SDPA elsewhere — the same code path, and every answer's ``usage``
(hence every WRBench row's verdict) says which precision and attention scored it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.components import PathParam
from worldrecall.core.judges import JudgeError, JudgeResponse
from worldrecall.core.models import BackendUnavailable
from worldrecall.core.video import Video, VideoError

DEFAULTS: dict[str, Any] = {
    "model_path": PathParam(""),  # local folder of the Qwen-VL checkpoint (required; its content is in the key)
    "loader_family": "auto",      # auto | qwen2_vl | qwen2_5_vl | qwen3_vl
    "dtype": "auto",              # auto (bfloat16 on CUDA, float32 elsewhere) | bfloat16 | float16 | float32
    "attn_implementation": "auto",  # auto (flash_attention_2 on CUDA with flash_attn, else sdpa) | sdpa | eager | …
    "device": "auto",             # auto | cpu | cuda | cuda:<i>
    "fps": 2.0,                   # frames per second the processor samples (the release's FPS=2)
    "min_pixels": 0,              # the video processor's pixel bounds (0 = the processor's own)
    "max_pixels": 0,
}
CLASSES = {"qwen2_vl": "Qwen2VLForConditionalGeneration", "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
           "qwen3_vl": "Qwen3VLForConditionalGeneration"}


def _lse(values: Sequence[float]) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def yes_probability(logits: Any, yes_ids: Sequence[int], no_ids: Sequence[int]) -> float:
    """P(Yes | Yes or No) over the given token ids of one logit vector, rounded to 6 decimals."""
    ly = _lse([float(logits[i]) for i in yes_ids])
    ln = _lse([float(logits[i]) for i in no_ids])
    return round(math.exp(ly - _lse([ly, ln])), 6)


def single_token_ids(tokenizer: Any, variants: Sequence[str]) -> list[int]:
    """Ids of the variants that are one token (without special tokens)."""
    ids = sorted({t[0] for t in (tokenizer.encode(v, add_special_tokens=False) for v in variants) if len(t) == 1})
    if not ids:
        raise JudgeError(f"qwen_vl_logprob: none of {list(variants)} is a single token of this tokenizer")
    return ids


class QwenVLLogprobJudge:
    """Scores ``yes_no_logprob`` questions (``{"id", "prompt"}``) about one video file."""

    def __init__(self, options: Mapping[str, Any]):
        import torch

        o = {**DEFAULTS, **dict(options)}
        if not o["model_path"] or not Path(o["model_path"]).is_dir():
            raise BackendUnavailable(f"qwen_vl_logprob: model_path {o['model_path']!r} is not a local folder "
                                     f"(set judge_options.qwen_vl_logprob.model_path=<dir>)")
        cuda = torch.cuda.is_available()
        self.device = ("cuda" if cuda else "cpu") if o["device"] == "auto" else str(o["device"])
        on_cuda = self.device.startswith("cuda")
        self.dtype = ("bfloat16" if on_cuda else "float32") if o["dtype"] == "auto" else str(o["dtype"])
        attn = str(o["attn_implementation"])
        if attn == "auto":
            attn = "flash_attention_2" if on_cuda and _has_flash_attn() else "sdpa"
        self.attn = attn
        self.fps = float(o["fps"])
        self.pixels = {k: int(o[k]) for k in ("min_pixels", "max_pixels") if int(o[k]) > 0}
        from transformers import AutoModelForImageTextToText, AutoProcessor

        path = str(o["model_path"])
        self.processor = AutoProcessor.from_pretrained(path, local_files_only=True)
        family = str(o["loader_family"])
        if family != "auto" and family not in CLASSES:
            raise BackendUnavailable(f"qwen_vl_logprob: loader_family {family!r} (known: auto, {', '.join(CLASSES)})")
        import transformers

        cls = AutoModelForImageTextToText if family == "auto" else getattr(transformers, CLASSES[family])
        self.model = cls.from_pretrained(path, local_files_only=True, dtype=getattr(torch, self.dtype),
                                         attn_implementation=attn).to(self.device).eval()
        self.model_id = f"{Path(path).name}@{self.dtype}/{attn}"
        self.usage = {"dtype": self.dtype, "attn_implementation": attn, "device": self.device, "fps": self.fps}
        template = str(getattr(self.processor, "chat_template", "") or "")
        self.template_kwargs = {"enable_thinking": False} if "enable_thinking" in template else {}

    def _inputs(self, frames: np.ndarray, video_fps: float, prompt: str) -> Any:
        messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": prompt}]}]
        text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                  **self.template_kwargs)
        kwargs = {"do_sample_frames": True, "fps": self.fps,
                  "video_metadata": [{"fps": float(video_fps), "total_num_frames": int(len(frames)),
                                      "duration": len(frames) / float(video_fps)}], **self.pixels}
        return self.processor(text=[text], videos=[frames], return_tensors="pt", videos_kwargs=kwargs)

    def ask(self, video: Path | Sequence[Any], system_prompt: str, questions: Sequence[Mapping[str, Any]],
            schema: Mapping[str, Any], *, prompt: str = "") -> JudgeResponse:
        """``[{"id", "p_yes"}]``, one forward pass per question."""
        import torch

        if not isinstance(video, (str, Path)):
            raise JudgeError("qwen_vl_logprob: give a video file")
        try:
            v = Video(Path(video))
            frames, fps = v.frames(), v.fps
        except VideoError as e:
            raise JudgeError(str(e)) from None
        if not fps:
            raise JudgeError(f"{video}: unknown frame rate (the processor samples by time)")
        tok = self.processor.tokenizer
        yes = single_token_ids(tok, list(schema.get("yes") or ("Yes",)))
        no = single_token_ids(tok, list(schema.get("no") or ("No",)))
        answers = []
        for q in questions:
            text = str(q.get("prompt") or q.get("question") or "")
            if system_prompt:
                text = f"{system_prompt}\n\n{text}"
            inputs = self._inputs(frames, fps, text).to(self.device)
            with torch.inference_mode():
                logits = self.model(**inputs).logits[0, -1].float().cpu().numpy()
            answers.append({"id": str(q["id"]), "p_yes": yes_probability(logits, yes, no)})
        return JudgeResponse(answers=answers, usage=dict(self.usage), raw="", model_id=self.model_id)


def _has_flash_attn() -> bool:
    try:
        import flash_attn  # noqa: F401
    except Exception:  # noqa: BLE001  (missing, or built for another CUDA): not usable here
        return False
    return True


def make_qwen_vl_logprob_judge(options: Mapping[str, Any]) -> QwenVLLogprobJudge:
    """Factory: load the checkpoint at ``options["model_path"]`` (offline)."""
    return QwenVLLogprobJudge(options)
