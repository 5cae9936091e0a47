"""MIND core: action.json and its labels, the loader (layout, per-case errors), the mind.pairs aligner (frame
pairing, video_max_time, the release's batching, mirror halves), the release's frame transform and MSE / PSNR /
SSIM, the LCM and mirror metrics end to end and the Result.json aggregator — each against values worked out by
hand from the release (CSU-JPG/MIND ``src/process.py``, ``src/metrics/lcm.py``, ``src/utils/utils.py``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from worldrecall.core.components import LoadRequest, MeasureContext
from worldrecall.core.data import Case, CaseError, CaseFailure, CaseSkip, Phase, ScoreRow
from worldrecall.core.models import ModelHub
from worldrecall.core.video import VideoPool
from worldrecall.plugins.mind import frames as fr
from worldrecall.plugins.mind import records
from worldrecall.plugins.mind.aligner import MindPairs, scored_frames
from worldrecall.plugins.mind.lcm import MindLCM
from worldrecall.plugins.mind.loader import MindLoader
from worldrecall.plugins.mind.mirror import MindMirror
from worldrecall.plugins.mind.result import MindResult

H, W = 24, 32


def write_lossless(path: Path, frames: np.ndarray, fps: int = 24) -> Path:
    """uint8 RGB frames as a lossless H.264 RGB mp4 (libx264rgb, qp 0): decoded back bit-exactly."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264rgb", rate=fps)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "rgb24"
        s.options = {"qp": "0", "preset": "ultrafast", "threads": "1"}
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def flat(n: int, values: list[int] | int) -> np.ndarray:
    """``n`` frames, frame i filled with grey level values[i] (or one level for all)."""
    v = [values] * n if isinstance(values, int) else values
    return np.stack([np.full((H, W, 3), x, np.uint8) for x in v])


def action_doc(mark: int, total: int, codes: list[tuple[int, int, int, int]] | None = None) -> dict:
    codes = codes or [(0, 0, 0, 0)] * total
    return {"mark_time": mark, "total_time": total, "caption": "a street",
            "data": [{"time": i, "ws": c[0], "ad": c[1], "ud": c[2], "lr": c[3]} for i, c in enumerate(codes)]}


def gt_clip(root: Path, persp: str, test: str, clip: str, frames: np.ndarray, doc: dict) -> Path:
    d = root / persp / "test" / test / clip
    write_lossless(d / "video.mp4", frames)
    (d / "action.json").write_text(json.dumps(doc))
    return d


def load(data: Path, gens: dict[str, Path], **opts) -> list[Case | CaseError]:
    return list(MindLoader().load(LoadRequest(data, gens, opts, VideoPool())))


# --- action.json ----------------------------------------------------------------------------------------


def test_action_labels_ternary_and_binary(tmp_path):
    # ternary (0 none / 1 / 2): (1,0,0,2) -> forward + look_right; (0,2,1,0) -> right + look_up; zeros -> no_op
    # binary (0 first / 1 second): (1,0,0,1) -> backward+left+look_up+look_right
    p = tmp_path / "action.json"
    p.write_text(json.dumps(action_doc(1, 4, [(0, 0, 0, 0), (1, 0, 0, 2), (0, 2, 1, 0), (0, 0, 0, 0)])))
    rec = records.read_action_json(p)
    assert (rec.mark_time, rec.total_time, len(rec.frames)) == (1, 4, 4)
    assert records.frame_labels(rec) == ["forward+look_right", "right+look_up", "no_op"]
    assert records.frame_labels(rec, 0, 2) == ["no_op", "forward+look_right"]   # start + count, capped by data
    assert records.frame_label({"ws": 1, "ad": 0, "ud": 0, "lr": 1}, "binary") == \
        "backward+left+look_up+look_right"


@pytest.mark.parametrize("doc, problem", [
    ({"mark_time": 5, "total_time": 3, "data": []}, "mark_time 5 is past total_time 3"),
    ({"mark_time": "5", "total_time": 9, "data": []}, "'mark_time' must be an integer"),
    ({"mark_time": 1, "total_time": 9, "data": {}}, "'data' must be a list"),
    ([1, 2], "expected a JSON object"),
])
def test_bad_action_json_is_one_line_naming_the_file(tmp_path, doc, problem):
    p = tmp_path / "action.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(CaseFailure) as e:
        records.read_action_json(p)
    assert str(p) in str(e.value) and problem in str(e.value)


# --- loader ---------------------------------------------------------------------------------------------


@pytest.fixture
def layout(tmp_path):
    data, gen = tmp_path / "MIND-Data", tmp_path / "models" / "m1"
    codes = [(0, 0, 0, 0)] * 2 + [(1, 0, 0, 0), (0, 0, 0, 2)] + [(0, 0, 0, 0)] * 6
    gt_clip(data, "1st_data", "mem_test", "data-1", flat(10, list(range(0, 100, 10))), action_doc(2, 10, codes))
    (data / "1st_data" / "test" / "mem_test" / "data-1" / "images.txt").write_text("# empty\n")
    write_lossless(gen / "1st_data" / "mem_test" / "data-1" / "video.mp4", flat(8, 40))
    write_lossless(gen / "3rd_data" / "action_space_test" / "data-9" / "video.mp4", flat(4, 0))   # no GT
    write_lossless(gen / "1st_data" / "mirror_test" / "walk" / "path-1.mp4", flat(6, [10, 20, 30, 33, 20, 10]))
    write_lossless(gen / "1st_data" / "mirror_test" / "walk" / "path-2.mp4", flat(5, 0))
    (gen / "1st_data" / "mem_test" / ".DS_Store").write_bytes(b"\0")   # a hidden file is no clip
    return data, gen


def test_loader_builds_clip_and_mirror_cases_with_the_release_fields(layout):
    data, gen = layout
    cases = {c.case_id: c for c in load(data, {"m1": gen})}
    assert sorted(cases) == ["1st_data/mem_test/data-1", "1st_data/mirror_test/walk/path-1",
                             "1st_data/mirror_test/walk/path-2", "3rd_data/action_space_test/data-9"]
    c = cases["1st_data/mem_test/data-1"]
    assert isinstance(c, Case) and c.strata == {"perspective": "1st_data", "test_type": "mem_test"}
    assert (c.annotations["mark_time"], c.annotations["total_time"], c.annotations["clip"]) == (2, 10, "data-1")
    assert c.annotations["actions"][:3] == ["forward", "look_right", "no_op"]   # from mark_time
    assert len(c.annotations["actions"]) == 8                                    # data[2:min(2+97, 10)]
    assert c.annotations["gt_clip"] == "1st_data/test/mem_test/data-1"
    assert set(c.sidecars) == {"action_json", "gt_images_txt"}
    assert c.reference is not None and c.reference.path.name == "video.mp4"
    m = cases["1st_data/mirror_test/walk/path-1"]
    assert m.annotations["mirror"] is True and m.reference is None
    missing = cases["3rd_data/action_space_test/data-9"]
    assert "GT clip folder missing" in missing.annotations["gt_missing"] and missing.reference is None


def test_loader_errors_name_the_file(layout, tmp_path):
    data, gen = layout
    out = load(data, {"m1": gen}, missing_gt="error")
    err = [c for c in out if isinstance(c, CaseError)]
    assert len(err) == 1 and err[0].case_id == "3rd_data/action_space_test/data-9"
    assert "GT clip folder missing" in err[0].reason and "data-9" in err[0].reason
    # a broken action.json and a clip folder without its video: one error each, naming the file
    (data / "1st_data" / "test" / "mem_test" / "data-1" / "action.json").write_text("{not json")
    (gen / "1st_data" / "mem_test" / "data-2").mkdir(parents=True)
    by_id = {c.case_id: c for c in load(data, {"m1": gen})}
    assert isinstance(by_id["1st_data/mem_test/data-1"], CaseError)
    assert "action.json: not valid JSON" in by_id["1st_data/mem_test/data-1"].reason
    assert by_id["1st_data/mem_test/data-2"].reason.endswith("data-2/video.mp4: generated video missing")
    bad = load(data, {"m1": gen}, action_labels="quaternary")
    assert all(isinstance(c, CaseError) and "action_labels" in c.reason for c in bad)


# --- aligner --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("real, batches, expected", [
    (250, True, 200), (200, True, 100), (101, True, 100), (100, True, 0), (37, True, 0), (0, True, 0),
    (250, False, 250), (37, False, 37),
])
def test_release_batching_never_scores_the_last_read_batch(real, batches, expected):
    # process.py reads 100 frames a time and breaks as soon as the GT reader says it reached its end, before
    # scoring that batch: 250 -> batches 100, 100, (50 dropped); 200 -> 100, (100 dropped); 100 -> (100 dropped)
    assert scored_frames(real, batches) == expected


def _clip_case(n_gen: int, mark: int, total: int, n_gt: int) -> Case:
    class V:   # the aligner needs frame counts only
        def __init__(self, n: int, name: str):
            self.num_frames, self.path = n, Path(name)

    return Case("mind", "1st_data/mem_test/x", "m", V(n_gen, "gen.mp4"), reference=V(n_gt, "gt.mp4"),
                annotations={"mark_time": mark, "total_time": total})


def test_aligner_pairs_from_mark_time_with_real_time_and_video_max_time():
    al = MindPairs()
    # real_time = min(total - mark, sample) = min(300 - 40, 230) = 230 -> 200 scored (release batching)
    a = al.align(_clip_case(230, 40, 300, 300), {})
    assert a.phases["prediction"] == Phase("prediction", 0, 199)
    assert (a.info["real_time"], a.info["gt_start"], a.info["scored_frames"]) == (230, 40, 200)
    # video_max_time 150 caps real_time; without the release's batching every pair is scored
    a = al.align(_clip_case(230, 40, 300, 300), {"video_max_time": 150, "release_batches": False})
    assert a.phases["prediction"] == Phase("prediction", 0, 149)
    # 80 frames after mark_time: the release's only batch is its last -> nothing scored, said why
    a = al.align(_clip_case(80, 10, 90, 90), {})
    assert a.phases == {} and "first read batch of 100" in a.info["skip"]
    with pytest.raises(CaseFailure, match=r"gt.mp4: 250 frames, but the comparison reads GT frames 40\.\.269"):
        al.align(_clip_case(230, 40, 300, 250), {})


def test_aligner_mirror_halves_and_odd_frame_count():
    class V:
        def __init__(self, n: int):
            self.num_frames, self.path = n, Path("path-1.mp4")

    case = Case("mind", "1st_data/mirror_test/w/path-1", "m", V(6), annotations={"mirror": True})
    a = MindPairs().align(case, {})
    assert a.phases == {"first": Phase("first", 0, 2), "second": Phase("second", 3, 5)}
    assert fr.pair_indices(case, a) == ([0, 1, 2], [5, 4, 3], True)   # i <-> n - 1 - i
    case.video = V(7)
    with pytest.raises(CaseFailure, match="path-1.mp4: frame count 7 is not an even number"):
        MindPairs().align(case, {})


# --- the release's frames and formulas -------------------------------------------------------------------


def test_release_frame_transform_geometry():
    assert fr.release_geometry(1080, 1920) == ((720, 1280), (0, 0))     # 16:9: plain resize
    # 4:3 240x320: s = max(1280/320, 720/240) = 4 -> 960x1280, centre crop top = round((960-720)/2) = 120
    assert fr.release_geometry(240, 320) == ((960, 1280), (120, 0))
    # 1:1 100x100: s = 12.8 -> 1280x1280, top = 280
    assert fr.release_geometry(100, 100) == ((1280, 1280), (280, 0))
    x = fr.to_unit(np.full((1, 9, 16, 3), 51, np.uint8))
    assert tuple(x.shape) == (1, 3, 720, 1280) and float(x.max()) == pytest.approx(0.2)


def test_mse_psnr_ssim_by_hand():
    import torch

    a = torch.full((1, 3, 16, 16), 0.5)
    b = torch.full((1, 3, 16, 16), 0.25)
    m = fr.mse(a, b)
    assert m[0] == pytest.approx(0.0625)
    assert fr.psnr_from_mse(m)[0] == pytest.approx(10 * math.log10(16))          # 12.0412 dB
    assert math.isinf(fr.psnr_from_mse(np.array([0.0]))[0])
    # constant images: σ = 0, so SSIM = (2·0.5·0.25 + C1) / (0.5² + 0.25² + C1) with C1 = 0.01², C2 cancels
    c1 = 0.01 ** 2
    assert fr.ssim(a, b)[0] == pytest.approx((0.25 + c1) / (0.3125 + c1), rel=1e-6)   # 0.80006
    assert fr.ssim(a, a)[0] == pytest.approx(1.0)


def test_ssim_matches_an_independent_implementation():
    # torchmetrics' SSIM = skimage's with a Gaussian window (σ 1.5, truncate 3.5 -> 11 taps), population
    # covariances and the 5-pixel border cropped, averaged over channels
    import torch
    from skimage.metrics import structural_similarity

    rng = np.random.default_rng(3)
    x = rng.random((2, 3, 20, 27)).astype(np.float32)
    y = np.clip(x + 0.2 * rng.standard_normal(x.shape), 0, 1).astype(np.float32)
    ours = fr.ssim(torch.from_numpy(x), torch.from_numpy(y))
    ref = [structural_similarity(x[i], y[i], gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                 data_range=1.0, channel_axis=0) for i in range(2)]
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)


# --- LCM and mirror end to end ----------------------------------------------------------------------------


def _measure(metric, case, params=None):
    al = MindPairs().align(case, {"release_batches": False, "frame_size": "native", **(params or {})})
    return metric.measure(case, al, MeasureContext(models=ModelHub({}, {}))), al


def test_lcm_pairs_generated_frames_with_gt_after_mark_time(layout):
    data, gen = layout
    case = next(c for c in load(data, {"m1": gen}) if c.case_id == "1st_data/mem_test/data-1")
    meas, _ = _measure(MindLCM(), case)
    # generated frames are all grey 40; GT frames 2..9 are 20, 30, ..., 90 (real_time = min(10-2, 8) = 8):
    # per-frame MSE = ((40 - g) / 255)², mean over the 8 pairs
    gt = np.arange(20, 100, 10)
    expect = ((40 - gt) / 255.0) ** 2
    np.testing.assert_allclose(meas["mse"], expect, rtol=1e-5)
    s = MindLCM().score(meas, {})
    assert s["mse"] == pytest.approx(expect.mean(), rel=1e-5) and s["frames"] == 8
    assert s["psnr"] is None          # pair 3 is 40 vs 40: PSNR infinite -> null, said on the row
    assert "PSNR is infinite" in MindLCM().verdict(meas, {})
    assert s["lpips"] is None and meas["row_info"]["mark_time"] == 2
    with pytest.raises(CaseSkip, match="mirror-test video"):
        mirror = next(c for c in load(data, {"m1": gen}) if c.annotations.get("mirror"))
        _measure(MindLCM(), mirror)


def test_mirror_compares_first_half_with_reversed_second_half(layout):
    data, gen = layout
    case = next(c for c in load(data, {"m1": gen}) if c.case_id.endswith("walk/path-1"))
    meas, _ = _measure(MindMirror(), case)
    # levels 10, 20, 30 | 33, 20, 10 -> pairs (10, 10), (20, 20), (30, 33): MSE 0, 0, (3/255)²
    np.testing.assert_allclose(meas["mse"], [0.0, 0.0, (3 / 255) ** 2], rtol=1e-5, atol=1e-12)   # float32
    s = MindMirror().score(meas, {})
    assert s["mse"] == pytest.approx((3 / 255) ** 2 / 3, rel=1e-5)
    odd = next(c for c in load(data, {"m1": gen}) if c.case_id.endswith("walk/path-2"))
    with pytest.raises(CaseFailure, match="path-2.mp4: frame count 5 is not an even number"):
        _measure(MindMirror(), odd)


def test_result_aggregator_reproduces_result_json_names():
    rows = [
        ScoreRow("mind", "m1", "1st_data/mem_test/data-1", "mind.lcm", {"mse": 0.01, "psnr": 20.0, "frames": 100.0},
                 strata={"perspective": "1st_data", "test_type": "mem_test"},
                 info={"mark_time": 40, "total_time": 300, "sample_frames": 230}),
        ScoreRow("mind", "m1", "1st_data/mem_test/data-2", "mind.lcm", {"mse": 0.03, "psnr": 16.0, "frames": 100.0},
                 strata={"perspective": "1st_data", "test_type": "mem_test"}),
        ScoreRow("mind", "m1", "1st_data/mem_test/data-2", "mind.dino", {}, status="skipped", reason="no backend",
                 strata={"perspective": "1st_data", "test_type": "mem_test"}),
        ScoreRow("mind", "m1", "1st_data/mem_test/data-3", "mind.lcm", {}, status="failed", reason="gt.mp4: short",
                 strata={"perspective": "1st_data", "test_type": "mem_test"}),
    ]
    t = MindResult().aggregate(rows, {})
    clips = t["mind_clips"].set_index("path")
    assert clips.loc["data-1", "lcm_avg_mse"] == 0.01 and clips.loc["data-1", "mark_time"] == 40
    assert clips.loc["data-3", "error"] == "mind.lcm: gt.mp4: short"
    assert clips.loc["data-2", "skipped"] == "mind.dino: no backend"
    g = t["mind_groups"].iloc[0]
    assert (g["n_clips"], g["n_errors"], g["lcm_avg_mse_n"]) == (3, 1, 2)
    assert g["lcm_avg_mse"] == pytest.approx(0.02) and g["lcm_avg_psnr"] == pytest.approx(18.0)


def test_release_frame_transform_matches_torchvision_as_the_release_calls_it():
    # transform_image: Resize(size, antialias=False) on float 0-255, centre crop, / 255, clamp
    import torch
    from torchvision import transforms
    from torchvision.transforms import functional as tvf

    rng = np.random.default_rng(5)
    f = rng.integers(0, 256, (2, 30, 40, 3), dtype=np.uint8)   # 4:3 -> 960x1280 -> crop 720x1280
    x = torch.from_numpy(f).permute(0, 3, 1, 2).float()
    ref = tvf.center_crop(transforms.Resize(size=(960, 1280), antialias=False)(x), (720, 1280)) / 255.0
    torch.testing.assert_close(fr.to_unit(f), torch.clamp(ref, 0.0, 1.0), rtol=0, atol=1e-6)


def test_ranking_views_print_small_values_with_significant_digits():
    # LCM MSE ~4.6e-5 at the 0–1 column's 3 decimals would print 0.000 for every good model: the column gets the
    # decimals for 2 significant digits of its smallest value (-floor(log10 4.6e-5) + 1 = 6), also beside a failed
    # gate counted at 1. A value below 1e-5 of the column's largest (an RPE of exactly matching poses, 2.6e-8
    # beside 0.046) is 0 at that scale: the RPE column widens for 0.0049 (4 decimals), not for the noise
    from worldrecall.plugins.stats.ranking import _widen_digits

    cells = [{"column": "LCM MSE", "mean": 4.6e-5, "digits": 3}, {"column": "LCM MSE", "mean": 1.0, "digits": 3},
             {"column": "RPE", "mean": 2.6e-8, "digits": 2}, {"column": "RPE", "mean": 0.0049, "digits": 2},
             {"column": "RPE", "mean": 0.046, "digits": 2}, {"column": "PSNR", "mean": 43.6, "digits": 2}]
    assert [c["digits"] for c in _widen_digits(cells)] == [6, 6, 4, 4, 4, 2]


def test_mind_yaml_matches_the_class_defaults():
    # the shipped config spells every default out, and they are the release's: the synthetic suite's departures
    # (72-frame 320x240 clips) come with the suite (conf/suite_settings/synthetic.yaml; tests/test_suite_settings.py)
    from omegaconf import OmegaConf

    from worldrecall.plugins.mind.plugin import METRICS

    path = Path(records.__file__).parents[2] / "conf" / "benchmark" / "mind.yaml"
    conf = OmegaConf.to_container(OmegaConf.load(path), resolve=False)   # Hydra's YAML (1.0e9 is a float)
    assert conf["loader"] == "mind" and conf["aligner"] == "mind.pairs" and conf["aggregators"] == ["mind.result"]
    assert conf["loader_options"] == MindLoader.defaults
    official = dict(MindPairs.defaults)
    assert (official["frame_size"], official["release_batches"]) == ("release", True)
    assert conf["aligner_params"] == official
    by_short = {m.name.split(".", 1)[1]: m for m in METRICS}
    assert set(conf["metrics"]) == set(by_short)
    for short, entry in conf["metrics"].items():
        m = by_short[short]
        assert set(entry.get("params") or {}) <= set(m.params), short
        assert set(entry.get("thresholds") or {}) <= set(m.thresholds), short
        m(entry.get("params"), entry.get("thresholds"))   # instantiable with the shipped values


def test_lcm_at_the_release_frame_size(layout):
    # frame_size release: every frame brought to 1280x720 first (a flat frame stays flat, so the MSE is the
    # same hand value), release batching off; the row says the size it compared at
    data, gen = layout
    case = next(c for c in load(data, {"m1": gen}) if c.case_id == "1st_data/mem_test/data-1")
    meas, _ = _measure(MindLCM(), case, {"frame_size": "release", "video_max_time": 2})
    np.testing.assert_allclose(meas["mse"], ((40 - np.array([20, 30])) / 255.0) ** 2, rtol=1e-5)
    assert meas["row_info"]["frame_size"] == [720, 1280] and meas["row_info"]["scored_frames"] == 2


def test_a_clip_without_gt_is_a_missing_input_naming_the_folder(layout):
    data, gen = layout
    case = next(c for c in load(data, {"m1": gen}) if c.case_id == "3rd_data/action_space_test/data-9")
    (miss,) = MindLCM().missing_inputs(case)
    assert miss.path == str(data / "3rd_data" / "test" / "action_space_test" / "data-9")
    assert "missing GT clip folder" in miss.line() and "missing_gt=error" in miss.line()
    assert MindMirror().missing_inputs(case) == []
