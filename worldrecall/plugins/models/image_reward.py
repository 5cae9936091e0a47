"""``image_reward`` (role text_image_reward): ImageReward-v1.0 re-implemented on transformers BLIP.

The ``image-reward`` package does not import on transformers 5, so the scorer is rebuilt from its parts:
BLIP ViT-L/16 @224 (``BlipVisionModel``) → BERT-base text encoder with cross-attention to the image
tokens (``BlipTextModel``, bidirectional) → ``[CLS]`` → MLP 768→1024→128→64→16→1 (dropouts only) →
``(r − 0.16717362830052426) / 1.0333394966054072``. Text: bert-base-uncased tokens, padded/truncated to
35. Image: Resize(224, bicubic, shorter side) → CenterCrop(224) → OpenAI CLIP mean/std.

Weights: ``ImageReward.pt`` (HF ``THUDM/ImageReward``) is a plain state dict in the original BLIP naming;
:func:`remap_image_reward_keys` renames it to the transformers modules and it is loaded with
``torch.load(weights_only=True)``. The text encoder's sizes come from the repo's ``med_config.json``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.components import batched
from worldrecall.plugins.models.manifest import IMAGE_REWARD_FILE, IMAGE_REWARD_MED_CONFIG, entry
from worldrecall.plugins.models.options import Options, check_rgb, inference
from worldrecall.plugins.models.preprocess import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, to_normalized_tensor
from worldrecall.plugins.models.weights import (
    hf_backend_folder,
    hf_dir,
    load_state_dict,
    required_hf_files,
)

log = logging.getLogger(__name__)

NAME = "image_reward"
REWARD_MEAN = 0.16717362830052426
REWARD_STD = 1.0333394966054072
TOKENIZER_REPO = "bert-base-uncased"
# BLIP ViT-L/16 as ImageReward builds it (BLIP_Pretrain(vit="large"), timm-style LayerNorm eps 1e-6)
VIT_LARGE = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096,
             "image_size": 224, "patch_size": 16, "layer_norm_eps": 1e-6}
DEFAULTS: dict[str, Any] = {"max_length": 35, "vision": dict(VIT_LARGE), "revision": None}

_VISION_RULES = [  # original BLIP ViT name -> transformers BlipVisionModel name
    (r"^cls_token$", "embeddings.class_embedding"),
    (r"^pos_embed$", "embeddings.position_embedding"),
    (r"^patch_embed\.proj\.(weight|bias)$", r"embeddings.patch_embedding.\1"),
    (r"^blocks\.(\d+)\.norm1\.(.+)$", r"encoder.layers.\1.layer_norm1.\2"),
    (r"^blocks\.(\d+)\.norm2\.(.+)$", r"encoder.layers.\1.layer_norm2.\2"),
    (r"^blocks\.(\d+)\.attn\.qkv\.(.+)$", r"encoder.layers.\1.self_attn.qkv.\2"),
    (r"^blocks\.(\d+)\.attn\.proj\.(.+)$", r"encoder.layers.\1.self_attn.projection.\2"),
    (r"^blocks\.(\d+)\.mlp\.(fc1|fc2)\.(.+)$", r"encoder.layers.\1.mlp.\2.\3"),
    (r"^norm\.(weight|bias)$", r"post_layernorm.\1"),
]


def remap_image_reward_keys(sd: Mapping[str, Any]) -> dict[str, Any]:
    """``ImageReward.pt`` keys → :class:`ImageRewardModel` keys; unused BLIP parts are dropped."""
    out: dict[str, Any] = {}
    for key, val in sd.items():
        k = key.removeprefix("module.")
        if k.startswith("blip.visual_encoder."):
            sub = k[len("blip.visual_encoder."):]
            for pat, rep in _VISION_RULES:
                if re.match(pat, sub):
                    out["visual_encoder." + re.sub(pat, rep, sub)] = val
                    break
            else:
                raise KeyError(f"{IMAGE_REWARD_FILE}: unexpected vision key {key}")
        elif k.startswith("blip.text_encoder."):
            sub = k[len("blip.text_encoder."):]
            if sub.endswith("position_ids") or sub.startswith("pooler."):
                continue  # buffer / unused pooler
            out["text_encoder." + sub] = val
        elif k.startswith("mlp."):
            out[k] = val
        # blip.vision_proj / blip.text_proj / itm heads: not used for the reward
    return out


def text_config_from_med(med: Mapping[str, Any], encoder_width: int) -> dict[str, Any]:
    """BlipTextConfig kwargs from BLIP's ``med_config.json`` (cross-attention width = the ViT width)."""
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
            "hidden_act", "layer_norm_eps", "max_position_embeddings", "pad_token_id")
    cfg = {k: med[k] for k in keys if k in med}
    cfg.update(encoder_hidden_size=int(encoder_width), is_decoder=True,  # is_decoder: build cross-attention
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    vocab = int(cfg.get("vocab_size", 30524))
    for tok in ("bos_token_id", "sep_token_id", "eos_token_id"):
        if tok in med:
            cfg[tok] = med[tok]
        else:  # keep transformers' defaults only when they fit the vocabulary
            cfg[tok] = {"bos_token_id": 30522, "sep_token_id": 102, "eos_token_id": 2}[tok]
        if cfg[tok] is not None and cfg[tok] >= vocab:
            cfg[tok] = None
    return cfg


def make_model(vision: Mapping[str, Any], text: Mapping[str, Any]) -> Any:
    """The ImageReward network (random weights) for given BLIP vision / text config kwargs."""
    from torch import nn
    from transformers import BlipTextConfig, BlipTextModel, BlipVisionConfig, BlipVisionModel

    from worldrecall.plugins.models.laion_aesthetic import make_head

    class ImageRewardModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            tcfg = BlipTextConfig(**text)
            self.visual_encoder = BlipVisionModel(BlipVisionConfig(**vision))
            self.text_encoder = BlipTextModel(tcfg, add_pooling_layer=False)
            self.mlp = make_head(int(tcfg.hidden_size))  # same MLP shape as LAION's head, keys mlp.layers.N

        def forward(self, pixel_values: Any, input_ids: Any, attention_mask: Any) -> Any:
            import torch

            img = self.visual_encoder(pixel_values=pixel_values).last_hidden_state
            img_att = torch.ones(img.shape[:-1], dtype=torch.long, device=img.device)
            txt = self.text_encoder(input_ids=input_ids, attention_mask=attention_mask, encoder_hidden_states=img,
                                    encoder_attention_mask=img_att).last_hidden_state[:, 0, :].float()
            return (self.mlp(txt).reshape(-1) - REWARD_MEAN) / REWARD_STD

    return ImageRewardModel()


class ImageRewardScorer:
    """Standardised ImageReward of each frame for one prompt."""

    def __init__(self, model: Any, tokenizer: Any, options: Options):
        self.opts = options
        self.model = model.eval().to(options.device)
        self.tokenizer = tokenizer
        self.size = int(model.visual_encoder.config.image_size)

    def reward(self, prompt: str, frames: Sequence[np.ndarray]) -> np.ndarray:
        """``[N]`` float32 raw (standardised) rewards; the metric applies the sigmoid."""
        o = self.opts
        tok = self.tokenizer(prompt, padding="max_length", truncation=True, max_length=int(o["max_length"]),
                             return_tensors="pt")
        out: list[np.ndarray] = []
        for chunk in batched(list(frames), o.batch_size):
            x = to_normalized_tensor([check_rgb(f) for f in chunk], self.size, self.size,
                                     OPENAI_CLIP_MEAN, OPENAI_CLIP_STD).to(o.device)
            n = len(chunk)
            with inference(o.device, o.dtype):
                r = self.model(x, tok["input_ids"].expand(n, -1).to(o.device),
                               tok["attention_mask"].expand(n, -1).to(o.device))
            out.append(r.float().cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)


def load_from(folder: Path, tokenizer_dir: Path, options: Options) -> ImageRewardScorer:
    """Build the scorer from ``ImageReward.pt`` + ``med_config.json`` in ``folder``."""
    from transformers import BertTokenizer

    med = json.loads((folder / IMAGE_REWARD_MED_CONFIG).read_text())
    vision = dict(options["vision"])
    model = make_model(vision, text_config_from_med(med, int(vision["hidden_size"])))
    sd = remap_image_reward_keys(load_state_dict(folder / IMAGE_REWARD_FILE))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if missing:  # a naming mismatch shows up here: every weight of the scorer must come from the file
        raise KeyError(f"{IMAGE_REWARD_FILE}: {len(missing)} missing keys (e.g. {missing[:3]})")
    if unexpected:  # extra BLIP parts the reward does not use (the official loader ignores them too)
        log.warning("%s: ignoring %d unused keys (e.g. %s)", IMAGE_REWARD_FILE, len(unexpected), unexpected[:3])
    return ImageRewardScorer(model, BertTokenizer.from_pretrained(str(tokenizer_dir)), options)


def build(opts: Mapping[str, Any]) -> ImageRewardScorer:
    """Factory: ``THUDM/ImageReward`` + ``bert-base-uncased`` tokenizer (cache or ``local_dir``).

    ``local_dir`` holds ``ImageReward.pt`` and ``med_config.json``, and the tokenizer files
    (``vocab.txt`` or ``tokenizer.json`` …) when it has them; otherwise the tokenizer comes from the HF cache.
    """
    o, folder = hf_backend_folder(NAME, opts, DEFAULTS)
    e = entry(NAME)
    if o.local_dir is not None and any((folder / f).exists() for f in ("vocab.txt", "tokenizer.json")):
        tok_dir = folder
    else:
        tok_dir = hf_dir(NAME, TOKENIZER_REPO, required=required_hf_files(e.weights, TOKENIZER_REPO))
    return load_from(folder, tok_dir, o)
