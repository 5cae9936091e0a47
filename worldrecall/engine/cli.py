"""The ``worldrecall`` command: ``run`` (a Hydra app), ``aggregate``, ``cache``, ``plugins``, and every plugin
command.

``run`` and ``aggregate`` take Hydra overrides (``key=value``; ``-m``/``--multirun`` for sweeps). Plugins add
subcommands through the ``register_commands`` hook (``worldrecall models``, ``worldrecall vqa-bank`` …).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from worldrecall.engine.hydra_entry import CONF_DIR


def _plugin_conf_dirs() -> dict[str, Path]:
    """Config groups contributed by plugins: a ``conf/`` folder beside a plugin's package (searchpath -> dir)."""
    import importlib.util

    from worldrecall.registry.host import load_plugins

    paths: dict[str, Path] = {}
    for info in load_plugins().plugins.values():
        pkg = info.module.split(":")[0].rsplit(".", 1)[0] if "." in info.module else info.module
        if not pkg or pkg.startswith("worldrecall."):
            continue
        spec = importlib.util.find_spec(pkg)
        if spec and spec.submodule_search_locations:
            for loc in spec.submodule_search_locations:
                if (Path(loc) / "conf").is_dir():
                    paths[f"pkg://{pkg}.conf"] = Path(loc) / "conf"
    return paths


def check_group_options(args: Sequence[str], conf_dirs: Sequence[Path]) -> str:
    """'' when every ``group=option`` override names an option that exists, else one line saying which does not.

    Hydra's own message for ``suite=synthetc`` is a dozen lines with the search path; this one reads like
    every other unknown name (:func:`worldrecall.registry.names.unknown_name`)."""
    from worldrecall.registry.names import unknown_name

    for arg in args:
        key, eq, value = arg.partition("=")
        key = key.lstrip("+")
        if not eq or key.startswith(("~", "hydra")) or any(c in key for c in "./@") or "(" in value:
            continue
        groups = [d / key for d in conf_dirs if (d / key).is_dir()]
        if not groups:
            continue
        known = {p.stem for g in groups for p in g.glob("*.yaml")}
        for option in value.strip("[]").split(","):
            option = option.strip()
            if option and option != "null" and option not in known:
                return unknown_name(f"{key} option", option, known, arg)
    return ""


def cmd_version() -> int:
    """``worldrecall --version``: the package, then every plugin's name, version and distribution."""
    from worldrecall import __version__
    from worldrecall.registry.host import load_plugins

    print(f"worldrecall {__version__}")
    for p in load_plugins().manifest():
        err = "  (not loaded: see `worldrecall plugins`)" if p.get("error") else ""
        print(f"  {p['name']} {p['version'] or '?'} ({p['distribution'] or 'local'}){err}")
    return 0


TRUE_WORDS = ("true", "yes", "on", "1")
# loggers of libraries whose INFO (or, for the font cache, WARNING) lines are chatter in a user's output
QUIET_LOGGERS = {"matplotlib.font_manager": logging.ERROR}


def verbose_asked(argv: Sequence[str]) -> bool:
    """Whether the overrides say ``verbose=true`` (with or without Hydra's ``+``/``++``)."""
    for a in argv:
        key, eq, value = a.lstrip("+").partition("=")
        if eq and key == "verbose" and value.strip().lower() in TRUE_WORDS:
            return True
    return False


def quiet_logging(argv: Sequence[str]) -> list[str]:
    """Logging for a user's terminal; returns the Hydra overrides ``run`` adds for it.

    Unless ``verbose=true``: MLflow logs warnings only (``MLFLOW_LOGGING_LEVEL``, read when it is imported;
    its alembic migrations follow it), matplotlib's font-cache line is dropped, and a Hydra job's root logger
    is at WARNING with worldrecall's own loggers at INFO (Hydra's default is INFO for every library). A
    setting the user made (the environment variable, ``hydra/job_logging=…``, ``hydra.job_logging.…``) wins.
    Without a terminal, bars that plugins draw with tqdm redraw at most every few seconds."""
    from worldrecall.engine.stages.progress import calm_other_bars

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    calm_other_bars()
    if verbose_asked(argv):
        return []
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    for name, level in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    if any(a.lstrip("+").startswith(("hydra/job_logging", "hydra.job_logging")) for a in argv):
        return []
    return ["hydra.job_logging.root.level=WARNING", "+hydra.job_logging.loggers.worldrecall.level=INFO"]


# open mappings whose keys come from plugins (roles, judges, aggregators): `models.flow=dis_flow`,
# `judge_options.qwen_vl_logprob.model_path=…` and `aggregator_params.memobench.leaderboard.…=…` add or replace
# a key as printed, without Hydra's `+`
OPEN_MAPPINGS = ("models.", "judge_options.", "aggregator_params.")


def run_overrides(argv: Sequence[str]) -> tuple[list[str], str]:
    """The overrides ``run`` and ``check`` hand to Hydra (open mappings forced, the plugins' config folders on
    the search path), and '' or the one-line error for a group option that does not exist."""
    conf_dirs = _plugin_conf_dirs()
    args = [f"++{a}" if a.startswith(OPEN_MAPPINGS) else a for a in argv]
    bad = check_group_options(args, [Path(CONF_DIR), *conf_dirs.values()])
    if conf_dirs and not any(a.startswith("hydra.searchpath") for a in args):
        args.append("hydra.searchpath=[" + ",".join(conf_dirs) + "]")
    return args, bad


def hydra_run(argv: Sequence[str]) -> int:
    """``worldrecall run``: check the group options, add the plugins' config folders, launch; returns the
    worst job exit code."""
    from worldrecall.engine.hydra_entry import launch

    args, bad = run_overrides(argv)
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        return 2
    return launch(args + quiet_logging(args))


def first_job(args: Sequence[str]) -> list[str]:
    """The overrides of the first job a (multi)run would start: ``-m`` dropped, each sweep (``a=1,2``,
    ``range(4)``) at its first value. ``check`` and the docs test compose that one job."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from worldrecall.engine.hydra_entry import MULTIRUN_FLAGS

    args = [a for a in args if a not in MULTIRUN_FLAGS]
    parsed = OverridesParser.create().parse_overrides(args)
    batches = BasicSweeper.split_arguments(parsed, max_batch_size=None)
    return list(batches[0][0]) if batches and batches[0] else args


def compose_checked(argv: Sequence[str]) -> tuple[dict | None, int]:
    """The config ``worldrecall run argv`` would compose for its first job, or ``(None, 2)`` after printing
    the one-line error (an unknown group option or key, with a did-you-mean) as ``run`` does."""
    from hydra.errors import HydraException

    from worldrecall.engine.hydra_entry import _key_hint

    try:
        args, bad = run_overrides(first_job(argv))
        if bad:
            print(f"error: {bad}", file=sys.stderr)
            return None, 2
        return compose(args), 0
    except HydraException as e:  # also a malformed override (Hydra's parser)
        cause = f": {e.__cause__}" if e.__cause__ is not None and str(e.__cause__) not in str(e) else ""
        print(f"error: {' '.join((str(e) + cause).split())}{_key_hint(str(e))}", file=sys.stderr)
        return None, 2


def cmd_check(argv: Sequence[str]) -> int:
    """``worldrecall check <the overrides of run>``: per benchmark and metric, runs / cannot run and why, from
    the run's own plan and loaded cases; exit 1 when a requested headline cannot run on any case."""
    from worldrecall.engine.job import check_plain

    if any(a in ("-h", "--help") for a in argv):
        print("usage: worldrecall check [overrides…]   (the same overrides as `worldrecall run`)")
        return 0
    cfg, code = compose_checked(argv)
    if cfg is None:
        return code
    return check_plain(cfg)


def compose(overrides: Sequence[str]) -> dict:
    """The resolved config for ``overrides`` without running anything (compose API)."""
    from hydra import compose as hcompose
    from hydra import initialize_config_dir

    from worldrecall.engine.hydra_entry import register_resolvers, to_plain
    from worldrecall.engine.stages.config import store_schemas

    store_schemas()
    register_resolvers()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = hcompose("config", overrides=list(overrides))
    return to_plain(cfg)


def cmd_plugins(ns: argparse.Namespace) -> int:
    from worldrecall.registry.host import load_plugins

    host = load_plugins()
    manifest = host.manifest()
    if ns.json:
        print(json.dumps(manifest, indent=2))
        return 0
    for p in manifest:
        status = f"  ERROR: {p['error']}" if p.get("error") else ""
        print(f"{p['name']} {p['version']} ({p['distribution'] or 'local'}) hooks: {', '.join(p['hooks']) or '-'}{status}")
        for kind, names in sorted(p["components"].items()):
            print(f"    {kind}: {', '.join(sorted(names))}")
        for b in p.get("benchmarks", []):
            print(f"    {b['name']}: headline {', '.join(b['headline'])}; ranked by {b['rank_by']}; "
                  f"gate {b['gate'] or 'none'}" + (f"; protocol gate {b['protocol_gate']}" if b["protocol_gate"] else ""))
    return 0


def cmd_aggregate(ns: argparse.Namespace) -> int:
    from worldrecall.engine.job import aggregate_command
    from worldrecall.engine.stages.plan import run_key

    cfg, code = compose_checked(ns.overrides)  # composed as `run` composes it (open mappings, plugin configs)
    if cfg is None:
        return code
    results_dir = Path(ns.results_dir) if ns.results_dir else Path(cfg["output_root"]) / "results" / run_key(cfg)
    if not results_dir.exists():
        print(f"no results at {results_dir}", file=sys.stderr)
        return 2
    return aggregate_command(results_dir, cfg)


def _usage(commands: dict) -> str:
    lines = ["usage: worldrecall {run,check,aggregate,cache,plugins" + "".join(f",{n}" for n in sorted(commands))
             + "} ...",
             "  run [overrides…] [-m]       evaluate (default: the built-in synthetic suite)",
             "  check [overrides…]          what a run with these overrides can score, and what is missing",
             "  aggregate [overrides…]      merge shard results into tables + one MLflow run",
             "  cache info|clear|prune|explain  what the output root's cache holds, removing it, why a row was reused",
             "  plugins [--json]            list plugins, versions, hooks, components",
             "  --version                   the package's and every plugin's version"]
    lines += [f"  {n:<27} {c.help}" for n, c in sorted(commands.items())]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        return hydra_run(argv[1:])
    quiet_logging(argv)
    if argv and argv[0] == "check":
        return cmd_check(argv[1:])
    if argv and argv[0] in ("--version", "-V"):
        return cmd_version()
    if argv and argv[0] == "cache":
        from worldrecall.engine import cache_cli

        return cache_cli.main(argv[1:], compose)
    from worldrecall.registry.host import load_plugins

    host = load_plugins()
    commands = host.commands
    if not argv or argv[0] not in ("aggregate", "plugins", *commands):
        print(_usage(commands), file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    p = argparse.ArgumentParser(prog="worldrecall")
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("plugins", help="list plugins, versions, hooks, components")
    pp.add_argument("--json", action="store_true")
    pa = sub.add_parser("aggregate", help="merge shard results into tables + one MLflow run")
    pa.add_argument("--results-dir", default=None)
    pa.add_argument("overrides", nargs="*")
    for name, command in commands.items():
        command.configure(sub.add_parser(name, help=command.help, description=command.help))
    ns = p.parse_args(argv)
    if ns.cmd in commands:
        return int(commands[ns.cmd].run(ns, host) or 0)
    return {"plugins": cmd_plugins, "aggregate": cmd_aggregate}[ns.cmd](ns)


def entry() -> None:
    """The ``worldrecall`` command (its console script): :func:`main`, then the process ends as an interpreter
    exit would — non-daemon threads joined, exit handlers run (logging flushed, pools and temporary folders
    closed), the standard streams flushed — without tearing the interpreter down: destroying every module of a
    job that loaded pandas, torch and Hydra took 0.2–0.3 s of each run and changes nothing on disk. An error
    leaves through the usual path (its traceback, its exit code)."""
    import atexit
    import gc
    import threading

    # a job keeps ~100k objects alive (rows, keys, tables): at CPython's default first threshold (700
    # allocations) the collector ran ~800 times in a re-score (0.3 s) and freed next to nothing; it still
    # runs, less often (forked workers inherit it)
    gc.set_threshold(50_000, 20, 10)
    code = main()
    shutdown = getattr(threading, "_shutdown", None)  # what an interpreter exit calls first (CPython)
    if not callable(shutdown) or not hasattr(atexit, "_run_exitfuncs"):
        sys.exit(code)
    shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: what an exit would meet too
            pass
    os._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":  # pragma: no cover
    entry()
