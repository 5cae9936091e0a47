"""The cache key comes from what a call receives: judges, backends, the files a component reads, the code it
runs (across packages, and after a reload).

Each scenario of issue 44 runs ``worldrecall run`` in fresh processes on the synthetic smoke suite, as a user
does: a first run, a change, the same command again in the same output root; the rerun must give the new
number (a fresh output root's), never the cached old one.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import worldrecall

CHECKOUT = Path(worldrecall.__file__).parents[1]
CLI = [sys.executable, "-c", "import sys; from worldrecall.engine.cli import main; sys.exit(main(sys.argv[1:]))"]


def _env(*first: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, first), str(CHECKOUT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HF_HUB_OFFLINE"] = "1"
    return env


def _run(out: Path, suite: Path, *extra: str, env: dict[str, str] | None = None) -> dict[tuple[str, str, str], dict]:
    args = ["run", "experiment=[smoke,quiet]", f"output_root={out}", f"suite.root={suite}", "tracking=none",
            "report.enabled=false", "progress=false", *extra]
    proc = subprocess.run([*CLI, *args], env=env or _env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _rows(out)


def _rows(out: Path) -> dict[tuple[str, str, str], dict]:
    rows: dict[tuple[str, str, str], dict] = {}
    for f in sorted(out.glob("results/*/rows-shard-*.jsonl"), key=lambda p: p.stat().st_mtime_ns):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            rows[(r["model"], r["case_id"], r["metric"])] = r  # the last write per place wins
    return rows


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    pytest.importorskip("open3d")
    return tmp_path_factory.mktemp("suite") / "suite"


# -- 1. a judge's checkpoint -------------------------------------------------------------------------------

WRBENCH_PROBES = ["only=[wrbench]", "benchmarks.wrbench.metrics.probes.params.judge=qwen_vl_logprob",
                  "benchmarks.wrbench.metrics.camprec.enabled=false", "benchmarks.wrbench.metrics.camalign.enabled=false",
                  "benchmarks.wrbench.metrics.visual_integrity.enabled=false", "+judge_options.qwen_vl_logprob.device=cpu"]


def _d3(rows: dict) -> dict[tuple[str, str], float]:
    return {(m, c): r["values"]["d3"] for (m, c, metric), r in rows.items() if metric == "wrbench.probes"}


def test_a_judge_checkpoint_switched_gives_its_own_answers(suite, tmp_path):
    pytest.importorskip("transformers")
    from helpers.wrbench_qwen import save_tiny_qwen2_vl

    a, b = save_tiny_qwen2_vl(tmp_path / "ckpt-a", seed=0), save_tiny_qwen2_vl(tmp_path / "ckpt-b", seed=1)
    with_a = _d3(_run(tmp_path / "out", suite, *WRBENCH_PROBES, f"+judge_options.qwen_vl_logprob.model_path={a}"))
    with_b = _d3(_run(tmp_path / "out", suite, *WRBENCH_PROBES, f"+judge_options.qwen_vl_logprob.model_path={b}"))
    fresh_b = _d3(_run(tmp_path / "fresh", suite, *WRBENCH_PROBES, f"+judge_options.qwen_vl_logprob.model_path={b}"))
    assert with_b == fresh_b and with_b != with_a
    # the same folder, its weights replaced in place (a re-download, a fine-tune saved over it)
    shutil.copyfile(b / "model.safetensors", a / "model.safetensors")
    replaced = _d3(_run(tmp_path / "out", suite, *WRBENCH_PROBES, f"+judge_options.qwen_vl_logprob.model_path={a}"))
    assert replaced == fresh_b
    # `cache explain` names the judge's checkpoint by the digest of its weights, and says why the row changed
    from worldrecall.engine.cache.keys import inputs_digest

    [[_, digest]] = inputs_digest([str(a)])  # the folder's content, weights included
    model, case = next(iter(replaced))
    said = subprocess.run([*CLI, "cache", "explain", "wrbench", model, case, "probes", f"output_root={tmp_path / 'out'}"],
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert said.returncode == 0, said.stderr[-2000:]
    assert f'params.judges.qwen_vl_logprob.files: [["{a}", "{digest}"]]' in said.stdout
    assert "measurement key changed since the previous row" in said.stdout


# -- 2. an optional backend installed later ----------------------------------------------------------------

LPIPS = ["only=[memobench]", "models.perceptual=lpips_vgg", "+models.options.lpips_vgg.pnet_rand=true"]


def test_an_optional_backend_installed_after_a_run_is_used_by_the_rerun(suite, tmp_path):
    pytest.importorskip("lpips")
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "sitecustomize.py").write_text("import sys\nsys.modules['lpips'] = None  # as if not installed\n")

    def lpips(rows: dict) -> dict[tuple[str, str], tuple[float | None, bool]]:
        """(LPIPS, whether the row says it was not computed) per case; ``pnet_rand`` draws a random trunk in
        each process, so values are compared with null, not across processes."""
        return {(m, c): (r["values"].get("ALL_LPIPS"), any("not computed" in w for w in r["warnings"]))
                for (m, c, metric), r in rows.items() if metric == "memobench.pixel_fidelity"}

    without = lpips(_run(tmp_path / "out", suite, *LPIPS, env=_env(blocked)))
    assert without and all(v is None and noted for v, noted in without.values())
    installed = lpips(_run(tmp_path / "out", suite, *LPIPS))
    assert installed.keys() == without.keys()
    assert all(v is not None and not noted for v, noted in installed.values())


# -- 3. a file a component reads, edited in place ----------------------------------------------------------

def test_the_official_results_csv_edited_in_place_reaches_the_wrbench_table(suite, tmp_path):
    from worldrecall.plugins.wrbench.official_results import PAPER_TABLE

    official = tmp_path / "official.csv"
    shutil.copyfile(PAPER_TABLE, official)
    args = ["only=[wrbench]", "benchmarks.wrbench.metrics.probes.enabled=false",
            f"+aggregator_params={{wrbench.table:{{official_results:{official}}}}}"]

    def gen3c_d3(out: Path) -> str:
        table = next(out.glob("results/*/tables/wrbench_table.csv"))
        return next(r["D3"] for r in csv.DictReader(table.open()) if r["model"].startswith("Gen3C "))

    _run(tmp_path / "out", suite, *args)
    assert float(gen3c_d3(tmp_path / "out")) == pytest.approx(0.7226223275)
    st = official.stat()
    official.write_text(official.read_text().replace("0.7226223275", "0.1226223275"))  # same size
    os.utime(official, ns=(st.st_atime_ns, st.st_mtime_ns))
    _run(tmp_path / "out", suite, *args)
    assert float(gen3c_d3(tmp_path / "out")) == pytest.approx(0.1226223275)


# -- 4. code outside the component's package ---------------------------------------------------------------

SUBCLASS = '''
from worldrecall.plugins.memobench.ors import ORS


class WeightedORS(ORS):
    """A third party's variant of the built-in ORS: same measuring code, its own name."""

    name = "memobench.weighted_ors"
'''
PRINT_KEY = """
from worldrecall.engine.cache.keys import component_identity
from worldrecall.engine.stages.pipeline import SCORING_METHODS
from thirdparty_ors import WeightedORS
print(component_identity(WeightedORS, without=SCORING_METHODS)["code"])
"""


def test_a_third_party_subclass_changes_key_when_the_built_in_code_it_runs_changes(tmp_path):
    copy = tmp_path / "checkout"
    shutil.copytree(CHECKOUT / "worldrecall", copy / "worldrecall", ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    (site / "thirdparty_ors").mkdir(parents=True)
    (site / "thirdparty_ors" / "__init__.py").write_text(SUBCLASS)

    def key() -> str:
        env = _env(site, copy)
        res = subprocess.run([sys.executable, "-c", PRINT_KEY], env=env, capture_output=True, text=True, timeout=300,
                             cwd=tmp_path)  # not the checkout: "-c" puts the working folder first on the path
        assert res.returncode == 0, res.stderr[-2000:]
        return res.stdout.strip()

    before = key()
    assert key() == before  # stable between processes
    ors = copy / "worldrecall" / "plugins" / "memobench" / "ors.py"
    ors.write_text(ors.read_text() + "\n# worldrecall's measuring code changed\n")
    assert key() != before


# -- 5. code reloaded in one process -----------------------------------------------------------------------

PLUGIN = '''
from pathlib import Path

from worldrecall.core.components import Loader, Metric, Value
from worldrecall.core.data import Alignment, Case
from worldrecall.core.hookspecs import hookimpl

GAIN = 1.0


class OneLoader(Loader):
    name = "reloadable"
    benchmark = "reloadable"

    def load(self, request):
        for model, gen in request.generations.items():
            for video in sorted(Path(gen).glob("*.mp4")):
                yield Case("reloadable", video.stem, model, request.pool.get(video), strata={"domain": "d"})


class Brightness(Metric):
    name = "reloadable.brightness"
    benchmark = "reloadable"
    primary = "level"
    values = {"level": Value(higher_is_better=True, range=None, unit="levels", description="mean level x GAIN")}

    def measure(self, case, alignment, ctx):
        return {"level": float(case.video.frames().mean()) * GAIN}

    def score(self, m, thresholds):
        return {"level": m["level"]}


@hookimpl
def register_loaders(register):
    register(OneLoader())


@hookimpl
def register_metrics(register):
    register(Brightness)
'''
NOTEBOOK = """
import importlib, json, sys
from pathlib import Path
from worldrecall.engine.cli import main

args, src = sys.argv[1:], Path(sys.argv[1].split("=", 1)[1]).parent / "site" / "reloadable" / "__init__.py"
import reloadable  # imported (a notebook cell), then its file edited before any run hashed it
text = src.read_text()
src.write_text(text.replace("GAIN = 1.0", "GAIN = 3.0") + "# edited")  # another size: seen whatever the clock
levels = []
for step in ("first", "again", "reloaded"):
    if step == "reloaded":
        import reloadable
        importlib.reload(reloadable)
    assert main(["run", *args]) == 0
    out = Path(args[0].split("=", 1)[1])
    rows = [json.loads(line) for f in out.glob("results/*/rows-shard-*.jsonl") for line in f.read_text().splitlines()]
    levels.append(rows[-1]["values"]["level"])
print(json.dumps(levels))
"""


def test_code_reloaded_in_one_process_is_a_new_key(tmp_path):
    import numpy as np

    from worldrecall.formats.mp4 import write_video

    site = tmp_path / "site"
    (site / "reloadable").mkdir(parents=True)
    (site / "reloadable" / "__init__.py").write_text(PLUGIN)
    dist = site / "reloadable-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: reloadable\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[worldrecall]\nreloadable = reloadable\n")
    write_video(tmp_path / "gen" / "m" / "c0.mp4", np.full((4, 16, 16, 3), 100, np.uint8), fps=4)
    env = _env(site)
    env["WORLDRECALL_PLUGINS"] = env.get("WORLDRECALL_PLUGINS", "") + ",reloadable"
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user runs: the import writes the .pyc the key compares with
    args = [f"output_root={tmp_path / 'out'}", "suite=none", "only=[reloadable]", "workers=1", "progress=false",
            "tracking=none", "report.enabled=false", "aggregators=[mean]", "+benchmarks.reloadable.loader=reloadable",
            f"+benchmarks.reloadable.generations={tmp_path / 'gen'}", "+benchmarks.reloadable.metrics={brightness:{}}"]
    res = subprocess.run([sys.executable, "-c", NOTEBOOK, *args], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    first, again, reloaded = json.loads(res.stdout.strip().splitlines()[-1])
    assert again == first  # the file changed before the first run, the code running did not: GAIN 1 throughout
    assert reloaded == pytest.approx(3 * first)  # the reloaded code runs under a new key
    # a fresh process runs the file's code (GAIN 3): never served what the stale process stored
    args[0] = f"output_root={tmp_path / 'fresh'}"
    proc = subprocess.run([*CLI, "run", *args], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for f in (tmp_path / "fresh").glob("results/*/rows-shard-*.jsonl")
            for x in f.read_text().splitlines()]
    assert rows[-1]["values"]["level"] == pytest.approx(3 * first)


# -- every file a component reads is covered by its key ----------------------------------------------------

def test_every_component_of_the_smoke_run_opens_only_files_its_key_covers(suite, tmp_path):
    """Every aligner, metric and aggregator of the default smoke run, under an audit hook (event ``open``):
    a file it opens must be one its key covers (the case's files, a path param's, a digest in the key), or the
    output root, the installation, worldrecall's own code and data, a weight cache (tests/helpers/audit_run.py)."""
    report = tmp_path / "audit.json"
    script = Path(__file__).parent / "helpers" / "audit_run.py"
    res = subprocess.run([sys.executable, str(script), str(report), str(tmp_path / "out"), "experiment=[smoke,quiet]",
                          f"suite.root={suite}", "workers=1", "tracking=none", "report.enabled=false", "progress=false"],
                         env=_env(), capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(report.read_text())
    assert doc["exit"] == 0
    assert doc["found"] == {}, f"files read outside the key: {doc['found']}"


# -- a per-video model output is computed once -------------------------------------------------------------

def test_a_manifest_field_changed_reruns_no_model_and_replaces_the_superseded_rows(suite, tmp_path):
    """WRBench's ``look_away_frame`` changed in every ``videos.json`` (the videos untouched): every measurement
    is taken again (its case changed), but no backend runs on an unchanged video, and the rows file then holds
    one row per (benchmark, model, case, metric)."""
    _run(tmp_path / "warm", suite, "only=[wrbench]")  # builds the suite's WRBench layout
    videos = tmp_path / "videos"
    shutil.copytree(suite / "wrbench" / "videos", videos)
    args = ["only=[wrbench]", "models.pose=sift_pose", f"benchmarks.wrbench.generations={videos}"]

    def forward_seconds(out: Path) -> dict[str, float]:
        return json.loads(next(out.glob("results/*/meta/timing.json")).read_text())["model_forward_seconds"]

    first = _run(tmp_path / "out", suite, *args)
    assert set(forward_seconds(tmp_path / "out")) >= {"sift_pose", "color_cls_patch_embedder"}
    prov = json.loads(next((tmp_path / "out").glob("results/*/submission/provenance.json")).read_text())
    sift = prov["identities"]["backends"]["sift_pose"]  # provenance says what the keys folded in
    assert sift["state"] == "available" and "opencv-python-headless" in sift["libraries"] and sift["code"]
    for manifest in videos.glob("*/videos.json"):
        manifest.write_text(manifest.read_text().replace('"look_away_frame": 5', '"look_away_frame": 6'))
    again = _run(tmp_path / "out", suite, *args)
    assert forward_seconds(tmp_path / "out") == {}  # no model ran
    fresh = _run(tmp_path / "fresh", suite, *args)
    assert {k: r["values"] for k, r in again.items()} == {k: r["values"] for k, r in fresh.items()}
    assert any(again[k]["key"] != first[k]["key"] for k in first)
    lines = [json.loads(x) for f in (tmp_path / "out").glob("results/*/rows-shard-*.jsonl")
             for x in f.read_text().splitlines()]
    places = [(r["benchmark"], r["model"], r["case_id"], r["metric"]) for r in lines]
    assert len(places) == len(set(places)) == len(again)


# -- every option is classified ----------------------------------------------------------------------------

def test_every_config_key_and_every_backend_and_judge_option_is_classified_in_or_out_of_the_key():
    """A new top-level key or a new backend/judge option fails here until engine/cache/classified.py says
    whether it can change a number (in the key) or not (out of it)."""
    from dataclasses import fields

    from worldrecall.engine.cache.classified import (
        CONFIG_IN_KEY,
        CONFIG_OUT_OF_KEY,
        OPTIONS_IN_KEY,
        OPTIONS_OUT_OF_KEY,
    )
    from worldrecall.engine.stages.config import WorldrecallSchema
    from worldrecall.plugins.models.options import COMMON
    from worldrecall.registry.host import load_plugins

    assert not CONFIG_IN_KEY & CONFIG_OUT_OF_KEY and not OPTIONS_IN_KEY & OPTIONS_OUT_OF_KEY
    keys = {f.name for f in fields(WorldrecallSchema)}
    assert keys - CONFIG_IN_KEY - CONFIG_OUT_OF_KEY == set(), "classify these top-level keys"
    assert (CONFIG_IN_KEY | CONFIG_OUT_OF_KEY) - keys == set(), "no longer config keys"
    host = load_plugins()
    options = {f"models.options.{s.name}.{k}" for s in host.models.values() for k in [*COMMON, *s.defaults]}
    options |= {f"judge_options.{s.name}.{k}" for s in host.judges.values() for k in s.defaults}
    left = sorted(o for o in options if o.rsplit(".", 1)[1] not in OPTIONS_IN_KEY | OPTIONS_OUT_OF_KEY)
    assert left == [], "classify these options"


def test_options_out_of_the_key_leave_it_and_the_others_change_it():
    from worldrecall.core.judges import JudgeSpec
    from worldrecall.engine.cache.identity import IdentifiedJudgeHub

    spec = JudgeSpec("j", factory=lambda o: None, defaults={"model_id": "a", "timeout_s": 1.0, "cache_dir": ""})

    def ident(**options):
        return IdentifiedJudgeHub({"j": spec}, {"j": options}).identity("j")

    assert ident() == ident(timeout_s=9.0, cache_dir="/elsewhere")
    assert ident() != ident(model_id="b")


def test_a_judge_checkpoint_folder_is_in_its_identity_by_content(tmp_path):
    from worldrecall.core.components import PathParam
    from worldrecall.core.digests import file_digest
    from worldrecall.core.judges import JudgeSpec
    from worldrecall.engine.cache.identity import IdentifiedJudgeHub
    from worldrecall.engine.stages.provenance import Provenance

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights A")
    spec = JudgeSpec("j", factory=lambda o: None, defaults={"model_path": PathParam("")}, requires=("no_such_pkg",))

    def ident() -> dict:
        return IdentifiedJudgeHub({"j": spec}, {"j": {"model_path": str(ckpt)}}).identity("j")

    first = ident()
    assert first["files"] == [[str(ckpt), file_digest(ckpt)]]
    assert first["state"] == "unavailable: no_such_pkg not importable"
    (ckpt / "model.safetensors").write_bytes(b"weights B")  # replaced in place
    assert ident()["files"] != first["files"]
    prov = Provenance.of({"max_failure_rate": 0.5}, [], [], {}, {"judges": {"j": first}})
    assert prov.identities["judges"]["j"]["files"] == first["files"] and prov.modified["worldrecall"] in (True, False)


def test_dense_outputs_of_a_weight_free_backend_are_recomputed_not_kept(tmp_path):
    """The per-input output cache keeps what is costly to compute: every output of a reference (weights) backend,
    and a weight-free backend's small outputs (poses); a weight-free backend's dense output (DIS flow fields, over
    DENSE_BYTES a call) is computed again instead of filling the cache (780 MB on the default run)."""
    import numpy as np

    from worldrecall.engine.cache import Store
    from worldrecall.engine.cache.identity import DENSE_BYTES, CachedOutputs

    class Fields:
        calls = 0

        def flow(self, frames):
            Fields.calls += 1
            return [np.zeros((len(frames), DENSE_BYTES // 8 + 1, 2), np.float32)]

        def poses(self, frames):
            Fields.calls += 1
            return np.tile(np.eye(4), (len(frames), 1, 1))

    frames = [np.full((4, 4, 3), i, np.uint8) for i in range(3)]
    store = Store(tmp_path / "cache")
    for kind, kept in (("classical", {"poses"}), ("reference", {"flow", "poses"})):
        backend = CachedOutputs(Fields(), {"name": f"{kind}_thing", "kind": kind}, store)
        for method in ("flow", "poses"):
            Fields.calls = 0
            getattr(backend, method)(frames)
            getattr(backend, method)(frames)
            assert Fields.calls == (1 if method in kept else 2), (kind, method)


def test_a_pyc_left_from_an_earlier_version_never_freezes_the_code_key(tmp_path, monkeypatch):
    """Where imports write no ``.pyc`` (``PYTHONDONTWRITEBYTECODE``), one that disagrees with the source is left over
    from an earlier version, not the code that runs: the key follows the source through every further edit."""
    import importlib.util
    import py_compile

    from worldrecall.engine.cache import keys

    src = tmp_path / "edited_mod.py"
    src.write_text("GAIN = 1\n")
    spec = importlib.util.spec_from_file_location("edited_mod", src)
    py_compile.compile(str(src), cfile=spec.cached)
    src.write_text("GAIN = 22\n")  # edited after the pyc was written: sizes differ, so the pyc is stale
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert keys._compiled_if_edited(spec) is None
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # a process that writes its pycs ran the compiled one
    assert keys._compiled_if_edited(spec) == Path(spec.cached)
