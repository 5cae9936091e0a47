"""A rerun never serves an old number: every way an input, the code or a setting changes gets the new rows.

Each scenario runs ``worldrecall run`` in fresh processes, as a user does: a first run, a change, the same
command again in the same output root, and the same command in a fresh output root. The rerun must give
exactly the fresh root's rows, and the change must matter (the numbers differ from the first run's).

The plugin used here is installed into a throw-away folder (a ``.dist-info`` with its entry point, on
``PYTHONPATH``), so its source can be edited between runs the way a plugin author edits theirs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from worldrecall.formats.mp4 import write_video

PLUGIN = '''
"""A plugin whose code the tests edit: a loader, an aligner, a metric with a file param."""
import json
from pathlib import Path

import numpy as np

from worldrecall.core.components import Aligner, Loader, Metric, Value
from worldrecall.core.data import Alignment, Case, Phase
from worldrecall.core.hookspecs import hookimpl

LOG = Path(__file__).with_name("measured.log")
SPLIT = 2  # the aligner's split point divisor


class StaleLoader(Loader):
    name = "stale"
    benchmark = "stale"

    def load(self, request):
        for model, gen in request.generations.items():
            for video in sorted(Path(gen).glob("*.mp4")):
                yield Case("stale", video.stem, model, request.pool.get(video), strata={"domain": "d"})


class StaleAligner(Aligner):
    name = "stale.split"
    min_frames = 2

    def align(self, case, params):
        n = case.video.num_frames
        h = n // SPLIT
        return Alignment({"A": Phase("A", 0, h - 1), "B": Phase("B", h, n - 1)}, {"n": n})


class StaleMetric(Metric):
    name = "stale.drift"
    benchmark = "stale"
    primary = "drift"
    values = {"drift": Value(higher_is_better=False, range=None, unit="levels", description="B minus A")}
    params = {"offset_file": ""}
    path_params = ("offset_file",)

    def measure(self, case, alignment, ctx):
        with open(LOG, "a") as f:
            f.write(case.key + "\\n")
        fr = case.video.frames().astype(np.float64)
        a, b = alignment.phases["A"], alignment.phases["B"]
        offset = float(json.loads(Path(self.params["offset_file"]).read_text())["offset"]) if self.params["offset_file"] else 0.0
        return {"a": float(fr[a.start:a.end + 1].mean()), "b": float(fr[b.start:b.end + 1].mean()) + offset}

    def score(self, m, thresholds):
        return {"drift": m["b"] - m["a"]}


@hookimpl
def register_loaders(register):
    register(StaleLoader())


@hookimpl
def register_aligners(register):
    register(StaleAligner())


@hookimpl
def register_metrics(register):
    register(StaleMetric)
'''


def _video(path: Path, delta: int, n: int = 8) -> None:
    fr = np.full((n, 32, 48, 3), 100, np.uint8)
    fr[n // 2:] += np.uint8(delta)
    fr[: n // 4] -= np.uint8(20)
    fr[:, ::4, ::4] = 30
    write_video(path, fr, fps=8)


@pytest.fixture
def world(tmp_path: Path) -> dict:
    site = tmp_path / "site"
    pkg = site / "staleplug"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(PLUGIN)
    dist = site / "staleplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: staleplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[worldrecall]\nstaleplug = staleplug\n")
    for model, deltas in {"good": [0, 2], "bad": [40, 60]}.items():
        for i, d in enumerate(deltas):
            _video(tmp_path / "gen" / model / f"c{i}.mp4", d)
    offset = tmp_path / "offset.json"
    offset.write_text('{"offset": 1.0}')
    env = dict(os.environ)
    import worldrecall  # this checkout first: the subprocess imports the code under test

    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(worldrecall.__file__).parents[1]),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["WORLDRECALL_PLUGINS"] = env.get("WORLDRECALL_PLUGINS", "") + ",staleplug"
    return {"tmp": tmp_path, "pkg": pkg, "env": env, "offset": offset}


def _run(world: dict, root: str, *extra: str) -> dict[tuple[str, str], float]:
    args = ["run", f"output_root={world['tmp'] / root}", "suite=none", "only=[stale]", "workers=1",
            "progress=false", "tracking=none", "report.enabled=false", "aggregators=[mean]",
            "+benchmarks.stale.loader=stale", "+benchmarks.stale.aligner=stale.split",
            f"+benchmarks.stale.generations={world['tmp'] / 'gen'}",
            f"+benchmarks.stale.metrics={{drift:{{params:{{offset_file:{world['offset']}}}}}}}", *extra]
    proc = subprocess.run([sys.executable, "-c", "import sys; from worldrecall.engine.cli import main; "
                           "sys.exit(main(sys.argv[1:]))", *args], env=world["env"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {}
    for f in (world["tmp"] / root / "results").glob("*/rows-shard-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            rows[(r["model"], r["case_id"])] = r["values"]["drift"]
    return rows


def _measured(world: dict) -> int:
    log = world["pkg"] / "measured.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _fresh_equals_rerun(world: dict, before: dict) -> dict:
    again = _run(world, "out")
    fresh = _run(world, f"fresh-{len(list(world['tmp'].glob('fresh-*')))}")
    assert again == fresh, "the rerun in the same output root must give the fresh root's rows"
    assert again != before, "the change must matter, or this test proves nothing"
    return again


def test_regenerated_videos_are_scored_again(world):
    before = _run(world, "out")
    shutil.copyfile(world["tmp"] / "gen" / "bad" / "c0.mp4", world["tmp"] / "gen" / "good" / "c0.mp4")
    after = _fresh_equals_rerun(world, before)
    assert after[("good", "c0")] == after[("bad", "c0")] != before[("good", "c0")]
    assert after[("good", "c1")] == before[("good", "c1")]  # the others are kept


def test_a_score_edited_without_a_version_bump_is_rescored_and_the_measurements_kept(world):
    before = _run(world, "out")
    n = _measured(world)
    src = world["pkg"] / "__init__.py"
    src.write_text(src.read_text().replace('return {"drift": m["b"] - m["a"]}', 'return {"drift": 2 * (m["b"] - m["a"])}'))
    again = _run(world, "out")
    assert _measured(world) == n, "editing score must not measure again"
    assert again == {k: 2 * v for k, v in before.items()}


def test_an_edited_aligner_aligns_and_measures_again(world):
    before = _run(world, "out")
    n = _measured(world)
    src = world["pkg"] / "__init__.py"
    src.write_text(src.read_text().replace("SPLIT = 2", "SPLIT = 4"))
    _fresh_equals_rerun(world, before)
    assert _measured(world) > n


def test_a_file_a_param_names_rewritten_with_its_size_and_mtime_kept_is_read_again(world):
    before = _run(world, "out")
    st = world["offset"].stat()
    world["offset"].write_text('{"offset": 9.0}')  # same size
    os.utime(world["offset"], ns=(st.st_atime_ns, st.st_mtime_ns))  # as cp -p / tar x / rsync -t leave it
    assert world["offset"].stat().st_size == st.st_size and world["offset"].stat().st_mtime_ns == st.st_mtime_ns
    after = _fresh_equals_rerun(world, before)
    assert all(abs(after[k] - before[k] - 8.0) < 1e-9 for k in before)


def test_two_processes_sharing_one_output_root_corrupt_nothing(world):
    args = [sys.executable, "-c", "import sys; from worldrecall.engine.cli import main; sys.exit(main(sys.argv[1:]))"]
    common = ["run", f"output_root={world['tmp'] / 'shared'}", "suite=none", "only=[stale]", "progress=false",
              "tracking=none", "report.enabled=false", "aggregators=[mean]", "+benchmarks.stale.loader=stale",
              "+benchmarks.stale.aligner=stale.split", f"+benchmarks.stale.generations={world['tmp'] / 'gen'}",
              f"+benchmarks.stale.metrics={{drift:{{params:{{offset_file:{world['offset']}}}}}}}"]
    # two shards of one config (a SLURM array) and a sweep value of it, all at once, over one cache
    jobs = [[f"workers={w}", "shard.count=2", f"shard.index={i}", "allow_empty=true"] for i, w in ((0, 1), (1, 2))]
    jobs.append(["workers=1", "aggregators=[mean,macro]"])
    procs = [subprocess.Popen([*args, *common, *job],
                              env=world["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for job in jobs]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    single = _run(world, "single")
    for folder in (world["tmp"] / "shared" / "results").iterdir():
        rows = {}
        for f in folder.glob("rows-shard-*.jsonl"):
            for line in f.read_text().splitlines():
                r = json.loads(line)  # every line whole
                rows[(r["model"], r["case_id"])] = r["values"]["drift"]
        assert rows == single
    assert not list((world["tmp"] / "shared" / "cache").rglob(".tmp-*"))  # no write left half-done


def test_a_cache_entry_cut_short_is_a_miss_never_a_wrong_row(tmp_path):
    from worldrecall.engine.cache import Store

    store = Store(tmp_path)
    store.put_arrays("measurements", "ab" * 32, {"x": np.arange(1000.0), "n": 3})
    store.put_json("scores", "cd" * 32, {"values": {"v": 1.5}})
    for kind, key, suffix in (("measurements", "ab" * 32, ".safetensors"), ("scores", "cd" * 32, ".json")):
        p = store.path(kind, key, suffix)
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    fresh = Store(tmp_path)  # another process: nothing in memory
    assert fresh.get_arrays("measurements", "ab" * 32) is None
    assert fresh.get_json("scores", "cd" * 32) is None
    assert fresh.corrupt == 2
    flipped = Store(tmp_path)
    flipped.put_json("scores", "ef" * 32, {"values": {"v": 1.5}})
    p = flipped.path("scores", "ef" * 32)
    p.write_text(p.read_text().replace("1.5", "2.5"))  # still valid JSON: the digest tells
    assert Store(tmp_path).get_json("scores", "ef" * 32) is None
    # an entry file laid out otherwise (indented, keys in another order) with a true digest is read as it is
    import hashlib
    import json

    text = json.dumps({"values": {"v": 1.5}}, sort_keys=True, separators=(",", ":"))
    other = store.path("scores", "aa" * 32)
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_text(json.dumps({"entry": {"values": {"v": 1.5}},
                                 "digest": hashlib.sha256(text.encode()).hexdigest()}, indent=2))
    assert Store(tmp_path).get_json("scores", "aa" * 32) == {"values": {"v": 1.5}}


def test_the_store_returns_what_a_later_read_returns(tmp_path):
    from worldrecall.engine.cache import Store

    store = Store(tmp_path)
    kept = store.put_arrays("measurements", "12" * 32, {"x": np.arange(3, dtype=np.float32), "t": (1, 2)})
    again = Store(tmp_path).get_arrays("measurements", "12" * 32)
    assert again["t"] == kept["t"] == [1, 2]
    assert again["x"].dtype == np.float32 and np.array_equal(again["x"], kept["x"])
    kept["x"][0] = 99  # a caller changing its copy changes nothing stored
    assert store.get_arrays("measurements", "12" * 32)["x"][0] == 0


def test_thumbnails_of_a_frame_folder_rerendered_in_place_are_drawn_again(tmp_path):
    import cv2

    from worldrecall.engine.cache import Store
    from worldrecall.engine.sinks.report.images import frame_thumbs

    folder = tmp_path / "frames"
    folder.mkdir()
    for i in range(4):
        cv2.imwrite(str(folder / f"{i:05d}.png"), np.full((24, 32, 3), 40, np.uint8))
    store = Store(tmp_path / "cache")
    first = frame_thumbs(folder, [0, 3], 32, store)
    states = {p: p.stat() for p in folder.iterdir()}
    for i in range(4):  # re-rendered: same names, sizes and mtimes, other pixels
        cv2.imwrite(str(folder / f"{i:05d}.png"), np.full((24, 32, 3), 200, np.uint8))
    for p, st in states.items():
        assert p.stat().st_size == st.st_size
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = frame_thumbs(folder, [0, 3], 32, Store(tmp_path / "cache"))
    assert again != first


def test_a_recently_changed_file_is_hashed_again_and_its_digest_never_kept(tmp_path):
    from worldrecall.core import digests

    p = tmp_path / "f.bin"
    p.write_bytes(b"aaaa")
    first = digests.file_digest(p)
    st = p.stat()
    p.write_bytes(b"bbbb")  # within the same second, same size: a racy write
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert digests.file_digest(p) != first
    assert not any(k[0] == str(p) for k in digests._DIGESTS)  # never trusted by its state


def test_the_key_holds_the_code_and_the_library_versions():
    from worldrecall.engine.cache.keys import code_digest, component_identity, imported_libraries

    ident = component_identity(type("X", (), {"__module__": "worldrecall.plugins.memobench.ors", "name": "x"}))
    assert set(library_versions_of_memobench := imported_libraries("worldrecall.plugins.memobench.ors")) >= {
        "numpy", "opencv-python-headless"}  # what its code imports (OpenCV by its distribution's name) …
    assert "transformers" not in library_versions_of_memobench  # … and not a fixed list
    assert "transformers" in imported_libraries("worldrecall.plugins.models.dinov2")
    assert ident["libraries"] == library_versions_of_memobench
    assert ident["code"] == code_digest("worldrecall.plugins.memobench.ors")
    # the scoring methods are left out of a measurement's key, and only they
    assert code_digest("worldrecall.plugins.memobench.ors", ("score",)) != code_digest("worldrecall.plugins.memobench.ors")
    assert code_digest("worldrecall.plugins.memobench.ors", ("no_such_method",)) == code_digest(
        "worldrecall.plugins.memobench.ors")


NO_IMPORTS = """
import sys
from worldrecall.registry.host import load_plugins
from worldrecall.engine.cache import keys
host = load_plugins()
mods = sorted({(c if isinstance(c, type) else type(c)).__module__ for comps in host.components.values() for c in comps.values()})
before = set(sys.modules)
for m in mods:
    keys.code_digest(m)
import sysconfig
stdlib = sysconfig.get_paths()["stdlib"]  # the digest's own needs (sysconfig: where wheels are installed) aside
print(sorted(m for m in set(sys.modules) - before
             if not (getattr(sys.modules[m], "__file__", None) or "").startswith(stdlib)))
lazy = "worldrecall.plugins.synthetic.heatmap"  # imported inside a function of the validity aggregator
print(lazy in keys._closure("worldrecall.plugins.synthetic.validity") and lazy not in sys.modules)
"""


def test_a_code_digest_imports_nothing_and_still_covers_lazily_imported_modules():
    """Finding the modules a component's code imports must not import them (a package's ``__init__``, and the
    heavy libraries a lazily imported module pulls in, cost every run time and memory)."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", NO_IMPORTS], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    imported, covered = res.stdout.strip().splitlines()
    assert imported == "[]" and covered == "True"


def test_official_results_folder_edited_in_place_reaches_the_leaderboard(tmp_path):
    """A file under a folder an aggregator's param names (MemoBench's ``official_eval_dir``) is an input."""
    from worldrecall.engine.stages.aggregate import aggregate_rows
    from worldrecall.engine.stages.config import resolve_config
    from worldrecall.registry.host import load_plugins

    host = load_plugins()
    src = "id,scene,data_type,VisualQuality,CameraControllability\nBarnyard_001,Barnyard,synthetic,50.0,0.4\n"
    official = tmp_path / "official"
    (official / "CogVideoX").mkdir(parents=True)
    csv = official / "CogVideoX" / "eval_synthetic_20260101_000000.csv"
    csv.write_text(src)
    cfg = resolve_config({"output_root": str(tmp_path / "out"), "cache_dir": str(tmp_path / "cache"),
                          "suite": {"builder": None, "root": None, "params": {}}, "aggregators": [],
                          "aggregator_params": {"memobench.leaderboard": {"official_eval_dir": str(official)}}})
    per = {"memobench": ["memobench.leaderboard"]}
    first = aggregate_rows(host, [], cfg, per)
    st = csv.stat()
    csv.write_text(src.replace("50.0", "90.0"))  # same size, mtime kept: only the content says it changed
    os.utime(csv, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = aggregate_rows(host, [], cfg, per)

    def visual(tables):
        t = tables["memobench_leaderboard"]
        return float(t[(t["split"] == "all") & (t["model"] == "cogvideo (official)")]["VisualQuality"].iloc[0])

    assert (visual(first), visual(again)) == (50.0, 90.0)


def _memobench(tmp: Path, root: str) -> dict[tuple[str, str, str], dict]:
    args = ["run", "experiment=[smoke,quiet]", f"output_root={tmp / root}", f"suite.root={tmp / 'suite'}",
            "only=[memobench]", "tracking=none", "report.enabled=false", "progress=false"]
    proc = subprocess.run([sys.executable, "-c", "import sys; from worldrecall.engine.cli import main; "
                           "sys.exit(main(sys.argv[1:]))", *args], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {}
    for f in (tmp / root / "results").glob("*/rows-shard-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            rows[(r["model"], r["case_id"], r["metric"])] = r["values"]
    return rows


@pytest.mark.slow
def test_memobench_regenerated_case_and_rewritten_gt_are_scored_again(tmp_path):
    """The issue's own reproduction on the smoke suite: the oracle's first case regenerated (the frozen
    camera's output copied over it), then a GT pose file rewritten in place (same size, mtime restored)."""
    pytest.importorskip("open3d")
    before = _memobench(tmp_path, "out")
    gen = tmp_path / "suite" / "memobench" / "output"
    first = sorted(p.name for p in (gen / "oracle" / "Synthetic" / "Atrium").iterdir())[0]
    src, dst = (gen / m / "Synthetic" / "Atrium" / first for m in ("frozen_camera", "oracle"))
    shutil.rmtree(dst)
    shutil.copytree(src, dst)
    again, fresh = _memobench(tmp_path, "out"), _memobench(tmp_path, "fresh1")
    assert again == fresh
    gate = ("oracle", first, "memobench.camera_gate")
    assert before[gate]["passed"] == 1.0 and again[gate]["passed"] == 0.0
    assert again[gate] == before[("frozen_camera", first, "memobench.camera_gate")]

    poses = tmp_path / "suite" / "memobench" / "data" / "Synthetic_processed" / "Atrium" / first / "1" / "poses.npy"
    st = poses.stat()
    arr = np.load(poses, allow_pickle=False)
    np.save(poses, np.broadcast_to(arr[:1], arr.shape).copy())  # the GT camera never moves; same size
    os.utime(poses, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert poses.stat().st_size == st.st_size
    later, fresh2 = _memobench(tmp_path, "out"), _memobench(tmp_path, "fresh2")
    assert later == fresh2
    cc = ("appearance_drift", first, "memobench.camera_controllability")
    assert later[cc] != again[cc]
