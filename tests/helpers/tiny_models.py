"""Random-weight instances of the reference backends' own model classes: tiny (tests) or full size (speed).

* :func:`save_tiny` writes a tiny random model of the SAME class as the reference into a folder laid out
  like the real weights (``save_pretrained`` folders, ``torch.save`` state dicts under the real file
  names) and returns the factory options that load it through the real code path (``local_dir``).
* :func:`full_size_backend` builds a backend object around a randomly initialised full-size network
  (same FLOPs as the real one) without any weight file — for ``benchmarks/models.py``.

Nothing here downloads anything. Tokenizers are built from in-memory vocabularies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.plugins.models import manifest
from worldrecall.plugins.models.options import parse_options

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


# --- tokenizers ------------------------------------------------------------------------------------
def clip_tokenizer() -> Any:
    """A byte-level CLIP tokenizer with no merges (514 tokens: every byte, with and without ``</w>``)."""
    import transformers
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    chars = list(bytes_to_unicode().values())
    # BOS must not be id 0: OWLv2 treats a query whose first token is 0 as padding
    vocab = {"<|endoftext|>": 0, "<|startoftext|>": 1}
    for c in chars:
        vocab[c] = len(vocab)
    for c in chars:
        vocab[c + "</w>"] = len(vocab)
    return transformers.CLIPTokenizer(vocab=vocab, merges=[])


def bert_tokenizer() -> Any:
    """A word-level BERT tokenizer over a dozen words."""
    import transformers

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "a", "red", "car", "cat", "dog", "on", "the", "road"]
    return transformers.BertTokenizer(vocab={w: i for i, w in enumerate(words)})


# --- configs -----------------------------------------------------------------------------------------
def dinov2_config(size: str) -> Any:
    from transformers import Dinov2Config

    if size == "tiny":
        return Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=224,
                            patch_size=14)
    return Dinov2Config(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4, image_size=518,
                        patch_size=14)


def depth_anything_config(size: str) -> Any:
    from transformers import DepthAnythingConfig, Dinov2Config

    if size == "tiny":
        bb = Dinov2Config(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, mlp_ratio=2, image_size=224,
                          patch_size=14, out_indices=[1, 2, 3, 4], reshape_hidden_states=False)
        return DepthAnythingConfig(backbone_config=bb, reassemble_hidden_size=32, neck_hidden_sizes=[8, 16, 32, 32],
                                   fusion_hidden_size=16, head_hidden_size=8)
    bb = Dinov2Config(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, mlp_ratio=4, image_size=518,
                      patch_size=14, out_indices=[3, 6, 9, 12], reshape_hidden_states=False)
    return DepthAnythingConfig(backbone_config=bb, reassemble_hidden_size=384, reassemble_factors=[4, 2, 1, 0.5],
                               neck_hidden_sizes=[48, 96, 192, 384], fusion_hidden_size=64, head_hidden_size=32)


def dpt_processor(side: int) -> Any:
    """The Depth-Anything-V2 preprocessing (keep aspect, multiple of 14, bicubic, ImageNet) at ``side``."""
    from transformers import DPTImageProcessorPil

    return DPTImageProcessorPil(do_resize=True, size={"height": side, "width": side}, keep_aspect_ratio=True,
                                ensure_multiple_of=14, resample=3, do_rescale=True, rescale_factor=1 / 255,
                                do_normalize=True, image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD, do_pad=False)


def sam3_config(size: str) -> Any:
    import transformers as T

    if size != "tiny":
        return T.Sam3Config()
    vit = T.Sam3ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                          image_size=224, patch_size=14, window_size=8, global_attn_indexes=[0, 1])
    return T.Sam3Config(
        vision_config=T.Sam3VisionConfig(backbone_config=vit, fpn_hidden_size=32, scale_factors=[2.0, 1.0]),
        text_config=dict(vocab_size=1000, hidden_size=32, intermediate_size=64, projection_dim=32, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=32, bos_token_id=1, eos_token_id=0,
                         pad_token_id=0),
        geometry_encoder_config=T.Sam3GeometryEncoderConfig(hidden_size=32, num_layers=1, num_attention_heads=4,
                                                            intermediate_size=64, mask_fuser_hidden_size=32,
                                                            mask_fuser_num_layers=1),
        detr_encoder_config=T.Sam3DETREncoderConfig(hidden_size=32, num_layers=1, num_attention_heads=4,
                                                    intermediate_size=64),
        detr_decoder_config=T.Sam3DETRDecoderConfig(hidden_size=32, num_layers=1, num_queries=5, num_attention_heads=4,
                                                    intermediate_size=64),
        mask_decoder_config=T.Sam3MaskDecoderConfig(hidden_size=32, num_upsampling_stages=2))


def sam3_processor(size: str) -> Any:
    import transformers as T

    if size == "tiny":
        ip = T.Sam3ImageProcessor(size={"height": 224, "width": 224}, mask_size={"height": 56, "width": 56})
    else:
        ip = T.Sam3ImageProcessor()
    return T.Sam3Processor(image_processor=ip, tokenizer=clip_tokenizer())


def owlv2_config(size: str) -> Any:
    from transformers import Owlv2Config

    if size == "tiny":
        return Owlv2Config(
            text_config=dict(vocab_size=1000, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, max_position_embeddings=16, bos_token_id=1, eos_token_id=0,
                             pad_token_id=0),
            vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                               image_size=224, patch_size=16), projection_dim=32)
    return Owlv2Config(text_config=dict(bos_token_id=1, eos_token_id=0, pad_token_id=0),
                       vision_config=dict(image_size=960, patch_size=16))


def owlv2_processor(side: int) -> Any:
    from transformers import Owlv2ImageProcessor, Owlv2Processor

    return Owlv2Processor(image_processor=Owlv2ImageProcessor(size={"height": side, "width": side}),
                          tokenizer=clip_tokenizer())


def clip_vision_config(size: str) -> Any:
    """tiny | b32 (ViT-B/32) | l14 (ViT-L/14)."""
    from transformers import CLIPVisionConfig

    if size == "tiny":
        return CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                image_size=224, patch_size=32, projection_dim=32)
    if size == "b32":
        return CLIPVisionConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                                image_size=224, patch_size=32, projection_dim=512, hidden_act="quick_gelu")
    return CLIPVisionConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                            image_size=224, patch_size=14, projection_dim=768, hidden_act="quick_gelu")


def lightglue_config(size: str) -> Any:
    from transformers import LightGlueConfig, SuperPointConfig

    if size == "tiny":
        sp = SuperPointConfig(encoder_hidden_sizes=[8, 8, 16, 16], decoder_hidden_size=32, descriptor_decoder_dim=32,
                              max_keypoints=256, keypoint_threshold=0.0)
        return LightGlueConfig(keypoint_detector_config=sp, descriptor_dim=32, num_hidden_layers=2,
                               num_attention_heads=4)
    return LightGlueConfig(keypoint_detector_config=SuperPointConfig(max_keypoints=2048))


def lightglue_processor(size: str) -> Any:
    from transformers import LightGlueImageProcessor

    side = {"height": 96, "width": 128} if size == "tiny" else {"height": 480, "width": 640}
    return LightGlueImageProcessor(size=side)


TINY_BLIP_VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                    "image_size": 224, "patch_size": 16, "layer_norm_eps": 1e-6}
TINY_MED_CONFIG = {"architectures": ["BertModel"], "hidden_act": "gelu", "hidden_size": 32, "intermediate_size": 64,
                   "layer_norm_eps": 1e-12, "max_position_embeddings": 64, "model_type": "bert",
                   "num_attention_heads": 4, "num_hidden_layers": 2, "pad_token_id": 0, "vocab_size": 100,
                   "encoder_width": 32, "add_cross_attention": True}
# BLIP's med_config.json as shipped in THUDM/ImageReward (BERT-base with cross-attention)
MED_CONFIG_BASE = {"architectures": ["BertModel"], "hidden_act": "gelu", "hidden_size": 768,
                   "intermediate_size": 3072, "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
                   "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 0, "vocab_size": 30524,
                   "encoder_width": 768, "add_cross_attention": True}

_VISION_BACK = [  # transformers name -> original BLIP ViT name (inverse of image_reward._VISION_RULES)
    (r"^embeddings\.class_embedding$", "cls_token"),
    (r"^embeddings\.position_embedding$", "pos_embed"),
    (r"^embeddings\.patch_embedding\.(weight|bias)$", r"patch_embed.proj.\1"),
    (r"^encoder\.layers\.(\d+)\.layer_norm1\.(.+)$", r"blocks.\1.norm1.\2"),
    (r"^encoder\.layers\.(\d+)\.layer_norm2\.(.+)$", r"blocks.\1.norm2.\2"),
    (r"^encoder\.layers\.(\d+)\.self_attn\.qkv\.(.+)$", r"blocks.\1.attn.qkv.\2"),
    (r"^encoder\.layers\.(\d+)\.self_attn\.projection\.(.+)$", r"blocks.\1.attn.proj.\2"),
    (r"^encoder\.layers\.(\d+)\.mlp\.(fc1|fc2)\.(.+)$", r"blocks.\1.mlp.\2.\3"),
    (r"^post_layernorm\.(weight|bias)$", r"norm.\1"),
]


def to_image_reward_checkpoint(model: Any) -> dict[str, Any]:
    """A state dict named like the original ``ImageReward.pt`` (BLIP naming, unused projection heads, buffers)."""
    import re

    import torch

    out: dict[str, Any] = {}
    for k, v in model.state_dict().items():
        if k.startswith("visual_encoder."):
            sub = k[len("visual_encoder."):]
            for pat, rep in _VISION_BACK:
                if re.match(pat, sub):
                    out["blip.visual_encoder." + re.sub(pat, rep, sub)] = v.clone()
                    break
            else:
                raise KeyError(k)
        elif k.startswith("text_encoder."):
            out["blip." + k] = v.clone()
        else:
            out[k] = v.clone()
    n_pos = out["blip.text_encoder.embeddings.position_embeddings.weight"].shape[0]
    out["blip.text_encoder.embeddings.position_ids"] = torch.arange(n_pos).unsqueeze(0)
    width = out["blip.visual_encoder.cls_token"].shape[-1]
    out["blip.vision_proj.weight"] = torch.zeros(8, width)  # present in the real file, unused by the reward
    out["blip.text_proj.weight"] = torch.zeros(8, out["mlp.layers.0.weight"].shape[1])
    return out


# --- tiny folders for the real factories ------------------------------------------------------------
def save_tiny(name: str, folder: Path, seed: int = 0) -> dict[str, Any]:
    """Write a tiny random ``name`` model into ``folder``; return the factory options that load it."""
    import torch

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    opts: dict[str, Any] = {"local_dir": str(folder), "device": "cpu"}
    if name in ("dinov2_base", "dinov2_base_cls"):
        from transformers import Dinov2Model

        Dinov2Model(dinov2_config("tiny")).save_pretrained(folder)
    elif name == "raft_large":
        from torchvision.models.optical_flow import raft_large

        torch.save(raft_large(weights=None).state_dict(), folder / manifest.RAFT_LARGE_FILE)
    elif name == "depth_anything_v2_small":
        from transformers import DepthAnythingForDepthEstimation

        DepthAnythingForDepthEstimation(depth_anything_config("tiny")).save_pretrained(folder)
        dpt_processor(56).save_pretrained(folder)
    elif name == "sam3":
        from transformers import Sam3Model

        Sam3Model(sam3_config("tiny")).save_pretrained(folder)
        sam3_processor("tiny").save_pretrained(folder)
    elif name == "owlv2":
        from transformers import Owlv2ForObjectDetection

        Owlv2ForObjectDetection(owlv2_config("tiny")).save_pretrained(folder)
        owlv2_processor(224).save_pretrained(folder)
    elif name in ("laion_aesthetic", "clip_vit_b32"):
        from transformers import CLIPVisionModelWithProjection

        CLIPVisionModelWithProjection(clip_vision_config("tiny")).save_pretrained(folder)
        if name == "laion_aesthetic":
            from worldrecall.plugins.models.laion_aesthetic import make_head

            torch.save(make_head(32).state_dict(), folder / manifest.LAION_HEAD_FILE)
    elif name == "clipiqa_plus":
        from pyiqa.archs import clip_model as pcm

        # build_model() infers the architecture from the state dict: ResNet trunk, 64-wide text transformer
        # (heads = width // 64); vocab must stay 49408 (clip.tokenize's BPE vocabulary).
        clip = pcm.CLIP(embed_dim=32, image_resolution=224, vision_layers=(1, 1, 1, 1), vision_width=16,
                        vision_patch_size=None, context_length=77, vocab_size=49408, transformer_width=64,
                        transformer_heads=1, transformer_layers=1)
        # openai ships RN50.pt as a TorchScript archive of the whole model; write the tiny one the same way
        from pyiqa.archs.clip_imports import clip as openai_clip

        traced = torch.jit.trace(clip.eval(), (torch.rand(1, 3, 224, 224), openai_clip.tokenize(["a photo"])),
                                 check_trace=False)
        torch.jit.save(traced, str(folder / manifest.CLIP_RN50_FILE))
        torch.save(torch.randn(2, 16, 64) * 0.02, folder / manifest.CLIPIQA_PROMPTS_FILE)
    elif name in ("lpips_alex", "lpips_vgg"):
        from torchvision.models import alexnet

        if name == "lpips_vgg":
            opts["pnet_rand"] = True  # a random VGG16 trunk file would be 60 MB; the loader is shared with alex
        else:
            sd = {k: v for k, v in alexnet(weights=None).state_dict().items() if k.startswith("features.")}
            torch.save(sd, folder / manifest.ALEXNET_FILE)
    elif name == "image_reward":
        from worldrecall.plugins.models.image_reward import make_model, text_config_from_med

        model = make_model(TINY_BLIP_VISION, text_config_from_med(TINY_MED_CONFIG, TINY_BLIP_VISION["hidden_size"]))
        torch.save(to_image_reward_checkpoint(model), folder / manifest.IMAGE_REWARD_FILE)
        (folder / manifest.IMAGE_REWARD_MED_CONFIG).write_text(json.dumps(TINY_MED_CONFIG))
        bert_tokenizer().save_pretrained(folder)
        opts["vision"] = dict(TINY_BLIP_VISION)
    elif name == "superpoint_lightglue":
        from transformers import LightGlueForKeypointMatching

        LightGlueForKeypointMatching(lightglue_config("tiny")).save_pretrained(folder)
        lightglue_processor("tiny").save_pretrained(folder)
    elif name == "dinov3_vitb16":
        from transformers import DINOv3ViTConfig, DINOv3ViTImageProcessorFast, DINOv3ViTModel

        DINOv3ViTModel(DINOv3ViTConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, patch_size=16, image_size=64,
                                       num_register_tokens=4)).save_pretrained(folder)
        DINOv3ViTImageProcessorFast(size={"height": 64, "width": 64}).save_pretrained(folder)
    elif name == "musiq_spaq":
        from worldrecall.plugins.models.musiq import build_net

        # 6 heads as SPAQ's (not in the weights); width, MLP width and depth are read off the checkpoint;
        # as pyiqa's checkpoints: a DataParallel 'module.' prefix under a 'params' key
        sd = {f"module.{k}": v for k, v in build_net(hidden_size=48, mlp_dim=96, num_layers=1).state_dict().items()}
        torch.save({"params": sd}, folder / manifest.MUSIQ_SPAQ_FILE)
    elif name == "laion_linear":
        from transformers import CLIPVisionModelWithProjection

        from worldrecall.plugins.models.laion_linear import make_head

        CLIPVisionModelWithProjection(clip_vision_config("tiny")).save_pretrained(folder)
        torch.save(make_head(32).state_dict(), folder / manifest.LAION_LINEAR_FILE)
    else:
        raise KeyError(f"no tiny recipe for {name!r}")
    return opts


# --- full-size random backends for speed benchmarks ---------------------------------------------------
def full_size_backend(name: str, options: dict[str, Any] | None = None) -> Any:
    """A backend object around a randomly initialised full-size network (no weight files)."""
    import torch

    torch.manual_seed(0)
    opts = dict(options or {})
    builders: dict[str, Callable[[], Any]] = {}

    def dinov2() -> Any:
        from transformers import Dinov2Model

        from worldrecall.plugins.models import dinov2 as m

        return m.Dinov2PatchEmbedder(Dinov2Model(dinov2_config("full")), parse_options(m.NAME, opts, m.DEFAULTS))

    def raft() -> Any:
        from torchvision.models.optical_flow import raft_large

        from worldrecall.plugins.models import raft as m

        return m.RaftFlow(raft_large(weights=None), parse_options(m.NAME, opts, m.DEFAULTS))

    def depth() -> Any:
        from transformers import DepthAnythingForDepthEstimation

        from worldrecall.plugins.models import depth_anything as m

        return m.DepthAnythingDepth(DepthAnythingForDepthEstimation(depth_anything_config("full")), dpt_processor(518),
                                    parse_options(m.NAME, opts, m.DEFAULTS))

    def sam3() -> Any:
        from transformers import Sam3Model

        from worldrecall.plugins.models import sam3 as m

        return m.Sam3Segmenter(Sam3Model(sam3_config("full")), sam3_processor("full"),
                               parse_options(m.NAME, opts, m.DEFAULTS))

    def owl() -> Any:
        from transformers import Owlv2ForObjectDetection

        from worldrecall.plugins.models import owlv2 as m

        return m.Owlv2Segmenter(Owlv2ForObjectDetection(owlv2_config("full")), owlv2_processor(960),
                                parse_options(m.NAME, opts, m.DEFAULTS))

    def laion() -> Any:
        from transformers import CLIPVisionModelWithProjection

        from worldrecall.plugins.models import laion_aesthetic as m
        from worldrecall.plugins.models.clip_embedder import ClipImageEncoder

        o = parse_options(m.NAME, opts, m.DEFAULTS)
        return m.LaionAesthetic(ClipImageEncoder(CLIPVisionModelWithProjection(clip_vision_config("l14")), o),
                                m.make_head(768))

    def clip32() -> Any:
        from transformers import CLIPVisionModelWithProjection

        from worldrecall.plugins.models import clip_embedder as m

        o = parse_options(m.NAME, opts, m.DEFAULTS)
        return m.ClipImageEmbedder(m.ClipImageEncoder(CLIPVisionModelWithProjection(clip_vision_config("b32")), o))

    def clipiqa() -> Any:
        import pyiqa
        import pyiqa.archs.clipiqa_arch as ca
        from pyiqa.archs import clip_model as pcm

        from worldrecall.plugins.models import clipiqa as m

        rn50 = pcm.CLIP(embed_dim=1024, image_resolution=224, vision_layers=(3, 4, 6, 3), vision_width=64,
                        vision_patch_size=None, context_length=77, vocab_size=49408, transformer_width=512,
                        transformer_heads=8, transformer_layers=12).float().eval()
        saved = ca.load
        ca.load = lambda *a, **k: rn50  # the arch asks its loader for RN50; hand it the random one
        try:
            metric = pyiqa.create_metric("clipiqa+", device="cpu", as_loss=False, pretrained=False)
        finally:
            ca.load = saved
        return m.ClipIqaPlus(metric, parse_options(m.NAME, opts, m.DEFAULTS))

    def lp(net: str) -> Callable[[], Any]:
        def make() -> Any:
            import lpips

            from worldrecall.plugins.models import lpips_distance as m

            name = "lpips_alex" if net == "alex" else "lpips_vgg"
            return m.LpipsDistance(lpips.LPIPS(net=net, pnet_rand=True, verbose=False),
                                   parse_options(name, opts, m.DEFAULTS))
        return make

    def ir() -> Any:
        from worldrecall.plugins.models import image_reward as m

        o = parse_options(m.NAME, opts, m.DEFAULTS)
        model = m.make_model(m.VIT_LARGE, m.text_config_from_med(MED_CONFIG_BASE, m.VIT_LARGE["hidden_size"]))
        return m.ImageRewardScorer(model, bert_tokenizer(), o)

    def lightglue() -> Any:
        from transformers import LightGlueForKeypointMatching

        from worldrecall.plugins.models import superpoint_lightglue as m

        return m.LightGluePose(LightGlueForKeypointMatching(lightglue_config("full")), lightglue_processor("full"),
                               parse_options(m.NAME, opts, m.DEFAULTS))

    builders.update({"dinov2_base": dinov2, "raft_large": raft, "depth_anything_v2_small": depth, "sam3": sam3,
                     "owlv2": owl, "laion_aesthetic": laion, "clip_vit_b32": clip32, "clipiqa_plus": clipiqa,
                     "lpips_alex": lp("alex"), "lpips_vgg": lp("vgg"), "image_reward": ir,
                     "superpoint_lightglue": lightglue})
    if name not in builders:
        raise KeyError(f"no full-size recipe for {name!r}")
    return builders[name]()


def textured_image(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A uint8 RGB image with structure at several scales (smoothed noise + edges), good for matching."""
    import cv2

    rng = np.random.default_rng(seed)
    img = np.zeros((h, w, 3), np.float32)
    for scale, amp in ((4, 0.5), (16, 0.3), (64, 0.2)):
        small = rng.random((max(2, h // scale), max(2, w // scale), 3)).astype(np.float32)
        img += amp * cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    return np.clip(img * 255, 0, 255).astype(np.uint8)
