"""Every weight file the reference backends need: where it comes from, its licence, its size.

Pure data (no torch import), read by ``plugin.py`` to fill each :class:`ModelSpec` and by ``fetch.py`` to
prefetch into the standard caches.

Honesty notes:
* ``revision`` is ``None`` (the repository's default branch) for every Hugging Face repository: we do not
  know the pinned commit hashes for certain, so none is invented. Pin one with the backend option
  ``revision`` (e.g. ``models.options.dinov2_base.revision=<commit>``).
* ``sha256`` is filled only where the publisher states it: openai's CLIP URLs carry the full sha256 in
  their path. torchvision file names carry an 8-hex sha256 *prefix* (``-ff5fadd5.pth``), which fetch checks
  the same way ``torch.hub`` does. Everything else is ``None``.
* ``size_mb`` values are approximate (for display in ``worldrecall models list``), not checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worldrecall.core.models import WeightFile

CLIP_RN50_SHA256 = "afeb0e10f9e5a86da6080e35cf09123aca3b358a0c3e3b6c78a7b63bc04b6762"

# Glob patterns fetched along with an HF repository's required files: processor and tokenizer metadata
# (preprocessor_config.json / processor_config.json, tokenizer files). Optional: a repository without a
# matching file is fine. Only the exact file names below are checked for presence.
META_PATTERNS = ("*.json", "*.txt")


@dataclass(frozen=True)
class ManifestEntry:
    """The provenance of one backend: hub id, revision, licence and its weight files."""

    model_id: str
    licence: str
    weights: list[WeightFile] = field(default_factory=list)
    revision: str = ""          # "" = default branch (see module notes)


def _hf(repo: str, filename: str, size_mb: float | None = None) -> WeightFile:
    return WeightFile(repo=repo, filename=filename, revision=None, sha256=None, size_mb=size_mb, cache="hf")


def _torchvision(filename: str, size_mb: float) -> WeightFile:
    return WeightFile(repo="torchvision", filename=filename, size_mb=size_mb, cache="torch_hub",
                      url=f"https://download.pytorch.org/models/{filename}")


RAFT_LARGE_FILE = "raft_large_C_T_SKHT_V2-ff5fadd5.pth"
ALEXNET_FILE = "alexnet-owt-7be5be79.pth"
VGG16_FILE = "vgg16-397923af.pth"
VGG19_FILE = "vgg19-dcbb9e9d.pth"
LAION_HEAD_FILE = "sac+logos+ava1-l14-linearMSE.pth"
CLIPIQA_PROMPTS_FILE = "CLIP-IQA+_learned_prompts-603f3273.pth"
CLIP_RN50_FILE = "RN50.pt"
IMAGE_REWARD_FILE = "ImageReward.pt"
IMAGE_REWARD_MED_CONFIG = "med_config.json"
DINOV3_VITB16_REPO = "facebook/dinov3-vitb16-pretrain-lvd1689m"
MUSIQ_SPAQ_FILE = "musiq_spaq_ckpt-358bb6af.pth"
LAION_LINEAR_FILE = "sa_0_4_vit_l_14_linear.pth"

MANIFEST: dict[str, ManifestEntry] = {
    "dinov2_base": ManifestEntry(
        "facebook/dinov2-base", "Apache-2.0",
        [_hf("facebook/dinov2-base", "config.json"), _hf("facebook/dinov2-base", "model.safetensors", 346.0)]),
    "dinov2_base_fullfov": ManifestEntry(
        "facebook/dinov2-base", "Apache-2.0",
        [_hf("facebook/dinov2-base", "config.json"), _hf("facebook/dinov2-base", "model.safetensors", 346.0)]),
    "dinov2_base_cls": ManifestEntry(
        "facebook/dinov2-base", "Apache-2.0",
        [_hf("facebook/dinov2-base", "config.json"), _hf("facebook/dinov2-base", "model.safetensors", 346.0)]),
    "vgg19_gram": ManifestEntry(
        "torchvision/vgg19:IMAGENET1K_V1", "BSD-3-Clause (torchvision weights)",
        [_torchvision(VGG19_FILE, 548.1)]),
    "raft_large": ManifestEntry(
        "torchvision/raft_large:C_T_SKHT_V2", "BSD-3-Clause (torchvision weights)",
        [_torchvision(RAFT_LARGE_FILE, 20.1)]),
    "depth_anything_v2_small": ManifestEntry(
        "depth-anything/Depth-Anything-V2-Small-hf", "Apache-2.0",
        [_hf("depth-anything/Depth-Anything-V2-Small-hf", "config.json"),
         _hf("depth-anything/Depth-Anything-V2-Small-hf", "model.safetensors", 99.2)]),
    "sam3": ManifestEntry(
        "facebook/sam3", "SAM License (Meta; gated repository, accept the terms on the hub first)",
        [_hf("facebook/sam3", "config.json"), _hf("facebook/sam3", "model.safetensors", 3450.0)]),
    "owlv2": ManifestEntry(
        "google/owlv2-base-patch16-ensemble", "Apache-2.0",
        [_hf("google/owlv2-base-patch16-ensemble", "config.json"),
         _hf("google/owlv2-base-patch16-ensemble", "model.safetensors", 620.0)]),
    "laion_aesthetic": ManifestEntry(
        "openai/clip-vit-large-patch14+laion/improved-aesthetic-predictor", "MIT (CLIP) + Apache-2.0 (LAION head)",
        [_hf("openai/clip-vit-large-patch14", "config.json"),
         _hf("openai/clip-vit-large-patch14", "model.safetensors", 1710.0),
         WeightFile(repo="github.com/christophschuhmann/improved-aesthetic-predictor", filename=LAION_HEAD_FILE,
                    size_mb=3.7, cache="url",
                    url="https://github.com/christophschuhmann/improved-aesthetic-predictor/raw/main/"
                        "sac+logos+ava1-l14-linearMSE.pth")]),
    "clipiqa_plus": ManifestEntry(
        "pyiqa/clipiqa+", "PolyForm-Noncommercial-1.0.0 (pyiqa); CLIP-IQA S-Lab License 1.0; CLIP MIT",
        [WeightFile(repo="openaipublic.azureedge.net/clip", filename=CLIP_RN50_FILE, sha256=CLIP_RN50_SHA256,
                    size_mb=244.0, cache="url",
                    url=f"https://openaipublic.azureedge.net/clip/models/{CLIP_RN50_SHA256}/RN50.pt"),
         WeightFile(repo="chaofengc/IQA-PyTorch-Weights", filename=CLIPIQA_PROMPTS_FILE, size_mb=0.1, cache="url",
                    url="https://huggingface.co/chaofengc/IQA-PyTorch-Weights/resolve/main/"
                        "CLIP-IQA%2B_learned_prompts-603f3273.pth")]),
    "lpips_alex": ManifestEntry(
        "lpips/alex-v0.1", "BSD-2-Clause (lpips; linear heads ship in the wheel) + BSD-3-Clause (torchvision AlexNet)",
        [_torchvision(ALEXNET_FILE, 233.1)]),
    "lpips_vgg": ManifestEntry(
        "lpips/vgg-v0.1", "BSD-2-Clause (lpips; linear heads ship in the wheel) + BSD-3-Clause (torchvision VGG16)",
        [_torchvision(VGG16_FILE, 527.8)]),
    "image_reward": ManifestEntry(
        "THUDM/ImageReward", "Apache-2.0 (ImageReward) + Apache-2.0 (bert-base-uncased tokenizer)",
        [_hf("THUDM/ImageReward", IMAGE_REWARD_FILE, 1790.0), _hf("THUDM/ImageReward", IMAGE_REWARD_MED_CONFIG),
         _hf("bert-base-uncased", "vocab.txt", 0.2), _hf("bert-base-uncased", "tokenizer_config.json")]),
    "clip_vit_b32": ManifestEntry(
        "openai/clip-vit-base-patch32", "MIT",
        [_hf("openai/clip-vit-base-patch32", "config.json"),
         _hf("openai/clip-vit-base-patch32", "model.safetensors", 605.0)]),
    "superpoint_lightglue": ManifestEntry(
        "ETH-CVG/lightglue_superpoint",
        "Apache-2.0 (LightGlue); SuperPoint weights: Magic Leap academic non-commercial licence",
        [_hf("ETH-CVG/lightglue_superpoint", "config.json"),
         _hf("ETH-CVG/lightglue_superpoint", "model.safetensors", 52.0)]),
    "mapanything": ManifestEntry(
        "facebook/map-anything-apache", "Apache-2.0",
        [_hf("facebook/map-anything-apache", "config.json"),
         _hf("facebook/map-anything-apache", "model.safetensors")]),
    # MIND (CSU-JPG/MIND): DINOv3 patch tokens, MUSIQ-SPAQ imaging quality, LAION's linear aesthetic head
    "dinov3_vitb16": ManifestEntry(
        DINOV3_VITB16_REPO, "DINOv3 License (Meta; gated repository, accept the terms on the hub first)",
        [_hf(DINOV3_VITB16_REPO, "config.json"), _hf(DINOV3_VITB16_REPO, "model.safetensors", 343.0),
         _hf(DINOV3_VITB16_REPO, "preprocessor_config.json")]),
    "musiq_spaq": ManifestEntry(
        "pyiqa/musiq-spaq", "PolyForm-Noncommercial-1.0.0 (pyiqa weights); MUSIQ Apache-2.0 (Google Research)",
        [WeightFile(repo="github.com/chaofengc/IQA-PyTorch", filename=MUSIQ_SPAQ_FILE, size_mb=104.0, cache="url",
                    url="https://github.com/chaofengc/IQA-PyTorch/releases/download/v0.1-weights/"
                        f"{MUSIQ_SPAQ_FILE}")]),
    "laion_linear": ManifestEntry(
        "openai/clip-vit-large-patch14+LAION-AI/aesthetic-predictor:sa_0_4_vit_l_14_linear",
        "MIT (CLIP) + MIT (LAION-AI/aesthetic-predictor)",
        [_hf("openai/clip-vit-large-patch14", "config.json"),
         _hf("openai/clip-vit-large-patch14", "model.safetensors", 1710.0),
         WeightFile(repo="github.com/LAION-AI/aesthetic-predictor", filename=LAION_LINEAR_FILE, size_mb=0.01,
                    cache="url", url=f"https://github.com/LAION-AI/aesthetic-predictor/raw/main/{LAION_LINEAR_FILE}")]),
}


def entry(name: str) -> ManifestEntry:
    """The manifest entry of a reference backend (KeyError for classical/sidecar names)."""
    return MANIFEST[name]
