"""The CPU-kernel pin (numerics/isa.py) and a suite that renders the same whatever kernels the libraries pick."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worldrecall.numerics import isa

ROOT = Path(__file__).resolve().parents[1]
AVX2_HOST = {"sse4_2", "avx", "avx2", "fma"}
AVX512_HOST = AVX2_HOST | {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in isa._ALWAYS and k not in (
        "NPY_DISABLE_CPU_FEATURES", "OPENCV_CPU_DISABLE", isa.ENV)}
    clean["PYTHONPATH"] = str(ROOT)
    res = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip()


def test_an_avx2_host_caps_the_blas_mkl_onednn_and_aten_kernels_at_avx2():
    want, level = isa.wanted(AVX2_HOST, "x86_64", "Linux")
    assert level == "AVX2+FMA"
    assert want["OPENBLAS_CORETYPE"] == "Haswell" and want["MKL_CBWR"] == "AVX2"
    assert want["ONEDNN_MAX_CPU_ISA"] == "AVX2" and want["ATEN_CPU_CAPABILITY"] == "avx2"
    # nothing to turn off on an AVX2 CPU (and OpenCV warns at import about a feature the CPU lacks)
    assert "NPY_DISABLE_CPU_FEATURES" not in want and "OPENCV_CPU_DISABLE" not in want


def test_an_avx512_host_also_turns_off_numpys_and_opencvs_avx512_paths():
    want, _ = isa.wanted(AVX512_HOST, "x86_64", "Linux")
    assert "X86_V4" in want["NPY_DISABLE_CPU_FEATURES"].split()
    assert want["OPENCV_CPU_DISABLE"] == "AVX512-SKX"
    # AVX-512F without the SKX set (OpenCV's only AVX-512 target): numpy only
    want, _ = isa.wanted(AVX2_HOST | {"avx512f"}, "x86_64", "Linux")
    assert "NPY_DISABLE_CPU_FEATURES" in want and "OPENCV_CPU_DISABLE" not in want


@pytest.mark.parametrize(("flags", "machine", "system", "why"), [
    ({"sse4_2", "avx"}, "x86_64", "Linux", "no AVX2+FMA"),
    (AVX2_HOST, "aarch64", "Linux", "x86-64 Linux"),
    (AVX2_HOST, "x86_64", "Darwin", "x86-64 Linux"),
])
def test_where_avx2_kernels_cannot_run_nothing_is_pinned(flags, machine, system, why):
    want, reason = isa.wanted(flags, machine, system)
    assert want == {} and why in reason


@pytest.mark.skipif(not {"avx2", "fma"} <= isa.cpu_flags(), reason="the pin applies on AVX2+FMA CPUs")
def test_importing_worldrecall_pins_numpys_blas_and_says_so_and_a_users_setting_wins():
    code = ("import worldrecall, json, numpy\nfrom threadpoolctl import threadpool_info\nfrom worldrecall.numerics import isa\n"
            "arch = [i.get('architecture') for i in threadpool_info() if i['internal_api'] == 'openblas']\n"
            "print(json.dumps({'state': isa.state(), 'arch': arch}))")
    out = json.loads(_python(code))
    assert out["state"]["level"] == "AVX2+FMA" and out["state"]["set"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert out["arch"] and set(out["arch"]) == {"Haswell"}, out
    out = json.loads(_python(code, OPENBLAS_CORETYPE="Sandybridge"))
    assert out["state"]["kept"] == {"OPENBLAS_CORETYPE": "Sandybridge"} and set(out["arch"]) == {"Sandybridge"}
    out = json.loads(_python(code, WORLDRECALL_ISA="native"))
    assert out["state"]["level"] == "native" and out["state"]["set"] == {}
    # numpy loaded first has already chosen its kernels: reported, not claimed
    late = json.loads(_python("import numpy, worldrecall, json\nfrom worldrecall.numerics import isa\n"
                              "print(json.dumps(isa.state()))"))
    assert late["late"] == ["numpy"]


@pytest.mark.skipif(not {"avx2", "fma"} <= isa.cpu_flags(), reason="needs a CPU with the AVX2 paths to disable")
def test_the_suite_renders_byte_identically_whatever_kernels_blas_numpy_and_opencv_pick(tmp_path):
    pytest.importorskip("open3d")
    code = ("import sys, json\nfrom worldrecall.plugins.synthetic.build import ensure_suite\n"
            "r = ensure_suite(sys.argv[1], n_cases=1, width=96, height=72, gt_frames=24, gen_frames=16, workers=1)\n"
            "print(json.loads((r / 'manifest.json').read_text())['content_digest'])")
    code = code.replace("sys.argv[1]", "{!r}")
    native = _python(code.format(str(tmp_path / "a")))
    # SSE3 BLAS kernels (another blocking, no FMA), numpy's and OpenCV's pre-AVX2 paths: every byte the same
    other = _python(code.format(str(tmp_path / "b")), OPENBLAS_CORETYPE="Prescott",
                    NPY_DISABLE_CPU_FEATURES="X86_V3", OPENCV_CPU_DISABLE="AVX2,FMA3,FP16,AVX")
    assert native == other


def test_the_runs_table_line_says_what_the_pin_did_not_cover():
    st = {"level": "AVX2+FMA", "set": {"MKL_CBWR": "AVX2"}, "kept": {"OPENBLAS_CORETYPE": "Sandybridge"},
          "late": ["numpy"]}
    assert isa.summary(st) == "AVX2+FMA; user-set OPENBLAS_CORETYPE=Sandybridge; loaded before worldrecall: numpy"
    assert isa.summary({"level": "native", "kept": {}, "late": []}) == "native"
