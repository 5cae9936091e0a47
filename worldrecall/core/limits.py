"""Process-wide caps on what an untrusted input file may declare, set from the job's config (``inputs.*``).

Readers deep in plugins (``formats.arrays``) take no config; the job sets the cap once, before any work,
and forked workers inherit it.
"""

DEFAULT_MAX_ARRAY_BYTES = 4 << 30  # a 60 s, 30 fps full-HD float32 depth is ~1 GB; masks are smaller
_MAX_ARRAY_BYTES = [DEFAULT_MAX_ARRAY_BYTES]


def set_max_array_bytes(n: int) -> None:
    """Cap every array read from an input file at ``n`` bytes in memory from now on (0 or less: no cap)."""
    _MAX_ARRAY_BYTES[0] = int(n)


def max_array_bytes() -> int:
    """The cap :func:`set_max_array_bytes` set (``inputs.max_array_bytes``; 4 GiB by default)."""
    return _MAX_ARRAY_BYTES[0]
