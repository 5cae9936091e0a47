"""The (benchmark, model) runs of a job are written in one transaction of the SQL store, and are the same
runs as logging them one by one (names, tags, params, metrics incl. NaN, status, times, artifact folders)."""

from __future__ import annotations

import math

import pytest

from worldrecall.engine.sinks.tracking.tracker import Tracker

mlflow = pytest.importorskip("mlflow")

CHILDREN = [
    {"name": "oracle · bench", "tags": {"worldrecall.kind": "model", "api_key": "s3cret"},
     "metrics": {"ors": 0.5, "psnr (dB)": float("nan"), "big": float("inf"), "rank": 1.0},
     "params": {"model": "oracle", "benchmark": "bench", "override.x": "1"}},
    {"name": "drift · bench", "tags": {"worldrecall.kind": "model"},
     "metrics": {"ors": 0.25, "psnr (dB)": 30.5, "big": -1.0, "rank": 2.0},
     "params": {"model": "drift", "benchmark": "bench", "override.x": "1"}},
]


def _one_by_one(t: Tracker, parent: str | None, spec: dict) -> str:
    """One finished run as start_run / log_batch / end_run make it (what the batched path must equal)."""
    rid = t.start_run(spec["name"], parent_id=parent, start_time=1000.0, tags=spec["tags"])
    t.log_batch(rid, metrics=spec["metrics"], params=spec["params"])
    t.end_run(rid, "FINISHED", end_time=1010.0)
    return rid


def _log(tmp_path, batched: bool):
    t = Tracker({"experiment": "batch"}, tmp_path)
    job = t.start_run("job", start_time=1000.0)
    if batched:
        ids = t.log_finished_runs(job, CHILDREN, 1000.0, 1010.0)
        assert ids is not None and len(ids) == 2
    else:
        ids = [_one_by_one(t, job, c) for c in CHILDREN]
    t.end_run(job, "FINISHED", end_time=1011.0)
    return t, job, ids


def _view(t: Tracker, job: str, rid: str) -> dict:
    r = t.client.get_run(rid)
    return {"name": r.info.run_name, "status": r.info.status, "start": r.info.start_time, "end": r.info.end_time,
            "stage": r.info.lifecycle_stage, "user": r.info.user_id,
            "artifacts": r.info.artifact_uri.endswith(f"/{rid}/artifacts"),
            "params": r.data.params, "tags": {k: v for k, v in r.data.tags.items() if k != "mlflow.parentRunId"},
            "parent": r.data.tags.get("mlflow.parentRunId") == job,
            "metrics": {k: ("nan" if math.isnan(v) else v) for k, v in r.data.metrics.items()},
            "history": [(m.step, m.value if not math.isnan(m.value) else "nan")
                        for m in t.client.get_metric_history(rid, "ors")]}


def test_batched_runs_equal_runs_logged_one_by_one(tmp_path):
    tb, jb, batched = _log(tmp_path / "b", True)
    tu, ju, single = _log(tmp_path / "u", False)
    for b, u in zip(batched, single):
        vb, vu = _view(tb, jb, b), _view(tu, ju, u)
        assert vb == vu
        assert vb["status"] == "FINISHED" and vb["parent"] and vb["artifacts"]
        assert vb["tags"].get("api_key") != "s3cret"  # redacted like every tag
    assert _view(tb, jb, batched[0])["metrics"]["psnr _dB_"] == "nan"  # the key as log_batch spells it
    # the runs are found the way the runs view and a rerun look for them
    found = tb.search(f"tags.`mlflow.parentRunId` = '{jb}'")
    assert sorted(r.info.run_id for r in found) == sorted(batched)


def test_a_store_that_cannot_batch_falls_back(tmp_path, monkeypatch):
    t = Tracker({"experiment": "batch"}, tmp_path)
    job = t.start_run("job")
    monkeypatch.setattr(type(t.client._tracking_client), "store", property(lambda self: object()))
    assert t.log_finished_runs(job, CHILDREN, 1000.0, 1010.0) is None


def test_a_job_and_its_model_runs_are_one_transaction_equal_to_logging_them_one_by_one(tmp_path, monkeypatch):
    """A top-level job run (no parent) and its per-model runs under it ("parent": 0) are written in one
    commit, and are what start_run / log_batch / end_run would make."""
    from worldrecall.engine.sinks.tracking import tracker as tracker_mod

    t = Tracker({"experiment": "batch"}, tmp_path / "b")
    job_spec = {"name": "job · x=1", "tags": {"worldrecall.kind": "invocation"}, "metrics": {"n_cases": 4.0},
                "params": {"seed": 0}}
    sessions: list[int] = []
    real = tracker_mod._insert
    monkeypatch.setattr(tracker_mod, "_insert", lambda session, *a: sessions.append(id(session)) or real(session, *a))
    ids = t.log_finished_runs(None, [job_spec, *({**c, "parent": 0} for c in CHILDREN)], 1000.0, 1010.0)
    assert ids is not None and len(ids) == 3
    assert len(sessions) == 5 and len(set(sessions)) == 1  # runs, tags, params, metrics, latest metrics: one session
    u = Tracker({"experiment": "batch"}, tmp_path / "u")
    ju = _one_by_one(u, None, job_spec)
    one_by_one = [_one_by_one(u, ju, c) for c in CHILDREN]
    assert "mlflow.parentRunId" not in t.client.get_run(ids[0]).data.tags
    assert _view(t, "-", ids[0]) == _view(u, "-", ju)
    for b, s in zip(ids[1:], one_by_one):
        assert _view(t, ids[0], b) == _view(u, ju, s)


def test_a_later_tracker_of_this_process_finds_its_experiment_without_reading_its_tags(tmp_path, monkeypatch):
    """The experiment a tracker found is found again by the next one of this process (a sweep's next job) by a
    query that reads no tags; one deleted, or renamed, in between is looked up as MLflow does."""
    first = Tracker({"experiment": "exp"}, tmp_path)
    calls = []
    real = first.client.get_experiment_by_name
    monkeypatch.setattr(type(first.client), "get_experiment_by_name",
                        lambda self, name: calls.append(name) or real(name))
    again = Tracker({"experiment": "exp"}, tmp_path)
    assert again.experiment_id == first.experiment_id and calls == []
    again.client.rename_experiment(again.experiment_id, "other")
    moved = Tracker({"experiment": "exp"}, tmp_path)  # a new experiment of that name
    assert calls == ["exp"] and moved.experiment_id != first.experiment_id
    moved.client.delete_experiment(moved.experiment_id)
    assert Tracker({"experiment": "exp"}, tmp_path)._active_experiment() is None


def test_shared_views_in_one_transaction_equal_mlflows_own_tags(tmp_path, monkeypatch):
    """The runs-page views a job shares are stored in one transaction, as the experiment tags MLflow's
    set_experiment_tag stores (same keys and values); a deleted experiment is refused as MLflow refuses it."""
    from mlflow.exceptions import MlflowException

    from worldrecall.engine.sinks.tracking.tracker import SHARED_VIEW_TAG

    states = [{"searchFilter": f"params.benchmark = '{b}'", "orderByKey": "metrics.`rank`", "orderByAsc": True,
               "selectedColumns": ["metrics.`rank`"]} for b in ("a", "b")]
    batched = Tracker({"experiment": "views"}, tmp_path / "one")
    keys = batched.share_views(states)
    monkeypatch.setattr(Tracker, "_set_experiment_tags", lambda self, tags: False)  # MLflow's way, one by one
    plain = Tracker({"experiment": "views"}, tmp_path / "two")
    assert plain.share_views(states) == keys

    def views(t: Tracker) -> dict:
        return {k: v for k, v in t.client.get_experiment(t.experiment_id).tags.items() if k.startswith(SHARED_VIEW_TAG)}

    assert views(batched) == views(plain) and len(views(batched)) == 2
    monkeypatch.undo()
    batched.client.delete_experiment(batched.experiment_id)
    with pytest.raises(MlflowException, match="active"):
        batched.share_views(states[:1])


def test_batched_run_ids_are_time_ordered_uuid7(tmp_path, monkeypatch):
    """The runs made in one transaction get UUIDv7 ids (32 hex digits, as MLflow's own): a later job's ids sort
    after an earlier one's, so its metric rows are appended to the run-id indexes; MLflow finds each run."""
    import uuid

    from worldrecall.engine.sinks.tracking import tracker as tracker_mod

    clock = iter([1_700_000_000_000_000_000 + i * 5_000_000 for i in range(20)])  # 5 ms apart
    monkeypatch.setattr(tracker_mod.time, "time_ns", lambda: next(clock))
    ids = [tracker_mod.time_ordered_id() for _ in range(6)]
    assert ids == sorted(ids) and len(set(ids)) == 6
    for i, rid in enumerate(ids):
        u = uuid.UUID(rid)
        assert len(rid) == 32 and u.hex == rid and u.version == 7 and u.variant == uuid.RFC_4122
        assert int(rid[:12], 16) == 1_700_000_000_000 + 5 * i  # the first 48 bits: Unix time in milliseconds
    monkeypatch.undo()
    t, job, made = _log(tmp_path, True)
    for rid in made:
        assert uuid.UUID(rid).version == 7 and t.client.get_run(rid).info.run_id == rid
