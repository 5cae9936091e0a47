"""Tiny random-weight instances of the OPIS reference backends' own transformers classes.

Each builder saves a model + processor with ``save_pretrained`` into a folder and returns the factory options
(``local_dir``) that load it through the backend's real factory (``from_pretrained(local_files_only=...)``).
Nothing here downloads anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def save_tiny_dinov3(folder: Path, seed: int = 0) -> dict[str, Any]:
    """``DINOv3ViTModel`` (2 layers, 32 wide, patch 16) + ``DINOv3ViTImageProcessor`` at 32 px."""
    import torch
    from transformers import DINOv3ViTConfig, DINOv3ViTImageProcessor, DINOv3ViTModel

    torch.manual_seed(seed)
    cfg = DINOv3ViTConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                          patch_size=16, image_size=32, num_register_tokens=0)
    DINOv3ViTModel(cfg).save_pretrained(folder)
    DINOv3ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=IMAGENET_MEAN,
                            image_std=IMAGENET_STD).save_pretrained(folder)
    return {"local_dir": str(folder), "image_size": 32, "local_files_only": True}


def save_tiny_depth_anything_metric(folder: Path, seed: int = 0) -> dict[str, Any]:
    """``DepthAnythingForDepthEstimation`` (metric head, max depth 20) + a 56 px DPT processor."""
    import torch
    from transformers import (
        DepthAnythingConfig,
        DepthAnythingForDepthEstimation,
        Dinov2Config,
        DPTImageProcessor,
    )

    torch.manual_seed(seed)
    bb = Dinov2Config(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, mlp_ratio=2, image_size=56,
                      patch_size=14, out_indices=[1, 2, 3, 4], reshape_hidden_states=False)
    cfg = DepthAnythingConfig(backbone_config=bb, reassemble_hidden_size=32, neck_hidden_sizes=[8, 16, 32, 32],
                              fusion_hidden_size=16, head_hidden_size=8, depth_estimation_type="metric", max_depth=20)
    DepthAnythingForDepthEstimation(cfg).save_pretrained(folder)
    DPTImageProcessor(do_resize=True, size={"height": 56, "width": 56}, keep_aspect_ratio=True, ensure_multiple_of=14,
                      do_normalize=True, image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD).save_pretrained(folder)
    return {"local_dir": str(folder), "local_files_only": True}


def save_tiny_vitpose(folder: Path, seed: int = 0, experts: int = 6) -> dict[str, Any]:
    """``VitPoseForPoseEstimation`` (ViTPose+ style: ``experts`` MoE experts, 17 keypoints) + its processor."""
    import torch
    from transformers import (
        VitPoseBackboneConfig,
        VitPoseConfig,
        VitPoseForPoseEstimation,
        VitPoseImageProcessor,
    )

    torch.manual_seed(seed)
    bb = VitPoseBackboneConfig(image_size=[64, 48], patch_size=[16, 16], hidden_size=32, num_hidden_layers=2,
                               num_attention_heads=4, mlp_ratio=2, num_experts=experts, part_features=8,
                               out_indices=[2])
    cfg = VitPoseConfig(backbone_config=bb, use_simple_decoder=True)
    cfg.num_labels = 17
    VitPoseForPoseEstimation(cfg).save_pretrained(folder)
    VitPoseImageProcessor(size={"height": 64, "width": 48}).save_pretrained(folder)
    return {"local_dir": str(folder), "local_files_only": True}


def save_tiny_lightglue(folder: Path, seed: int = 0) -> dict[str, Any]:
    """``LightGlueForKeypointMatching`` with a tiny SuperPoint + a 96x128 processor."""
    import torch
    from transformers import (
        LightGlueConfig,
        LightGlueForKeypointMatching,
        LightGlueImageProcessor,
        SuperPointConfig,
    )

    torch.manual_seed(seed)
    sp = SuperPointConfig(encoder_hidden_sizes=[8, 8, 16, 16], decoder_hidden_size=32, descriptor_decoder_dim=32,
                          max_keypoints=256, keypoint_threshold=0.0)
    cfg = LightGlueConfig(keypoint_detector_config=sp, descriptor_dim=32, num_hidden_layers=2, num_attention_heads=4)
    LightGlueForKeypointMatching(cfg).save_pretrained(folder)
    LightGlueImageProcessor(size={"height": 96, "width": 128}).save_pretrained(folder)
    return {"local_dir": str(folder), "local_files_only": True}
