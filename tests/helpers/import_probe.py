"""Imported by a toy metric's measure stage: records which process imported it (a line per import)."""

import os

_LOG = os.environ.get("WR_IMPORT_PROBE_LOG")
if _LOG:
    with open(_LOG, "a") as f:
        f.write(f"{os.getpid()}\n")
