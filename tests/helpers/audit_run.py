"""Run ``worldrecall run`` in this process under a Python audit hook (event ``open``) and write, as JSON, every
file a component opened while it aligned, measured or aggregated that its cache key does not cover.

Usage: ``python audit_run.py REPORT.json OUTPUT_ROOT <run overrides…>`` (serial: ``workers=1``). What a key
covers: the case's files (its videos, reference and sidecars: the case fingerprint), the files and folders the
component's path params name, the files its backends' and judges' path options name; besides, the output root
(the store, artifacts), the interpreter's installation (site-packages, the standard library), worldrecall's
own code and bundled data (in every code digest), the weight caches and the kernel's pseudo-files; and a file whose content
digest the key holds (a metric's ``cache_params``: MemoBench's GT poses).
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path

# (component, the paths its key covers, the digests its key holds) of the call running now
CTX: list[tuple[str, tuple[str, ...], str]] = []
FOUND: dict[str, dict[str, str]] = {}  # component -> path opened -> the digests its key held then


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def main(argv: list[str]) -> int:
    report, out_root, args = Path(argv[0]), os.path.abspath(argv[1]), argv[2:]
    import worldrecall
    from worldrecall.core.models import default_cache_dirs
    from worldrecall.engine.cache.identity import received_identity
    from worldrecall.engine.cache.keys import named_files
    from worldrecall.engine.stages import aggregate as ag
    from worldrecall.engine.stages import pipeline as pl

    package = str(Path(worldrecall.__file__).parent)
    always = tuple({out_root, sys.prefix, sys.base_prefix, *sysconfig.get_paths().values(), "/proc", "/sys", "/dev",
                    *(str(p) for p in default_cache_dirs().values())})

    def hook(event: str, a: tuple) -> None:
        if event != "open" or not CTX or not isinstance(a[0], (str, bytes, os.PathLike)):
            return
        path = os.path.abspath(os.fsdecode(a[0]))
        label, covered, digests = CTX[-1]
        if _under(path, always) or _under(path, covered):
            return
        if _under(path, (package,)) and (path.endswith((".py", ".pyc")) or f"{os.sep}data{os.sep}" in path):
            return  # worldrecall's code and its packages' data/ folders: in every code digest
        if path.endswith(".__path_hook__") or path == os.path.abspath(__file__):  # the import system's own
            return
        if any(part.endswith((".dist-info", ".egg-info")) for part in Path(path).parts):
            return  # a distribution's metadata (versions, entry points): the key's library versions; an editable
            # install keeps worldrecall's beside the checkout, outside site-packages
        FOUND.setdefault(label, {}).setdefault(path, digests)

    def files(entries: list[list[str]]) -> list[str]:
        return [os.path.abspath(p) for p, _ in entries]

    def case_paths(case) -> list[str]:
        out = [str(v.path) for v in (case.video, case.reference) if v is not None]
        return [os.path.abspath(p) for p in [*out, *map(str, case.sidecars.values())]]

    measure, align, cached = pl.CasePipeline.measure_and_score, pl.CasePipeline.align, ag._Groups.cached

    def measure_and_score(self, metric, case, alignment, row, **kw):
        got = received_identity(metric, self.hub, self.judges) if metric.models or metric.judge_names() else {}
        received = [f for part in got.values() for ident in part.values() if isinstance(ident, dict)
                    for f in ident.get("files", [])]  # the files backends' and judges' path options name
        extra = json.dumps(metric.cache_params(case, alignment), default=str)
        CTX.append((metric.name, (*case_paths(case), *files(named_files(metric, metric.params)), *files(received)),
                    extra))
        try:
            return measure(self, metric, case, alignment, row, **kw)
        finally:
            CTX.pop()

    def align_(self, name, case, params, key=None, *rest, **kw):
        aligner = self.host.aligner(name) if name else None
        named = files(named_files(aligner, {**aligner.defaults, **params})) if aligner is not None else []
        CTX.append((f"aligner {name}", (*case_paths(case), *named), ""))
        try:
            return align(self, name, case, params, key, *rest, **kw)
        finally:
            CTX.pop()

    def cached_(self, name, agg, p, key):
        CTX.append((f"aggregator {name}", tuple(files(named_files(agg, p))), ""))
        try:
            return cached(self, name, agg, p, key)
        finally:
            CTX.pop()

    pl.CasePipeline.measure_and_score, pl.CasePipeline.align, ag._Groups.cached = measure_and_score, align_, cached_
    sys.addaudithook(hook)
    from worldrecall.engine.cli import main as cli

    code = cli(["run", f"output_root={out_root}", *args])
    from worldrecall.core.digests import file_digest

    found = {}
    for label, paths in FOUND.items():
        left = sorted(p for p, digests in paths.items() if not (os.path.isfile(p) and file_digest(p) in digests))
        if left:
            found[label] = left
    report.write_text(json.dumps({"exit": code, "found": found}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
