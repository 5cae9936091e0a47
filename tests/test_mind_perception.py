"""MIND perception: the DINOv3, MUSIQ-SPAQ and LAION-linear backends (tiny random-weight instances of the real
classes, saved and loaded through the real factories, offline) and the metrics on top of them — DINO patch MSE,
visual quality and the LCM's LPIPS — against the release's calls (CSU-JPG/MIND ``src/utils/dino_utils.py``,
``src/metrics/{dino,visual_quality,lcm}.py``) and values worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from helpers import tiny_models as testing
from test_mind_core import action_doc, gt_clip, load, write_lossless

from worldrecall.core.components import MeasureContext
from worldrecall.core.data import CaseSkip
from worldrecall.core.models import ModelHub
from worldrecall.plugins.mind.aligner import MindPairs
from worldrecall.plugins.mind.dino import MindDino, token_mse
from worldrecall.plugins.mind.lcm import MindLCM
from worldrecall.plugins.mind.visual_quality import MindVisualQuality
from worldrecall.plugins.models import manifest, plugin

SPECS = {s.name: s for s in plugin.specs()}
ROLE = {"dinov3_vitb16": "patch_tokens", "musiq_spaq": "imaging_quality", "laion_linear": "linear_aesthetic",
        "lpips_alex": "perceptual"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """name -> factory options of a tiny saved instance (built once for the module)."""
    return {n: testing.save_tiny(n, tmp_path_factory.mktemp(n)) for n in ROLE}


def backend(name: str, opts: dict):
    spec = SPECS[name]
    return spec.factory({**spec.defaults, **opts})


def hub(tiny: dict, *names: str) -> ModelHub:
    return ModelHub({n: SPECS[n] for n in names}, {ROLE[n]: n for n in names}, {n: tiny[n] for n in names})


def textured(n: int, h: int = 48, w: int = 64, seed: int = 0) -> np.ndarray:
    return np.stack([testing.textured_image(h, w, seed + i) for i in range(n)])


@pytest.fixture(scope="module")
def clip_case(tmp_path_factory, tiny):
    """A memory clip with textured 48x64 frames: GT 8 frames, mark_time 4, generated 4 frames."""
    root = tmp_path_factory.mktemp("mind")
    data, gen = root / "data", root / "models" / "m"
    gt_clip(data, "3rd_data", "action_space_test", "data-7", textured(8), action_doc(4, 8))
    write_lossless(gen / "3rd_data" / "action_space_test" / "data-7" / "video.mp4", textured(4, seed=20))
    case = load(data, {"m": gen})[0]
    return case, MindPairs().align(case, {"release_batches": False, "frame_size": "native"})


# --- DINOv3 ---------------------------------------------------------------------------------------------


def test_dinov3_backend_makes_the_release_processor_call(tiny):
    from transformers import AutoImageProcessor, AutoModel

    folder = tiny["dinov3_vitb16"]["local_dir"]
    frames = textured(3)
    tok = backend("dinov3_vitb16", {**tiny["dinov3_vitb16"], "batch_size": 2}).patch_tokens(list(frames))
    assert tok.shape == (3, 16, 32) and tok.dtype == np.float32     # (64 / 16)² patches; CLS + 4 registers dropped
    # the release: processor(images=<[0, 1] float frames>) then last_hidden_state[:, 5:]
    proc, model = AutoImageProcessor.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    x = torch.from_numpy(frames).permute(0, 3, 1, 2).float() / 255.0
    with torch.no_grad():
        ref = model(**proc(images=x, return_tensors="pt")).last_hidden_state[:, 5:].numpy()
    np.testing.assert_allclose(tok, ref, atol=1e-5)
    # that call rescales by 1/255 a second time: a flat level-128 frame becomes (128/255/255 - 0.485) / 0.229
    flat = torch.full((1, 3, 64, 64), 128 / 255.0)
    px = proc(images=flat, return_tensors="pt")["pixel_values"]
    assert float(px[0, 0, 5, 5]) == pytest.approx((128 / 255 / 255 - 0.485) / 0.229, abs=1e-5)
    px = proc(images=flat, return_tensors="pt", do_rescale=False)["pixel_values"]
    assert float(px[0, 0, 5, 5]) == pytest.approx((128 / 255 - 0.485) / 0.229, abs=1e-5)
    fixed = backend("dinov3_vitb16", {**tiny["dinov3_vitb16"], "input_range": "byte"}).patch_tokens(list(frames))
    with torch.no_grad():   # 0-255 frames: the processor's one rescale, as it expects
        once = model(**proc(images=x, return_tensors="pt", do_rescale=False)).last_hidden_state[:, 5:].numpy()
    np.testing.assert_allclose(fixed, once, atol=1e-5)
    assert not np.allclose(fixed, tok, atol=1e-3)


def test_token_mse_by_hand():
    # (3, 4) -> (0.6, 0.8); (0, 5) -> (0, 1): squared differences 0.36 and 0.04, mean over P·D = 2 -> 0.2
    assert token_mse(np.array([[[3.0, 4.0]]]), np.array([[[0.0, 5.0]]]))[0] == pytest.approx(0.2)
    assert token_mse(np.array([[[3.0, 4.0]]]), np.array([[[6.0, 8.0]]]))[0] == pytest.approx(0.0)


def test_dino_metric_over_the_aligned_pairs(tiny, clip_case):
    case, al = clip_case
    meas = MindDino().measure(case, al, MeasureContext(models=hub(tiny, "dinov3_vitb16")))
    emb = backend("dinov3_vitb16", tiny["dinov3_vitb16"])
    gen, gt = case.video.frames(), case.reference.frames()
    expect = token_mse(emb.patch_tokens(list(gen[:4])), emb.patch_tokens(list(gt[4:8])))   # i <-> 4 + i
    np.testing.assert_allclose(meas["mse"], expect, rtol=1e-5)
    assert MindDino().score(meas, {})["mse"] == pytest.approx(float(expect.mean()), rel=1e-5)


# --- MUSIQ and the LAION linear head ---------------------------------------------------------------------


def test_musiq_loads_the_checkpoint_without_unpickling(tiny, monkeypatch):
    from worldrecall.plugins.models.musiq import arch_of, build_net

    calls = []
    real = torch.load

    def spy(*a, **k):
        calls.append(k.get("weights_only"))
        return real(*a, **k)

    monkeypatch.setattr(torch, "load", spy)
    opts = tiny["musiq_spaq"]
    q = backend("musiq_spaq", opts)
    assert calls == [True]
    frames = textured(2)
    got = q.score_frames(list(frames))
    # the release: MUSIQ(<[0, 1] frames>) with the checkpoint's weights ('module.' stripped, under 'params')
    sd = real(f"{opts['local_dir']}/{manifest.MUSIQ_SPAQ_FILE}", weights_only=True)["params"]
    assert arch_of(sd) == {"hidden_size": 48, "num_layers": 1, "mlp_dim": 96}
    net = build_net({k.removeprefix("module."): v for k, v in sd.items()}, hidden_size=48, mlp_dim=96,
                    num_layers=1).eval()
    with torch.no_grad():
        ref = net(torch.from_numpy(frames).permute(0, 3, 1, 2).float() / 255.0).reshape(-1).numpy()
    assert got.shape == (2,)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_laion_linear_uses_the_release_clip_transform(tiny):
    from torchvision import transforms as T
    from transformers import CLIPVisionModelWithProjection

    from worldrecall.plugins.models.laion_linear import make_head, mind_clip_transform

    x = torch.rand(2, 3, 72, 128)
    tf = T.Compose([T.Resize(224, interpolation=T.InterpolationMode.BICUBIC, antialias=False), T.CenterCrop(224),
                    T.Normalize((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))])
    torch.testing.assert_close(mind_clip_transform(x), tf(x), rtol=0, atol=1e-5)
    folder = tiny["laion_linear"]["local_dir"]
    frames = textured(2, 72, 128)
    got = backend("laion_linear", tiny["laion_linear"]).score_frames(list(frames))
    vision = CLIPVisionModelWithProjection.from_pretrained(folder).eval()
    head = make_head(32, torch.load(f"{folder}/{manifest.LAION_LINEAR_FILE}", weights_only=True)).eval()
    with torch.no_grad():
        feats = vision(pixel_values=tf(torch.from_numpy(frames).permute(0, 3, 1, 2).float() / 255)).image_embeds
        ref = head(torch.nn.functional.normalize(feats.float(), dim=-1)).squeeze(-1).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_visual_quality_divides_by_100_and_10(tiny, clip_case):
    case, al = clip_case
    m = MindVisualQuality()
    meas = m.measure(case, al, MeasureContext(models=hub(tiny, "musiq_spaq", "laion_linear")))
    gen = list(case.video.frames()[:4])
    iq = backend("musiq_spaq", tiny["musiq_spaq"]).score_frames(gen)
    ae = backend("laion_linear", tiny["laion_linear"]).score_frames(gen)
    s = m.score(meas, {})
    assert s["imaging"] == pytest.approx(float(np.mean(iq)) / 100, rel=1e-5)
    assert s["aesthetic"] == pytest.approx(float(np.mean(ae)) / 10, rel=1e-5)
    assert s["frames"] == 4
    # one role without a backend: that value is null and the row says why; neither -> skipped
    part = m.measure(case, al, MeasureContext(models=hub(tiny, "laion_linear")))
    assert m.score(part, {})["imaging"] is None and "imaging null" in m.verdict(part, {})
    with pytest.raises(CaseSkip, match="no imaging_quality backend"):
        m.measure(case, al, MeasureContext(models=ModelHub({}, {})))


def test_lcm_lpips_is_alex_on_minus_one_to_one(tiny, clip_case):
    case, al = clip_case
    meas = MindLCM().measure(case, al, MeasureContext(models=hub(tiny, "lpips_alex")))
    lp = backend("lpips_alex", tiny["lpips_alex"])
    pred = torch.from_numpy(case.video.frames()[:4]).permute(0, 3, 1, 2).float() / 255
    gt = torch.from_numpy(case.reference.frames()[4:8]).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad():   # the release: lpips_metric(pred * 2 - 1, gt * 2 - 1) on [0, 1] frames
        ref = lp.model(pred * 2 - 1, gt * 2 - 1).reshape(-1).numpy()
    np.testing.assert_allclose(meas["lpips"], ref, rtol=1e-5, atol=1e-6)
    assert MindLCM().score(meas, {})["lpips"] == pytest.approx(float(ref.mean()), rel=1e-5)
    assert json.dumps(meas["row_info"])   # JSON-able facts for the row
