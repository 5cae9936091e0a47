"""Offline behaviour: missing weights -> BackendUnavailable at once (no network), caches, list and fetch."""

from __future__ import annotations

import hashlib
import importlib.util
import socket
from pathlib import Path

import pytest

from worldrecall.core.models import BackendUnavailable, WeightFile
from worldrecall.plugins.models import fetch as fetch_mod
from worldrecall.plugins.models import manifest, plugin, weights

SPECS = {s.name: s for s in plugin.specs()}
REFERENCE = sorted(n for n, s in SPECS.items() if s.kind == "reference")


@pytest.fixture
def empty_caches(tmp_path, monkeypatch):
    """Empty HF and torch caches, offline hub, and any socket use is an error."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))

    def no_network(*a, **k):
        raise AssertionError("network access attempted while offline")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    return tmp_path


def _first_missing_file(name: str) -> str:
    w = manifest.MANIFEST[name].weights[0]
    return w.repo if w.cache == "hf" else w.filename


@pytest.mark.parametrize("name", REFERENCE)
def test_missing_weights_raise_backend_unavailable_without_network(name, empty_caches):
    spec = SPECS[name]
    with pytest.raises(BackendUnavailable) as err:
        spec.factory({**spec.defaults, "device": "cpu"})
    msg = str(err.value)
    if name == "mapanything" and importlib.util.find_spec("mapanything") is None:
        assert "mapanything package is not installed" in msg
        return
    assert f"worldrecall models fetch {name}" in msg
    assert _first_missing_file(name) in msg


def test_local_dir_missing_files_are_named(tmp_path):
    spec = SPECS["dinov2_base"]
    with pytest.raises(BackendUnavailable, match="lacks config.json, model.safetensors"):
        spec.factory({"local_dir": str(tmp_path)})


def _fake_hf_snapshot(cache: Path, repo: str, files: dict[str, bytes], commit: str = "a" * 40) -> Path:
    """The HF hub cache layout: models--org--name/{refs/main, snapshots/<commit>/<files>}."""
    root = cache / ("models--" + repo.replace("/", "--"))
    snap = root / "snapshots" / commit
    snap.mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    for name, data in files.items():
        (snap / name).write_bytes(data)
    return snap


def test_list_models_reports_presence_from_the_caches(empty_caches):
    rows = {r["name"]: r for r in fetch_mod.list_models(SPECS)}
    assert set(rows) == set(SPECS)
    assert rows["dis_flow"]["present"] and rows["sidecar_pose"]["present"]
    assert not rows["dinov2_base"]["present"] and not rows["raft_large"]["present"]
    assert rows["dinov2_base"]["size_mb"] > 100 and rows["mapanything"]["size_mb"] is None
    _fake_hf_snapshot(empty_caches / "hf" / "hub", "facebook/dinov2-base",
                      {"config.json": b"{}", "model.safetensors": b"x"})
    ckpt = empty_caches / "torch" / "hub" / "checkpoints"
    ckpt.mkdir(parents=True)
    (ckpt / manifest.RAFT_LARGE_FILE).write_bytes(b"x")
    rows = {r["name"]: r for r in fetch_mod.list_models(SPECS.values())}
    assert rows["dinov2_base"]["present"] and rows["raft_large"]["present"]
    assert not rows["laion_aesthetic"]["present"]


def test_hf_dir_finds_a_cached_snapshot(empty_caches):
    snap = _fake_hf_snapshot(empty_caches / "hf" / "hub", "facebook/dinov2-base",
                             {"config.json": b"{}", "model.safetensors": b"x"})
    got = weights.hf_dir("dinov2_base", "facebook/dinov2-base", required=["config.json", "model.safetensors"])
    assert got == snap
    with pytest.raises(BackendUnavailable, match="preprocessor_config.json"):
        weights.hf_dir("dinov2_base", "facebook/dinov2-base", required=["preprocessor_config.json"])


def test_fetch_offline_fails_without_network(empty_caches):
    lines: list[str] = []
    failures = fetch_mod.fetch(["dinov2_base", "dis_flow", "nope"], SPECS, report=lines.append)
    assert any(f.startswith("nope: unknown backend") for f in failures)
    assert any(f.startswith("dinov2_base: weights missing and the hub is offline") for f in failures)
    assert "dis_flow: no weights needed (classical)" in lines


def test_fetch_downloads_into_the_standard_caches(empty_caches, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    hf_calls, url_calls = [], []

    def fake_hf(repo, revision, files):
        hf_calls.append((repo, revision, tuple(files)))
        return _fake_hf_snapshot(empty_caches / "hf" / "hub", repo, {"config.json": b"{}", "model.safetensors": b"x"})

    def fake_url(url, dst, hash_prefix=None, progress=True):
        url_calls.append((url, hash_prefix))
        Path(dst).write_bytes(b"raft")

    import torch.hub

    monkeypatch.setattr(fetch_mod, "hf_download", fake_hf)
    monkeypatch.setattr(torch.hub, "download_url_to_file", fake_url)
    assert fetch_mod.fetch(["dinov2_base", "raft_large"], SPECS, report=lambda s: None) == []
    assert hf_calls == [("facebook/dinov2-base", None, ("config.json", "model.safetensors", "*.json", "*.txt"))]
    # torchvision names carry a sha256 prefix, checked by torch.hub
    assert url_calls == [(manifest.MANIFEST["raft_large"].weights[0].url, "ff5fadd5")]
    assert (empty_caches / "torch" / "hub" / "checkpoints" / manifest.RAFT_LARGE_FILE).read_bytes() == b"raft"
    lines: list[str] = []
    assert fetch_mod.fetch(["dinov2_base", "raft_large"], SPECS, report=lines.append) == []
    assert lines == ["dinov2_base: present", "raft_large: present"] and len(url_calls) == 1


def test_url_download_checks_the_full_sha256(tmp_path, monkeypatch):
    import torch.hub

    monkeypatch.setattr(torch.hub, "download_url_to_file", lambda url, dst, **k: Path(dst).write_bytes(b"abc"))
    good = WeightFile(repo="x", filename="f.pt", url="https://example.invalid/f.pt", cache="url",
                      sha256=hashlib.sha256(b"abc").hexdigest())
    assert weights.download_url_file(good, tmp_path / "f.pt").read_bytes() == b"abc"
    bad = WeightFile(repo="x", filename="g.pt", url="https://example.invalid/g.pt", cache="url", sha256="0" * 64)
    with pytest.raises(ValueError, match="sha256 mismatch"):
        weights.download_url_file(bad, tmp_path / "g.pt")
    assert not (tmp_path / "g.pt").exists()


def test_state_dicts_load_without_unpickling_code(tmp_path):
    import torch

    torch.save({"w": torch.ones(2)}, tmp_path / "ok.pth")
    assert torch.equal(weights.load_state_dict(tmp_path / "ok.pth")["w"], torch.ones(2))

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    torch.save({"w": Evil()}, tmp_path / "evil.pth")
    with pytest.raises(Exception, match="(?i)weights.only|unpickl|global"):
        weights.load_state_dict(tmp_path / "evil.pth")


def test_models_list_present_means_weights_on_disk(empty_caches, capsys):
    """`worldrecall models list`: a reference backend that lists no weight files (the OPIS ones, loaded by
    from_pretrained) is present only once a checkpoint of its model id is in the HF cache."""
    import json

    from worldrecall.engine.cli import main
    from worldrecall.registry import host as host_mod

    host_mod._HOST = None
    assert main(["models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    undeclared = [n for n, r in rows.items() if r["kind"] == "reference" and r["files"][0].endswith("from_pretrained)")]
    assert {"opis_dinov3_vits16", "opis_vitpose_plus_small", "opis_superpoint_lightglue"} <= set(undeclared)
    for n in undeclared:  # nothing fetched: not present, size unknown (never 0.0)
        assert rows[n]["present"] is False and rows[n]["size_mb"] is None, rows[n]
    assert rows["opis_colorhist"]["present"] is True and rows["opis_colorhist"]["size_mb"] == 0.0  # weight-free
    repo = rows["opis_vitpose_plus_small"]["model_id"]
    _fake_hf_snapshot(empty_caches / "hf" / "hub", repo, {"config.json": b"{}"})  # metadata only: still absent
    assert main(["models", "list", "--json"]) == 0
    assert {r["name"]: r for r in json.loads(capsys.readouterr().out)}["opis_vitpose_plus_small"]["present"] is False
    snap = empty_caches / "hf" / "hub" / ("models--" + repo.replace("/", "--")) / "snapshots" / ("a" * 40)
    (snap / "model.safetensors").write_bytes(b"x" * 2_000_000)
    assert main(["models", "list", "--json"]) == 0
    row = {r["name"]: r for r in json.loads(capsys.readouterr().out)}["opis_vitpose_plus_small"]
    assert row["present"] is True and row["size_mb"] == 2.0 and row["files"] == [str(snap / "model.safetensors")]
    host_mod._HOST = None


def test_glob_weight_is_present_only_when_a_cached_file_matches(empty_caches):
    w = WeightFile(repo="org/m", filename="*.safetensors", cache="hf")
    assert not weights.weight_present(w)
    snap = _fake_hf_snapshot(empty_caches / "hf" / "hub", "org/m", {"config.json": b"{}"})
    assert not weights.weight_present(w)
    (snap / "model.safetensors").write_bytes(b"x")
    assert weights.weight_present(w)
