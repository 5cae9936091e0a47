"""The Hydra entry point: a module-level task function, and :func:`launch`, which runs or multiruns it and
returns the worst job's exit code from Hydra's own job returns (local and SLURM launchers alike).

Hydra's ``@hydra.main`` parses ``sys.argv`` and discards the task's return value, so ``worldrecall run``
drives Hydra through its compose entry (:func:`hydra.initialize_config_dir`) instead; only Hydra's own
inspection flags (``--cfg``, ``--info``, ``--help`` …), which run no job, go through ``hydra.main``.
"""

from __future__ import annotations

import copy
import os
import sys
import traceback
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
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
    later_jobs = sweep_dir is not None or not _LAST_LAUNCH[0]  # a multirun's next job, or the next launch
    return run_plain(plain, job_dir=job_dir, overrides=list(hc.overrides.task), sweep_dir=sweep_dir,
                     foresee=later_jobs)


_LAST_LAUNCH = [False]  # the running launch is this process's last (``launch(settle=False)``)


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


def launch(args: Sequence[str], settle: bool = True) -> int:
    """Run (or with ``-m`` multirun) :func:`hydra_job` over Hydra overrides ``args``; the worst exit code.

    ``settle``: afterwards, :func:`settle_heap` for the process's next launch. False where the process ends
    right after, as ``worldrecall run`` does: then nothing is settled, and a single job does not foresee
    the rows of a re-score job that will not come.
    """
    _LAST_LAUNCH[0] = not settle
    code = _launch(args)
    if settle:
        settle_heap()
    return code


def settle_heap() -> None:
    """Collect what the launch left, then take every object still alive out of the garbage collector's
    walks (``gc.freeze``), for the next launch in this process (a Python session, the benchmarks).

    What is alive between launches is there for good or for reuse: the imported libraries (pandas, MLflow,
    Hydra: ~330k objects) and the memos later jobs take from. Python's full collections walk every tracked
    object, so in such a process each one cost 0.2-0.4 s of whichever job it landed in; after this, they
    walk only what later jobs made (and forked workers never touch the parent's objects). Nothing is kept
    that would have been freed: the launch's own objects (its configs, runs, cases) are collected first, and
    an object alive now that dies later is still freed by its reference count; only one that then sits in a
    reference cycle stays (none of the memos: their rows, tables and texts hold no cycles).
    """
    import gc

    gc.collect()
    gc.freeze()


def _launch(args: Sequence[str]) -> int:
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
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name="worldrecall"), \
                _compose_once(), parse_once(), compose_memo():
            hydra = GlobalHydra.instance().hydra
            assert hydra is not None
            run = hydra.multirun if multirun else hydra.run
            returns = run(config_name="config", task_function=hydra_job, overrides=overrides)
    except HydraException as e:  # a bad override, an unknown group option: Hydra's own one-line message
        cause = f": {e.__cause__}" if e.__cause__ is not None and str(e.__cause__) not in str(e) else ""
        print(f"error: {' '.join((str(e) + cause).split())}", file=sys.stderr)
        return 2
    except Exception:  # noqa: BLE001  (a job raised: Hydra re-raises it here; the traceback is the report)
        traceback.print_exc()
        return 1
    return max(_codes(returns), default=0)


@contextmanager
def _compose_once() -> Iterator[None]:
    """Each job's config of a multirun composed once: Hydra's sweeper composes every job of a batch to
    catch errors before launching any, then the launcher composes each job again, here or before submitting
    it. The launcher gets a copy of the composition the sweeper validated (the same overrides on the same
    master config: the same config) — a third of a sweep's re-score job went to composing."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    real = ConfigLoaderImpl.load_sweep_config
    validated: dict[tuple[int, int, tuple[str, ...]], Any] = {}

    def load_sweep_config(self: Any, master_config: Any, sweep_overrides: list[str]) -> Any:
        key = (id(self), id(master_config), tuple(sweep_overrides))
        if key in validated:  # the launcher's call, after the sweeper's: what the sweeper composed
            return validated.pop(key)
        cfg = real(self, master_config, sweep_overrides)
        validated[key] = copy.deepcopy(cfg)
        return cfg

    ConfigLoaderImpl.load_sweep_config = load_sweep_config  # type: ignore[method-assign]
    try:
        yield
    finally:
        ConfigLoaderImpl.load_sweep_config = real  # type: ignore[method-assign]


# a config file's (real path, mtime ns, size, inode) -> (its header, its parsed YAML), for every launch of the
# process: Hydra makes a new config repository each launch and parses each YAML file again
_PARSED: dict[tuple[str, int, int, int], tuple[dict[str, Any], Any]] = {}


@contextmanager
def parse_once() -> Iterator[None]:
    """Each config file (ours, a searchpath's, Hydra's own package configs) is parsed once per process while it
    is unchanged (the state a stat gives): PyYAML's pure-Python loader took ~50 ms of every job to read the
    same files again. Each load still gets a fresh config of its own, built as ``OmegaConf.load`` builds it,
    from a copy of the parsed data; a file that cannot be read, or does not parse to what ``OmegaConf.load``
    accepts, is left to Hydra (its own error)."""
    import yaml
    from hydra._internal.core_plugins.file_config_source import FileConfigSource
    from hydra._internal.core_plugins.importlib_resources_config_source import ImportlibResourcesConfigSource
    from hydra.plugins.config_source import ConfigResult, ConfigSource
    from omegaconf._utils import get_yaml_loader

    def parsed(source: Any, path: str) -> ConfigResult | None:
        try:
            st = os.stat(path)
            key = (path, st.st_mtime_ns, st.st_size, st.st_ino)
            if key not in _PARSED:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                obj = yaml.load(text, Loader=get_yaml_loader())
                if obj is not None and not isinstance(obj, (list, dict, str)):
                    return None
                _PARSED[key] = (ConfigSource._get_header_dict(text[:512]), obj)  # Hydra reads the first 512
        except (OSError, UnicodeError, yaml.YAMLError):
            return None
        header, obj = _PARSED[key]
        cfg = OmegaConf.create() if obj is None else OmegaConf.create(copy.deepcopy(obj))
        return ConfigResult(config=cfg, path=f"{source.scheme()}://{source.path}", provider=source.provider,
                            header=dict(header))

    real_file, real_pkg = FileConfigSource.load_config, ImportlibResourcesConfigSource._read_config

    def load_file(self: Any, config_path: str) -> Any:
        full = os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))
        return parsed(self, full) or real_file(self, config_path)

    def read_pkg(self: Any, res: Any) -> Any:  # a package's config: a plain file unless it sits in a zip
        return (isinstance(res, Path) and parsed(self, os.path.realpath(res))) or real_pkg(self, res)

    FileConfigSource.load_config = load_file  # type: ignore[method-assign]
    ImportlibResourcesConfigSource._read_config = read_pkg  # type: ignore[method-assign]
    try:
        yield
    finally:
        FileConfigSource.load_config = real_file  # type: ignore[method-assign]
        ImportlibResourcesConfigSource._read_config = real_pkg  # type: ignore[method-assign]


# (config name, the overrides that choose config group options, Hydra's flags, the config sources) -> (the
# sources' state, Hydra's defaults list, the config composed from it before any value override): every launch
# of the process (a sweep's jobs, the benchmarks' re-score jobs) composes the same defaults again
_DEFAULTS: dict[tuple[Any, ...], list[Any]] = {}


@contextmanager
def compose_memo() -> Iterator[None]:
    """Hydra's defaults list, and the config composed from it, worked out once per process for each choice of
    config group options while no config source changed: a job that differs from an earlier one only in value
    overrides (``key=value``: a sweep's threshold) gets a copy of the composition, and Hydra applies its value
    overrides and fills its ``hydra`` node on the copy as on a fresh one (~70 ms of every job).

    Hydra's defaults list depends on the config files and on the overrides that name group options only: a
    value override cannot change which configs are merged (``Overrides`` in ``hydra._internal.defaults_list``
    sets them apart the same way, by ``group_exists``). A source's state is every file and folder under it
    (mtime, size, inode) and, for the config store, the very nodes registered; a source of any other kind, or
    one in a zip, is not memoised (Hydra composes as before).
    """
    import hydra._internal.config_loader_impl as impl
    from hydra._internal.defaults_list import DefaultsList

    real_defaults = impl.create_defaults_list
    real_compose = impl.ConfigLoaderImpl._compose_config_from_defaults_list
    composing: dict[int, list[Any]] = {}  # id(a memoised defaults list's .defaults) -> its memo entry

    def create_defaults_list(repo: Any, config_name: str | None, overrides_list: list[Any], prepend_hydra: bool,
                             skip_missing: bool) -> Any:
        try:
            chosen, values = [], []
            for o in overrides_list:
                is_value = not o.is_sweep_override() and (isinstance(o.value(), dict)
                                                         or not repo.group_exists(o.key_or_group))
                (values if is_value else chosen).append(o)
            sources = repo.get_sources()
            key = (config_name, prepend_hydra, skip_missing, tuple(o.input_line for o in chosen),
                   tuple((type(src).__name__, src.scheme(), src.path, src.provider) for src in sources))
            state = _sources_state(sources)
        except Exception:  # noqa: BLE001  (anything unexpected: Hydra's own path, and its own error)
            return real_defaults(repo, config_name, overrides_list, prepend_hydra, skip_missing)
        known = _DEFAULTS.get(key)
        if state is not None and known is not None and known[0] == state:
            dl = known[1]
            composing[id(dl.defaults)] = known
            return DefaultsList(defaults=dl.defaults, defaults_tree=dl.defaults_tree, config_overrides=values,
                                overrides=dl.overrides)
        dl = real_defaults(repo, config_name, overrides_list, prepend_hydra, skip_missing)
        if state is not None:
            _DEFAULTS[key] = entry = [state, dl, None]
            composing[id(dl.defaults)] = entry
        return dl

    def compose(self: Any, defaults: list[Any], repo: Any) -> Any:
        entry = composing.get(id(defaults))
        if entry is None or entry[1].defaults is not defaults:
            return real_compose(self, defaults, repo)
        if entry[2] is None:
            cfg = real_compose(self, defaults, repo)
            entry[2] = copy.deepcopy(cfg)  # kept as composed: Hydra goes on to change the one it gets
            return cfg
        return copy.deepcopy(entry[2])

    impl.create_defaults_list = create_defaults_list  # type: ignore[assignment]
    impl.ConfigLoaderImpl._compose_config_from_defaults_list = compose  # type: ignore[method-assign]
    try:
        yield
    finally:
        impl.create_defaults_list = real_defaults
        impl.ConfigLoaderImpl._compose_config_from_defaults_list = real_compose  # type: ignore[method-assign]


def _sources_state(sources: Sequence[Any]) -> tuple[Any, ...] | None:
    """What a composition read from Hydra's config sources could have changed by: every entry under a file or
    package source's folder, and the config store's registered nodes (the objects themselves, kept). None: a
    source it cannot watch."""
    import importlib.resources

    from hydra._internal.core_plugins.file_config_source import FileConfigSource
    from hydra._internal.core_plugins.importlib_resources_config_source import ImportlibResourcesConfigSource
    from hydra._internal.core_plugins.structured_config_source import StructuredConfigSource
    from hydra.core.config_store import ConfigStore

    state: list[Any] = []
    for src in sources:
        if isinstance(src, FileConfigSource):
            root = src.path
        elif isinstance(src, ImportlibResourcesConfigSource):
            found = importlib.resources.files(src.path)
            if not isinstance(found, Path):
                return None  # a package in a zip
            root = str(found)
        elif isinstance(src, StructuredConfigSource):
            state.append(("store", _store_nodes(ConfigStore.instance().repo)))
            continue
        else:
            return None
        entries = []
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for name in [".", *sorted(files)]:
                st = os.stat(os.path.join(folder, name))
                entries.append((folder, name, st.st_mtime_ns, st.st_size, st.st_ino))
        state.append((root, tuple(entries)))
    return tuple(state)


class _Nodes(tuple):
    """The config store's nodes, equal to another such tuple only when they are the same objects (a node
    registered again is a new object; comparing configs by value would cost what the memo saves)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Nodes) and len(self) == len(other) and all(
            a[0] == b[0] and a[1] is b[1] for a, b in zip(self, other))

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__


def _store_nodes(repo: dict[str, Any], prefix: str = "") -> _Nodes:
    out: list[tuple[str, Any]] = []
    for name in sorted(repo):
        node = repo[name]
        if isinstance(node, dict):
            out.extend(_store_nodes(node, f"{prefix}{name}/"))
        else:
            out.append((prefix + name, node))
    return _Nodes(out)


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
