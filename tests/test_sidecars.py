"""Sidecar IO: converted layout, native ViPE layout (EXR depth in a zip), validation failures, EXR codec."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers.scene_memory_fixtures import (
    intrinsics,
    loop_poses,
    render_depth,
    write_converted_sidecar,
)

from worldrecall.core.data import CaseFailure
from worldrecall.formats.vipe import (
    decode_exr,
    encode_exr,
    find_sidecar_dir,
    intrinsics_to_k,
    read_points_file,
    read_sidecar,
    write_native_vipe,
)

W, H = 8, 6


def _sidecar(tmp: Path, n: int = 5, **kw) -> tuple[Path, np.ndarray, np.ndarray, np.ndarray]:
    P = loop_poses("dolly", 1)[:n]
    K = intrinsics(W, H)
    depth = np.stack([render_depth(p, K, W, H) for p in P])
    d = write_converted_sidecar(tmp / "annotations_vipe" / "clip_vipe_ann", P, K, depth, **kw)
    return d, P, K, depth


# -- converted layout ---------------------------------------------------------------------------------
def test_converted_layout_round_trip(tmp_path):
    d, P, K, _ = _sidecar(tmp_path, frame_indices=np.array([0, 2, 4, 6, 8]))
    sc = read_sidecar(d)
    assert sc.layout == "converted" and len(sc) == 5
    assert sc.poses_c2w.dtype == np.float64 and sc.poses_c2w.shape == (5, 4, 4)
    np.testing.assert_allclose(sc.poses_c2w, P.astype(np.float32))
    np.testing.assert_allclose(sc.intrinsics[3], K.astype(np.float32))
    assert sc.depth.shape == (5, H, W) and sc.depth.dtype == np.float32
    assert sc.valid.dtype == bool and sc.valid.all()
    assert sc.frame_indices.dtype == np.int64 and sc.timestamps[1] == pytest.approx(2 / 16)
    assert sc.depth_size == (W, H)
    # row lookup: frame 4 is row 2; frame 3 was skipped by ViPE
    assert sc.row_for_frame(4) == 2
    with pytest.raises(CaseFailure, match="clip_vipe_ann.*no sidecar row for video frame 3"):
        sc.row_for_frame(3)
    assert sc.nearest_row(3) == 1 and sc.nearest_row(100) == 4


def test_find_sidecar_dir_prefers_annotations_vipe(tmp_path):
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"")
    assert find_sidecar_dir(video) is None
    (tmp_path / "clip_vipe_ann").mkdir()
    assert find_sidecar_dir(video) == tmp_path / "clip_vipe_ann"
    (tmp_path / "annotations_vipe" / "clip_vipe_ann").mkdir(parents=True)
    assert find_sidecar_dir(video) == tmp_path / "annotations_vipe" / "clip_vipe_ann"


def test_alternative_pose_and_intrinsics_files(tmp_path):
    d, P, K, _ = _sidecar(tmp_path)
    (d / "poses_c2w.npy").unlink()
    (d / "poses_w2c.npy").unlink()
    np.savez(d / "camera_poses.npz", data=P.astype(np.float32))
    np.save(d / "intrinsics.npy", np.array([K[0, 0], K[1, 1], K[0, 2], K[1, 2]], np.float32))  # [4]
    sc = read_sidecar(d)
    np.testing.assert_allclose(sc.poses_c2w, P.astype(np.float32))
    assert sc.intrinsics.shape == (5, 3, 3)
    np.testing.assert_allclose(sc.intrinsics[4], K.astype(np.float32), rtol=1e-6)
    # [3,3] and [N,>=4] forms give the same K
    np.testing.assert_allclose(intrinsics_to_k(K, 5, "k"), intrinsics_to_k(np.tile([K[0, 0], K[1, 1], K[0, 2], K[1, 2], 0.0], (5, 1)), 5, "k"))
    with pytest.raises(CaseFailure, match="intrinsics of shape \\[2, 2\\]"):
        intrinsics_to_k(np.eye(2), 5, "intrinsics.npy")


def test_missing_mask_is_derived_from_depth(tmp_path):
    d, *_ = _sidecar(tmp_path)
    (d / "depth_valid_mask.npz").unlink()
    dep = np.load(d / "depth_metric.npy")
    dep[1, 0, :3] = [np.nan, 0.0, -1.0]
    np.save(d / "depth_metric.npy", dep)
    sc = read_sidecar(d)
    assert sc.valid[1, 0, :4].tolist() == [False, False, False, True]
    assert int(sc.valid.sum()) == 5 * W * H - 3


def test_need_depth_false_reads_poses_only(tmp_path):
    d, *_ = _sidecar(tmp_path)
    (d / "depth_metric.npy").unlink()
    sc = read_sidecar(d, need_depth=False)
    assert sc.depth is None and sc.valid is None and len(sc) == 5
    with pytest.raises(CaseFailure, match="depth_metric.npy: missing"):
        read_sidecar(d)


def _break(d: Path, what: str) -> str:
    """Damage one file of a good sidecar; return the file name the reason must name."""
    if what == "pose_shape":
        np.save(d / "poses_c2w.npy", np.zeros((5, 3, 4), np.float32))
        return "poses_c2w.npy"
    if what == "non_orthonormal":
        P = np.load(d / "poses_c2w.npy")
        P[2, :3, :3] *= 1.1
        np.save(d / "poses_c2w.npy", P)
        (d / "poses_w2c.npy").unlink()
        return "poses_c2w.npy"
    if what == "reflection":
        P = np.load(d / "poses_c2w.npy")
        P[1, :3, 0] *= -1
        np.save(d / "poses_c2w.npy", P)
        (d / "poses_w2c.npy").unlink()
        return "poses_c2w.npy"
    if what == "nan_pose":
        P = np.load(d / "poses_c2w.npy")
        P[3, 0, 3] = np.nan
        np.save(d / "poses_c2w.npy", P)
        (d / "poses_w2c.npy").unlink()
        return "poses_c2w.npy"
    if what == "w2c_not_inverse":
        w = np.load(d / "poses_w2c.npy")
        w[0, 0, 3] += 0.5
        np.save(d / "poses_w2c.npy", w)
        return "poses_w2c.npy"
    if what == "nan_depth":
        dep = np.load(d / "depth_metric.npy")
        dep[2, 3, 4] = np.nan  # the mask still says valid
        np.save(d / "depth_metric.npy", dep)
        return "depth_metric.npy"
    if what == "empty_mask":
        m = np.load(d / "depth_valid_mask.npz")["mask"]
        np.savez(d / "depth_valid_mask.npz", mask=np.zeros_like(m))
        return "depth_valid_mask.npz"
    if what == "all_invalid_depth":
        (d / "depth_valid_mask.npz").unlink()
        np.save(d / "depth_metric.npy", np.zeros((5, H, W), np.float32))
        return "depth_metric.npy"
    if what == "count_depth":
        np.save(d / "depth_metric.npy", np.load(d / "depth_metric.npy")[:4])
        return "depth_metric.npy"
    if what == "count_frames":
        np.save(d / "frame_indices.npy", np.arange(6, dtype=np.int32))
        return "frame_indices.npy"
    if what == "mask_shape":
        np.savez(d / "depth_valid_mask.npz", mask=np.ones((5, H, W + 1), bool))
        return "depth_valid_mask.npz"
    if what == "intrinsics_resolution":
        K = np.load(d / "intrinsics.npy")
        K[:, :2, :] *= 4.0  # K of a 4x larger video, depth stays small
        np.save(d / "intrinsics.npy", K)
        return "intrinsics.npy"
    if what == "unsorted_frames":
        np.save(d / "frame_indices.npy", np.array([0, 2, 1, 3, 4], np.int32))
        return "frame_indices.npy"
    if what == "pickled":
        # an object-dtype .npy (its payload is a pickle), written by hand: the reader must refuse it
        import pickle

        header = {"descr": "|O", "fortran_order": False, "shape": (5,)}
        with open(d / "frame_indices.npy", "wb") as f:
            np.lib.format.write_array_header_1_0(f, header)
            f.write(pickle.dumps(list(range(5))))
        return "frame_indices.npy"
    if what == "bad_json":
        (d / "instances.json").write_text("{not json")
        return "instances.json"
    raise AssertionError(what)


@pytest.mark.parametrize("what", ["pose_shape", "non_orthonormal", "reflection", "nan_pose", "w2c_not_inverse",
                                  "nan_depth", "empty_mask", "all_invalid_depth", "count_depth", "count_frames",
                                  "mask_shape", "intrinsics_resolution", "unsorted_frames", "pickled", "bad_json"])
def test_bad_sidecar_fails_with_file_name(tmp_path, what):
    d, *_ = _sidecar(tmp_path)
    fname = _break(d, what)
    with pytest.raises(CaseFailure) as ei:
        read_sidecar(d)
    msg = str(ei.value)
    assert fname in msg, msg
    assert "\n" not in msg


def test_non_orthonormal_message_reports_the_error(tmp_path):
    d, *_ = _sidecar(tmp_path)
    _break(d, "non_orthonormal")
    # RᵀR of 1.1·I-scaled rotation = 1.21·I -> |RᵀR − I| = 0.21
    with pytest.raises(CaseFailure, match=r"row 2 is not orthonormal \(\|RᵀR − I\| = 0\.21"):
        read_sidecar(d)


def test_instance_extras(tmp_path):
    d, *_ = _sidecar(tmp_path)
    ids = np.zeros((5, H * 2, W * 2), np.uint8)
    ids[:, 2:4, 2:4] = 3
    np.savez_compressed(d / "instance_masks.npz", ids=ids)
    (d / "instances.json").write_text('{"instances": {"3": "red mug"}, "target": 3}')
    sc = read_sidecar(d)
    assert sc.instance_ids.shape == (5, 12, 16) and sc.instances["target"] == 3
    lean = read_sidecar(d, need_instances=False)  # pose/depth consumers skip the full-resolution masks
    assert lean.instance_ids is None and lean.instances is None
    np.savez_compressed(d / "instance_masks.npz", ids=ids[:4])
    with pytest.raises(CaseFailure, match="instance_masks.npz: 4 rows but poses_c2w.npy has 5"):
        read_sidecar(d)


# -- native ViPE layout -------------------------------------------------------------------------------
def _native(tmp: Path, compression: str = "zip") -> tuple[Path, np.ndarray, np.ndarray]:
    P = loop_poses("dolly", 1)[:6]
    K = intrinsics(W, H)
    depth = np.stack([render_depth(p, K, W, H) for p in P])
    depth[1, 0, 0] = np.nan  # ViPE marks invalid depth with NaN or 0
    depth[1, 0, 1] = 0.0
    vec = np.tile([K[0, 0], K[1, 1], K[0, 2], K[1, 2]], (6, 1))
    # depth missing for frame 3 -> the rows are the intersection {0,1,2,4,5}
    out = write_native_vipe(tmp / "vipe_out", "clip", P, vec, depth[[0, 1, 2, 4, 5]],
                            depth_inds=np.array([0, 1, 2, 4, 5]), compression=compression)
    return out, P, depth


@pytest.mark.parametrize("compression", ["none", "zips", "zip"])
def test_native_vipe_layout(tmp_path, compression):
    out, P, depth = _native(tmp_path, compression)
    sc = read_sidecar(out)
    assert sc.layout == "vipe_native"
    assert sc.frame_indices.tolist() == [0, 1, 2, 4, 5]
    np.testing.assert_allclose(sc.poses_c2w, P[[0, 1, 2, 4, 5]].astype(np.float32))
    assert sc.intrinsics.shape == (5, 3, 3) and sc.intrinsics[0, 2, 2] == 1.0
    expect = depth[[0, 1, 2, 4, 5]].astype(np.float16).astype(np.float32)  # single HALF channel Z
    np.testing.assert_array_equal(np.nan_to_num(sc.depth, nan=-1), np.nan_to_num(expect, nan=-1))
    assert not sc.valid[1, 0, 0] and not sc.valid[1, 0, 1] and sc.valid[1, 0, 2]
    assert sc.row_for_frame(4) == 3


def test_native_depth_is_decoded_on_access(tmp_path):
    out, _, depth = _native(tmp_path)
    sc = read_sidecar(out)
    rows = [0, 1, 2, 4, 5]
    want = depth[rows].astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(sc.depth[-1], want[-1])
    assert sc.depth[1:3].shape == (2, H, W) and sc.depth[[0, 4]].shape == (2, H, W)
    assert np.asarray(sc.depth).shape == (5, H, W) and len(sc.depth) == 5 and sc.depth.dtype == np.float32
    assert sc.valid[1].dtype == bool and int(np.asarray(sc.valid).sum()) == 5 * W * H - 2
    with pytest.raises(IndexError):
        sc.depth[5]


def test_native_non_pinhole_camera_fails(tmp_path):
    out, *_ = _native(tmp_path)
    (out / "intrinsics" / "clip_camera.txt").write_text("0: PINHOLE\n1: MEI\n")
    with pytest.raises(CaseFailure, match="clip_camera.txt: camera model MEI is not supported"):
        read_sidecar(out)
    (out / "intrinsics" / "clip_camera.txt").write_text("0: PINHOLE\n1: PINHOLE\n")
    assert len(read_sidecar(out)) == 5


def test_native_corrupt_exr_reads_as_nan_frame(tmp_path):
    out, *_ = _native(tmp_path)
    zpath = out / "depth" / "clip.zip"
    with zipfile.ZipFile(zpath) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members["00002.exr"] = members["00002.exr"][:40]  # truncated
    with zipfile.ZipFile(zpath, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    sc = read_sidecar(out)
    assert np.isnan(sc.depth[2]).all() and not sc.valid[2].any()
    assert any("00002.exr" in n for n in sc.notes)


def test_native_needs_a_name_when_several_videos(tmp_path):
    out, P, depth = _native(tmp_path)
    K = intrinsics(W, H)
    write_native_vipe(out, "other", P[:2], np.tile([K[0, 0], K[1, 1], K[0, 2], K[1, 2]], (2, 1)), depth[:2])
    with pytest.raises(CaseFailure, match="2 videos"):
        read_sidecar(out)
    assert len(read_sidecar(out, name="other")) == 2


def test_native_pose_only_has_no_depth(tmp_path):
    out, *_ = _native(tmp_path)
    (out / "depth" / "clip.zip").unlink()
    assert len(read_sidecar(out, need_depth=False)) == 6
    with pytest.raises(CaseFailure, match="clip.zip: missing"):
        read_sidecar(out)


# -- EXR codec ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["none", "zips", "zip"])
def test_exr_round_trip(compression):
    rng = np.random.default_rng(1)
    z = (rng.random((37, 21)) * 9).astype(np.float32)  # 37 rows: last ZIP block is partial (16 + 16 + 5)
    z[0, 0], z[5, 5], z[36, 20] = np.nan, np.inf, 0.0
    got = decode_exr(encode_exr(z, compression=compression))
    want = z.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(np.nan_to_num(got, nan=-7), np.nan_to_num(want, nan=-7))
    got32 = decode_exr(encode_exr(z, compression=compression, half=False))
    np.testing.assert_array_equal(np.nan_to_num(got32, nan=-7), np.nan_to_num(z, nan=-7))


def _exr_with_chunk(width: int, comp: int, chunk: bytes) -> bytes:
    """A 1-line single-channel HALF EXR whose only chunk is ``chunk`` (hand-made, for codec tests)."""
    def attr(name: str, typ: str, value: bytes) -> bytes:
        return name.encode() + b"\0" + typ.encode() + b"\0" + struct.pack("<i", len(value)) + value
    chlist = b"Z\0" + struct.pack("<iB3xii", 1, 0, 1, 1) + b"\0"
    head = struct.pack("<ii", 20000630, 2) + attr("channels", "chlist", chlist) \
        + attr("compression", "compression", bytes([comp])) \
        + attr("dataWindow", "box2i", struct.pack("<iiii", 0, 0, width - 1, 0)) + b"\0"
    return head + struct.pack("<Q", len(head) + 8) + struct.pack("<ii", 0, len(chunk)) + chunk


def test_exr_rle_hand_made():
    # 8 HALF pixels of 1.0 (0x3C00, bytes 00 3C): 16 raw bytes. Split even/odd bytes -> 8×00, 8×3C;
    # predictor d[i] = t[i] − t[i−1] + 128 -> 00, 80×7, BC, 80×7; RLE runs (count−1, byte) / (−n, literals):
    # FF 00 | 06 80 | FF BC | 06 80  (8 bytes < 16, so the decoder must expand them)
    chunk = bytes([0xFF, 0x00, 0x06, 0x80, 0xFF, 0xBC, 0x06, 0x80])
    np.testing.assert_array_equal(decode_exr(_exr_with_chunk(8, 1, chunk)), np.ones((1, 8), np.float32))


def test_exr_unsupported_and_broken():
    with pytest.raises(CaseFailure, match="unsupported EXR compression 4"):
        decode_exr(_exr_with_chunk(8, 4, b"\0" * 10))  # PIZ
    with pytest.raises(CaseFailure, match="no channel 'R'"):
        decode_exr(encode_exr(np.ones((2, 2))), channel="R")
    with pytest.raises(CaseFailure, match="not an EXR"):
        decode_exr(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    with pytest.raises(CaseFailure, match="truncated"):
        decode_exr(encode_exr(np.ones((4, 4)))[:60])


def test_read_points_file_formats(tmp_path):
    pts = np.arange(12, dtype=np.float64).reshape(4, 3)
    np.save(tmp_path / "a.npy", pts)
    np.savez(tmp_path / "b.npz", pobs=pts)
    np.savetxt(tmp_path / "c.xyz", pts)
    for name in ("a.npy", "b.npz", "c.xyz"):
        np.testing.assert_array_equal(read_points_file(tmp_path / name), pts)
    np.save(tmp_path / "d.npy", np.zeros((4, 2)))
    with pytest.raises(CaseFailure, match="d.npy: point cloud of shape \\[4, 2\\]"):
        read_points_file(tmp_path / "d.npy")


def test_vipe_package_keeps_its_public_names_and_small_modules():
    """``formats/vipe/`` is split by job; every name callers import from ``formats.vipe`` still resolves
    there to the object its own module defines, and no module grows back into a ~700-line file."""
    import importlib
    import pkgutil

    from worldrecall.formats import vipe

    for name in vipe.__all__:
        obj = getattr(vipe, name)
        home = getattr(obj, "__module__", None)
        if home is not None:  # classes and functions live in one submodule, re-exported unchanged
            assert home.startswith("worldrecall.formats.vipe."), (name, home)
            assert getattr(importlib.import_module(home), name) is obj
    assert vipe.decode_exr is decode_exr and vipe.encode_exr is encode_exr
    mods = [m.name for m in pkgutil.iter_modules(vipe.__path__)]
    assert {"record", "reader", "converted", "native", "cameras", "validation", "writer", "points"} <= set(mods)
    for m in mods:
        lines = Path(importlib.import_module(f"worldrecall.formats.vipe.{m}").__file__).read_text().count("\n")
        assert lines < 250, f"formats/vipe/{m}.py has {lines} lines"
