"""Reference backends built from tiny random-weight models of the SAME classes, saved and loaded through
the real factories (``local_dir``); shapes, dtypes, ranges, determinism and the parity-relevant details."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from helpers import tiny_models as testing

from worldrecall.core.models import BackendUnavailable
from worldrecall.plugins.models import manifest, plugin

SPECS = {s.name: s for s in plugin.specs()}


def build(name: str, folder, **extra):
    """save_tiny + the registered factory, as the ModelHub would call it."""
    opts = testing.save_tiny(name, folder)
    spec = SPECS[name]
    return spec.factory({**spec.defaults, **opts, **extra})


def frames(n: int, h: int = 60, w: int = 80, seed: int = 0) -> list[np.ndarray]:
    return [testing.textured_image(h, w, seed + i) for i in range(n)]


# --- DINOv2 ---------------------------------------------------------------------------------------------
def test_dinov2_patch_tokens_match_the_official_recipe(tmp_path):
    from PIL import Image
    from torchvision import transforms as T
    from transformers import Dinov2Model

    emb = build("dinov2_base", tmp_path, batch_size=2)
    fr = frames(3, 90, 160)
    tok = emb.patch_tokens(fr)
    assert tok.shape == (3, 256, 32) and tok.dtype == np.float32
    # the official hub transform + last_hidden_state without CLS, computed independently
    tf = T.Compose([T.Resize(256, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224), T.ToTensor(),
                    T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    x = torch.stack([tf(Image.fromarray(f)) for f in fr])
    with torch.no_grad():
        ref = Dinov2Model.from_pretrained(tmp_path).eval()(pixel_values=x).last_hidden_state[:, 1:].numpy()
    np.testing.assert_allclose(tok, ref, atol=1e-5)
    np.testing.assert_array_equal(tok, emb.patch_tokens(fr))                          # deterministic
    np.testing.assert_allclose(emb.patch_tokens(fr[:1])[0], tok[0], atol=1e-5)        # batch-independent


# --- RAFT -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def raft_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("raft")
    testing.save_tiny("raft_large", d)
    return d


def test_raft_pads_replicates_and_crops_back(raft_dir, monkeypatch):
    from torchvision.models.optical_flow import raft_large

    # loads from TORCH_HOME/hub/checkpoints (the standard cache), no local_dir
    home = raft_dir / "home"
    ckpt = home / "hub" / "checkpoints"
    ckpt.mkdir(parents=True)
    (ckpt / manifest.RAFT_LARGE_FILE).symlink_to(raft_dir / manifest.RAFT_LARGE_FILE)
    monkeypatch.setenv("TORCH_HOME", str(home))
    flow = SPECS["raft_large"].factory({**SPECS["raft_large"].defaults, "num_flow_updates": 2})
    a, b = frames(2, 130, 137)
    out = flow.flow([(a, b)])
    assert len(out) == 1 and out[0].shape == (130, 137, 2) and out[0].dtype == np.float32
    # independent: [0, 1] input, replicate pad right/bottom to 136x144, last refinement, crop
    model = raft_large(weights=None)
    model.load_state_dict(torch.load(raft_dir / manifest.RAFT_LARGE_FILE, weights_only=True))
    model.eval()

    def t(x):
        x = torch.from_numpy(x).permute(2, 0, 1)[None].float() / 255
        return torch.nn.functional.pad(x, (0, 7, 0, 6), mode="replicate")

    with torch.no_grad():
        ref = model(t(a), t(b), num_flow_updates=2)[-1][0, :, :130, :137].permute(1, 2, 0).numpy()
    np.testing.assert_allclose(out[0], ref, atol=1e-4)
    np.testing.assert_array_equal(out[0], flow.flow([(a, b)])[0])


def test_raft_input_range_switch(raft_dir):
    a, b = frames(2, 128, 128)
    unit = build("raft_large", raft_dir, num_flow_updates=1).flow([(a, b)])[0]
    pre = build("raft_large", raft_dir, num_flow_updates=1, input_range="weights_transform").flow([(a, b)])[0]
    assert not np.allclose(unit, pre)
    with pytest.raises(ValueError, match="input_range"):
        build("raft_large", raft_dir, input_range="0-255")


# --- Depth Anything ---------------------------------------------------------------------------------------
def test_depth_anything_returns_processor_resolution_maps(tmp_path):
    from transformers import AutoImageProcessor, AutoModelForDepthEstimation

    depth = build("depth_anything_v2_small", tmp_path)
    fr = frames(2, 60, 80)
    maps = depth.depth(fr)
    proc = AutoImageProcessor.from_pretrained(tmp_path, backend="pil")
    assert type(proc).__name__ == "DPTImageProcessorPil"  # transformers 4.x default, as MemoBench ran
    px = proc(images=fr, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        ref = AutoModelForDepthEstimation.from_pretrained(tmp_path).eval()(pixel_values=px).predicted_depth.numpy()
    # 56 target, keep aspect ratio, multiple of 14: 60x80 -> 56x70 (scale 56/60 = 0.933 -> 74.7 -> 70)
    assert [m.shape for m in maps] == [(56, 70), (56, 70)] and maps[0].dtype == np.float32
    np.testing.assert_allclose(np.stack(maps), ref, atol=1e-5)


# --- SAM-3 ----------------------------------------------------------------------------------------------
def test_sam3_scores_are_query_times_presence_and_masks_threshold_logits():
    from worldrecall.plugins.models.sam3 import logits_to_detections

    pred_logits = torch.tensor([0.0, 2.0, -30.0])
    presence = torch.tensor([0.0])
    # query 0: [[2, -10], [2, -10]] upsampled 2x2 -> 2x4 (bilinear, align_corners=False) samples the
    # columns at x = -0.25 -> 0, 0.25, 0.75, 1.25 -> 1: logits 2, 2*0.75 - 10*0.25 = -1, -7, -10.
    # sigmoid(logit) > 0.5 keeps only the first column; thresholding upsampled *probabilities* (what
    # transformers' post-processing does) would also keep column 2 (0.75*0.881 + 0.25*0.00005 = 0.66).
    m0 = torch.tensor([[2.0, -10.0], [2.0, -10.0]])
    masks = torch.stack([m0, -m0, m0])
    boxes = torch.tensor([[0.0, 0.0, 0.5, 1.0], [0.5, 0.0, 1.0, 1.0], [0, 0, 1, 1.0]])
    dets = logits_to_detections(pred_logits, presence, masks, boxes, (2, 4), threshold=0.0)
    # scores: sigmoid(2)*sigmoid(0) = 0.8808*0.5 = 0.4404; sigmoid(0)*0.5 = 0.25; sigmoid(-30)*0.5 = 4.7e-14 > 0
    assert [round(d.score, 4) for d in dets] == [0.4404, 0.25, 0.0]
    assert dets[2].score > 0.0  # threshold 0.0 keeps every candidate with a positive score
    np.testing.assert_array_equal(dets[1].mask, [[True, False, False, False]] * 2)
    np.testing.assert_array_equal(dets[0].mask, [[False, True, True, True]] * 2)
    assert dets[1].box == (0.0, 0.0, 2.0, 2.0)  # xyxy in 0-1 scaled by (W, H) = (4, 2)
    assert len(logits_to_detections(pred_logits, presence, masks, boxes, (2, 4), threshold=0.3)) == 1
    assert len(logits_to_detections(pred_logits, presence, masks, boxes, (2, 4), max_candidates=2)) == 2


def test_sam3_tiny_end_to_end(tmp_path):
    seg = build("sam3", tmp_path, batch_size=2)
    fr = frames(3, 48, 64)
    dets = seg.segment(fr, "red car")
    assert len(dets) == 3 and all(len(d) == 5 for d in dets)  # 5 queries in the tiny config, all > 0
    for d in dets[0]:
        assert d.mask.shape == (48, 64) and d.mask.dtype == bool and 0.0 < d.score <= 1.0
    assert [d.score for d in dets[0]] == sorted((d.score for d in dets[0]), reverse=True)
    again = seg.segment(fr, "red car")
    assert [d.score for d in again[2]] == [d.score for d in dets[2]]
    assert all(np.array_equal(a.mask, b.mask) for a, b in zip(again[2], dets[2]))


# --- OWLv2 ----------------------------------------------------------------------------------------------
def test_owlv2_boxes_to_masks_by_hand():
    from worldrecall.plugins.models.owlv2 import boxes_to_detections

    logits = torch.tensor([[2.0], [-3.0], [1.0]])
    # frame 60x80 padded to an 80x80 square: box 0 (cx .5, cy .25, w .5, h .25) -> x 20..60, y 10..30;
    # box 2 lies below y = 60 (in the padding) and is dropped; box 1 scores sigmoid(-3) = 0.047 < 0.1.
    boxes = torch.tensor([[0.5, 0.25, 0.5, 0.25], [0.5, 0.5, 0.2, 0.2], [0.5, 0.9, 0.2, 0.1]])
    dets = boxes_to_detections(logits, boxes, (60, 80), threshold=0.1, max_candidates=None)
    assert len(dets) == 1 and round(dets[0].score, 4) == 0.8808 and dets[0].box == (20.0, 10.0, 60.0, 30.0)
    m = dets[0].mask
    assert m.shape == (60, 80) and m.sum() == 20 * 40 and m[10:30, 20:60].all()


def test_owlv2_tiny_end_to_end(tmp_path):
    seg = build("owlv2", tmp_path, threshold=0.0, max_candidates=7)
    # random box heads saturate to zero-size boxes; with a zeroed last layer every patch predicts OWLv2's
    # box prior: a box of 1/14 of the padded square centred on its own patch
    with torch.no_grad():
        seg.model.box_head.dense2.weight.zero_()
        seg.model.box_head.dense2.bias.zero_()
    dets = seg.segment(frames(2, 50, 70), "red car")
    assert len(dets) == 2 and all(1 <= len(d) <= 7 for d in dets)
    for d in dets[0]:
        assert d.mask.shape == (50, 70) and 0.0 < d.score <= 1.0
        x0, _, x1, y1 = d.box
        assert abs((x1 - x0) - 70 / 14) < 0.5 and y1 <= 50 and d.mask.any()


# --- CLIP embedder / LAION aesthetic --------------------------------------------------------------------
def _clip_reference(folder, fr):
    from PIL import Image
    from torchvision import transforms as T
    from transformers import CLIPVisionModelWithProjection

    tf = T.Compose([T.Resize(224, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224), T.ToTensor(),
                    T.Normalize((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))])
    with torch.no_grad():
        e = CLIPVisionModelWithProjection.from_pretrained(folder).eval()(
            pixel_values=torch.stack([tf(Image.fromarray(f)) for f in fr])).image_embeds
    return e / e.norm(dim=-1, keepdim=True)


def test_clip_b32_embeddings_are_unit_norm_open_clip_style(tmp_path):
    emb = build("clip_vit_b32", tmp_path)
    fr = frames(3, 70, 120)
    e = emb.embed(fr)
    assert e.shape == (3, 32) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(e, _clip_reference(tmp_path, fr).numpy(), atol=1e-5)


def test_laion_head_on_normalised_embedding(tmp_path):
    from worldrecall.plugins.models.laion_aesthetic import make_head, remap_head_keys

    aes = build("laion_aesthetic", tmp_path)
    fr = frames(2, 70, 120)
    s = aes.score_frames(fr)
    head = make_head(32)
    head.load_state_dict(torch.load(tmp_path / manifest.LAION_HEAD_FILE, weights_only=True))
    with torch.no_grad():
        ref = head.eval()(_clip_reference(tmp_path, fr)).reshape(-1).numpy()
    assert s.shape == (2,) and s.dtype == np.float32
    np.testing.assert_allclose(s, ref, atol=1e-5)
    sd = head.state_dict()
    stripped = {k[len("layers."):]: v for k, v in sd.items()}  # MemoBench strips the prefix; accept both
    assert remap_head_keys(stripped).keys() == sd.keys()


# --- CLIP-IQA+ ------------------------------------------------------------------------------------------
def test_clipiqa_plus_through_pyiqa(tmp_path):
    pytest.importorskip("pyiqa")
    iqa = build("clipiqa_plus", tmp_path, batch_size=2)
    ctx = torch.load(tmp_path / manifest.CLIPIQA_PROMPTS_FILE, weights_only=True)
    assert torch.equal(iqa.metric.net.prompt_learner.ctx.data, ctx)  # learned prompts loaded by us
    fr = frames(3, 64, 96)
    s = iqa.score_frames(fr)
    assert s.shape == (3,) and s.dtype == np.float32 and ((s >= 0) & (s <= 1)).all()
    np.testing.assert_array_equal(s, iqa.score_frames(fr))
    # the raw pyiqa call on one frame in [0, 1] gives the same value
    x = torch.from_numpy(fr[0]).permute(2, 0, 1)[None].float() / 255
    with torch.no_grad():
        assert abs(float(iqa.metric(x).reshape(-1)[0]) - float(s[0])) < 1e-5


def test_clipiqa_rejects_a_wrong_prompt_file(tmp_path):
    pytest.importorskip("pyiqa")
    testing.save_tiny("clipiqa_plus", tmp_path)
    torch.save(torch.zeros(3, 3), tmp_path / manifest.CLIPIQA_PROMPTS_FILE)
    with pytest.raises(BackendUnavailable, match="prompt context"):
        SPECS["clipiqa_plus"].factory({"local_dir": str(tmp_path)})


# --- LPIPS ----------------------------------------------------------------------------------------------
def test_lpips_alex_loads_the_torchvision_trunk(tmp_path):
    pytest.importorskip("lpips")
    lp = build("lpips_alex", tmp_path, batch_size=2)
    saved = torch.load(tmp_path / manifest.ALEXNET_FILE, weights_only=True)
    assert torch.equal(getattr(lp.model.net.slice1, "0").weight, saved["features.0.weight"])
    assert torch.equal(getattr(lp.model.net.slice5, "10").weight, saved["features.10.weight"])
    a, b, c = frames(3, 64, 64)
    d = lp.distance([a, a, b], [a, b, c])
    assert d.shape == (3,) and d.dtype == np.float32
    assert abs(d[0]) < 1e-6 and d[1] > 0 and d[2] > 0
    np.testing.assert_allclose(lp.distance([b], [c]), d[2:], atol=1e-6)  # batch-independent
    # the lpips package's own [-1, 1] scaling gives the same number
    import lpips

    with torch.no_grad():
        ref = lp.model(lpips.im2tensor(a), lpips.im2tensor(b)).item()
    assert abs(ref - float(d[1])) < 1e-5


def test_lpips_vgg_random_trunk(tmp_path):
    pytest.importorskip("lpips")
    lp = build("lpips_vgg", tmp_path)
    a, b = frames(2, 48, 48)
    d = lp.distance([a, a], [a, b])
    assert abs(d[0]) < 1e-6 and d[1] > 0


# --- ImageReward ----------------------------------------------------------------------------------------
def test_image_reward_key_remap_round_trip(tmp_path):
    from worldrecall.plugins.models.image_reward import (
        REWARD_MEAN,
        REWARD_STD,
        make_model,
        remap_image_reward_keys,
        text_config_from_med,
    )

    scorer = build("image_reward", tmp_path, batch_size=2)
    ckpt = torch.load(tmp_path / manifest.IMAGE_REWARD_FILE, weights_only=True)
    assert "blip.visual_encoder.blocks.0.attn.qkv.weight" in ckpt  # original BLIP naming on disk
    remapped = remap_image_reward_keys(ckpt)
    own = scorer.model.state_dict()
    assert remapped.keys() == own.keys()
    assert all(torch.equal(remapped[k], own[k]) for k in own)
    fr = frames(3, 80, 100)
    r = scorer.reward("a red car on the road", fr)
    assert r.shape == (3,) and r.dtype == np.float32 and np.isfinite(r).all()
    np.testing.assert_array_equal(r, scorer.reward("a red car on the road", fr))
    # standardisation: with a zeroed MLP the raw reward is 0 -> (0 - 0.16717362830052426) / 1.0333394966054072
    # = -0.161780...
    model = make_model(testing.TINY_BLIP_VISION, text_config_from_med(testing.TINY_MED_CONFIG, 32))
    for p in model.mlp.parameters():
        torch.nn.init.zeros_(p)
    x = torch.zeros(1, 3, 224, 224)
    ids = torch.tensor([[2, 6, 7, 8, 3]])
    with torch.no_grad():
        got = float(model.eval()(x, ids, torch.ones_like(ids)))
    assert abs(got - (-REWARD_MEAN / REWARD_STD)) < 1e-7 and abs(got + 0.1617802) < 1e-6


def test_image_reward_truncates_prompts_to_35_tokens(tmp_path):
    scorer = build("image_reward", tmp_path)
    seen = []
    scorer.model = lambda x, ids, mask: (seen.append((tuple(x.shape), ids.clone(), mask.clone())),
                                         torch.zeros(len(x)))[1]
    scorer.reward(" ".join(["red car"] * 60), frames(2, 90, 50))
    (xshape, ids, mask), = seen
    # BLIP @224 input for both frames; [CLS] + 33 words + [SEP] = 35 tokens, all attended
    assert xshape == (2, 3, 224, 224) and ids.shape == (2, 35) and int(mask.sum()) == 70
    assert ids[0, 0] == scorer.tokenizer.cls_token_id and ids[0, -1] == scorer.tokenizer.sep_token_id
    seen.clear()
    scorer.reward("a red car", frames(1))
    assert seen[0][1].shape == (1, 35) and int(seen[0][2].sum()) == 5  # padded to 35: [CLS] a red car [SEP]


def test_image_reward_rejects_a_checkpoint_with_missing_keys(tmp_path):
    testing.save_tiny("image_reward", tmp_path)
    ckpt = torch.load(tmp_path / manifest.IMAGE_REWARD_FILE, weights_only=True)
    del ckpt["mlp.layers.0.weight"]
    torch.save(ckpt, tmp_path / manifest.IMAGE_REWARD_FILE)
    with pytest.raises(KeyError, match="missing keys"):
        SPECS["image_reward"].factory({"local_dir": str(tmp_path), "vision": testing.TINY_BLIP_VISION})


# --- SuperPoint + LightGlue -------------------------------------------------------------------------------
def test_lightglue_matched_points_scale_to_pixels():
    from worldrecall.plugins.models.superpoint_lightglue import matched_points

    kp = torch.tensor([[[[0.5, 0.5], [0.25, 0.1], [0.0, 0.0]], [[0.1, 0.2], [0.75, 0.5], [0.0, 0.0]]]])
    out = SimpleNamespace(
        keypoints=kp, mask=torch.tensor([[[1, 1, 0], [1, 1, 0]]]),
        matches=torch.tensor([[[1, 0, -1], [1, 0, -1]]]), matching_scores=torch.tensor([[[0.9, 0.2, 0.0],
                                                                                          [0.9, 0.2, 0.0]]]))
    p0, p1 = matched_points(out, 0, (100, 200), threshold=0.5)
    # keypoint 0 of image 0 (0.5, 0.5) -> (100, 50) px matches keypoint 1 of image 1 (0.75, 0.5) -> (150, 50)
    np.testing.assert_allclose(p0, [[100.0, 50.0]])
    np.testing.assert_allclose(p1, [[150.0, 50.0]])
    assert len(matched_points(out, 0, (100, 200), threshold=0.0)[0]) == 2


def test_lightglue_tiny_end_to_end(tmp_path):
    pose = build("superpoint_lightglue", tmp_path, batch_size=2)
    fr = frames(4, 96, 128)
    c2w = pose.poses(fr)
    assert c2w.shape == (4, 4, 4)
    np.testing.assert_allclose(c2w[0], np.eye(4))
    for p in c2w:
        np.testing.assert_allclose(p[:3, :3] @ p[:3, :3].T, np.eye(3), atol=1e-6)
        np.testing.assert_allclose(p[:3, 3], 0.0)
    assert len(pose.trace.pairs) == 3
    np.testing.assert_array_equal(c2w, pose.poses(fr))


# --- MapAnything ----------------------------------------------------------------------------------------
def test_mapanything_adapter_settings(tmp_path):
    from worldrecall.plugins.models import mapanything as ma
    from worldrecall.plugins.models.mapanything import MapAnythingPose
    from worldrecall.plugins.models.options import parse_options

    calls = {}
    want = np.stack([np.eye(4) + k for k in range(3)])

    class FakeModel:  # stands in for mapanything's model: records the infer() settings
        def infer(self, views, **kw):
            calls.update(kw, n=len(views))
            return [{"camera_poses": torch.from_numpy(want[i][None]).float()} for i in range(len(views))]

    def load_images(paths):
        calls["paths"] = list(paths)
        return [{"img": p} for p in paths]

    pose = MapAnythingPose(FakeModel(), load_images, parse_options(ma.NAME, {}, ma.DEFAULTS))
    got = pose.poses(frames(3, 32, 48))
    np.testing.assert_allclose(got, want)
    assert calls["n"] == 3 and all(p.endswith(".png") for p in calls["paths"])
    assert {k: calls[k] for k in ("memory_efficient_inference", "minibatch_size", "amp_dtype", "apply_mask",
                                   "mask_edges", "use_amp")} == {
        "memory_efficient_inference": True, "minibatch_size": 1, "amp_dtype": "bf16", "apply_mask": True,
        "mask_edges": True, "use_amp": False}  # amp only on CUDA
