"""Byte sizes as people write them on a command line: ``512M``, ``2G``, ``1.5GiB``, ``4294967296``.

Units are binary, as Slurm's ``--mem`` and Docker's ``--memory`` read them: K = 2^10, M = 2^20, G = 2^30,
T = 2^40 bytes, whether written ``G``, ``GB``, ``Gi`` or ``GiB``, in any case (``512m`` = ``512MiB``). A
budget of memory is counted in binary units; accepting ``GB`` as 10^9 beside ``GiB`` would make ``2GB`` and
``2G`` differ by 7 %, which no one means on a command line. A plain integer (or ``B``) is bytes.
"""

from __future__ import annotations

import difflib
import math
import re

__all__ = ["UNITS", "parse_size"]

UNITS = {"": 0, "B": 0, "K": 10, "M": 20, "G": 30, "T": 40}  # power of two of each unit
_SPELLINGS = ["B", *(f"{u}{tail}" for u in "KMGT" for tail in ("", "B", "i", "iB"))]  # K, KB, Ki, KiB, ...
_BY_UPPER = {s.upper(): s for s in _SPELLINGS}
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[A-Za-z]*)")


def parse_size(value: object, where: str) -> int:
    """``value`` (an int, or text such as ``512M``, ``1.5GiB``) as a whole number of bytes, rounded down.

    Anything else raises ``ValueError`` with one line naming ``where`` (the config key), what is accepted
    and, for a unit close to an accepted one, a did-you-mean with the value spelled right."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{where}: expected a byte size such as 512M, 2G or 1.5GiB, got {value!r}")  # noqa: TRY004 - one error for every bad size
    if isinstance(value, int):
        return value
    m = _SIZE.fullmatch(value.strip())
    unit = m["unit"].upper() if m else ""
    if m is None or (unit and unit not in _BY_UPPER):
        close = difflib.get_close_matches(unit, list(_BY_UPPER), n=1, cutoff=0.6) if m else []
        what = f"unknown size unit {m['unit']!r} in {value!r}" if m else f"{value!r} is not a byte size"
        hint = f"; did you mean '{m['number']}{_BY_UPPER[close[0]]}'?" if close else ""
        raise ValueError(f"{where}: {what}; known units: K, M, G, T (binary, an optional i and B, any case: 512M, "
                         f"2G, 1.5GiB) or none (bytes){hint}")
    number = float(m["number"]) * (1 << UNITS[unit[:1]])
    if not math.isfinite(number) or number >= 2**63:
        raise ValueError(f"{where}: {value!r} is past the largest size (2^63 bytes)")
    return int(number)
