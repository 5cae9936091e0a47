"""The Hydra entry point: a module-level task function, and :func:`launch`, which runs or multiruns it and
returns the worst job's exit code from Hydra's own job returns (local and SLURM launchers alike).

Hydra's ``@hydra.main`` parses ``sys.argv`` and discards the task's return value, so ``worldrecall run``
drives Hydra through its compose entry (:func:`hydra.initialize_config_dir`) instead; only Hydra's own
inspection flags (``--cfg``, ``--info``, ``--help`` …), which run no job, go through ``hydra.main``.
"""

from __future__ import annotations

import os
import sys
import traceback
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

# Hydra flags that inspect instead of run (no job, no exit code of ours)
INSPECT_FLAGS = ("--cfg", "-c", "--info", "-i", "--help", "-h", "--hydra-help", "--shell-completion", "-sc",
                 "--resolve", "--package", "-p", "--version")
# Hydra flags that would run the job outside :func:`launch` (its exit code lost): refused, with the override
# that does the same where there is one
RUN_FLAGS = {"--config-dir": "hydra.searchpath=[file:///abs/dir]", "-cd": "hydra.searchpath=[file:///abs/dir]",
             "--config-path": "hydra.searchpath=[file:///abs/dir]", "-cp": "hydra.searchpath=[file:///abs/dir]",
             "--config-name": "experiment=<name> (a config in a searchpath folder's experiment/)",
             "-cn": "experiment=<name> (a config in a searchpath folder's experiment/)",
             "--experimental-rerun": "the same command line again (a rerun resumes)"}
MULTIRUN_FLAGS = ("-m", "--multirun")
CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def register_resolvers() -> None:
    """``${wr_uid:}``: unique per invocation, so jobs started in the same second get distinct dirs."""
    if OmegaConf.has_resolver("wr_uid"):
        OmegaConf.clear_resolver("wr_uid")
    uid = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
    OmegaConf.register_new_resolver("wr_uid", lambda: uid, use_cache=True)


def to_plain(cfg: DictConfig) -> dict[str, Any]:
    """A composed config as a plain dict, without Hydra's own node."""
    d = OmegaConf.to_container(cfg, resolve=True)
    d.pop("hydra", None)
    return d  # type: ignore[return-value]


def hydra_job(cfg: DictConfig) -> int:
    """One Hydra job (a run, or one job of a multirun): returns its exit code."""
    from hydra.core.hydra_config import HydraConfig

    from worldrecall.engine.hydra_files import redact_hydra_files
    from worldrecall.engine.job import run_plain
    from worldrecall.engine.stages.config import ResolvedConfig

    hc = HydraConfig.get()
    job_dir = Path(hc.runtime.output_dir)
    sweep_dir = Path(hc.sweep.dir) if hc.mode.name == "MULTIRUN" else None
    redact_hydra_files(job_dir, sweep_dir)  # before anything else can fail: no secret stays on disk
    # composed on the schema (config.yaml's first default): complete, typed and resolved already, so the job
    # does not merge it into the schema again (~35 ms a job; tests/test_cli.py checks the two are equal)
    plain = ResolvedConfig(to_plain(cfg))
    return run_plain(plain, job_dir=job_dir, overrides=list(hc.overrides.task), sweep_dir=sweep_dir)


def _codes(returns: Any) -> Iterable[int]:
    """Exit codes of Hydra job returns (nested lists for a multirun); a job that raised counts as 1."""
    if isinstance(returns, (list, tuple)):
        for r in returns:
            yield from _codes(r)
        return
    if returns is None:
        return
    try:
        value = returns.return_value  # re-raises the job's exception
    except Exception:  # noqa: BLE001  (the traceback is the report, the exit code says it failed)
        traceback.print_exc()
        yield 1
        return
    yield int(value) if isinstance(value, int) else 0


def launch(args: Sequence[str]) -> int:
    """Run (or with ``-m`` multirun) :func:`hydra_job` over Hydra overrides ``args``; the worst exit code."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    from worldrecall.engine.stages.config import store_schemas

    store_schemas()
    register_resolvers()
    args = list(args)
    refused = [a.split("=", 1)[0] for a in args if a.split("=", 1)[0] in RUN_FLAGS]
    if refused:
        print(f"error: `worldrecall run` does not take Hydra's {refused[0]}; use {RUN_FLAGS[refused[0]]}",
              file=sys.stderr)
        return 2
    if any(a.split("=", 1)[0] in INSPECT_FLAGS for a in args):
        return _inspect(args)
    multirun = any(a in MULTIRUN_FLAGS for a in args)
    overrides = [a for a in args if a not in MULTIRUN_FLAGS]
    overrides.append(f"hydra.mode={'MULTIRUN' if multirun else 'RUN'}")
    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name="worldrecall"):
            hydra = GlobalHydra.instance().hydra
            assert hydra is not None
            run = hydra.multirun if multirun else hydra.run
            returns = run(config_name="config", task_function=hydra_job, overrides=overrides)
    except HydraException as e:  # a bad override, an unknown group option: Hydra's own one-line message
        cause = f": {e.__cause__}" if e.__cause__ is not None and str(e.__cause__) not in str(e) else ""
        print(f"error: {' '.join((str(e) + cause).split())}{_key_hint(str(e))}", file=sys.stderr)
        return 2
    except Exception:  # noqa: BLE001  (a job raised: Hydra re-raises it here; the traceback is the report)
        traceback.print_exc()
        return 1
    return max(_codes(returns), default=0)


def _key_hint(message: str) -> str:
    """``; did you mean 'video.max_bytes'?`` for an override of a key the schema does not have."""
    import difflib
    import re
    from dataclasses import fields, is_dataclass

    from worldrecall.engine.stages.config import WorldrecallSchema

    m = re.search(r"Could not override '([^']+)'", message)
    if m is None:
        return ""
    node: Any = WorldrecallSchema
    done: list[str] = []
    for part in m.group(1).lstrip("+~").split("."):
        if not is_dataclass(node):
            return ""  # an open mapping (benchmarks, models …): their own checks name what is known
        known = {f.name: f for f in fields(node)}
        if part not in known:
            close = difflib.get_close_matches(part, sorted(known), n=1, cutoff=0.6)
            return f"; did you mean {'.'.join([*done, close[0]])!r}?" if close else ""
        done.append(part)
        default = known[part].default_factory() if callable(known[part].default_factory) else known[part].default
        node = type(default) if is_dataclass(default) else None
    return ""


def _inspect(args: list[str]) -> int:
    """Hydra's inspection flags (``--cfg job``, ``--info`` …) through ``hydra.main``; they run no job."""
    import hydra

    main = hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")(hydra_job)
    old = sys.argv
    sys.argv = ["worldrecall run", *args, "hydra.job.name=worldrecall"]  # hydra.main reads sys.argv only
    try:
        main()
    finally:
        sys.argv = old
    return 0
