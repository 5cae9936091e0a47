"""Where the vendored MemoBench release files live (MIT, unchanged: tests/data/memobench-official)."""

from __future__ import annotations

import os
from pathlib import Path

OFFICIAL_ROOT = Path(os.environ.get("WORLDRECALL_MEMOBENCH_OFFICIAL",
                                    Path(__file__).resolve().parents[1] / "data" / "memobench-official"))
SAM3_METADATA = OFFICIAL_ROOT / "data" / "sam3_metadata"
VQA_QUESTIONS = OFFICIAL_ROOT / "data" / "vqa_questions"
