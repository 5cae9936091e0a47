"""The Gemini judge through the real google-genai client, against a local fake server (no network)."""

from __future__ import annotations

import hashlib
import io
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from helpers.fake_gemini import FakeGemini, Reply, answer_items, questions_in, truth_answerer

from worldrecall.core.judges import JudgeError, JudgeHub
from worldrecall.core.models import BackendUnavailable
from worldrecall.formats.mp4 import write_video
from worldrecall.plugins.judges.errors import JudgeUnavailable
from worldrecall.plugins.judges.gemini import GeminiJudge, MissingAnswers, make_gemini_judge
from worldrecall.plugins.judges.media import official_fps
from worldrecall.plugins.judges.plugin import register_judges
from worldrecall.plugins.memobench.vqa.prompts import EVAL_SCHEMA, EVAL_SYSTEM, EVAL_USER

KEY = "wr-test-key-7f3a9c51"
QS = [
    {
        "ID": 1,
        "Dimension": "Continuity of Memory",
        "Dimension Polarity": "Positive",
        "Question": "Is it back?",
    },
    {
        "ID": 2,
        "Dimension": "Physics Adherence",
        "Dimension Polarity": "Negative",
        "Question": "Does it float?",
    },
]
GOOD = json.dumps(answer_items(QS, {"1": "Yes", "2": "No"}))


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    frames = np.random.default_rng(0).integers(0, 255, (12, 48, 64, 3), dtype=np.uint8)
    return write_video(tmp_path_factory.mktemp("vid") / "clip.mp4", frames, 16)


@pytest.fixture
def fake():
    with FakeGemini(KEY, lambda call: GOOD) as f:
        yield f


def judge_for(fake: FakeGemini, tmp_path: Path, **opts) -> GeminiJudge:
    base = {
        "base_url": fake.base_url,
        "cache_dir": str(tmp_path / "judge_cache"),
        "initial_backoff_s": 0.01,
        "max_backoff_s": 0.05,
        "poll_interval_s": 0.01,
        "timeout_s": 5.0,
        "max_total_s": 30.0,
    }
    return GeminiJudge({**base, **opts}, api_key=KEY)


def ask(judge: GeminiJudge, video, questions=QS):
    return judge.ask(video, EVAL_SYSTEM, questions, EVAL_SCHEMA, prompt=EVAL_USER)


def sha(p: Path) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def test_correct_answers_inline(fake, tmp_path, video):
    r = ask(judge_for(fake, tmp_path), video)
    assert [(a["ID"], a["Answer"]) for a in r.answers] == [(1, "Yes"), (2, "No")]
    call = fake.calls[0]
    assert fake.generate_calls == 1 and not call.via_file
    assert call.media_sha256 == sha(video) and call.media_mime == "video/mp4"
    assert call.model == "gemini-3.1-pro-preview"
    assert call.config["temperature"] == 0.0 and call.config["responseMimeType"] == "application/json"
    assert call.config["responseSchema"]["type"] == "ARRAY"
    assert "expert judge" in call.system
    assert questions_in(call.text) == QS  # the question list travels verbatim
    assert r.usage["total_tokens"] == 120 and r.usage["calls"] == 1 and r.usage["uploaded"] is False
    assert json.loads(r.raw) == json.loads(GOOD)
    assert all(fake.key_ok) and fake.key_ok


def test_answers_in_code_fences_and_prose(fake, tmp_path, video):
    fake.script = [Reply(text=f"```json\n{GOOD}\n```")]
    r = ask(judge_for(fake, tmp_path / "a"), video)
    assert [a["Answer"] for a in r.answers] == ["Yes", "No"]
    fake.script = [Reply(text=f"Sure! Here are my answers:\n{GOOD}\nHope this helps.")]
    r = ask(judge_for(fake, tmp_path / "b"), video)
    assert [a["Answer"] for a in r.answers] == ["Yes", "No"]
    assert fake.generate_calls == 2  # no repair call was needed


def test_invalid_json_fails_after_one_repair(fake, tmp_path, video):
    fake.answer = lambda call: "I think the answer is yes {"
    with pytest.raises(JudgeError, match="invalid JSON after a repair attempt"):
        ask(judge_for(fake, tmp_path), video)
    assert fake.generate_calls == 2
    assert fake.calls[1].media is None  # the repair call is text only
    assert "I think the answer is yes {" in fake.calls[1].text


def test_invalid_json_repaired(fake, tmp_path, video):
    fake.script = [Reply(text='[{"ID": 1, "Answer": "Yes"},')]  # truncated, then GOOD on repair
    r = ask(judge_for(fake, tmp_path), video)
    assert [a["ID"] for a in r.answers] == [1, 2]
    assert r.usage["calls"] == 2 and len(r.usage["repairs"]) == 1


def test_schema_violation_is_repaired_or_fails(fake, tmp_path, video):
    fake.answer = lambda call: '[{"ID": 1}]'  # "Answer" is required by the schema
    with pytest.raises(JudgeError, match="missing required field"):
        ask(judge_for(fake, tmp_path), video)


def test_missing_questions_follow_up_then_error(fake, tmp_path, video):
    only_first = json.dumps(answer_items(QS[:1], {"1": "Yes"}))
    # the follow-up call asks only for ID 2 and gets it
    fake.script = [Reply(text=only_first)]
    fake.answer = lambda call: json.dumps(answer_items(questions_in(call.text), {"2": "No"}))
    r = ask(judge_for(fake, tmp_path / "ok"), video)
    assert sorted(a["ID"] for a in r.answers) == [1, 2]
    assert [q["ID"] for q in questions_in(fake.calls[1].text)] == [2]
    assert fake.calls[1].media_sha256 == sha(video)  # the follow-up shows the video again
    # a judge that keeps omitting ID 2: a per-case error naming the IDs, partial answers attached
    fake.answer = lambda call: only_first
    j = judge_for(fake, tmp_path / "bad")
    with pytest.raises(MissingAnswers, match=r"question ID\(s\) 2 unanswered") as ei:
        ask(j, video)
    assert ei.value.missing == ["2"] and [a["ID"] for a in ei.value.response.answers] == [1]
    n = fake.generate_calls
    with pytest.raises(MissingAnswers):  # never kept: the rerun asks again (and fails the same way here)
        ask(judge_for(fake, tmp_path / "bad"), video)
    assert fake.generate_calls == n + 2  # the question, then the follow-up for ID 2
    assert not list((tmp_path / "bad" / "judge_cache").rglob("*.json"))


def test_429_then_success(fake, tmp_path, video, caplog):
    caplog.set_level(logging.INFO)
    fake.script = [Reply(status=429), Reply(status=429)]
    r = ask(judge_for(fake, tmp_path), video)
    assert r.usage["tries"] == 3 and fake.generate_calls == 3
    assert "429" in caplog.text


def test_500_until_attempts_run_out(fake, tmp_path, video):
    fake.answer = lambda call: Reply(status=500)
    with pytest.raises(JudgeError, match=r"gave up after 3 tries.*500"):
        ask(judge_for(fake, tmp_path, max_attempts=3), video)
    assert fake.generate_calls == 3


def test_total_time_bound_stops_retries(fake, tmp_path, video):
    fake.answer = lambda call: Reply(status=503)
    # backoff 0.4 s, then 0.8 s: the second wait cannot fit in a 0.6 s budget, whatever max_attempts says
    j = judge_for(fake, tmp_path, max_attempts=50, initial_backoff_s=0.4, max_backoff_s=10.0, max_total_s=0.6)
    with pytest.raises(JudgeError, match="total time limit"):
        ask(j, video)
    assert fake.generate_calls <= 2


def test_non_retryable_error_fails_at_once(fake, tmp_path, video):
    fake.answer = lambda call: Reply(status=400, message="bad request")
    with pytest.raises(JudgeError, match="400"):
        ask(judge_for(fake, tmp_path), video)
    assert fake.generate_calls == 1


def test_slow_response_past_timeout(fake, tmp_path, video):
    fake.answer = lambda call: Reply(text=GOOD, delay_s=1.5)
    with pytest.raises(JudgeError, match="(?i)timeout|timed out"):
        ask(judge_for(fake, tmp_path / "a", timeout_s=0.3, max_attempts=2), video)
    assert fake.generate_calls == 2  # timeouts are retried, within the bounds
    fake.answer = lambda call: GOOD
    fake.script = [Reply(text=GOOD, delay_s=1.5)]  # slow once, then fine
    r = ask(judge_for(fake, tmp_path / "b", timeout_s=0.3, max_attempts=3), video)
    assert r.usage["tries"] == 2


def test_files_api_upload_path(fake, tmp_path, video):
    j = judge_for(fake, tmp_path, inline_max_bytes=100)
    r = ask(j, video)
    assert r.usage["uploaded"] is True and [a["Answer"] for a in r.answers] == ["Yes", "No"]
    call = fake.calls[0]
    assert call.via_file and call.media_sha256 == sha(video) and call.media_mime == "video/mp4"
    assert fake.requests[0] == ("POST", "/upload/v1/files")  # resumable upload start
    assert any(p.startswith("/upload-session/") for _, p in fake.requests)
    assert any(m == "GET" for m, _ in fake.requests)  # waited for PROCESSING -> ACTIVE
    assert fake.requests[-1][0] == "DELETE" and fake.deleted  # cleaned up after answering
    assert all(fake.key_ok)


def test_frames_are_encoded_to_h264_mp4(fake, tmp_path):
    import av

    frames = np.random.default_rng(1).integers(0, 255, (20, 72, 96, 3), dtype=np.uint8)
    ask(judge_for(fake, tmp_path), list(frames))
    data = fake.calls[0].media
    assert fake.calls[0].media_mime == "video/mp4"
    with av.open(io.BytesIO(data)) as c:
        s = c.streams.video[0]
        assert s.codec_context.name == "h264" and s.average_rate == 16  # <= 100 frames -> 16 fps
        assert sum(1 for _ in c.decode(video=0)) == 20


def test_official_fps_rule(fake, tmp_path):
    import av

    assert (official_fps(100), official_fps(101)) == (16, 24)
    ask(judge_for(fake, tmp_path), np.zeros((101, 16, 16, 3), np.uint8))  # > 100 frames -> 24 fps
    with av.open(io.BytesIO(fake.calls[0].media)) as c:
        assert c.streams.video[0].average_rate == 24


def test_answer_cache_makes_reruns_free(fake, tmp_path, video):
    j = judge_for(fake, tmp_path)
    r1 = ask(j, video)
    r2 = ask(judge_for(fake, tmp_path), video)  # a new judge object, same cache dir
    assert fake.generate_calls == 1 and r2.usage["cached"] is True and r2.answers == r1.answers
    ask(j.for_model("gemini-3-flash-preview"), video)  # the model id is part of the key
    assert fake.generate_calls == 2 and fake.calls[-1].model == "gemini-3-flash-preview"
    j.ask(video, EVAL_SYSTEM, QS, EVAL_SCHEMA, prompt=EVAL_USER + " v2")  # so is the prompt text
    assert fake.generate_calls == 3
    ask(j, video, QS[:1])  # and the question list (the bank)
    assert fake.generate_calls == 4


def test_an_unparsable_reply_is_never_kept_and_asked_again(fake, tmp_path, video):
    fake.answer = lambda call: "I think the answer is yes {"
    for _ in range(2):
        with pytest.raises(JudgeError, match="invalid JSON after a repair attempt"):
            ask(judge_for(fake, tmp_path), video)
    assert fake.generate_calls == 4  # each run: the question and one repair; nothing served from the cache
    fake.answer = lambda call: GOOD
    assert [a["Answer"] for a in ask(judge_for(fake, tmp_path), video).answers] == ["Yes", "No"]
    fake.script = [Reply(status=500)] * 10
    with pytest.raises(JudgeError):  # an endpoint that fails: an error, never an answer
        ask(judge_for(fake, tmp_path / "down", max_attempts=2), video)
    assert not list((tmp_path / "down" / "judge_cache").rglob("*.json"))


def test_the_answer_cache_key_holds_repair_endpoint_and_parsing_code(fake, tmp_path, video, monkeypatch):
    from worldrecall.plugins.judges import gemini

    ask(judge_for(fake, tmp_path), video)
    ask(judge_for(fake, tmp_path, repair=False), video)  # the repair switch decides what is kept
    assert fake.generate_calls == 2
    ask(judge_for(fake, tmp_path, api_version="v1beta"), video)  # so does the endpoint
    assert fake.generate_calls == 3
    gemini.parsing_code_digest.cache_clear()
    monkeypatch.setattr(gemini, "parsing_code_digest", lambda: "edited parsing code")
    ask(judge_for(fake, tmp_path), video)  # and the code that parsed the reply
    assert fake.generate_calls == 4
    monkeypatch.undo()
    ask(judge_for(fake, tmp_path), video)  # the original entry is still there
    assert fake.generate_calls == 4


def test_no_api_key_is_unavailable(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(JudgeUnavailable, match="GEMINI_API_KEY") as ei:
        make_gemini_judge({})
    assert isinstance(ei.value, BackendUnavailable) and isinstance(ei.value, JudgeError)
    specs = []
    register_judges(specs.append)
    hub = JudgeHub({s.name: s for s in specs})
    with pytest.raises(BackendUnavailable):
        hub.get("gemini")


def test_key_from_env_sent_as_header_and_never_leaked(fake, tmp_path, video, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    specs = []
    register_judges(specs.append)
    (spec,) = [s for s in specs if s.name == "gemini"]  # the plugin also registers WRBench's local judges
    hub = JudgeHub(
        {"gemini": spec},
        {
            "gemini": {
                "base_url": fake.base_url,
                "cache_dir": str(tmp_path / "c"),
                "inline_max_bytes": 100,
                "poll_interval_s": 0.01,
            }
        },
    )
    j = hub.get("gemini")
    assert KEY not in repr(j)
    r = ask(j, video)
    fake.script = [Reply(status=400, message=f"API key not valid: {KEY}")]  # a server echoing the key
    with pytest.raises(JudgeError) as ei:
        ask(j, video, QS[:1])
    assert KEY not in str(ei.value) and "***" in str(ei.value)
    assert fake.key_ok and all(fake.key_ok)
    assert KEY not in caplog.text
    assert KEY not in json.dumps(r.__dict__, default=str)
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert KEY.encode() not in p.read_bytes(), p


def test_wrong_key_is_refused(fake, tmp_path, video):
    j = GeminiJudge({"base_url": fake.base_url}, api_key="not-the-key")
    with pytest.raises(JudgeError, match="401"):
        ask(j, video)
    assert fake.key_ok == [False]


def test_unknown_option_is_rejected():
    with pytest.raises(JudgeError, match="unknown option"):
        GeminiJudge({"modle_id": "x"}, api_key=KEY, client=object())


def test_truth_answerer_identifies_videos(fake, tmp_path, video):
    fake.answer = truth_answerer({sha(video): {"1": "No", "2": "Yes"}})
    r = ask(judge_for(fake, tmp_path), video)
    assert [a["Answer"] for a in r.answers] == ["No", "Yes"]
