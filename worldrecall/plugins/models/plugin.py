"""Built-in perception backends, registered through the ``worldrecall`` entry-point group.

Every backend is a :class:`ModelSpec` whose factory builds it lazily: importing this module loads no
torch, transformers, OpenCV, lpips or pyiqa (those are imported inside the factories), so
``worldrecall plugins`` / ``models list`` stay fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from worldrecall.core.components import Command, PathParam, Registry
from worldrecall.core.hookspecs import hookimpl
from worldrecall.core.models import ModelSpec, Role
from worldrecall.plugins.models import (
    clip_embedder,
    clipiqa,
    cls_patches,
    color_histogram,
    color_patches,
    depth_anything,
    dinov2,
    dinov3,
    dis_flow,
    image_reward,
    laion_aesthetic,
    laion_linear,
    lpips_distance,
    mapanything,
    musiq,
    owlv2,
    pose_npy,
    raft,
    sam3,
    sidecar,
    sift_matches,
    sift_pose,
    superpoint_lightglue,
    texture_gram,
)
from worldrecall.plugins.models.manifest import MANIFEST
from worldrecall.plugins.models.weights import weights_probe

TORCH = ("torch", "torchvision")
HF = ("torch", "transformers")


def _reference(name: str, role: str, factory: Callable[..., Any], defaults: dict[str, Any], description: str,
               requires: tuple[str, ...] = HF, extra: str | None = None) -> ModelSpec:
    e = MANIFEST[name]
    # `worldrecall check` probes (packages, weights on disk) instead of loading; without declared weights the
    # factory alone knows, so it is built there as in a run
    probe = weights_probe(name, requires, e.weights, e.model_id, factory) if e.weights else None
    return ModelSpec(name=name, role=role, kind="reference", factory=factory, description=description,
                     model_id=e.model_id, revision=e.revision, weights=list(e.weights), licence=e.licence,
                     requires=requires, defaults={"local_dir": PathParam(""), **defaults}, extra=extra,
                     probe=probe)


# the role's other backends (weight-free first) are appended by the engine from the registry
SIDECAR_FIX = ("these sidecar backends read ViPE sidecars (annotations_vipe/<name>_vipe_ann) the dataset does "
               "not ship (docs/real_outputs.md: how to produce them)")


def _local(name: str, role: str, kind: str, factory: Callable[..., Any], defaults: dict[str, Any],
           description: str, requires: tuple[str, ...] = ()) -> ModelSpec:
    return ModelSpec(name=name, role=role, kind=kind, factory=factory, description=description, model_id=name,
                     revision="", weights=[], licence="Apache-2.0 (worldrecall)", requires=requires,
                     defaults=dict(defaults),
                     preflight=sidecar.preflight if kind == "sidecar" else None,
                     fix=SIDECAR_FIX if kind == "sidecar" else "")


def roles() -> list[Role]:
    """The perception roles MemoBench and Scene Memory F1 use, with each backend set's default backend."""
    def role(name: str, description: str, classical: str = "", reference: str = "") -> Role:
        return Role(name, description, {k: v for k, v in (("classical", classical), ("reference", reference)) if v})

    return [
        role("flow", "dense optical flow between two frames", "dis_flow", "raft_large"),
        role("patch_embedder", "per-patch embeddings of a frame (DINOv2 x_norm_patchtokens)",
             "color_patch_embedder", "dinov2_base"),
        role("depth", "per-frame depth (relative inverse depth or metric depth)", "sidecar_depth",
             "depth_anything_v2_small"),
        role("segmenter", "text-prompted instance masks with scores", "sidecar_segmenter", "sam3"),
        role("aesthetic", "LAION aesthetic score per frame (0-10)", reference="laion_aesthetic"),
        role("iqa", "no-reference image quality per frame (0-1)", reference="clipiqa_plus"),
        role("perceptual", "LPIPS distance between frame pairs", reference="lpips_alex"),
        role("text_image_reward", "prompt-image reward (ImageReward raw score)", reference="image_reward"),
        role("image_embedder", "global image embedding per frame", "color_histogram", "clip_vit_b32"),
        role("pose", "camera-to-world poses of every generated frame", "sidecar_pose", "superpoint_lightglue"),
        role("texture", "texture distance between two frames (memory_loop rendering recovery: VGG19 Gram)",
             "gradient_gram", "vgg19_gram"),
        role("revisit_embedder", "global image embedding per frame for revisit fidelity (memory_loop: DINOv2 CLS)",
             "color_histogram_revisit", "dinov2_base_cls"),
        # the release runs SIFT itself, so the weight-free backend is the default of both sets
        role("local_features", "matched keypoints of two frames, best first (memory_loop closure: SIFT, ratio 0.75)",
             "sift", "sift"),
        role("cls_patch_embedder", "global (CLS) embedding and patch tokens per frame over the full field of view "
             "(WRBench D2: DINOv2, resize-and-pad, no centre crop)", "color_cls_patch_embedder",
             "dinov2_base_fullfov"),
        # MIND: the release's DINOv3 tokens, MUSIQ-SPAQ and LAION linear aesthetic head (reference only)
        role("patch_tokens", "per-patch tokens of a frame without CLS/register tokens, the model's own processor "
             "(MIND: DINOv3 ViT-B/16)", "color_patch_tokens", "dinov3_vitb16"),
        role("imaging_quality", "no-reference imaging quality per frame, raw MOS (MIND: MUSIQ-SPAQ, 0-100)",
             reference="musiq_spaq"),
        role("linear_aesthetic", "LAION linear aesthetic head on CLIP ViT-L/14 features per frame, raw (MIND, 0-10)",
             reference="laion_linear"),
    ]


def specs() -> list[ModelSpec]:
    """Every built-in backend spec (reference, classical, sidecar)."""
    return [
        _reference("dinov2_base", "patch_embedder", dinov2.build, dinov2.DEFAULTS,
                   "DINOv2 ViT-B/14 layer-normed patch tokens (256 bicubic, crop 224) [N,256,768]"),
        _reference("raft_large", "flow", raft.build, raft.DEFAULTS,
                   "torchvision RAFT-Large C_T_SKHT_V2, 12 updates, [0,1] input quirk (MemoBench)",
                   requires=TORCH),
        _reference("depth_anything_v2_small", "depth", depth_anything.build, depth_anything.DEFAULTS,
                   "Depth-Anything-V2-Small relative inverse depth at processor resolution"),
        _reference("sam3", "segmenter", sam3.build, sam3.DEFAULTS,
                   "SAM-3 text-prompted masks, score = query x presence, all candidates > 0"),
        _reference("owlv2", "segmenter", owlv2.build, owlv2.DEFAULTS,
                   "OWLv2 open-vocabulary boxes as box masks (fallback when SAM-3 is unavailable)"),
        _reference("laion_aesthetic", "aesthetic", laion_aesthetic.build, laion_aesthetic.DEFAULTS,
                   "CLIP ViT-L/14 + LAION improved-aesthetic-predictor linear-MSE head (0-10)"),
        _reference("clipiqa_plus", "iqa", clipiqa.build, clipiqa.DEFAULTS,
                   "pyiqa CLIP-IQA+ (RN50, learned prompts), clipped to [0,1]",
                   requires=("torch", "pyiqa", "clip"), extra="iqa"),
        _reference("lpips_alex", "perceptual", lpips_distance.build_alex, lpips_distance.DEFAULTS,
                   "LPIPS v0.1 AlexNet, RGB in [-1,1], batches of 16", requires=("torch", "lpips"),
                   extra="lpips"),
        _reference("lpips_vgg", "perceptual", lpips_distance.build_vgg, lpips_distance.DEFAULTS,
                   "LPIPS v0.1 VGG16, RGB in [-1,1], batches of 16", requires=("torch", "lpips"), extra="lpips"),
        _reference("image_reward", "text_image_reward", image_reward.build, image_reward.DEFAULTS,
                   "ImageReward-v1.0 on transformers BLIP (35 tokens), standardised reward"),
        _reference("dinov2_base_cls", "revisit_embedder", dinov2.build_cls, dinov2.DEFAULTS,
                   "DINOv2 ViT-B/14 layer-normed CLS token (256 bicubic, crop 224), L2-normalised [N,768]"),
        _reference("vgg19_gram", "texture", texture_gram.build_vgg, texture_gram.VGG_DEFAULTS,
                   "VGG19 Gram-matrix MSE summed over conv1-5 (shorter side 512 on CUDA, 128 on CPU)",
                   requires=TORCH),
        _reference("clip_vit_b32", "image_embedder", clip_embedder.build, clip_embedder.DEFAULTS,
                   "CLIP ViT-B/32 image embeddings, L2-normalised"),
        _reference("superpoint_lightglue", "pose", superpoint_lightglue.build, superpoint_lightglue.DEFAULTS,
                   "SuperPoint+LightGlue matches -> rotation homography / essential matrix -> chained rotations",
                   requires=("torch", "transformers", "cv2")),
        _reference("mapanything", "pose", mapanything.build, mapanything.DEFAULTS,
                   "MapAnything (facebook/map-anything-apache) c2w poses; needs the mapanything package",
                   requires=("torch", "mapanything")),
        _local("dis_flow", "flow", "classical", dis_flow.build, dis_flow.DEFAULTS,
               "OpenCV DIS optical flow (preset medium) on grey frames", requires=("cv2",)),
        _local("sift_pose", "pose", "classical", sift_pose.build, sift_pose.DEFAULTS,
               "SIFT + ratio test -> rotation homography / essential matrix -> chained rotations",
               requires=("cv2",)),
        _local("sift", "local_features", "classical", sift_matches.build, sift_matches.DEFAULTS,
               "OpenCV SIFT on grey frames, brute-force L2 2-NN, Lowe ratio 0.75, sorted by distance",
               requires=("cv2",)),
        _local("color_histogram", "image_embedder", "classical", color_histogram.build, color_histogram.DEFAULTS,
               "per-channel 8-bin RGB histograms, L2-normalised"),
        _local("color_histogram_revisit", "revisit_embedder", "classical", color_histogram.build,
               color_histogram.DEFAULTS, "per-channel 8-bin RGB histograms, L2-normalised (not the paper's DINOv2)"),
        _local("gradient_gram", "texture", "classical", texture_gram.build_gradient, texture_gram.GRADIENT_DEFAULTS,
               "Gram MSE of RGB + Sobel + Laplacian maps at two scales (not the paper's VGG)", requires=("cv2",)),
        _local("color_patch_embedder", "patch_embedder", "classical", color_patches.build, color_patches.DEFAULTS,
               "DINOv2-shaped tokens from patch Lab colour, colour layout and gradient statistics [N,256,27]",
               requires=("cv2",)),
        _local("sidecar_depth", "depth", "sidecar", sidecar.build_depth, sidecar.DEPTH_DEFAULTS,
               "metric depth from the case's ViPE sidecar (0 where invalid)"),
        _local("sidecar_pose", "pose", "sidecar", sidecar.build_pose, {},
               "c2w poses from the case's ViPE sidecar"),
        _local("sidecar_segmenter", "segmenter", "sidecar", sidecar.build_segmenter, {},
               "instance masks from the sidecar: target + phrase-matching instances, score 1.0"),
        _reference("dinov2_base_fullfov", "cls_patch_embedder", cls_patches.build_dino, cls_patches.DINO_DEFAULTS,
                   "DINOv2 ViT-B/14 CLS + patch tokens, longer side 224 bicubic, centred pad (no crop) [N,256,768]"),
        _local("color_cls_patch_embedder", "cls_patch_embedder", "classical", cls_patches.build_color,
               cls_patches.COLOR_DEFAULTS, "colour/gradient patch tokens of the resize-and-pad canvas, CLS = mean "
               "image token (not the paper's DINOv2)", requires=("cv2",)),
        ModelSpec(name=pose_npy.NAME, role="pose", kind="sidecar", factory=pose_npy.build, model_id=pose_npy.NAME,
                  description="c2w poses from one .npy stack per video (WRBench's pose cache: manifest pose_path)",
                  licence="Apache-2.0 (worldrecall)", preflight=pose_npy.preflight,
                  fix="name each video's pose stack in the manifest (pose_path), or use another pose backend"),
    ] + mind_specs()


def mind_specs() -> list[ModelSpec]:
    """MIND's backends: the release's DINOv3 tokens, MUSIQ-SPAQ and LAION linear head, and a weight-free tokens
    stand-in for the classical set."""
    return [
        _reference("dinov3_vitb16", "patch_tokens", dinov3.build, dinov3.DEFAULTS,
                   "DINOv3 ViT-B/16 patch tokens through its own processor (MIND's call: double rescale unless "
                   "input_range=byte), CLS + registers dropped [N,196,768]"),
        _reference("musiq_spaq", "imaging_quality", musiq.build, musiq.DEFAULTS,
                   "pyiqa MUSIQ with the SPAQ checkpoint (weights_only load), raw MOS on [0,1] frames",
                   requires=("torch", "pyiqa"), extra="iqa"),
        _reference("laion_linear", "linear_aesthetic", laion_linear.build, laion_linear.DEFAULTS,
                   "CLIP ViT-L/14 + LAION sa_0_4 linear head, MIND's CLIP transform (bicubic, no antialias)"),
        _local("color_patch_tokens", "patch_tokens", "classical", color_patches.build,
               {**color_patches.DEFAULTS, "resize": 128, "crop": 112},
               "tokens of patch Lab colour, colour layout and gradient statistics, 8x8 patches at 112 px [N,64,27] "
               "(not the paper's DINOv3)", requires=("cv2",)),
    ]


@hookimpl
def register_models(register: Callable[..., None]) -> None:
    """Register the built-in perception roles (see :func:`roles`) and backends (see :func:`specs`)."""
    for role in roles():
        register(role)
    for spec in specs():
        register(spec)


class ModelsCommand(Command):
    """``worldrecall models list|fetch [NAME…]``: what each backend needs, what is here, prefetching."""

    name = "models"
    help = "list / prefetch perception backends' weights"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=["list", "fetch"])
        parser.add_argument("names", nargs="*", help="backend names (default: all)")
        parser.add_argument("--json", action="store_true")

    def run(self, args: argparse.Namespace, registry: Registry) -> int:
        from worldrecall.plugins.models.fetch import fetch, list_models

        if args.action == "list":
            rows = list_models(registry.models)
            if args.json:
                print(json.dumps(rows, indent=2, default=str))
            else:
                for r in rows:
                    print("  ".join(f"{k}={v}" for k, v in r.items()))
            return 0
        failures = fetch(args.names or None, registry.models)
        for line in failures:
            print(f"error: {line}", file=sys.stderr)
        return 1 if failures else 0


@hookimpl
def register_commands(register: Callable[..., None]) -> None:
    """Register ``worldrecall models``."""
    register(ModelsCommand())
