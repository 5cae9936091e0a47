"""Every name a config selects by, checked against the registry before any work (a typo is exit 2, one line).

``only=[memobnech]`` or ``models_only=[oracel]`` would otherwise select nothing and "succeed" with an empty
report. :func:`check_names` runs before the suite is built; :func:`check_selection` runs once the cases are
loaded (models only known from folders on disk, and a run that selects no case at all).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from worldrecall.core.components import ConfigTypeError
from worldrecall.registry.host import PluginHost
from worldrecall.registry.names import unknown_name

METRIC_KEYS = ("enabled", "params", "thresholds")  # what a benchmarks.<b>.metrics.<m> node may hold


def selected_benchmarks(cfg: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The enabled benchmark nodes ``only`` keeps (the same rule as :func:`plan.plan_benchmarks`)."""
    only = cfg["only"]
    return {n: b for n, b in (cfg["benchmarks"] or {}).items()
            if b and b.get("enabled", True) and (only is None or n in only)}


def check_names(cfg: Mapping[str, Any], host: PluginHost) -> None:
    """Raise :class:`ConfigTypeError` (one line, with a did-you-mean) for the first unknown name."""
    benches = cfg["benchmarks"] or {}
    for name in cfg["only"] or []:
        _known("benchmark", name, benches, "only")
    builder = (cfg["suite"] or {}).get("builder")
    if builder:
        _known("suite", builder, host.components["suite"], "suite.builder")
    for agg in [*(cfg["aggregators"] or []), *((cfg["suite"] or {}).get("aggregators") or [])]:
        _known("aggregator", agg, host.components["aggregator"], "aggregators")
    configured_aggregator_params(cfg, host.components["aggregator"])  # a param for no aggregator is a typo
    for judge in cfg.get("judge_options") or {}:  # taken without `+` from the shell, so a typo must be named
        _known("judge", judge, host.judges, "judge_options")
    selected = selected_benchmarks(cfg)
    if not selected and not cfg["allow_empty"]:
        raise ConfigTypeError(f"the run selects no benchmark (configured: {', '.join(benches) or 'none'}; "
                              f"only={cfg['only']}); set allow_empty=true to allow an empty run")
    for bench, node in selected.items():
        _check_benchmark(bench, node, host)
    _check_backends(cfg["models"] or {}, host)
    _check_models_only_early(cfg, host)


def _known(kind: str, name: Any, known: Iterable[str], where: str) -> None:
    known = list(known)
    if name not in known:
        raise ConfigTypeError(unknown_name(kind, str(name), known, where))


def _check_benchmark(bench: str, node: Mapping[str, Any], host: PluginHost) -> None:
    where = f"benchmarks.{bench}"
    loader = node.get("loader")
    if loader and loader != "???":
        _known("loader", loader, host.components["loader"], f"{where}.loader")
    if node.get("aligner"):
        _known("aligner", node["aligner"], host.components["aligner"], f"{where}.aligner")
    for agg in node.get("aggregators") or []:
        _known("aggregator", agg, host.components["aggregator"], f"{where}.aggregators")
    metrics = node.get("metrics") or {}
    if not isinstance(metrics, Mapping):
        return  # validate_benchmark words the type error
    known = [m.split(".", 1)[1] for m in host.metrics if m.startswith(f"{bench}.")]
    for short, mcfg in metrics.items():
        for key in mcfg if isinstance(mcfg, Mapping) else ():
            _known("key", key, METRIC_KEYS, f"{where}.metrics.{short}")  # `enabeld=false` is a typo, not a switch
        if isinstance(mcfg, Mapping) and not mcfg.get("enabled", True):
            continue
        _known("metric", short, known, f"{where}.metrics")


def _check_backends(models: Mapping[str, Any], host: PluginHost) -> None:
    """``models.<role>=<backend>``, ``models.set`` and ``models.options.<backend>`` name things that exist."""
    sets = {s for r in host.roles.values() for s in r.defaults}
    chosen = models.get("set")
    if chosen:
        _known("backend set", chosen, sets, "models.set")
    for backend in (models.get("options") or {}):
        _known("backend", backend, host.models, "models.options")
    for role, backend in models.items():
        if role in ("set", "options"):
            continue
        _known("role", role, host.roles, "models")
        if not backend:
            continue  # null: the role is left without a backend on purpose
        fitting = [n for n, s in host.models.items() if s.role == role]
        _known(f"{role} backend", backend, fitting, f"models.{role}")


def _check_models_only_early(cfg: Mapping[str, Any], host: PluginHost) -> None:
    """``models_only`` against every model name knowable before the suite is built.

    Known: a suite's declared models (:meth:`Suite.models`), explicit ``generations`` mappings and the
    sub-folders of generation folders already on disk. Where a benchmark's models cannot be known yet,
    the check waits for :func:`check_selection`.
    """
    wanted = cfg["models_only"]
    if not wanted:
        return
    suite = cfg["suite"] or {}
    suite_models: list[str] | None = None
    if suite.get("builder"):
        suite_models = host.suite(suite["builder"]).models(dict(suite.get("params") or {}))
    suite_root = Path(suite["root"]).expanduser().absolute() if suite.get("root") else None
    known: set[str] = set(suite_models or [])
    for node in selected_benchmarks(cfg).values():
        gens = node.get("generations")
        if gens is None:
            continue
        if isinstance(gens, Mapping):
            known.update(map(str, gens))
            continue
        root = Path(gens).expanduser().absolute()
        if root.is_dir():
            known.update(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        elif not (suite_models is not None and suite_root is not None and root.is_relative_to(suite_root)):
            return  # this benchmark's models are only known once its folder exists
    for name in wanted:
        _known("model", name, known, "models_only")


def check_selection(cfg: Mapping[str, Any], n_items: int, models_seen: Iterable[str],
                    models_known: Iterable[str]) -> None:
    """After loading: every ``models_only`` name is a model of the data, and the run selected at least one case."""
    known = set(models_known) | set(models_seen)
    for name in cfg["models_only"] or []:
        if name not in known:
            raise ConfigTypeError(unknown_name("model", name, known, "models_only"))
    if n_items == 0 and not cfg["allow_empty"]:
        shard = cfg["shard"]
        in_shard = f" in shard {shard['index']} of {shard['count']}" if shard["count"] > 1 else ""
        names = ", ".join(selected_benchmarks(cfg)) or "none"
        raise ConfigTypeError(f"the run selects no case{in_shard} (benchmarks: {names}; only={cfg['only']}, "
                              f"models_only={cfg['models_only']}); set allow_empty=true to allow an empty run")


def aggregator_params_by_name(params: Mapping[str, Any] | None, known: Iterable[str],
                              strict: bool = True) -> dict[str, Any]:
    """``aggregator_params`` keyed by registered aggregator names.

    From the shell, ``aggregator_params.memobench.leaderboard.official_eval_dir=…`` arrives split at every dot
    (``{memobench: {leaderboard: {…}}}``): keys are joined back while they lead to a registered name. A key
    that leads to none is a :class:`ConfigTypeError` with a did-you-mean (``strict``), else kept as it is."""
    known = set(known)
    out: dict[str, Any] = {}

    def walk(name: str, value: Any, where: str) -> None:
        if name in known:
            prev = out.get(name)
            out[name] = {**prev, **value} if isinstance(prev, Mapping) and isinstance(value, Mapping) else value
        elif isinstance(value, Mapping) and value and any(k.startswith(f"{name}.") for k in known):
            for sub, v in value.items():
                walk(f"{name}.{sub}", v, where)
        elif strict:
            raise ConfigTypeError(unknown_name("aggregator", name, known, where))
        else:
            out[name] = value

    for name, value in (params or {}).items():
        walk(str(name), value, "aggregator_params")
    return out


def configured_aggregator_params(cfg: Mapping[str, Any], known: Iterable[str], strict: bool = True
                                 ) -> dict[str, Any]:
    """The run's aggregator params by registered name: ``aggregator_params``, then the suite's over them."""
    known = list(known)
    suite = cfg.get("suite") or {}
    return {**aggregator_params_by_name(cfg.get("aggregator_params"), known, strict),
            **aggregator_params_by_name(suite.get("aggregator_params"), known, strict)}


def check_aggregator_paths(cfg: Mapping[str, Any], host: PluginHost) -> None:
    """Every file or folder an aggregator's declared ``path_params`` names exists (checked once the suite is
    built, which writes some of them): else one line naming the key and the path, with a did-you-mean."""
    aggregators = host.components["aggregator"]
    for name, params in configured_aggregator_params(cfg, aggregators).items():
        if not isinstance(params, Mapping):
            continue
        for key in getattr(aggregators[name], "path_params", ()) or ():
            value = params.get(key)
            if value and not Path(str(value)).expanduser().exists():
                raise ConfigTypeError(missing_path(f"aggregator_params.{name}.{key}", Path(str(value)).expanduser()))


def missing_path(where: str, path: Path) -> str:
    """``<where>: no such file or folder '<path>'`` with the closest name in the deepest folder that exists."""
    from worldrecall.registry.names import did_you_mean

    parent, missing = path, []
    while not parent.exists() and parent != parent.parent:
        missing.append(parent.name)
        parent = parent.parent
    hint = ""
    if parent.is_dir() and missing:
        try:
            names = [p.name for p in parent.iterdir()]
        except OSError:
            names = []
        close = did_you_mean(missing[-1], names)
        if close:
            hint = f"; in {parent}: {close}"
    return f"{where}: no such file or folder {str(path)!r}{hint}"
