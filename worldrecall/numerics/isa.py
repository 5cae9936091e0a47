"""One instruction set for every numeric library, so that a result does not depend on the CPU model.

OpenBLAS, MKL, oneDNN, ATen, numpy and OpenCV each pick their kernels when they load, by what the CPU offers:
on an AVX-512 machine they run 16-wide kernels with other blocking and other fused multiply-adds than on an
AVX2 one, and sums come out different in the last bit. A metric near a rounding edge then prints 77.93 on
one machine and 77.94 on another of the same kind. :func:`pin` caps them all at AVX2 + FMA (the level every
machine we run on has) through the switches each library documents for this, before any of them is
imported: ``worldrecall/__init__.py`` calls it first thing.

It only ever *sets defaults*: a variable the user exported wins, and ``WORLDRECALL_ISA=native`` turns the
pin off (faster on an AVX-512 machine, no longer reproducible across machines). On a CPU without AVX2 or
FMA, or off x86-64 Linux, nothing is pinned (those kernels could not run there). :func:`state` says what
was done; it goes into every result's provenance.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

ENV = "WORLDRECALL_ISA"

# library switch -> value; each read once, when that library loads
_ALWAYS = {
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's OpenBLAS: the AVX2 kernels and their blocking
    "MKL_CBWR": "AVX2",  # torch's MKL: conditional numerical reproducibility, AVX2 branch
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # torch's oneDNN (convolutions, linear layers)
    "DNNL_MAX_CPU_ISA": "AVX2",  # its older spelling
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's own vectorised kernels
}
# only where the CPU has AVX-512: nothing to turn off elsewhere, and OpenCV prints a warning at every import
# when told to disable a feature the CPU lacks
_NUMPY_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR"  # numpy >= 2.4's names for its AVX-512 dispatch targets
_NUMPY_AVX512_LEGACY = (  # numpy 2.0-2.3
    "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
)
_OPENCV_AVX512 = "AVX512-SKX"  # OpenCV's only AVX-512 dispatch target in the wheels we install

_STATE: dict[str, object] = {}


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux lists them (empty where /proc/cpuinfo is not there)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _numpy_names() -> str:
    try:
        major, minor = (int(x) for x in metadata.version("numpy").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return _NUMPY_AVX512
    return _NUMPY_AVX512 if (major, minor) >= (2, 4) else _NUMPY_AVX512_LEGACY


def wanted(flags: set[str], machine: str, system: str) -> tuple[dict[str, str], str]:
    """The variables to default on a CPU with ``flags``, and why (or why nothing)."""
    if machine != "x86_64" or system != "Linux":
        return {}, f"not pinned: {system}/{machine} (the pin is for x86-64 Linux)"
    if not {"avx2", "fma"} <= flags:
        return {}, "not pinned: this CPU has no AVX2+FMA"
    want = dict(_ALWAYS)
    if "avx512f" in flags:
        want["NPY_DISABLE_CPU_FEATURES"] = _numpy_names()
        if {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"} <= flags:
            want["OPENCV_CPU_DISABLE"] = _OPENCV_AVX512
    return want, "AVX2+FMA"


def pin() -> dict[str, object]:
    """Default the libraries' ISA switches (once per process; a no-op after the first call)."""
    if _STATE:
        return _STATE
    if os.environ.get(ENV, "").strip().lower() == "native":
        _STATE.update(level="native", reason=f"{ENV}=native", set={}, kept={}, late=[])
        return _STATE
    want, level = wanted(cpu_flags(), platform.machine(), platform.system())
    set_, kept = {}, {}
    for k, v in want.items():
        if k in os.environ:
            kept[k] = os.environ[k]  # the user's own setting wins
        else:
            os.environ[k] = v
            set_[k] = v
    # a library loaded before us has already chosen its kernels: say so rather than claim a pin
    late = sorted(m for m in ("numpy", "torch", "cv2", "scipy") if m in sys.modules)
    _STATE.update(level=level if want else "none", reason=level, set=set_, kept=kept, late=late)
    return _STATE


def state() -> dict[str, object]:
    """What :func:`pin` did in this process (for provenance)."""
    return dict(pin())


def summary(st: dict[str, object]) -> str:
    """One line for a runs table: the level, and what it does not cover (a user's own setting, a library
    that loaded first), so that a pinned-looking run that was not fully pinned does not read as one."""
    parts = [str(st.get("level", "?"))]
    if st.get("kept"):
        parts.append("user-set " + " ".join(f"{k}={v}" for k, v in sorted(dict(st["kept"]).items())))
    if st.get("late"):
        parts.append("loaded before worldrecall: " + ", ".join(st["late"]))
    return "; ".join(parts)
