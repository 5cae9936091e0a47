"""Texture distance between two frames (role ``texture``, the memory_loop suite's rendering recovery).

* ``vgg19_gram`` (reference): the released ``style._gram_distances``: torchvision VGG19 ``features``
  (ImageNet weights), PIL resize of the shorter side to ``image_size`` (the release: 512 on CUDA, 128 on
  CPU), ``ToTensor`` + ImageNet normalisation; at each of the first five convolutions (before the ReLU)
  Gram = F·Fᵀ / (C·H·W); the distance is the sum over those layers of the mean squared difference of the
  two Gram matrices.
* ``gradient_gram`` (classical, *not the paper's VGG*): the same Gram construction on a fixed filter
  bank — RGB in [0, 1], grey x/y Sobel and Laplacian — at full and half resolution of the frame resized
  to a 128-pixel shorter side. Weight-free; its numbers are on another scale than VGG's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from worldrecall.plugins.models.options import Options, check_rgb, inference, parse_options

NAME_VGG = "vgg19_gram"
NAME_GRADIENT = "gradient_gram"
VGG_DEFAULTS: dict[str, Any] = {"image_size": None, "layers": 5}
GRADIENT_DEFAULTS: dict[str, Any] = {"image_size": 128}
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class VggGram:
    """``distance(a, b)``: summed Gram MSE over the first ``layers`` convolutions of a VGG ``features``."""

    def __init__(self, features: Any, options: Options):
        self.opts = options
        self.features = features.eval().to(options.device)
        for p in self.features.parameters():
            p.requires_grad_(False)

    def _size(self) -> int:
        size = self.opts.get("image_size")
        return int(size) if size else (512 if str(self.opts.device).startswith("cuda") else 128)

    def _tensor(self, frame: np.ndarray) -> Any:
        import torch
        from PIL import Image
        from torchvision import transforms

        t = transforms.Compose([transforms.Resize(self._size()), transforms.ToTensor()])
        x = t(Image.fromarray(check_rgb(frame)).convert("RGB")).unsqueeze(0).to(self.opts.device, torch.float)
        m = torch.tensor(IMAGENET_MEAN, device=self.opts.device).view(1, -1, 1, 1)
        s = torch.tensor(IMAGENET_STD, device=self.opts.device).view(1, -1, 1, 1)
        return (x - m) / s

    def distance(self, frame_a: np.ndarray, frame_b: np.ndarray) -> float:
        """Gram distance of frame B to frame A (B already at A's size)."""
        import torch
        from torch import nn

        a, b = self._tensor(frame_a), self._tensor(frame_b)
        total, conv, n_layers = 0.0, 0, int(self.opts["layers"])
        with inference(self.opts.device, "float32"):
            for layer in self.features.children():
                a, b = layer(a), layer(b)
                if isinstance(layer, nn.Conv2d):
                    conv += 1
                    if conv <= n_layers:
                        total += float(torch.mean((_gram(b) - _gram(a)) ** 2))
                    if conv >= n_layers:
                        break
        return total


def _gram(x: Any) -> Any:
    n, c, h, w = x.size()
    f = x.view(n, c, h * w)
    return (f @ f.transpose(1, 2)) / (c * h * w)


class GradientGram:
    """``distance(a, b)``: Gram MSE of a fixed colour + gradient filter bank at two scales."""

    def __init__(self, options: Options):
        self.opts = options

    def _bank(self, frame: np.ndarray) -> list[np.ndarray]:
        import cv2

        f = check_rgb(frame)
        size = int(self.opts["image_size"])
        h, w = f.shape[:2]
        s = size / min(h, w)
        f = cv2.resize(f, (max(1, round(w * s)), max(1, round(h * s))), interpolation=cv2.INTER_AREA)
        out = []
        for level in (f, cv2.pyrDown(f)):
            rgb = level.astype(np.float32) / 255.0
            g = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
            maps = [rgb[..., 0], rgb[..., 1], rgb[..., 2], cv2.Sobel(g, cv2.CV_32F, 1, 0, ksize=3),
                    cv2.Sobel(g, cv2.CV_32F, 0, 1, ksize=3), cv2.Laplacian(g, cv2.CV_32F, ksize=3)]
            out.append(np.stack([m.ravel() for m in maps]).astype(np.float64))
        return out

    def distance(self, frame_a: np.ndarray, frame_b: np.ndarray) -> float:
        """Summed over the two scales: mean squared difference of F·Fᵀ / (C·H·W)."""
        total = 0.0
        for fa, fb in zip(self._bank(frame_a), self._bank(frame_b)):
            ga = fa @ fa.T / fa.size
            gb = fb @ fb.T / fb.size
            total += float(np.mean((gb - ga) ** 2))
        return total


def build_vgg(opts: Mapping[str, Any]) -> VggGram:
    """Factory: torchvision VGG19 with its ImageNet state dict (TORCH_HOME or ``local_dir``)."""
    from worldrecall.plugins.models.manifest import MANIFEST
    from worldrecall.plugins.models.weights import ensure_weights, load_state_dict, weight_file

    o = parse_options(NAME_VGG, opts, VGG_DEFAULTS)
    files = MANIFEST[NAME_VGG].weights
    ensure_weights(NAME_VGG, files, local_dir=o.local_dir)
    from torchvision.models import vgg19

    model = vgg19(weights=None)
    model.load_state_dict(load_state_dict(weight_file(NAME_VGG, files[0], local_dir=o.local_dir)))
    return VggGram(model.features, o)


def build_gradient(opts: Mapping[str, Any]) -> GradientGram:
    """Factory: no weights."""
    return GradientGram(parse_options(NAME_GRADIENT, opts, GRADIENT_DEFAULTS))
