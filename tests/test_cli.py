"""The Hydra app: config schemas, unique job dirs, threshold sweeps re-scored from the cache, aggregate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_cli_overrides

from worldrecall.engine.cli import compose, hydra_run, main
from worldrecall.registry import host as host_mod


def _toy_overrides(tmp_path: Path, ds: dict) -> list[str]:
    return toy_cli_overrides(ds, tmp_path / "out", "workers=1", "aggregator_params.bootstrap.replicates=100")


def test_schema_rejects_wrong_types_with_a_clear_message():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException) as e:
        compose(["batch_size=lots"])
    assert "batch_size" in str(e.value.__cause__) and "lots" in str(e.value.__cause__)
    with pytest.raises(ConfigCompositionException):
        compose(["shard.count=two"])
    cfg = compose(["suite=none", "shard.count=4", "shard.index=3"])
    assert cfg["shard"] == {"count": 4, "index": 3}


def test_threshold_multirun_rescored_from_cache_parent_and_children(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    toy_plugin.MEASURE_CALLS.clear()
    code = hydra_run(["-m", *_toy_overrides(tmp_path, ds),
                      "benchmarks.toy.metrics.brightness.thresholds.tolerance=5.0,40.0,100.0"])
    assert code == 0
    assert len(toy_plugin.MEASURE_CALLS) == 4  # measured once, re-scored for 3 thresholds
    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{(tmp_path / 'out').resolve() / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("worldrecall").experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(parents) == 1 and len(jobs) == 3  # sweep parent -> one run per job -> one per (benchmark, model)
    job_ids = {r.info.run_id for r in jobs}
    bad = [r for r in runs if r.data.tags.get("mlflow.parentRunId") in job_ids and r.data.params["model"] == "bad"]
    stable = sorted(r.data.metrics["brightness"] for r in bad)
    assert stable == [0.0, 0.5, 1.0]  # drifts ~37.5 and ~56.25 vs tolerance 5 / 40 / 100
    job_dirs = sorted(p for p in (tmp_path / "out" / "hydra-multirun").glob("*/*/*") if p.is_dir() and p.name.isdigit())
    assert len(job_dirs) == 3
    out = capsys.readouterr().out
    assert "mlflow ui --backend-store-uri" in out
    assert "sweep summary: 3 jobs over tolerance (5.0, 40.0, 100.0)" in out


def test_a_sweep_job_logs_only_the_benchmarks_its_swept_value_changes(tmp_path, toy_host, capsys):
    """A job whose swept value leaves a benchmark's numbers as an earlier job of the sweep logged them points to
    that job's runs (tag worldrecall.same_as.<benchmark>) instead of logging them again; a value that changes
    them logs them."""
    import mlflow

    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    # "bad" drifts by ~37.5 and ~56: tolerances 100 and 200 give the same numbers, 10 other ones
    code = hydra_run(["-m", *_toy_overrides(tmp_path, ds),
                      "benchmarks.toy.metrics.brightness.thresholds.tolerance=100.0,200.0,10.0"])
    assert code == 0
    client = mlflow.tracking.MlflowClient(f"sqlite:///{(tmp_path / 'out').resolve() / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("worldrecall").experiment_id])
    jobs = {r.info.run_name.rpartition("=")[2]: r for r in runs if r.data.tags.get("worldrecall.kind") == "job"}
    kids = {v: sorted(r.data.params["model"] for r in runs if r.data.tags.get("mlflow.parentRunId") == j.info.run_id)
            for v, j in jobs.items()}
    assert kids == {"100.0": ["bad", "good"], "200.0": [], "10.0": ["bad", "good"]}
    assert jobs["200.0"].data.tags["worldrecall.same_as.toy"] == jobs["100.0"].info.run_id
    assert "worldrecall.logged.toy" not in jobs["200.0"].data.tags
    assert jobs["10.0"].data.tags["worldrecall.logged.toy"] != jobs["100.0"].data.tags["worldrecall.logged.toy"]
    assert jobs["200.0"].data.metrics == jobs["100.0"].data.metrics | {"wall_s": jobs["200.0"].data.metrics["wall_s"]}
    out = capsys.readouterr().out
    held = jobs["100.0"].info.run_id
    assert out.count(f"MLflow: toy came out as run {held[:8]} ('brightness.thresholds.tolerance=100.0') logged") == 1
    records = [json.loads(p.read_text()) for p in (tmp_path / "out" / "results").glob("*/meta/tracking.json")]
    assert sorted((r["unchanged"] for r in records), key=len) == [
        {}, {}, {"toy": [held, "brightness.thresholds.tolerance=100.0"]}]


def test_runs_in_the_same_second_get_distinct_dirs(tmp_path, toy_host):
    ds = make_dataset(tmp_path, {"good": [0]})
    for _ in range(2):
        assert hydra_run([*_toy_overrides(tmp_path, ds), "tracking=none"]) == 0
    dirs = list((tmp_path / "out" / "hydra").glob("*/*"))
    assert len(dirs) == 2


def test_shards_then_aggregate(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0, 1, 2, 3], "bad": [50, 51, 52, 53]})
    ov = [*_toy_overrides(tmp_path, ds), "shard.count=2"]
    for i in range(2):
        assert hydra_run([*ov, f"shard.index={i}", "tracking=none"]) == 0
    capsys.readouterr()
    assert main(["aggregate", *ov]) == 0
    out = capsys.readouterr().out
    assert "merged 2 shard file(s), 8 cases, 0 failed" in out


def test_models_list_and_fetch_offline(capsys):
    host_mod._HOST = None
    assert main(["models", "list", "--json"]) == 0

    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["raft_large"]["role"] == "flow" and rows["raft_large"]["kind"] == "reference"
    assert rows["dis_flow"]["present"] is True  # weight-free
    # offline (tests set HF_HUB_OFFLINE=1): nothing is contacted, the failure names the backend, exit 1
    assert main(["models", "fetch", "raft_large"]) == 1
    err = capsys.readouterr().err
    assert "raft_large" in err and "offline" in err
    assert main(["models", "fetch", "no_such_backend"]) == 1


def test_experiments_compose_as_a_list_as_the_readme_shows():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "worldrecall run 'experiment=[smoke,quiet]'" in readme
    cfg = compose(["experiment=[smoke,quiet]"])
    assert cfg["suite"]["params"]["n_cases"] == 2 and cfg["aggregator_params"]["bootstrap"]["replicates"] == 200
    assert cfg["tracking"]["enabled"] is False and cfg["report"]["enabled"] is False and cfg["progress"] is False
    assert compose(["experiment=[smoke]"])["tracking"]["enabled"] is True  # quiet alone turns tracking off


@pytest.mark.parametrize("overrides", [[], ["max_failure_rate=1", "workers=2"], ["only=[memobench]", "++models.flow=dis_flow"],
                                       ["benchmarks.memobench.metrics.ors.thresholds.area_max=1"],
                                       ["video.max_bytes=1000", "devices=[0,1]", "shard.count=2", "shard.index=1"],
                                       ["models=reference", "experiment=[smoke,quiet]"]])
def test_a_jobs_composed_config_is_already_what_resolving_it_gives(overrides):
    """A job takes Hydra's composition as resolved (config.yaml composes on the schema): merging it into the
    schema again gives the same keys, values and types."""
    from hydra import compose as hcompose
    from hydra import initialize_config_dir

    from worldrecall.engine.cli import _plugin_conf_dirs
    from worldrecall.engine.hydra_entry import CONF_DIR, register_resolvers, to_plain
    from worldrecall.engine.stages.config import resolve_config, store_schemas

    def same(a, b, path=""):
        assert type(a) is type(b), path
        if isinstance(a, dict):
            assert a.keys() == b.keys(), path
            for k in a:
                same(a[k], b[k], f"{path}.{k}")
        elif isinstance(a, list):
            assert len(a) == len(b), path
            for i, (x, y) in enumerate(zip(a, b)):
                same(x, y, f"{path}[{i}]")
        else:
            assert a == b or (a != a and b != b), path

    store_schemas()
    register_resolvers()
    extra = list(_plugin_conf_dirs())
    search = ["hydra.searchpath=[" + ",".join(extra) + "]"] if extra else []
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        plain = to_plain(hcompose(config_name="config", overrides=[*overrides, *search]))
    same(dict(resolve_config(dict(plain))), plain)


def test_the_command_ends_as_an_interpreter_exit_would(tmp_path):
    """The console script ends without tearing the interpreter down, but keeps what an exit does: a non-daemon
    thread still working is joined, exit handlers run, buffered output is flushed, the exit code is main's."""
    import subprocess

    script = f"""
import atexit, sys, threading, time
from pathlib import Path
import worldrecall.engine.cli as cli
out = Path({str(tmp_path)!r})
def main():
    def late():
        time.sleep(0.3)
        (out / "thread.txt").write_text("joined")
    threading.Thread(target=late).start()
    atexit.register(lambda: (out / "atexit.txt").write_text("ran"))
    sys.stdout.write("no newline, still buffered")
    return 3
cli.main = main
cli.entry()
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "no newline, still buffered"
    assert (tmp_path / "thread.txt").read_text() == "joined"
    assert (tmp_path / "atexit.txt").read_text() == "ran"
