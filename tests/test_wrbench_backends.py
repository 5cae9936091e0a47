"""WRBench's perception backends: the full-FoV resize-and-pad geometry (by hand), the reference DINOv2 backend
through its real factory on a tiny random-weight model saved offline, the classical stand-in and poses_npy."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.tiny_models import dinov2_config

from worldrecall.core.data import Case, CaseFailure
from worldrecall.plugins.models import cls_patches, pose_npy


def test_resize_pad_geometry_by_hand():
    # 480x832 (h x w) -> longer side 224: scale 224/832 -> 129.2 -> 129 rows; top = (224 - 129) // 2 = 47
    assert cls_patches.resize_pad_geometry(480, 832, 224) == (129, 224, 47, 0)
    assert cls_patches.resize_pad_geometry(224, 224, 224) == (224, 224, 0, 0)
    canvas, mask = cls_patches.resize_pad(np.full((24, 48, 3), 255, np.uint8), 8, (0.25, 0.5, 0.75))
    # 24x48 -> 4x8, rows 2..5 image (white), rows 0-1 and 6-7 the fill
    assert mask.sum() == 32 and mask[2:6].all() and not mask[:2].any()
    assert canvas[0, 0].tolist() == [0.25, 0.5, 0.75] and canvas[3, 3].tolist() == [1.0, 1.0, 1.0]


def test_reference_backend_through_its_factory(tmp_path):
    pytest.importorskip("transformers")
    import torch
    from transformers import Dinov2Model

    torch.manual_seed(0)
    Dinov2Model(dinov2_config("tiny")).save_pretrained(tmp_path / "dino")
    emb = cls_patches.build_dino({"local_dir": str(tmp_path / "dino"), "device": "cpu"})
    frames = [np.random.default_rng(i).integers(0, 255, (48, 64, 3), dtype=np.uint8) for i in range(3)]
    cls, patches = emb.cls_and_patches(frames)
    assert cls.shape == (3, 32) and patches.shape == (3, 256, 32)   # 224 / 14 = 16 -> 256 patches, no crop
    with torch.inference_mode():  # CLS is token 0 of the same forward on the padded canvas
        mean = np.asarray(cls_patches.IMAGENET_MEAN, np.float32)
        std = np.asarray(cls_patches.IMAGENET_STD, np.float32)
        x = (cls_patches.resize_pad(frames[0], 224, cls_patches.IMAGENET_MEAN)[0] - mean) / std
        h = emb.model(pixel_values=torch.from_numpy(x[None]).permute(0, 3, 1, 2)).last_hidden_state[0]
    assert np.allclose(cls[0], h[0].numpy(), atol=1e-5) and np.allclose(patches[0], h[1:].numpy(), atol=1e-5)


def test_classical_stand_in_shapes_and_identity():
    emb = cls_patches.build_color({})
    f = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    cls, patches = emb.cls_and_patches([f, f])
    assert cls.shape == (2, 27) and patches.shape == (2, 256, 27) and np.array_equal(patches[0], patches[1])


def test_poses_npy_rows_by_frame_and_errors(tmp_path):
    p = tmp_path / "poses.npy"
    stack = np.tile(np.eye(4), (5, 1, 1))
    stack[:, 0, 3] = np.arange(5)
    np.save(p, stack[:, :3, :])                         # [N, 3, 4] accepted
    case = Case("wrbench", "c", "m", None, sidecars={"poses_npy": p})
    got = pose_npy.build({}).poses([None, None], case=case, indices=[1, 4])
    assert got.shape == (2, 4, 4) and got[:, 0, 3].tolist() == [1.0, 4.0] and got[1, 3].tolist() == [0, 0, 0, 1]
    with pytest.raises(CaseFailure, match="5 poses but frame 7"):
        pose_npy.build({}).poses([None], case=case, indices=[7])
    assert "no pose_path" in pose_npy.preflight(Case("wrbench", "c", "m", None))
