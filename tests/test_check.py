"""``worldrecall check``: before a run, per benchmark and metric, what can run on how many cases and what the
others lack — and the run then does exactly that (same metrics skipped, same cases). Also the aggregator
params a shell can address (joined back to dotted aggregator names; unknown names and missing paths: exit 2)."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_cli_overrides

from worldrecall.core.components import Benchmark
from worldrecall.core.hookspecs import hookimpl
from worldrecall.engine.cli import compose_checked, hydra_run, main
from worldrecall.engine.stages.name_checks import configured_aggregator_params
from worldrecall.engine.stages.row_store import read_rows
from worldrecall.registry import host as host_mod

STATUS = re.compile(r"^  (\S+)\s+(runs|cannot run)\b(.*)$")


def _rows(out: Path) -> list:
    return read_rows(sorted((out / "results").glob("*/rows-shard-*.jsonl")))


def _toy_dataset(tmp: Path, ids: list[str], missing_video: str = "") -> dict:
    ds = make_dataset(tmp, {"good": [0] * len(ids)})
    manifest = Path(ds["data_root"]) / "cases.json"
    cases = json.loads(manifest.read_text())
    for c, new in zip(cases["cases"], ids):
        c["id"] = new  # ids starting with "needs" read <video>.notes.json (toy_plugin.BrightnessDrift)
        if new == missing_video:
            (Path(ds["generations"]) / "good" / c["video"]).unlink()
    manifest.write_text(json.dumps(cases))
    return ds


def test_check_says_what_runs_and_the_run_does_exactly_that(tmp_path, toy_host, capsys):
    ds = _toy_dataset(tmp_path, ["needs0", "c1", "gone2", "c3"], missing_video="gone2")
    out = tmp_path / "out"
    overrides = toy_cli_overrides(ds, out, "workers=1", "tracking=none", "report.enabled=false")
    assert main(["check", *overrides]) == 0  # the toy benchmark declares no headline
    printed = capsys.readouterr().out
    notes = Path(ds["generations"]) / "good" / "c0.mp4.notes.json"
    assert "toy: 4 cases (1 model), 1 not loaded" in printed
    assert "toy.brightness  runs on 2 of 4 cases; cannot run on 2 cases" in printed
    assert (f"- missing notes file: write it with `echo {{}} > <video>.notes.json` (e.g. {notes}) [1 case]"
            in printed)
    assert "- the case could not be loaded (below) [1 case]" in printed
    assert "not loaded: good/gone2: " in printed and "generation missing" in printed
    assert not list(out.glob("results/*/rows-shard-*.jsonl"))  # check scores nothing

    toy_plugin.MEASURE_CALLS.clear()
    assert hydra_run(overrides) == 0
    said = capsys.readouterr()
    assert "toy.brightness cannot run on 1 of 4 toy cases: missing notes file" in said.out + said.err
    assert "toy: 1 of 4 cases could not be loaded and fail (e.g. good/gone2: " in said.out + said.err
    by = {r.case_id: r for r in _rows(out)}
    assert {c for c, r in by.items() if r.status == "ok"} == {"c1", "c3"}  # the 2 of 4 check said
    assert by["needs0"].status == "skipped" and "missing notes file" in by["needs0"].reason
    assert by["gone2"].status == "failed" and "generation missing" in by["gone2"].reason


def test_check_exits_1_when_a_requested_headline_runs_on_no_case(tmp_path, monkeypatch, capsys):
    mod = types.ModuleType("toy_benchmark")
    mod.register_benchmarks = hookimpl(lambda register: register(Benchmark("toy", ("toy.brightness:stable",))))
    mod.register_benchmarks.__doc__ = "The toy benchmark's headline."
    monkeypatch.setattr(host_mod, "_HOST", host_mod.load_plugins(extra=[toy_plugin, mod], fresh=True))
    ds = _toy_dataset(tmp_path, ["needs0", "needs1"])
    overrides = toy_cli_overrides(ds, tmp_path / "out", "tracking=none")
    assert main(["check", *overrides]) == 1
    printed = capsys.readouterr().out
    assert "toy.brightness  cannot run on 2 cases  [headline]" in printed
    assert printed.rstrip().endswith("headline cannot run on any case: toy (toy.brightness)")
    (Path(ds["generations"]) / "good" / "c0.mp4.notes.json").write_text("{}")  # one case gets its input
    assert main(["check", *overrides]) == 0
    assert "runs on 1 of 2 cases; cannot run on 1 case  [headline]" in capsys.readouterr().out


def test_check_on_the_smoke_suite_without_a_segmenter_agrees_with_the_run(tmp_path, capsys):
    out = tmp_path / "out"
    overrides = ["experiment=smoke", "only=[memobench]", "models.segmenter=null", f"output_root={out}",
                 "tracking=none", "report.enabled=false", "progress=false", "workers=1"]
    assert main(["check", *overrides]) == 1  # ORS, MemoBench's headline, needs the segmenter role
    printed = capsys.readouterr().out
    status = {m.group(1): m.group(2) + m.group(3) for m in map(STATUS.match, printed.splitlines()) if m}
    assert status["memobench.ors"].startswith("cannot run (all 16 cases)") and "[headline]" in status["memobench.ors"]
    assert "no backend selected for role 'segmenter'" in printed
    assert "headline cannot run on any case: memobench (memobench.ors)" in printed

    assert hydra_run(overrides) == 0
    rows = _rows(out)
    assert len({(r.model, r.case_id) for r in rows}) == 16
    for metric, said in status.items():
        got = {r.status for r in rows if r.metric == metric}
        if said.startswith("cannot run"):
            assert got == {"skipped"}, (metric, said, got)
        else:
            assert "skipped" not in got and got, (metric, said, got)


def test_aggregator_params_from_the_shell_reach_the_dotted_aggregator(tmp_path):
    cfg, code = compose_checked([f"aggregator_params.memobench.leaderboard.official_eval_dir={tmp_path}",
                                 "aggregator_params.wrbench.table.official_results=paper"])
    assert code == 0
    params = configured_aggregator_params(cfg, host_mod.load_plugins().components["aggregator"])
    assert params["memobench.leaderboard"] == {"official_eval_dir": str(tmp_path)}
    assert params["wrbench.table"] == {"official_results": "paper"}
    assert params["bootstrap"]["replicates"] == 2000  # the config's own entries stay


def test_an_aggregator_param_for_no_aggregator_is_exit_2_with_a_did_you_mean(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0]})
    code = hydra_run(toy_cli_overrides(ds, tmp_path / "out", "tracking=none",
                                       f"aggregator_params.memobench.leaderbord.official_eval_dir={tmp_path}"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("error: aggregator_params: unknown aggregator 'memobench.leaderbord'")
    assert err[-1].endswith("did you mean 'memobench.leaderboard'?")


def test_a_path_param_naming_no_file_is_exit_2_with_a_did_you_mean(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0]})
    (tmp_path / "official_eval").mkdir()
    overrides = toy_cli_overrides(ds, tmp_path / "out", "tracking=none",
                                  f"aggregator_params.memobench.leaderboard.official_eval_dir={tmp_path}/oficial_eval")
    for command in (hydra_run, lambda o: main(["check", *o])):
        assert command(overrides) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1] == (f"error: aggregator_params.memobench.leaderboard.official_eval_dir: no such file or "
                           f"folder '{tmp_path}/oficial_eval'; in {tmp_path}: did you mean 'official_eval'?")


def test_judge_options_take_no_plus_and_a_judge_typo_is_exit_2(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"good": [0]})
    cfg, code = compose_checked(["judge_options.qwen_vl_logprob.model_path=/models/Qwen-VL"])  # as README prints it
    assert code == 0 and cfg["judge_options"] == {"qwen_vl_logprob": {"model_path": "/models/Qwen-VL"}}
    assert hydra_run(toy_cli_overrides(ds, tmp_path / "out", "tracking=none", "judge_options.gemnii.base_url=x")) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("did you mean 'gemini'?")


def test_check_probes_a_backend_instead_of_loading_it_and_the_run_skips_alike(tmp_path, monkeypatch, capsys):
    from worldrecall.core.models import BackendUnavailable, ModelSpec

    built: list[str] = []
    reason = "toy_heavy: weights not available locally; run `worldrecall models fetch toy_heavy`"

    def factory(opts):
        built.append("toy_heavy")  # a reference backend would load its weights here
        raise BackendUnavailable(reason)

    class NeedsDepth(toy_plugin.BrightnessDrift):
        name = "toy.needs_depth"
        models = ("depth",)

    mod = types.ModuleType("toy_heavy")
    mod.register_models = hookimpl(lambda register: register(ModelSpec(
        "toy_heavy", "depth", "reference", factory, probe=lambda opts: reason)))
    mod.register_models.__doc__ = "A backend whose weights are absent."
    mod.register_metrics = hookimpl(lambda register: register(NeedsDepth))
    mod.register_metrics.__doc__ = "A toy metric that needs the depth role."
    monkeypatch.setattr(host_mod, "_HOST", host_mod.load_plugins(extra=[toy_plugin, mod], fresh=True))
    ds = make_dataset(tmp_path, {"good": [0, 1]})
    out = tmp_path / "out"
    overrides = [*toy_cli_overrides(ds, out, "workers=1", "tracking=none", "report.enabled=false",
                                    "models.depth=toy_heavy"), "+benchmarks.toy.metrics.needs_depth={}"]
    assert main(["check", *overrides]) == 0
    printed = capsys.readouterr().out
    assert built == []  # probed, never built
    status = {m.group(1): m.group(2) + m.group(3) for m in map(STATUS.match, printed.splitlines()) if m}
    assert status == {"toy.brightness": "runs (2 cases)", "toy.needs_depth": "cannot run (all 2 cases)"}
    assert f"- {reason}" in printed

    assert hydra_run(overrides) == 0
    rows = _rows(out)
    assert {r.status for r in rows if r.metric == "toy.needs_depth"} == {"skipped"}
    assert {r.status for r in rows if r.metric == "toy.brightness"} == {"ok"}
    assert built  # the run builds it (and skips the metric with the same reason)
    assert all(reason in r.reason for r in rows if r.metric == "toy.needs_depth")


def test_builtin_reference_probes_say_what_their_factories_would_raise_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    models = host_mod.load_plugins().models
    probed = [s for s in models.values() if s.kind == "reference" and s.probe is not None]
    assert {"sam3", "dinov2_base", "raft_large", "lpips_alex"} <= {s.name for s in probed}
    for spec in probed:
        opts = {**spec.defaults, "device": "cpu"}
        said = spec.probe(opts)
        if said is None:
            continue  # weights present here: the factory would load them, which this test does not do
        try:
            spec.factory(opts)
        except Exception as e:  # noqa: BLE001
            assert str(e) == said, spec.name
        else:
            raise AssertionError(f"{spec.name}: probe said {said!r}, the factory built it")
