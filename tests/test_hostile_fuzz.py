"""Issue 22: property-based fuzzing of every reader's public entry point (hypothesis, deterministic).

Each test starts from a valid file, mutates it (bytes flipped, cut, inserted; JSON values replaced by
other types, deep nesting, huge integers, NaN; arrays of other dtypes and forged shapes) and classifies
the outcome: either accepted, and then the result is valid, or refused with one of our error types and
a one-line message naming the file. Any other exception fails the test (hypothesis shrinks it to the
smallest input). The module runs under an address-space cap (``RLIMIT_AS``), so a reader that trusts a
declared size fails with ``MemoryError`` instead of exhausting the machine.

Derandomized, no example database: the same inputs on every run and every machine.
"""

from __future__ import annotations

import errno
import functools
import io
import json
import math
import resource
import shutil
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.scene_memory_fixtures import write_converted_sidecar
from worldrecall.core.data import CaseError, CaseFailure
from worldrecall.core.video import Video, VideoError
from worldrecall.formats import arrays, exr
from worldrecall.formats.safe_json import JSON_MAX_DEPTH, json_depth, read_json
from worldrecall.formats.vipe import read_sidecar, write_native_vipe
from worldrecall.plugins.memobench import metadata, sheets
from worldrecall.plugins.memobench.vqa.bank import read_bank

OUR_ERRORS = (CaseFailure, sheets.SheetError, VideoError)
FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=200, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])


@pytest.fixture(scope="module", autouse=True)
def memory_cap():
    """Cap the address space at what the process uses now + 3 GiB for the module (restored after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/status") as f:
        vm = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmSize:"))
    cap = vm + 3 * 2**30
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield cap
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_the_memory_cap_holds(memory_cap):
    # a reader trusting a forged size would fail here with MemoryError, not take the machine down
    with pytest.raises(MemoryError):
        np.empty(memory_cap, np.uint8)


def classify(fn: Callable[[], Any], named: str | Path, validate: Callable[[Any], None] | None = None) -> str:
    """``accepted`` (and ``validate`` holds) or ``refused`` (our error, one line naming ``named``)."""
    try:
        out = fn()
    except OUR_ERRORS as e:
        msg = str(e)
        assert msg and "\n" not in msg, f"not one line: {msg!r}"
        assert Path(named).name in msg, f"message does not name {Path(named).name}: {msg}"
        hypothesis.event("refused")
        return "refused"
    if validate is not None:
        validate(out)
    hypothesis.event("accepted")
    return "accepted"


# -- mutation strategies ------------------------------------------------------------------------------------

HAZARD_BYTES = [b"\0", b"\xff" * 8, b"\x00" * 8, b"9" * 30, b"[" * 200, b"-", b"\n", b"\xef\xbb\xbf", b"\xe9",
                b"NaN", b"1e999", b'"', b",", b"\x7f\xff\xff\xff", b"\xff\xff\xff\x7f"]


@st.composite
def mutated_bytes(draw: Any, seed: bytes, max_ops: int = 4) -> bytes:
    """``seed`` with a few byte-level edits (flip, cut, insert hazard/random bytes, delete, duplicate a span)."""
    b = bytearray(seed)
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete", "dup", "set"]))
        i = draw(st.integers(0, max(len(b) - 1, 0)))
        if op == "flip" and b:
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and b:
            b[i] = draw(st.integers(0, 255))
        elif op == "cut":
            del b[i:]
        elif op == "insert":
            b[i:i] = draw(st.sampled_from(HAZARD_BYTES) | st.binary(min_size=1, max_size=6))
        elif op == "delete":
            del b[i:i + draw(st.integers(1, 16))]
        elif op == "dup":
            j = min(len(b), i + draw(st.integers(1, 32)))
            b[i:i] = b[i:j]
    return bytes(b)


json_scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
                | st.text(max_size=8) | st.sampled_from(["", "  ", "nan", "inf", "-1", "1e999", "None"]))
json_values = st.recursive(json_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c,
                                                                                               max_size=4),
                           max_leaves=12)


@st.composite
def mutated_doc(draw: Any, doc: Any, p: float = 0.15) -> Any:
    """``doc`` with some values replaced by JSON values of any type (keys dropped or added too)."""
    def walk(v: Any) -> Any:
        if draw(st.floats(0, 1)) < p:
            return draw(json_values)
        if isinstance(v, dict):
            out = {k: walk(x) for k, x in v.items() if draw(st.floats(0, 1)) > p / 3}
            if draw(st.floats(0, 1)) < p / 3:
                out[draw(st.text(max_size=6))] = draw(json_values)
            return out
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return walk(doc)


@st.composite
def json_text(draw: Any, doc: Any) -> bytes:
    """A mutated document serialised, sometimes with a hazard spliced in (deep nesting, huge integer),
    sometimes then byte-mutated."""
    text = json.dumps(draw(mutated_doc(doc, draw(st.sampled_from([0.0, 0.03, 0.1, 0.2])))), allow_nan=True)
    hazard = draw(st.sampled_from([None] * 8 + ["deep", "deep_attr", "bigint", "midint"]))
    if hazard:
        spot = draw(st.sampled_from([m.start() for m in __import__("re").finditer(r"\d+", text)] or [None]))
        ins = {"deep": "[" * 100_000 + "]" * 100_000, "deep_attr": "[" * 3000 + "]" * 3000,
               "bigint": "7" * 5000, "midint": "7" * 400}[hazard]
        if spot is not None:
            text = text[:spot] + ins + text[spot:].lstrip("0123456789")
        else:
            text = ins
    data = text.encode()
    if draw(st.integers(0, 3)) == 0 and len(data) < 20_000:
        data = draw(mutated_bytes(data, 2))
    return data


def arrays_of(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """Arrays that are almost right: other dtypes (text, complex, bool, ints), other shapes, NaN/inf."""
    dtypes = st.sampled_from(["<f8", "<f4", "<f2", "<i8", "<u1", "?", "<c16", "<U2", "|S2"])
    shapes = st.sampled_from([shape, shape[:-1] or (1,), (0, *shape[1:]), (1,), (), (*shape[:-1], shape[-1] + 1)])

    def build(dt: str, sh: tuple[int, ...], fill: float) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            a = np.full(sh, fill) if np.dtype(dt).kind in "fc" else np.zeros(sh)
            a = a.astype(dt) if np.dtype(dt).kind not in "US" else a
        return a if np.dtype(dt).kind not in "US" else np.full(sh, "a", dtype=dt)
    return st.builds(build, dtypes, shapes, st.sampled_from([0.0, 1.0, np.nan, np.inf, -1.0, 1e300]))


def _write(p: Path, data: bytes) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _forge_shape(npy: bytes, shape: tuple[int, ...]) -> bytes:
    """An .npy whose header declares ``shape`` over the original data."""
    f = io.BytesIO(npy)
    _, dtype, header = arrays.npy_header(f)
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(dtype),
                                               "fortran_order": False, "shape": shape})
    return out.getvalue() + npy[header:]


FORGED = st.sampled_from([(10**12, 4, 4), (2**40,), (3, 2**31, 2**31), (0,), (7, 4, 4)])


# -- JSON ------------------------------------------------------------------------------------------------

SCENE = {"scene_id": "c1", "metadata": {"image_size": [64, 48], "domain": "home"}, "objects": [
    {"object_id": "o1", "category": "box", "bbox": [4, 4, 20, 20], "attributes": {"color": "red"},
     "embedding": [1.0, 0.0, 0.0],
     "metadata": {"mobility": {"kinematic_class": "rigid", "motion_expectation": "world_static",
                               "evaluation_track": "static_geometry", "geometry_eligible": True,
                               "confidence": 1.0}}}]}
OBSERVATION = {"video_id": "gen", "windows": [{"window_id": "f0", "frame_index": 0, "frame_size": [640, 400],
                                               "objects": [{"observed_id": "x", "category": "box",
                                                            "bbox": [20, 20, 100, 100],
                                                            "embedding": [0.88, 0.12, 0.0]}]}]}


@FUZZ
@given(data=json_text(SCENE))
def test_fuzz_read_json(tmp_path, data):
    p = _write(tmp_path / "instances.json", data)
    classify(lambda: read_json(p), p, lambda v: (assert_true(json_depth(v) <= JSON_MAX_DEPTH)))


def assert_true(x: bool) -> None:
    assert x


@FUZZ
@given(data=json_text(SCENE))
def test_fuzz_reference_scene(tmp_path, data):
    from worldrecall.plugins.opis.inventory import load_reference_scene

    p = _write(tmp_path / "reference_scene.json", data)

    def valid(inv: Any) -> None:
        assert all(isinstance(o.object_id, str) for o in inv.objects)
    classify(lambda: load_reference_scene(p, image_size=(64, 48)), p, valid)


@FUZZ
@given(data=json_text(OBSERVATION))
def test_fuzz_video_observation(tmp_path, data):
    from worldrecall.plugins.opis.inventory import load_video_observation

    p = _write(tmp_path / "video_observation.json", data)
    classify(lambda: load_video_observation(p), p, lambda ws: assert_true(isinstance(ws, list)))


@FUZZ
@given(data=json_text({"domains": {"home": "real-world", "kitchen": "real-world"}}))
def test_fuzz_domains(tmp_path, data):
    from worldrecall.plugins.opis.loader import read_domains

    p = _write(tmp_path / "domains.json", data)

    def valid(m: dict) -> None:
        assert all(isinstance(v, str) and v.strip() == v and v for v in m.values()), m
    classify(lambda: read_domains(p), p, valid)


# -- OPIS loader over one fuzzed case of three ------------------------------------------------------------

@pytest.fixture(scope="module")
def opis_release(tmp_path_factory):
    from tests.helpers.opis_fixtures import write_release

    return write_release(tmp_path_factory.mktemp("opis"), cases={"c1": "home", "c2": "home", "c3": "home"},
                         frames=4)


@settings(FUZZ, max_examples=80)
@given(which=st.sampled_from(["reference_scene.json", "conditions.json", "text_prompt.txt"]),
       data=st.one_of(json_text(SCENE), json_text({"camera_task": "pan", "fps": 16.0}),
                      st.binary(max_size=64)))
def test_fuzz_opis_loader_one_case_of_three(opis_release, which, data):
    from worldrecall.core.components import LoadRequest
    from worldrecall.plugins.opis.loader import OpisLoader

    target = opis_release / "final" / "home" / "c3" / which
    original = target.read_bytes()
    try:
        target.write_bytes(data)
        req = LoadRequest(data_root=opis_release, generations={"m1": opis_release / "generations" / "m1"},
                          options={})
        items = {c.case_id: c for c in OpisLoader().load(req)}   # never raises
    finally:
        target.write_bytes(original)
    assert not isinstance(items["c1"], CaseError) and not isinstance(items["c2"], CaseError)
    if isinstance(items["c3"], CaseError):
        assert "\n" not in items["c3"].reason and "c3" in items["c3"].reason


# -- MemoBench sheets, metadata, banks, official results ---------------------------------------------------

SHEET = (b"video_folder,exits,re-enter,frame_num,skip,prompt\nBarnyard_001,10,20,40,no,p\n"
         b"Barnyard_002,11,30,40,no,q\nBarnyard_003,1,2,3,yes,r\n")
REAL_SHEET = b"id,exit,reenter\n1,10,20\n2,11,30\n"


@FUZZ
@given(data=mutated_bytes(SHEET, 6), real=st.booleans(), checks=st.sampled_from(sheets.CHECKS))
def test_fuzz_phase_sheets(tmp_path, data, real, checks):
    p = _write(tmp_path / ("Real_ExitReenter.csv" if real else "Synthetic_ExitReenter.csv"),
               data if not real else data.replace(b"video_folder", b"id").replace(b"exits", b"exit")
               .replace(b"re-enter", b"reenter"))
    parse = sheets.parse_real_sheet if real else sheets.parse_synthetic_sheet

    def valid(rows: dict) -> None:
        for clip, r in rows.items():
            assert isinstance(clip, str)
            if r.error is None:
                assert isinstance(r.h_gt, int) and isinstance(r.r_gt, int)
                assert checks == "official" or 0 <= r.h_gt < r.r_gt
            else:
                assert "\n" not in r.error
    classify(lambda: parse(sheets.read_table(p), p.name, checks), p, valid)


def _xlsx_seed() -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    for line in SHEET.decode().splitlines():
        ws.append([int(c) if c.isdigit() else c for c in line.split(",")])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


@settings(FUZZ, max_examples=60)
@given(data=mutated_bytes(_xlsx_seed(), 3))
def test_fuzz_xlsx_sheet(tmp_path, data):
    p = _write(tmp_path / "Synthetic_ExitReenter.xlsx", data)
    classify(lambda: sheets.parse_synthetic_sheet(sheets.read_table(p), p.name), p,
             lambda rows: assert_true(isinstance(rows, dict)))


META = (b"scene,video_id,subject,exr_path,prompt\nBarnyard,1,fox,data/a.jpg,\"the camera sees a fox(subject)\"\n"
        b"Barnyard,2,cat,data/b.jpg,p\n")


@FUZZ
@given(data=mutated_bytes(META, 6), real=st.booleans())
def test_fuzz_sam3_metadata(tmp_path, data, real):
    p = _write(tmp_path / ("real_metadata.csv" if real else "synthetic_metadata.csv"), data)
    read = metadata.read_real_metadata if real else metadata.read_synthetic_metadata

    def valid(m: dict) -> None:
        assert all(isinstance(k, str) and isinstance(v.first_frame, str) for k, v in m.items())
    classify(lambda: read(p), p, valid)


QUESTIONS = [{"ID": 1, "Dimension": "Continuity of Memory", "Dimension Polarity": "Positive",
              "Question": "Is the fox there?"},
             {"ID": 2, "Dimension": "Object and Background", "Dimension Polarity": "Negative", "Question": "Q?"}]


@st.composite
def bank_bytes(draw: Any) -> bytes:
    """A one-row bank with one kind of damage (or none): video id, cell count, row count, question
    values, the final cell's JSON text, or the file's bytes."""
    import csv

    from worldrecall.formats.memobench_vqa import BANK_COLUMNS

    damage = draw(st.sampled_from(["none", "video_id", "cells", "rows", "questions", "final", "bytes"]))
    vid = draw(st.sampled_from(["10.0", "inf", "nan", "", "x", "9" * 400, "-1"])) if damage == "video_id" else "10"
    final = json.dumps(draw(mutated_doc(QUESTIONS, 0.2))) if damage == "questions" else json.dumps(QUESTIONS)
    if damage == "final":
        final = draw(json_text(QUESTIONS)).decode("utf-8", "replace")
    cells = ["Zen_Garden", vid, "[]", "[]", "[]", "[]", final]
    if damage == "cells":
        cells = (cells + ["extra"])[:draw(st.sampled_from([6, 8]))]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(BANK_COLUMNS)
    for _ in range(draw(st.sampled_from([0, 2])) if damage == "rows" else 1):
        w.writerow(cells)
    data = buf.getvalue().encode()
    return draw(mutated_bytes(data, 2)) if damage == "bytes" else data


@FUZZ
@given(data=bank_bytes())
def test_fuzz_vqa_bank(tmp_path, data):
    from worldrecall.formats.memobench_vqa import DIMENSIONS

    p = _write(tmp_path / "Zen_Garden-10-questions.csv", data)

    def valid(bank: Any) -> None:
        assert isinstance(bank.video_id, int) and bank.questions
        for q in bank.questions:
            assert isinstance(q["ID"], int) and q["Dimension"] in DIMENSIONS and isinstance(q["Question"], str)
    classify(lambda: read_bank(p), p, valid)


@settings(FUZZ, max_examples=100)
@given(score=json_text({"Instruction Following": 1.0, "Object and Background": 0.5, "Continuity of Memory": 0.0}))
def test_fuzz_official_vqa_scores(tmp_path, score):
    import csv

    from worldrecall.plugins.memobench.official_results import read_vqa_dir

    d = tmp_path / "vqa" / "ModelA"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "results.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["scene", "video_id", "folder", "score"])
        w.writerow(["Zen_Garden", "10", "ZenGarden_010", score.decode("utf-8", "replace")])

    def valid(found: dict) -> None:
        for (_, recs) in found.values():
            for r in recs:
                assert all(v is None or math.isfinite(v) for v in r["values"].values())
    classify(lambda: read_vqa_dir(tmp_path / "vqa"), d / "results.csv", valid)


# -- arrays, EXR ------------------------------------------------------------------------------------------

@FUZZ
@given(data=st.one_of(mutated_bytes(_npy_bytes(np.tile(np.eye(4), (3, 1, 1)))),
                      FORGED.map(lambda s: _forge_shape(_npy_bytes(np.tile(np.eye(4), (3, 1, 1))), s))),
       mmap=st.booleans())
def test_fuzz_npy(tmp_path, data, mmap):
    p = _write(tmp_path / "poses_c2w.npy", data)
    classify(lambda: arrays.load_npy(p, mmap=mmap), p, lambda a: assert_true(a.dtype != object))


def _npz_bytes(**arrs: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrs)
    return buf.getvalue()


@FUZZ
@given(data=st.one_of(mutated_bytes(_npz_bytes(data=np.tile(np.eye(4), (3, 1, 1)), inds=np.arange(3)), 3),
                      FORGED.map(lambda s: _npz_with_member("inds", _forge_shape(_npy_bytes(np.arange(3)), s)))))
def test_fuzz_npz(tmp_path, data):
    p = _write(tmp_path / "pose.npz", data)
    classify(lambda: arrays.load_npz(p), p, lambda d: assert_true(all(a.dtype != object for a in d.values())))


def _npz_with_member(name: str, npy: bytes, method: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        zf.writestr("data.npy", _npy_bytes(np.tile(np.eye(4), (3, 1, 1))))
        zf.writestr(f"{name}.npy", npy)
    return buf.getvalue()


EXR_SEEDS = [exr.encode_exr(np.linspace(0.5, 3.0, 48, dtype=np.float32).reshape(6, 8), compression=c, half=h)
             for c in ("none", "zips", "zip") for h in (True, False)]


def _rle_seed() -> bytes:
    # RLE is read, never written by encode_exr: patch a NONE file's compression byte (raw chunks then
    # have exactly the expected size, which the decoder accepts as stored)
    b = bytearray(EXR_SEEDS[0])
    key = b"compression\0compression\0"
    b[b.index(key) + len(key) + 4] = 1
    return bytes(b)


@settings(FUZZ, max_examples=400)
@given(data=st.sampled_from([*EXR_SEEDS, _rle_seed()]).flatmap(lambda s: mutated_bytes(s, 4)))
def test_fuzz_exr(data):
    try:
        z = exr.decode_exr(data)
    except CaseFailure as e:
        assert "\n" not in str(e)
        return
    assert z.dtype == np.float32 and z.ndim == 2 and z.size <= exr.MAX_EXR_PIXELS


# -- ViPE sidecars -----------------------------------------------------------------------------------------

def _converted(d: Path) -> Path:
    n = 3
    K = np.array([[10.0, 0, 4], [0, 10, 3], [0, 0, 1]])
    sc = write_converted_sidecar(d, np.tile(np.eye(4), (n, 1, 1)), K, np.ones((n, 6, 8), np.float32))
    (sc / "instances.json").write_text(json.dumps({"instances": {"1": "a fox"}, "target": 1}))
    np.savez_compressed(sc / "instance_masks.npz", ids=np.ones((n, 6, 8), np.uint8))
    return sc


CONVERTED_FILES = ["poses_c2w.npy", "poses_w2c.npy", "intrinsics.npy", "depth_metric.npy", "frame_indices.npy",
                   "timestamps.npy", "depth_valid_mask.npz", "instance_masks.npz", "instances.json"]
SHAPES = {"poses_c2w.npy": (3, 4, 4), "poses_w2c.npy": (3, 4, 4), "intrinsics.npy": (3, 3, 3),
          "depth_metric.npy": (3, 6, 8), "frame_indices.npy": (3,), "timestamps.npy": (3,)}


@st.composite
def converted_edit(draw: Any) -> tuple[str, bytes]:
    name = draw(st.sampled_from(CONVERTED_FILES))
    if name == "instances.json":
        return name, draw(json_text({"instances": {"1": "a fox"}, "target": 1}))
    if name.endswith(".npz"):
        key = "mask" if name.startswith("depth") else "ids"
        how = draw(st.sampled_from(["array", "bytes", "forged"]))
        if how == "array":
            return name, _npz_bytes(**{key: draw(arrays_of((3, 6, 8)))})
        if how == "forged":
            return name, _npz_with_member(key, _forge_shape(_npy_bytes(np.ones((3, 6, 8), bool)), draw(FORGED)))
        return name, draw(mutated_bytes(_npz_bytes(**{key: np.ones((3, 6, 8), bool)}), 3))
    how = draw(st.sampled_from(["array", "bytes", "forged"]))
    if how == "array":
        return name, _npy_bytes(draw(arrays_of(SHAPES[name])))
    seed = _npy_bytes(np.ones(SHAPES[name], np.float32))
    if how == "forged":
        return name, _forge_shape(seed, draw(FORGED))
    return name, draw(mutated_bytes(seed, 3))


@settings(FUZZ, max_examples=400)
@given(edit=converted_edit(), need_depth=st.booleans())
def test_fuzz_converted_sidecar(tmp_path_factory, edit, need_depth):
    d = _converted(tmp_path_factory.mktemp("conv") / "v_vipe_ann")
    name, data = edit
    (d / name).write_bytes(data)

    def valid(sc: Any) -> None:
        assert len(sc) > 0 and np.isfinite(sc.poses_c2w).all() and sc.poses_c2w.dtype == np.float64
        assert sc.intrinsics.dtype == np.float64 and np.isfinite(sc.intrinsics).all()
        if sc.timestamps is not None:
            assert sc.timestamps.dtype == np.float64
    classify(lambda: read_sidecar(d, need_depth=need_depth), d, valid)
    shutil.rmtree(d)


def _native(d: Path) -> Path:
    n = 3
    return write_native_vipe(d, "v", np.tile(np.eye(4), (n, 1, 1)), np.tile([10.0, 10.0, 4.0, 3.0], (n, 1)),
                             np.ones((n, 6, 8), np.float32))


@st.composite
def native_edit(draw: Any) -> tuple[str, bytes]:
    part = draw(st.sampled_from(["pose", "intrinsics", "depth", "depth", "camera"]))
    if part == "camera":
        return "intrinsics/v_camera.txt", draw(mutated_bytes(b"0: PINHOLE\n1: PINHOLE\n2: PINHOLE\n", 3))
    if part == "depth":
        members = {f"{i:05d}.exr": exr.encode_exr(np.ones((6, 8), np.float32)) for i in range(3)}
        victim = draw(st.sampled_from(sorted(members)))
        members[victim] = draw(mutated_bytes(members[victim], 3))
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for k, v in members.items():
                zf.writestr(k, v)
        raw = buf.getvalue()
        if draw(st.integers(0, 4)) == 0:  # an unsupported method or the encrypted flag in the central directory
            b = bytearray(raw)
            cd = b.index(b"PK\x01\x02")
            if draw(st.booleans()):
                struct.pack_into("<H", b, cd + 10, draw(st.sampled_from([9, 12, 14, 99])))
            else:
                struct.pack_into("<H", b, cd + 8, 1)
            raw = bytes(b)
        return "depth/v.zip", raw
    shape = (3, 4, 4) if part == "pose" else (3, 4)
    how = draw(st.sampled_from(["data", "inds", "forged", "bytes"]))
    data, inds = np.ones(shape) if part == "intrinsics" else np.tile(np.eye(4), (3, 1, 1)), np.arange(3)
    if how == "data":
        data = draw(arrays_of(shape))
    elif how == "inds":
        inds = draw(arrays_of((3,)) | st.just(np.array([0, 0, 1])))
    elif how == "forged":
        return f"{part}/v.npz", _npz_with_member("inds", _forge_shape(_npy_bytes(np.arange(3)), draw(FORGED)))
    raw = _npz_bytes(data=data, inds=inds)
    return f"{part}/v.npz", draw(mutated_bytes(raw, 3)) if how == "bytes" else raw


@settings(FUZZ, max_examples=400)
@given(edit=native_edit())
def test_fuzz_native_sidecar(tmp_path_factory, edit):
    d = _native(tmp_path_factory.mktemp("nat") / "vipe")
    name, data = edit
    (d / name).write_bytes(data)
    where = d / name

    def valid(sc: Any) -> None:
        assert len(sc) > 0 and np.isfinite(sc.poses_c2w).all() and sc.poses_c2w.dtype == np.float64
        for i in range(len(sc)):  # every depth row decodes (NaN when corrupt, with a note) or fails the case
            try:
                row = np.asarray(sc.depth[i])
            except CaseFailure as e:  # an unsupported or oversized frame, met when the row is read
                assert "\n" not in str(e) and "v.zip" in str(e)
                continue
            assert row.dtype == np.float32 and row.shape == sc.depth.shape[1:]
            if np.isnan(row).all():
                assert sc.notes, "a frame read as NaN without a note"
    try:
        classify(lambda: read_sidecar(d), where if where.is_file() else d, valid)
    except AssertionError as e:
        if "does not name" in str(e):  # a problem found in another file of the folder is named by it
            assert str(d) in str(e)
        else:
            raise
    shutil.rmtree(d)


# -- video frames -----------------------------------------------------------------------------------------

def _png(h: int = 6, w: int = 8) -> bytes:
    import cv2

    _ok, buf = cv2.imencode(".png", np.full((h, w, 3), 90, np.uint8))
    return buf.tobytes()


HDR = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 6 +X 8\n" + b"\x80\x80\x80\x81" * 48
PFM = b"PF\n8 6\n-1.0\n" + np.ones((6, 8, 3), "<f4").tobytes()


@settings(FUZZ, max_examples=150)
@given(data=st.sampled_from([_png(), HDR, PFM]).flatmap(lambda s: mutated_bytes(s, 3)),
       cap=st.sampled_from([0, 40, 40_000_000]))
def test_fuzz_frame_folder(tmp_path_factory, data, cap):
    d = tmp_path_factory.mktemp("frames")
    (d / "00000.png").write_bytes(_png())
    f = _write(d / "00001.png", data)

    def valid(frames: np.ndarray) -> None:
        assert frames.dtype == np.uint8 and frames.ndim == 4 and frames.shape[-1] == 3
        if cap:
            assert frames.shape[1] * frames.shape[2] <= cap
    try:
        out = Video(d, max_pixels=cap).frames()
    except VideoError as e:
        assert "\n" not in str(e) and (f.name in str(e) or str(d) in str(e))
        return
    valid(out)


# -- loaders over a whole release: never raise, one line per failed case ---------------------------------

@pytest.fixture(scope="module")
def memobench_release(tmp_path_factory):
    from tests.test_trust_inputs import _release

    return _release(tmp_path_factory.mktemp("mb"), n_gen=5)


@settings(FUZZ, max_examples=80)
@given(which=st.sampled_from(["sheet", "metadata"]), data=st.data())
def test_fuzz_memobench_loader_one_clip_of_three(memobench_release, which, data):
    """Only Barnyard_003's sheet or metadata row is fuzzed: the other two clips always load."""
    from hypothesis import assume

    from worldrecall.core.components import LoadRequest
    from worldrecall.plugins.memobench.loader import MemoBenchLoader

    data_dir = memobench_release / "data"
    if which == "sheet":
        target = data_dir / "Synthetic_processed" / "Synthetic_ExitReenter.csv"
        row = b"Barnyard_003,1,2,4,no,p"
    else:
        target = data_dir / "sam3_metadata" / "synthetic_metadata.csv"
        row = b"Barnyard,3,fox,data/Synthetic_processed/Barnyard/Barnyard_003/RGB3/00000.jpg,a prompt"
    bad = data.draw(mutated_bytes(row, 5))
    cells = bad.split(b",")
    # the fuzzed row must stay one row that names no other clip (else it rightly changes that clip)
    assume(not any(c in bad for c in b'\n\r"'))
    try:  # text that is not UTF-8 makes the whole file unreadable: a file-level error by design
        bad.decode("utf-8")
    except UnicodeDecodeError:
        assume(False)
    if which == "sheet":
        assume(cells[0].strip() not in (b"Barnyard_001", b"Barnyard_002"))
    else:
        assume(len(cells) > 1 and cells[1].strip() == b"3" and cells[0] == b"Barnyard")
    original = target.read_bytes()
    lines = original.rstrip(b"\n").split(b"\n")
    lines = [ln for ln in lines if b"Barnyard_003" not in ln and not ln.startswith(b"Barnyard,3,")]
    try:
        target.write_bytes(b"\n".join([*lines, bad]) + b"\n")
        req = LoadRequest(data_root=data_dir, generations={"m1": memobench_release / "output" / "m1"},
                          options={"splits": ["synthetic"]})
        items = list(MemoBenchLoader().load(req))   # never raises
    finally:
        target.write_bytes(original)
    cases = {it.case_id: it for it in items}
    assert not isinstance(cases["Barnyard_001"], CaseError), cases["Barnyard_001"]
    assert not isinstance(cases["Barnyard_002"], CaseError), cases["Barnyard_002"]
    for it in items:
        if isinstance(it, CaseError):
            assert it.reason and "\n" not in it.reason


@settings(FUZZ, max_examples=100)
@given(data=json_text({"actions": ["push_in"] * 4 + ["pull_out"] * 4, "frames_per_action": 4, "fps": 16}))
def test_fuzz_scene_memory_actions(tmp_path, data):
    from worldrecall.plugins.scene_memory.actions import read_program

    p = _write(tmp_path / "loop_actions.json", data)
    classify(lambda: read_program(p), p, lambda prog: assert_true(isinstance(prog["actions"], list)))


def _mp4() -> bytes:
    import tempfile

    from worldrecall.formats.mp4 import write_video

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "g.mp4"
        write_video(p, np.stack([np.full((16, 16, 3), 10 * i, np.uint8) for i in range(4)]), 8.0)
        return p.read_bytes()


@settings(FUZZ, max_examples=60)
@given(data=mutated_bytes(_mp4(), 4), cap=st.sampled_from([0, 100, 40_000_000]))
def test_fuzz_video_file(tmp_path, data, cap):
    p = _write(tmp_path / "clip.mp4", data)
    try:
        frames = Video(p, max_pixels=cap).frames()
    except VideoError as e:
        assert "\n" not in str(e) and "clip.mp4" in str(e)
        return
    assert frames.dtype == np.uint8 and frames.ndim == 4 and len(frames) > 0
    if cap:
        assert frames.shape[1] * frames.shape[2] <= cap


EVAL_CSV = (b"id,data_type,scene,error,VisualQuality,MotionSmoothness,Geo3DConsistency,ImageRewardScore\n"
            b"Barnyard_001,synthetic,Barnyard,,81.5,97.2,88.0,0.4\n1,real,real,,70.0,95.0,90.5,\n")
ORS_CSV = b"clip_id,data_type,scene,ors,detection_rate,mean_confidence\nBarnyard_001,synthetic,Barnyard,0.5,0.9,0.8\n"


@settings(FUZZ, max_examples=120)
@given(which=st.sampled_from(["eval", "ors"]), data=st.data())
def test_fuzz_official_result_folders(tmp_path, which, data):
    from worldrecall.plugins.memobench.official_results import official_rows

    shutil.rmtree(tmp_path / which, ignore_errors=True)
    name = "eval_2025.csv" if which == "eval" else "ors_scores.csv"
    seed = EVAL_CSV if which == "eval" else ORS_CSV
    p = _write(tmp_path / which / "ModelA" / name, data.draw(mutated_bytes(seed, 5)))

    def valid(rows: list) -> None:
        for r in rows:
            assert isinstance(r.case_id, str) and "\n" not in r.reason
            assert all(v is None or math.isfinite(v) for v in r.values.values())
    classify(lambda: official_rows(**{f"{which}_dir": tmp_path / which}), p, valid)


# -- issue 37: frame folders that cannot be listed, huge declared EXR decodes, never-read scanlines, sparse
# sheets, .xls sized before reading ----------------------------------------------------------------------

FRAME_ENTRIES = st.sampled_from(["png", "png", "loop", "long_target", "dangling", "text", "dir"])


@settings(FUZZ, max_examples=120)
@given(entries=st.lists(FRAME_ENTRIES, min_size=1, max_size=5),
       unlistable=st.sampled_from([None, None, errno.EACCES, errno.EIO, errno.ENOENT]),
       read=st.sampled_from(["frames", "hash", "frames_at"]))
def test_fuzz_frame_folder_listing(tmp_path_factory, entries, unlistable, read):
    import os
    from unittest import mock

    import worldrecall.core.video as video_mod

    d = tmp_path_factory.mktemp("listing")
    for i, kind in enumerate(entries):
        p = d / f"{i:05d}.png"
        if kind == "png":
            p.write_bytes(_png())
        elif kind == "loop":
            p.symlink_to(p)
        elif kind == "long_target":
            p.symlink_to(d / ("x" * 300))
        elif kind == "dangling":
            p.symlink_to(d / "gone.png")
        elif kind == "text":
            (d / f"{i:05d}.txt").write_text("not a frame")
        else:
            p.mkdir()
    real = os.scandir

    def scandir(path: Any) -> Any:
        if unlistable is not None:
            raise OSError(unlistable, os.strerror(unlistable), str(path))
        return real(path)
    with mock.patch.object(video_mod.os, "scandir", scandir):
        v = Video(d)
        try:
            out = {"frames": v.frames, "hash": v.content_hash, "frames_at": lambda: v.frames_at([0])}[read]()
        except VideoError as e:
            assert "\n" not in str(e) and str(e).startswith(str(d)), str(e)
            return
    assert unlistable is None
    if read == "frames":
        assert out.dtype == np.uint8 and out.ndim == 4


def _zeros_deflated(n: int) -> bytes:
    """zlib data that inflates to ``n`` zero bytes, built in 1 MiB steps (nothing of ``n`` bytes is allocated)."""
    import zlib

    z, step, out = zlib.compressobj(1), bytes(1 << 20), []
    for _ in range(n >> 20):
        out.append(z.compress(step))
    out.append(z.compress(bytes(n & ((1 << 20) - 1))))
    return b"".join(out) + z.flush()


@functools.cache
def _zip_bomb() -> bytes:
    """1 GiB of zeros in ~1 MB: inflated whole and widened to int64, past the module's address-space cap."""
    return _zeros_deflated(1 << 30)


@st.composite
def exr_declaring(draw: Any) -> tuple[bytes, int]:
    """A ZIP EXR whose header declares width x height x channels (within the pixel cap) and whose chunks
    inflate to about that (one byte short, exactly, one byte more, double) or to the 3 GiB bomb."""
    from tests.test_hostile_inputs import exr_bytes

    cap = draw(st.sampled_from([1_000_000, 4_000_000, 40_000_000]))
    width, height = draw(st.integers(1, 4096)), draw(st.integers(1, 32))
    channels = draw(st.sampled_from([1, 2, 3, 17, 300, 2048]))
    expected = min(16, height) * width * channels * 4
    kind = draw(st.sampled_from(["short", "exact", "long", "double", "bomb"]))
    if kind == "bomb":
        chunk = _zip_bomb()
    else:
        n = {"short": expected - 1, "exact": expected, "long": expected + 1, "double": 2 * expected}[kind]
        chunk = _zeros_deflated(min(n, 64 << 20))
    return exr_bytes(width, height, channels, chunk), cap


@settings(FUZZ, max_examples=40)
@given(case=exr_declaring())
def test_fuzz_exr_declared_decode_sizes(case):
    data, cap = case
    try:
        z = exr.decode_exr(data, max_pixels=cap)
    except CaseFailure as e:
        assert "\n" not in str(e)
        return
    assert z.dtype == np.float32 and z.ndim == 2 and z.size <= cap


@st.composite
def exr_offset_table(draw: Any) -> tuple[bytes, np.ndarray]:
    """A valid EXR (NONE or ZIP) with its offset table and chunk scanline numbers shuffled, repeated or dropped."""
    h, w = draw(st.integers(1, 40)), draw(st.integers(1, 5))
    z = np.arange(h * w, dtype=np.float32).reshape(h, w)
    good = bytearray(exr.encode_exr(z, compression=draw(st.sampled_from(["none", "zip"])), half=False))
    attrs, pos = exr._exr_header(bytes(good))
    lines = exr._EXR_LINES[attrs["compression"][1][0]]
    n = (h + lines - 1) // lines
    offs = list(struct.unpack_from(f"<{n}Q", good, pos))
    table = [draw(st.sampled_from(offs)) if draw(st.integers(0, 3)) == 0 else o for o in offs]
    if draw(st.booleans()):
        table = draw(st.permutations(table))
    struct.pack_into(f"<{n}Q", good, pos, *table)
    for o in set(offs):
        if draw(st.integers(0, 4)) == 0:   # a chunk claims another chunk's first scanline
            struct.pack_into("<i", good, o, draw(st.sampled_from([struct.unpack_from("<i", good, x)[0] for x in offs])))
    return bytes(good), z


@settings(FUZZ, max_examples=200)
@given(case=exr_offset_table())
def test_fuzz_exr_scanlines_never_read(case):
    data, z = case
    try:
        out = exr.decode_exr(data)
    except CaseFailure as e:
        assert "\n" not in str(e)
        return
    # accepted: every row is one of the file's rows (the chunks may have swapped places), never unwritten memory
    rows = {r.tobytes() for r in z}
    assert all(r.tobytes() in rows for r in out)


@settings(FUZZ, max_examples=40)
@given(stray=st.lists(st.tuples(st.integers(1, 1_048_576), st.integers(7, 16_384),
                                st.sampled_from([1, "x", 2.5, True])), min_size=1, max_size=4),
       far_rows=st.lists(st.tuples(st.integers(6, 1_048_576), st.integers(1, 6), st.sampled_from(["x", 3])),
                         max_size=2))
def test_fuzz_sparse_xlsx_one_cell_costs_no_other_clip(tmp_path_factory, stray, far_rows):
    """Stray cells right of the header anywhere, and values in header columns far below the clips: the three
    clips always load (a far row names at most a clip of its own, which fails alone)."""
    from tests.test_hostile_inputs import _xlsx_release
    from tests.test_trust_inputs import CLIPS, _load

    cells = {f"{_col(c)}{r}": v for r, c, v in stray}
    cells.update({f"{_col(c)}{r}": v for r, c, v in far_rows})
    cases, errors = _load(_xlsx_release(tmp_path_factory.mktemp("xlsx"), cells))
    assert set(CLIPS) <= set(cases), errors
    assert all("\n" not in r for r in errors.values())


def _col(c: int) -> str:
    from worldrecall.plugins.memobench.sheets import _column_letters

    return _column_letters(c)


@settings(FUZZ, max_examples=150)
@given(cells=st.dictionaries(st.tuples(st.integers(0, 65535), st.integers(0, 255)), st.just(1.0), min_size=1,
                             max_size=4),
       pad=st.sampled_from([0, 6000]), mutate=st.booleans(), data=st.data())
def test_fuzz_xls_sized_before_it_is_read(tmp_path, cells, pad, mutate, data):
    from tests.test_hostile_inputs import xls_bytes

    raw = xls_bytes(cells, pad)
    if mutate:
        raw = data.draw(mutated_bytes(raw, 3))
    p = _write(tmp_path / "Real_Selected.xls", raw)
    rows = max(r for r, _ in cells) + 1
    cols = max(c for _, c in cells) + 1
    try:
        sheets.check_xls_size(p)
    except sheets.SheetError as e:
        assert "\n" not in str(e) and str(p) in str(e)
        assert mutate or rows * cols > sheets.SHEET_MAX_CELLS
        return
    assert mutate or rows * cols <= sheets.SHEET_MAX_CELLS
