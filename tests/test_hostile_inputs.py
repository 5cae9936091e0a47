"""Issue 22: hostile inputs. One bad clip fails one clip, and every reader refuses a malformed file with one
line naming it (never another exception, never a silent acceptance).

Hand-built cases for each class of the issue; ``test_hostile_fuzz.py`` generates many more.
"""

from __future__ import annotations

import json
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.helpers.scene_memory_fixtures import write_converted_sidecar
from tests.test_trust_inputs import CLIPS, _one_line, _release, _row
from worldrecall.core.components import Metric, Value
from worldrecall.core.data import CaseError, CaseFailure
from worldrecall.core.paths import safe_join
from worldrecall.formats import arrays, exr
from worldrecall.formats.safe_json import JSON_MAX_DEPTH, json_depth, parse_json, read_json
from worldrecall.formats.vipe import read_sidecar, write_native_vipe
from worldrecall.plugins.memobench import sheets
from worldrecall.plugins.memobench.vqa.bank import read_bank

# -- JSON ------------------------------------------------------------------------------------------------

def test_json_bounds(tmp_path):
    p = tmp_path / "reference_scene.json"
    for text, why in (("[" * 100_000 + "]" * 100_000, "nested too deeply"),
                      ('{"a": ' + "[" * 3000 + "]" * 3000 + "}", "nested too deeply"),
                      ('{"frame_index": ' + "7" * 5000 + "}", "integer of 5000 digits"),
                      ('{"frame_index": ' + "7" * 21 + "}", "integer of 21 digits"),
                      ('{"a": ', "not valid JSON")):
        p.write_text(text)
        with pytest.raises(CaseFailure, match=why) as e:
            read_json(p)
        assert str(e.value).startswith(str(p)) and "\n" not in str(e.value)
    # depth exactly at the limit and 20-digit integers (uint64 range) are fine
    doc = {"n": 18446744073709551615, "deep": json.loads("[" * (JSON_MAX_DEPTH - 1) + "]" * (JSON_MAX_DEPTH - 1))}
    assert json_depth(doc) == JSON_MAX_DEPTH
    assert parse_json(json.dumps(doc), "x") == doc
    assert json_depth(3) == 0 and json_depth([]) == 1 and json_depth({"a": [1]}) == 2


def test_unusable_paths_are_case_failures(tmp_path):
    for rel, why in (("a" * 300, "File name too long"), ("a\0b", "embedded null byte")):
        with pytest.raises(CaseFailure, match=f"mask_path .*unusable path \\({why}\\)"):
            safe_join(tmp_path, rel, what="mask_path")


# -- MemoBench: one bad clip of three, end to end ---------------------------------------------------------

def _run_memobench(root: Path, out: Path) -> dict[str, object]:
    from worldrecall.engine.stages.runner import Runner
    from worldrecall.registry.host import load_plugins

    cfg = {"output_root": str(out), "cache_dir": str(out / "cache"), "device": "cpu",
           "progress": False, "tracking": {"enabled": False}, "aggregators": [],
           "benchmarks": {"memobench": {
               "enabled": True, "loader": "memobench", "aligner": "memobench.phases",
               "loader_options": {"splits": ["synthetic"]},
               "data_root": str(root / "data"), "generations": {"m1": str(root / "output" / "m1")},
               "metrics": {"pixel_fidelity": {"params": {"lpips": False}, "thresholds": {}}}, "aggregators": []}}}
    res = Runner(cfg, load_plugins(fresh=True)).run()
    return {r.case_id: r for r in res.rows}


def _meta(exr_path_of_003: str) -> bytes:
    prompt = "the camera sees a fox(subject) running"
    lines = ["scene,video_id,subject,exr_path,prompt"]
    for c in CLIPS:
        n = int(c[-3:])
        p = exr_path_of_003 if c == "Barnyard_003" else f"data/Synthetic_processed/Barnyard/{c}/RGB{n}/00000.jpg"
        lines.append(f'Barnyard,{n},fox,{p},"{prompt}"')
    return ("\n".join(lines) + "\n").encode()


def _forged_npy(path: Path, shape: tuple[int, ...]) -> None:
    header = {"descr": "<f8", "fortran_order": False, "shape": shape}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(b"\0" * 64)


LONG = "B" * 290 + "_003"


def _bad_long_folder(root: Path) -> str:
    rows = [_row("Barnyard_001", 1, 2), _row("Barnyard_002", 1, 2), _row(LONG, 1, 2)]
    shutil.rmtree(root / "output/m1/Synthetic/Barnyard_003")  # the third clip is the one the bad row names
    pd.DataFrame(rows).to_csv(root / "data/Synthetic_processed/Synthetic_ExitReenter.csv", index=False)
    return "Synthetic_ExitReenter: video_folder"


def _bad_nul_folder(root: Path) -> str:
    rows = [_row("Barnyard_001", 1, 2), _row("Barnyard_002", 1, 2), _row("Barn\0yard_003", 1, 2)]
    shutil.rmtree(root / "output/m1/Synthetic/Barnyard_003")
    pd.DataFrame(rows).to_csv(root / "data/Synthetic_processed/Synthetic_ExitReenter.csv", index=False)
    return "embedded null byte"


def _bad_extra_cell(root: Path) -> str:
    sheet = root / "data/Synthetic_processed/Synthetic_ExitReenter.csv"
    text = sheet.read_text().replace("Barnyard_003,1,2,4,no,p", "Barnyard_003,1,2,4,no,p,surplus")
    sheet.write_text(text)
    return "Synthetic_ExitReenter.csv line 4: 7 cells for 6 columns"


def _bad_meta_nul(root: Path) -> str:
    (root / "data/sam3_metadata/synthetic_metadata.csv").write_bytes(_meta("data/x\0y.jpg"))
    return "synthetic_metadata.csv: sam3_metadata first-frame path"


def _bad_meta_long(root: Path) -> str:
    (root / "data/sam3_metadata/synthetic_metadata.csv").write_bytes(_meta("data/" + "x" * 400 + ".jpg"))
    return "synthetic_metadata.csv: sam3_metadata first-frame path"


def _bad_forged_intrinsics(root: Path) -> str:
    _forged_npy(root / "data/Synthetic_processed/Barnyard/Barnyard_003/3/intrinsics.npy", (10**12, 4, 4))
    return "intrinsics.npy: header declares shape [1000000000000, 4, 4]"


def _bad_hdr_frame(root: Path) -> str:
    # Radiance HDR saved under a .jpg name: PIL cannot size it, OpenCV decodes it; 40 Mpx + 1 row
    rgb = root / "data/Synthetic_processed/Barnyard/Barnyard_003/RGB3"
    header = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 5001 +X 8000\n"
    (rgb / "00001.jpg").write_bytes(header + b"\0" * 64)
    return "00001.jpg: frame size 8000x5001"


@pytest.mark.parametrize("corrupt", [_bad_long_folder, _bad_nul_folder, _bad_extra_cell, _bad_meta_nul, _bad_meta_long,
                                     _bad_forged_intrinsics, _bad_hdr_frame],
                         ids=lambda f: f.__name__[5:])
def test_one_bad_memobench_clip_of_three(tmp_path, corrupt):
    root = _release(tmp_path / "r", n_gen=8)
    expected = corrupt(root)
    by = _run_memobench(root, tmp_path / "out")
    assert by["Barnyard_001"].status == "ok" and by["Barnyard_002"].status == "ok"
    bad = [r for cid, r in by.items() if cid not in ("Barnyard_001", "Barnyard_002")]
    assert len(bad) == 1 and bad[0].status == "failed", [(r.case_id, r.status, r.reason) for r in by.values()]
    assert expected in bad[0].reason, bad[0].reason
    _one_line(bad[0].reason)
    assert "*" not in by


def test_complex_gt_poses_and_intrinsics_are_refused(tmp_path):
    from worldrecall.core.data import Case
    from worldrecall.plugins.memobench import gt

    np.save(tmp_path / "poses.npy", np.tile(np.eye(4), (3, 1, 1)) * (1 + 1j))   # real part a valid rotation
    case = Case("memobench", "c", "m", None, annotations={"gt_poses": "poses.npy", "gt_poses_kind": "npy"},
                data_root=tmp_path)
    with pytest.raises(CaseFailure, match=r"poses.npy \(GT poses\): poses of dtype complex128"):
        gt.load_gt_poses(case)
    np.save(tmp_path / "intrinsics.npy", np.tile([100.0, 100.0, 4.0, 3.0], (3, 1)) * (1 + 0j))
    with pytest.raises(CaseFailure, match="intrinsics.npy: intrinsics of dtype complex128"):
        gt.load_gt_intrinsics(tmp_path / "intrinsics.npy")


def test_boolean_sheet_cells(tmp_path):
    df = pd.DataFrame([{"video_folder": "Barnyard_001", "exits": True, "re-enter": 3},
                       {"video_folder": "Barnyard_002", "exits": 1, "re-enter": 3}])
    strict = sheets.parse_synthetic_sheet(df)
    assert "is a boolean, not a frame number" in strict["Barnyard_001"].error and strict["Barnyard_002"].error is None
    official = sheets.parse_synthetic_sheet(df, checks="official")["Barnyard_001"]
    assert official.error is None and official.h_gt == 1       # the official int(float(True))
    assert any("is a boolean, read as 1" in w for w in official.warnings)


def _xlsx_release(tmp_path: Path, stray: dict[str, object]) -> Path:
    """The three-clip release with its phase sheet as .xlsx (the release format) plus ``stray`` cells."""
    from openpyxl import Workbook

    root = _release(tmp_path)
    syn = root / "data" / "Synthetic_processed"
    (syn / "Synthetic_ExitReenter.csv").unlink()
    wb = Workbook()
    ws = wb.active
    ws.append(["video_folder", "exits", "re-enter", "frame_num", "skip", "prompt"])
    for clip in CLIPS:
        ws.append([clip, 1, 2, 4, "no", "p"])
    for cell, value in stray.items():
        ws[cell] = value
    wb.save(syn / "Synthetic_ExitReenter.xlsx")
    return root


def test_a_far_cell_in_a_sparse_xlsx_costs_no_clip(tmp_path, caplog):
    from tests.test_trust_inputs import _load

    root = _xlsx_release(tmp_path, {"XFD1048576": 1, "XFD3": "x"})   # row 3 is Barnyard_002's
    sheet = root / "data" / "Synthetic_processed" / "Synthetic_ExitReenter.xlsx"
    assert sheet.stat().st_size < 10_000   # pandas would pad it to 1048576 x 16384 cells
    cases, errors = _load(root)
    assert sorted(cases) == list(CLIPS) and not errors
    assert cases["Barnyard_002"].warnings == [
        "Synthetic_ExitReenter.xlsx row 3: cell(s) XFD3 lie right of the sheet's header, in no column; ignored"]
    assert not cases["Barnyard_001"].warnings and not cases["Barnyard_003"].warnings
    assert "1 row(s) with cells right of the header's 6 column(s) in rows naming no clip ignored " \
           "(first: XFD1048576)" in caplog.text


def test_xlsx_is_read_as_pandas_reads_it_and_sized_by_its_values(tmp_path):
    from openpyxl import Workbook

    p = tmp_path / "Synthetic_ExitReenter.xlsx"
    wb = Workbook()
    ws = wb.active
    for row in (["video_folder", "exits", "re-enter", "prompt"], ["Barnyard_001", 1, 2.5, "p"],
                ["Barnyard_002", "7", 9, None], ["Barnyard_003", True, 9, 5]):
        ws.append(row)
    wb.save(p)
    ours, ref = sheets.read_xlsx(p), pd.read_excel(p)
    pd.testing.assert_frame_equal(ours, ref)          # same values, types and row numbers as pandas
    assert ours.attrs["stray_cells"] == {}
    ws["A1048576"] = "Barnyard_004"                   # a value in a header column, a million rows down
    wb.save(p)
    df = sheets.read_xlsx(p)
    assert list(df.index) == [0, 1, 2, 1048574]       # sheet row 1048576 keeps its number (index + 2)
    with pytest.raises(sheets.SheetError) as e:       # 5 rows x 4 columns with values: past a 19-cell cap
        sheets.read_xlsx(p, max_cells=19)
    assert str(e.value) == (f"{p}: sheet holds 5 rows (or more) of 4 columns, past the limit of 19 cells "
                            "(sheets.SHEET_MAX_CELLS)")


def test_xlsx_with_a_forged_row_number_is_read_at_once(tmp_path):
    from openpyxl import Workbook

    p = tmp_path / "Synthetic_ExitReenter.xlsx"
    wb = Workbook()
    ws = wb.active
    ws.append(["video_folder", "exits", "re-enter"])
    ws.append(["Barnyard_001", 1, 2])
    ws["A9"] = "Barnyard_002"
    wb.save(p)
    with zipfile.ZipFile(p) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    name = next(n for n in members if n.startswith("xl/worksheets/sheet"))
    members[name] = members[name].replace(b'r="9"', b'r="4000000000"').replace(b'r="A9"', b'r="A4000000000"')
    with zipfile.ZipFile(p, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    df = sheets.read_xlsx(p)   # openpyxl's rows would fill four billion empty rows first
    assert list(df["video_folder"]) == ["Barnyard_001", "Barnyard_002"] and df.index[-1] == 4_000_000_000 - 2


# -- .xls: a hand-built OLE2 compound file with a BIFF8 workbook ------------------------------------------

def _biff(rc: int, data: bytes = b"") -> bytes:
    return struct.pack("<HH", rc, len(data)) + data


def xls_bytes(cells: dict[tuple[int, int], float], pad_to: int = 0) -> bytes:
    """An .xls workbook with one worksheet holding ``cells`` {(row, col): number}: a version-3 compound file
    (512-byte sectors) whose Workbook stream sits in the mini stream when shorter than 4096 bytes (``pad_to``
    lengthens it with zero bytes past the last record)."""
    bof = lambda kind: _biff(0x0809, struct.pack("<HHHHII", 0x0600, kind, 0, 0, 0, 0))
    head = bof(0x0005) + _biff(0x0042, struct.pack("<H", 1200))
    boundsheet = lambda at: _biff(0x0085, struct.pack("<IBBBB", at, 0, 0, 1, 0) + b"S")
    sheet = bof(0x0010) + b"".join(_biff(0x0203, struct.pack("<HHHd", r, c, 0, v))
                                   for (r, c), v in sorted(cells.items())) + _biff(0x000A)
    glob = head + boundsheet(0) + _biff(0x000A)
    stream = head + boundsheet(len(glob)) + _biff(0x000A) + sheet
    stream += b"\0" * max(0, pad_to - len(stream))
    return _compound_file(stream)


def _compound_file(stream: bytes) -> bytes:
    ssz, end, free = 512, 0xFFFFFFFE, 0xFFFFFFFF
    sectors: list[bytes] = []
    chains: list[tuple[int, int]] = []

    def add(data: bytes) -> int:
        data += b"\0" * (-len(data) % ssz)
        first = len(sectors)
        sectors.extend(data[i:i + ssz] for i in range(0, len(data), ssz))
        chains.append((first, len(data) // ssz))
        return first

    mini = len(stream) < 4096
    if mini:
        padded = stream + b"\0" * (-len(stream) % 64)
        n = len(padded) // 64
        mini_fat = add(struct.pack(f"<{n}I", *range(1, n), end))
        root_start, root_size, start = add(padded), len(padded), 0
    else:
        mini_fat, root_start, root_size, start = end, end, 0, add(stream)

    def entry(name: str, kind: int, first: int, size: int, child: int = free) -> bytes:
        raw = name.encode("utf-16-le") + b"\0\0"
        return (raw.ljust(64, b"\0") + struct.pack("<HBBIII", len(raw), kind, 1, free, free, child)
                + b"\0" * 36 + struct.pack("<III", first, size, 0))

    directory = add(entry("Root Entry", 5, root_start, root_size, child=1) + entry("Workbook", 2, start, len(stream)))
    n_fat = 1 + (len(sectors) + 1) // (ssz // 4)
    fat = [free] * (n_fat * ssz // 4)
    for first, n in chains:
        for i in range(first, first + n):
            fat[i] = i + 1 if i < first + n - 1 else end
    fat_at = len(sectors)
    fat[fat_at:fat_at + n_fat] = [0xFFFFFFFD] * n_fat
    sectors.extend(struct.pack(f"<{len(fat)}I", *fat)[i:i + ssz] for i in range(0, n_fat * ssz, ssz))
    header = (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 16 + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
              + b"\0" * 6 + struct.pack("<9I", 0, n_fat, directory, 0, 4096, mini_fat, int(mini), end, 0)
              + struct.pack("<109I", *[fat_at + i for i in range(n_fat)], *[free] * (109 - n_fat)))
    return header + b"".join(sectors)


@pytest.mark.parametrize("pad_to", [0, 6000])   # the Workbook stream in the mini stream, then in sectors
def test_xls_extent_from_its_cell_records(pad_to):
    from worldrecall.formats.xls import xls_extent

    assert xls_extent(xls_bytes({(0, 0): 1.0, (1, 2): 2.0}, pad_to)) == (2, 3)
    assert xls_extent(xls_bytes({(0, 0): 1.0, (65535, 255): 2.0}, pad_to)) == (65536, 256)


def test_xls_is_sized_before_it_is_read(tmp_path, monkeypatch):
    from tests.test_trust_inputs import _load

    root = _release(tmp_path)
    p = root / "data" / "Real_Selected.xls"
    p.write_bytes(xls_bytes({(0, 0): 1.0, (65535, 255): 2.0}))   # 2.5 KB, 16.7 million cells to xlrd
    read = []
    monkeypatch.setattr(pd, "read_excel", lambda *a, **k: read.append(a) or pd.DataFrame())
    with pytest.raises(sheets.SheetError) as e:
        sheets.read_table(p)
    assert str(e.value) == (f"{p}: sheet spans 65536 rows x 256 columns, past the limit of 1000000 cells "
                            "(sheets.SHEET_MAX_CELLS); remove the stray cells or save it as .csv")
    assert read == []   # refused before pandas (xlrd) saw it
    p.write_bytes(xls_bytes({(0, 0): 1.0, (4, 1): 2.0}))
    sheets.read_table(p)
    assert len(read) == 1   # a small sheet goes on to pandas
    p.write_bytes(b"not a spreadsheet")
    with pytest.raises(sheets.SheetError, match=r"Real_Selected.xls: not a readable .xls \(no BIFF BOF record"):
        sheets.read_table(p)
    assert _load(root)[0]   # the synthetic split never reads the availability filter


# -- arrays, zip members, EXR ---------------------------------------------------------------------------

def test_forged_npy_and_npz_headers(tmp_path):
    p = tmp_path / "poses_c2w.npy"
    _forged_npy(p, (10**12, 4, 4))
    with pytest.raises(CaseFailure, match=r"poses_c2w.npy: header declares shape \[1000000000000, 4, 4\] float64"):
        arrays.load_npy(p)
    np.save(p, np.zeros((3, 4, 4)))
    assert arrays.load_npy(p).shape == (3, 4, 4)
    with pytest.raises(CaseFailure, match="past the limit of 100 bytes per array"):
        arrays.load_npy(p, limit=100)
    z = tmp_path / "pose.npz"
    np.savez(z, data=np.zeros((3, 4, 4)), inds=np.arange(3))
    buf = (tmp_path / "x.npy")
    _forged_npy(buf, (10**12, 4, 4))
    with zipfile.ZipFile(z, "a") as zf:
        zf.write(buf, "inds2.npy")
    assert set(arrays.load_npz(z, ("data", "inds"))) == {"data", "inds"}
    with pytest.raises(CaseFailure, match=r"pose.npz: member 'inds2': header declares shape"):
        arrays.load_npz(z)


def test_zip_members_refused_at_open(tmp_path):
    z = tmp_path / "d.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("00000.exr", b"x" * 10)
    with zipfile.ZipFile(z) as zf:
        zf.infolist()[0].compress_type = 9      # Deflate64
        with pytest.raises(CaseFailure, match="compression method 9"):
            arrays.check_zip_members(zf, z)
        zf.infolist()[0].compress_type = 0
        zf.infolist()[0].flag_bits |= 1
        with pytest.raises(CaseFailure, match="is encrypted"):
            arrays.check_zip_members(zf, z)
        zf.infolist()[0].flag_bits &= ~1
        zf.infolist()[0].file_size = 600 * 2**20
        with pytest.raises(CaseFailure, match=r"inflates to 629145600 bytes, past the limit of 5 bytes \(L\)"):
            arrays.check_zip_members(zf, z, max_member_bytes=5, limit_name="L")


def _exr_with_window(good: bytes, w: int, h: int) -> bytes:
    """An encoded EXR whose data window is patched to ``w`` x ``h``."""
    buf = bytearray(good)
    i = buf.index(b"dataWindow\0box2i\0") + len(b"dataWindow\0box2i\0") + 4
    buf[i:i + 16] = struct.pack("<iiii", 0, 0, w - 1, h - 1)
    return bytes(buf)


def test_exr_duplicate_scanline_window_and_rle():
    z = np.arange(12, dtype=np.float32).reshape(4, 3)
    good = exr.encode_exr(z, compression="none", half=False)
    assert np.array_equal(exr.decode_exr(good), z)
    # the offset table follows the header: four 8-byte offsets (one scanline each for NONE)
    _attrs, pos = exr._exr_header(good)
    offs = list(struct.unpack_from("<4Q", good, pos))
    dup = bytearray(good)
    struct.pack_into("<4Q", dup, pos, offs[0], offs[1], offs[1], offs[3])
    with pytest.raises(CaseFailure, match="scanline 1 stored twice"):
        exr.decode_exr(bytes(dup))
    huge = _exr_with_window(good, 2**31 - 1, 2**31 - 1)
    with pytest.raises(exr.ExrLimitError, match=r"exceeds the limit of 40 Mpx per frame \(video.max_pixels\)"):
        exr.decode_exr(huge)
    # an RLE chunk of one byte: a repeat count without its byte
    rle = bytearray(good)
    rle[rle.index(b"compression\0compression\0") + len(b"compression\0compression\0") + 4] = 1
    y, _size = struct.unpack_from("<ii", rle, offs[0])
    struct.pack_into("<ii", rle, offs[0], y, 1)
    with pytest.raises(CaseFailure, match="corrupt EXR chunk"):
        exr.decode_exr(bytes(rle))


def exr_bytes(width: int, height: int, channels: int, chunk: bytes, *, half: bool = False) -> bytes:
    """A ZIP-compressed scanline EXR of ``channels`` channels ("Z" first) whose every chunk holds ``chunk``
    (already compressed): what a header may declare, whatever the data."""
    def attr(name: str, typ: str, value: bytes) -> bytes:
        return name.encode() + b"\0" + typ.encode() + b"\0" + struct.pack("<i", len(value)) + value

    names = ["Z"] + [f"c{i:04d}" for i in range(channels - 1)]
    chlist = b"".join(n.encode() + b"\0" + struct.pack("<iB3xii", 1 if half else 2, 0, 1, 1) for n in names) + b"\0"
    header = struct.pack("<ii", 20000630, 2) + attr("channels", "chlist", chlist) + \
        attr("compression", "compression", bytes([3])) + \
        attr("dataWindow", "box2i", struct.pack("<iiii", 0, 0, width - 1, height - 1)) + b"\0"
    n_chunks = (height + 15) // 16
    at = len(header) + 8 * n_chunks
    chunks = [struct.pack("<ii", y, len(chunk)) + chunk for y in range(0, height, 16)]
    offsets = [at + sum(map(len, chunks[:i])) for i in range(n_chunks)]
    return header + struct.pack(f"<{n_chunks}Q", *offsets) + b"".join(chunks)


def test_exr_that_declares_a_huge_decode_is_refused_from_its_header():
    import zlib

    # 1000 x 16 pixels (under any pixel cap) of 1000 float channels: one chunk of 64,000,000 bytes
    bomb = zlib.compress(bytes(64_000_000), 9)     # ~62 KB that inflate to the declared chunk
    data = exr_bytes(1000, 16, 1000, bomb)
    assert len(data) < 100_000
    with pytest.raises(exr.ExrLimitError) as e:
        exr.decode_exr(data, max_pixels=1_000_000)
    assert str(e.value) == ("EXR data window 1000x16 with 1000 channel(s) decodes to 64000000 bytes, past the limit "
                            "of 8000000 bytes per frame (8 bytes per pixel at video.max_pixels = 1 Mpx)")
    # within the cap, a chunk is inflated to its declared scanlines and no further: 16 rows x 8 px x 4 B = 512
    with pytest.raises(CaseFailure, match=r"corrupt EXR chunk \(inflates past the 512 bytes of its scanlines\)"):
        exr.decode_exr(exr_bytes(8, 16, 1, zlib.compress(bytes(10**8))))
    # the byte predictor wraps in uint8 as the int64 arithmetic did: 1.5 (float32) over 8 x 16 pixels
    raw = np.full((16, 8), 1.5, "<f4").tobytes()
    assert np.all(exr.decode_exr(exr_bytes(8, 16, 1, zlib.compress(exr._apply_predictor(raw)))) == 1.5)


def test_exr_scanlines_never_read_are_corrupt():
    z = np.arange(12, dtype=np.float32).reshape(4, 3)
    good = exr.encode_exr(z, compression="none", half=False)
    _attrs, pos = exr._exr_header(good)
    offs = list(struct.unpack_from("<4Q", good, pos))
    for table, why in (((offs[0], offs[1], offs[1], offs[2]), "scanline 1 stored twice"),
                       ((offs[1], offs[2], offs[3], offs[3]), "scanline 3 stored twice")):
        bad = bytearray(good)
        struct.pack_into("<4Q", bad, pos, *table)
        with pytest.raises(CaseFailure, match=why):
            exr.decode_exr(bytes(bad))
    moved = bytearray(good)   # the first chunk claims scanline 1 and the second scanline 0: all read, swapped
    struct.pack_into("<i", moved, offs[0], 1)
    struct.pack_into("<i", moved, offs[1], 0)
    assert np.array_equal(exr.decode_exr(bytes(moved)), z[[1, 0, 2, 3]])


# -- ViPE sidecars -----------------------------------------------------------------------------------------

def _native(tmp_path: Path, n: int = 3) -> Path:
    poses = np.tile(np.eye(4), (n, 1, 1))
    k = np.tile([10.0, 10.0, 4.0, 3.0], (n, 1))
    return write_native_vipe(tmp_path / "vipe", "v", poses, k, np.ones((n, 6, 8), np.float32))


def test_native_sidecar_text_and_complex_values(tmp_path):
    d = _native(tmp_path)
    np.savez(d / "intrinsics" / "v.npz", data=np.array([["a"] * 4] * 3), inds=np.arange(3))
    with pytest.raises(CaseFailure, match=r"intrinsics/v.npz: 'data' of dtype <U1; expected real numbers"):
        read_sidecar(d)
    d = _native(tmp_path / "b")
    np.savez(d / "pose" / "v.npz", data=np.tile(np.eye(4), (3, 1, 1)) * (1 + 1j), inds=np.arange(3))
    with pytest.raises(CaseFailure, match=r"pose/v.npz: 'data' of dtype complex128"):
        read_sidecar(d)


def test_converted_sidecar_text_timestamps_and_complex_intrinsics(tmp_path):
    n = 3
    d = write_converted_sidecar(tmp_path / "c", np.tile(np.eye(4), (n, 1, 1)),
                                np.array([[10.0, 0, 4], [0, 10, 3], [0, 0, 1]]), np.ones((n, 6, 8), np.float32))
    assert len(read_sidecar(d)) == n
    np.save(d / "timestamps.npy", np.array(["a", "b", "c"]))
    with pytest.raises(CaseFailure, match="timestamps.npy: timestamps of dtype <U1; expected real numbers"):
        read_sidecar(d)
    (d / "timestamps.npy").unlink()
    np.save(d / "intrinsics.npy", np.tile(np.eye(3), (n, 1, 1)) * (1 + 1j))
    with pytest.raises(CaseFailure, match="intrinsics.npy: intrinsics of dtype complex128"):
        read_sidecar(d)


def test_deflate64_depth_archive_fails_at_open(tmp_path):
    d = _native(tmp_path)
    z = d / "depth" / "v.zip"
    raw = bytearray(z.read_bytes())
    # compression method field of the central directory record (offset 10 from its signature)
    cd = raw.index(b"PK\x01\x02")
    struct.pack_into("<H", raw, cd + 10, 9)
    z.write_bytes(bytes(raw))
    with pytest.raises(CaseFailure, match="v.zip: member '00000.exr' uses zip compression method 9"):
        read_sidecar(d)


def test_native_depth_frames_follow_the_runs_pixel_cap(tmp_path):
    d = _native(tmp_path)                    # 6x8 = 48 px depth frames
    assert len(read_sidecar(d, max_pixels=48)) == 3
    with pytest.raises(CaseFailure, match=r"v.zip/00000.exr: EXR data window 8x6 .* \(video.max_pixels\)"):
        read_sidecar(d, max_pixels=47)


def test_corrupt_depth_frame_note_reaches_the_rows(tmp_path):
    # a native sidecar whose second depth frame is corrupt: read as NaN with a note, which must reach the
    # rows of the metric that used the depth (here through the sidecar depth backend)
    from worldrecall.core.data import Case
    from worldrecall.plugins.models.options import parse_options
    from worldrecall.plugins.models.sidecar import SidecarDepth, clear_cache

    d = _native(tmp_path)
    z = d / "depth" / "v.zip"
    with zipfile.ZipFile(z) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members["00001.exr"] = members["00001.exr"][:40]
    with zipfile.ZipFile(z, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    clear_cache()
    case = Case("b", "c", "m", None, sidecars={"vipe": d})
    backend = SidecarDepth(parse_options("sidecar_depth", {}, {"output": "metric"}))
    out = backend.depth([np.zeros((6, 8, 3))] * 3, case=case, indices=[0, 1, 2])
    assert np.all(out[1] == 0) and np.all(out[0] == 1)
    assert len(case.warnings) == 1 and "v.zip/00001.exr: corrupt EXR read as all-NaN" in case.warnings[0]


# -- VQA banks ----------------------------------------------------------------------------------------------

def _bank(tmp_path: Path, cells: list[str], header: list[str] | None = None) -> Path:
    import csv

    from worldrecall.formats.memobench_vqa import BANK_COLUMNS

    p = tmp_path / "Zen_Garden-10-questions.csv"
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header or BANK_COLUMNS)
        w.writerow(cells)
    return p


Q = json.dumps([{"ID": 1, "Dimension": "Continuity of Memory", "Dimension Polarity": "Positive",
                 "Question": "Is the fox there?"}])


@pytest.mark.parametrize("cells, why", [
    (["Zen_Garden", "inf", "[]", "[]", "[]", "[]", Q], "video_id 'inf' is not a number"),
    (["Zen_Garden", "10", "[]", "[]", "[]", "[]"], "no cell for column 'Final questions'"),
    (["Zen_Garden", "10", "[]", "[]", "[]", "[]", Q, "extra"], "8 cells for 7 columns"),
    (["Zen_Garden", "10", "[]", "[]", "[]", "[]", "[" * 5000 + "]" * 5000], "nested too deeply"),
    (["Zen_Garden", "10", "[]", "[]", "[]", "[]", Q.replace('"ID": 1', '"ID": ' + "9" * 5000)],
     "integer of 5000 digits"),
    (["Zen_Garden", "10", "[]", "[]", "[]", "[]", Q.replace('"Continuity of Memory"', '["x"]')],
     "unknown Dimension"),
    (["Zen_Garden", "10", "[]", "[]", "[]", "[]", Q.replace('"Positive"', "[1]")], "has polarity"),
])
def test_bank_rows_of_the_wrong_shape(tmp_path, cells, why):
    p = _bank(tmp_path, cells)
    with pytest.raises(CaseFailure, match=why) as e:
        read_bank(p)
    assert "Zen_Garden-10-questions.csv" in str(e.value) and "\n" not in str(e.value)


# -- OPIS -----------------------------------------------------------------------------------------------------

def _opis_cases(root: Path) -> dict[str, object]:
    from worldrecall.core.components import LoadRequest
    from worldrecall.plugins.opis.loader import OpisLoader

    req = LoadRequest(data_root=root, generations={"m1": root / "generations" / "m1"}, options={})
    return {c.case_id: c for c in OpisLoader().load(req)}


@pytest.mark.parametrize("what", ["deep_scene", "long_mask", "nul_mask", "bool_fps", "huge_int"])
def test_one_bad_opis_case_of_three(tmp_path, what):
    from tests.helpers.opis_fixtures import write_release

    root = write_release(tmp_path / "o", cases={"c1": "home", "c2": "home", "c3": "home"}, frames=4)
    d = root / "final" / "home" / "c3"
    doc = json.loads((d / "reference_scene.json").read_text())
    if what == "deep_scene":
        (d / "reference_scene.json").write_text(json.dumps(doc)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
        expect = "reference_scene.json: JSON nested too deeply"
    elif what in ("long_mask", "nul_mask"):
        doc["objects"][0]["mask_path"] = "m" * 300 + ".png" if what == "long_mask" else "masks/a\0.png"
        (d / "reference_scene.json").write_text(json.dumps(doc))
        expect = "mask_path" if what == "long_mask" else "embedded null byte"
    elif what == "bool_fps":
        (d / "conditions.json").write_text(json.dumps({"camera_task": "pan", "fps": True}))
        expect = "conditions.json: fps True is not a positive number"
    else:
        (d / "conditions.json").write_text('{"camera_task": "pan", "frame_index": ' + "1" * 5000 + "}")
        expect = "conditions.json: not valid JSON (integer of 5000 digits"
    cases = _opis_cases(root)
    assert not isinstance(cases["c1"], CaseError) and not isinstance(cases["c2"], CaseError)
    assert isinstance(cases["c3"], CaseError) and expect in cases["c3"].reason, cases["c3"].reason
    _one_line(cases["c3"].reason)


@pytest.mark.parametrize("mapping, why", [({"home": None}, "is None, not a name"),
                                          ({"home": "  "}, "empty domain"), ({"home": ["x"]}, "not a name")])
def test_domains_without_a_domain_are_refused(tmp_path, mapping, why):
    from worldrecall.plugins.opis.loader import read_domains

    p = tmp_path / "domains.json"
    p.write_text(json.dumps(mapping))
    with pytest.raises(CaseFailure, match=why):
        read_domains(p)
    p.write_text(json.dumps({"home": " real-world "}))
    assert read_domains(p) == {"home": "real-world"}
    c = tmp_path / "domains.csv"
    c.write_text("subcategory,domain\nhome,real-world\nkitchen\n")   # a short row: no domain cell
    with pytest.raises(CaseFailure, match="empty domain for subcategory 'kitchen'"):
        read_domains(c)


# -- the engine: reader notes on the rows (also from the cache), failures name the inputs ------------------

class NotingMetric(Metric):
    """A metric whose reader leaves a note on the case (as the sidecar backends do); counts its runs."""

    name = "toy.noting"
    benchmark = "toy"
    primary = "v"
    values = {"v": Value(higher_is_better=True, range=(0.0, 10.0), description="0.5 x k")}  # noqa: RUF012
    thresholds = {"k": 1.0}  # noqa: RUF012
    runs = 0
    fail_with: type[BaseException] | None = None

    def measure(self, case, alignment, ctx):
        type(self).runs += 1
        case.warnings.append("v.zip/00001.exr: corrupt EXR read as all-NaN")
        if self.fail_with is not None:
            raise self.fail_with("boom")
        return {"x": np.array([0.5])}

    def score(self, measurement, thresholds):
        return {"v": float(measurement["x"][0]) * thresholds["k"]}


def _pipeline(tmp_path: Path):
    from worldrecall.core.models import ModelHub
    from worldrecall.engine.stages.pipeline import CasePipeline

    return CasePipeline(None, ModelHub({}, {}), None, None, tmp_path / "cache", artifacts=False, device="cpu",
                        batch_size=1)


def test_reader_notes_reach_the_rows_and_survive_the_measurement_cache(tmp_path):
    from worldrecall.core.data import Alignment, Case, ScoreRow

    M = NotingMetric
    (tmp_path / "vipe").mkdir()  # beside the cache folder, not above it: the sidecar's content is an input
    case = Case("toy", "c1", "m", None, sidecars={"vipe": tmp_path / "vipe"}, warnings=["sheet note"])
    for k, runs in ((1.0, 1), (2.0, 1)):  # the second threshold re-scores from the cached measurement
        metric = M(None, {"k": k})
        row = ScoreRow("toy", "m", "c1", M.name, {}, warnings=list(case.warnings))
        _pipeline(tmp_path).measure_and_score(metric, case, Alignment(), row)
        assert row.status == "ok" and row.values == {"v": 0.5 * k} and M.runs == runs
        assert row.warnings == ["sheet note", "v.zip/00001.exr: corrupt EXR read as all-NaN"]
        assert case.warnings == ["sheet note"]          # other metrics' rows do not inherit this reader's note


def test_a_failure_that_names_no_file_names_the_case_inputs(tmp_path):
    from worldrecall.core.data import Alignment, Case, ScoreRow
    from worldrecall.core.video import Video

    M = NotingMetric
    metric = M()
    metric.fail_with = MemoryError
    (tmp_path / "c2.mp4").write_bytes(b"not decoded")
    (tmp_path / "c2_vipe_ann").mkdir()
    (tmp_path / "c2_vipe_ann" / "poses_c2w.npy").write_bytes(b"x")
    case = Case("toy", "c2", "m", Video(tmp_path / "c2.mp4"), sidecars={"vipe": tmp_path / "c2_vipe_ann"})
    row = ScoreRow("toy", "m", "c2", M.name, {})
    _pipeline(tmp_path).measure_and_score(metric, case, Alignment(), row)
    assert row.status == "failed" and row.reason.startswith("measure: toy.noting raised MemoryError: boom")
    assert f"(inputs: {tmp_path / 'c2.mp4'}, vipe={tmp_path / 'c2_vipe_ann'})" in row.reason
    assert row.warnings == ["v.zip/00001.exr: corrupt EXR read as all-NaN"]   # the note says what was wrong


def test_corrupt_depth_frame_note_reaches_the_geo3d_row_end_to_end(tmp_path):
    # memobench.geo3d over the sidecar depth backend: clip 003's native ViPE sidecar has a corrupt depth
    # frame (read as NaN, as ViPE's reader does); its row must say so, also when served from the cache
    from worldrecall.engine.stages.runner import Runner
    from worldrecall.plugins.models.sidecar import clear_cache
    from worldrecall.registry.host import load_plugins

    root = _release(tmp_path / "r", n_gen=8)
    rng = np.random.default_rng(0)
    for clip in CLIPS:
        d = root / "output/m1/Synthetic" / clip / "frames_vipe_ann"
        depth = 1.0 + rng.random((8, 6, 8)).astype(np.float32)
        write_native_vipe(d, "frames", np.tile(np.eye(4), (8, 1, 1)), np.tile([10.0, 10.0, 4.0, 3.0], (8, 1)), depth)
        if clip == "Barnyard_003":
            z = d / "depth" / "frames.zip"
            with zipfile.ZipFile(z) as zf:
                members = {n: zf.read(n) for n in zf.namelist()}
            members["00000.exr"] = members["00000.exr"][:60]          # truncated: corrupt
            with zipfile.ZipFile(z, "w") as zf:
                for n, b in members.items():
                    zf.writestr(n, b)
    cfg = {"output_root": str(tmp_path / "out"), "cache_dir": str(tmp_path / "out" / "cache"), "device": "cpu",
           "progress": False, "tracking": {"enabled": False}, "aggregators": [],
           "models": {"depth": "sidecar_depth"},
           "benchmarks": {"memobench": {
               "enabled": True, "loader": "memobench", "aligner": "memobench.phases",
               "loader_options": {"splits": ["synthetic"]},
               "data_root": str(root / "data"), "generations": {"m1": str(root / "output" / "m1")},
               "metrics": {"geo3d": {"params": {}, "thresholds": {}}}, "aggregators": []}}}
    for attempt in range(2):  # the second run reads the measurements from the cache
        clear_cache()
        cfg["benchmarks"]["memobench"]["metrics"]["geo3d"]["thresholds"] = {"alpha": 0.7 - 0.1 * attempt}
        by = {r.case_id: r for r in Runner(cfg, load_plugins(fresh=True)).run().rows}
        assert all(r.status == "ok" for r in by.values()), [(r.case_id, r.reason) for r in by.values()]
        assert by["Barnyard_001"].warnings == [] and by["Barnyard_002"].warnings == []
        assert any("frames.zip/00000.exr: corrupt EXR read as all-NaN" in w for w in by["Barnyard_003"].warnings), \
            by["Barnyard_003"].warnings


def test_a_crashing_loader_keeps_the_cases_it_yielded():
    from worldrecall.core.components import LoadRequest
    from worldrecall.core.data import Case
    from worldrecall.engine.stages.plan import BenchmarkPlan, load_cases

    class Crashing:
        name = "crashing"

        def load(self, request):
            yield Case("b", "c1", "m", None)
            yield CaseError("b", "c2", "m", "load", "c2.json: bad")
            raise RuntimeError("bug after two cases")

    plan = BenchmarkPlan("b", Crashing(), "", {}, {}, {}, LoadRequest(Path("."), {}), [])
    items = load_cases(plan, 0, 1)
    assert [(i.case_id, type(i).__name__) for i in items] == [("c1", "Case"), ("c2", "CaseError"), ("*", "CaseError")]
    assert items[-1].reason == "loader crashing failed after 2 case(s): RuntimeError: bug after two cases"


def test_opis_input_image_follows_the_pixel_cap(tmp_path):
    from worldrecall.plugins.opis.metric import read_rgb

    p = tmp_path / "raw.jpg"   # a Radiance HDR under a .jpg name: PIL cannot size it, OpenCV would decode it
    p.write_bytes(b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 6000 +X 7000\n" + b"\0" * 64)
    with pytest.raises(CaseFailure, match=r"raw.jpg: frame size 7000x6000 \(42.0 Mpx\) exceeds the limit of 40 Mpx"):
        read_rgb(p)
    p.write_bytes(b"neither an image nor a header")
    with pytest.raises(CaseFailure, match="raw.jpg: unreadable image"):
        read_rgb(p)


def test_real_selection_ids_past_every_range_name_no_clip():
    df = pd.DataFrame({"ID": ["1", "inf", "1e400", "x", 2.0], "Availability": ["yes"] * 5})
    assert sheets.parse_real_selection(df) == {"001", "002"}


def test_opis_masks_and_report_thumbnails_follow_the_pixel_cap(tmp_path, monkeypatch):
    import cv2

    from worldrecall.core import video as video_mod
    from worldrecall.engine.sinks.report.images import image_thumb
    from worldrecall.plugins.opis.metric import load_mask

    mask = np.zeros((20, 30), np.uint8)
    mask[5:10, 5:15] = 255
    cv2.imwrite(str(tmp_path / "m.png"), mask)
    assert load_mask(tmp_path, "m.png", (30, 20)).sum() == 50
    monkeypatch.setattr(video_mod, "DEFAULT_MAX_PIXELS", 100)  # 30 x 20 = 600 px > 100
    monkeypatch.setattr(video_mod.read_image, "__defaults__", (100,))
    with pytest.raises(CaseFailure, match=r"m\.png: unreadable mask .*exceeds the limit"):
        load_mask(tmp_path, "m.png", (30, 20))
    with pytest.raises(ValueError, match="exceeds the limit"):
        image_thumb(tmp_path / "m.png", 64)
