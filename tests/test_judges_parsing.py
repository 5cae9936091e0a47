"""Reply parsing, schema validation, retry/backoff arithmetic and the answer cache (no network)."""

from __future__ import annotations

import json

import pytest

from worldrecall.core.judges import JudgeError, id_key
from worldrecall.plugins.judges.answer_cache import AnswerCache, request_key
from worldrecall.plugins.judges.parsing import ReplyError, extract_json, parse_reply, validate
from worldrecall.plugins.judges.retry import (
    Deadline,
    RetryPolicy,
    call_with_retry,
    is_transient,
    server_retry_delay,
)
from worldrecall.plugins.memobench.vqa.prompts import EVAL_SCHEMA, GEN_SCHEMA


def test_extract_json_official_fence_rule():
    # official: text between the line after the first fence and the last fence
    assert extract_json('```json\n[{"ID": 1}]\n```') == [{"ID": 1}]
    assert extract_json('  ```\n{"a": 2}\n```  ') == {"a": 2}
    assert extract_json("[1, 2]") == [1, 2]
    assert extract_json('Answers:\n[{"ID": 3, "Answer": "No"}]\nDone.') == [{"ID": 3, "Answer": "No"}]
    for bad in ("", "   ", None, "yes", "[1, 2", "```json\n[1,\n```"):
        with pytest.raises(ReplyError):
            extract_json(bad)


def test_validate_against_eval_schema():
    ok = [{"ID": 1, "Answer": "Yes."}, {"ID": "2", "Answer": None, "Extra": 1}]
    assert validate(ok, EVAL_SCHEMA) == ok  # enum is a hint; null leaves are kept for the scorer to fail
    assert validate({"answers": ok}, EVAL_SCHEMA) == ok  # a list wrapped in an object is unwrapped
    with pytest.raises(ReplyError, match=r"reply\[0\]: missing required field\(s\) 'Answer'"):
        validate([{"ID": 1}], EVAL_SCHEMA)
    with pytest.raises(ReplyError, match="expected an integer"):
        validate([{"ID": "three", "Answer": "Yes"}], EVAL_SCHEMA)
    with pytest.raises(ReplyError, match="expected a list"):
        validate({"a": 1, "b": 2}, EVAL_SCHEMA)
    with pytest.raises(ReplyError, match="expected an object"):
        validate(["Yes"], EVAL_SCHEMA)
    with pytest.raises(ReplyError, match="expected a string"):
        validate([{"ID": 1, "Answer": True}], EVAL_SCHEMA)
    with pytest.raises(ReplyError, match="missing required"):
        parse_reply('[{"ID": 1, "Dimension": "Physics Adherence", "Question": "q"}]', GEN_SCHEMA)


def test_id_key():
    assert id_key(3) == id_key("3") == id_key(" 3 ") == id_key(3.0) == "3"
    assert id_key(3.5) == "3.5"


def test_backoff_sequence_and_attempt_bound():
    # initial 2 s, x2 per try, capped at 5 s: waits 2, 4, 5 between 4 tries (hand-computed)
    pol = RetryPolicy(
        max_attempts=4,
        initial_backoff_s=2.0,
        backoff_multiplier=2.0,
        max_backoff_s=5.0,
        jitter=0.0,
        timeout_s=30.0,
        max_total_s=1000.0,
    )
    now = [0.0]
    slept, timeouts = [], []

    def sleep(s):
        slept.append(s)
        now[0] += s

    class E(Exception):
        code = 503

    def fn(t):
        timeouts.append(t)
        raise E()

    with pytest.raises(JudgeError, match="gave up after 4 tries"):
        call_with_retry(fn, pol, Deadline(1000.0, clock=lambda: now[0]), "x", sleep=sleep)
    assert slept == [2.0, 4.0, 5.0] and timeouts == [30.0] * 4


def test_deadline_caps_timeouts_and_waits():
    # 10 s budget, 6 s per try timeout: the try at t=0 gets 6 s; it fails at t=6 (clock advanced by fn),
    # backoff 3 s < 4 s left -> sleep to t=9; the second try gets min(6, 1) = 1 s;
    # after it (t=10) nothing is left.
    pol = RetryPolicy(
        max_attempts=10,
        initial_backoff_s=3.0,
        backoff_multiplier=1.0,
        jitter=0.0,
        timeout_s=6.0,
        max_total_s=10.0,
    )
    now = [0.0]
    timeouts = []

    def fn(t):
        timeouts.append(t)
        now[0] += t
        raise TimeoutError("timed out")

    def sleep(s):
        now[0] += s

    with pytest.raises(JudgeError, match="total time"):
        call_with_retry(fn, pol, Deadline(10.0, clock=lambda: now[0]), "x", sleep=sleep)
    assert timeouts == [6.0, 1.0]


def test_success_after_retries_and_classification():
    pol = RetryPolicy(max_attempts=3, initial_backoff_s=0.0, jitter=0.0)
    seq = iter([ConnectionError("reset"), "ok"])

    def fn(t):
        v = next(seq)
        if isinstance(v, Exception):
            raise v
        return v

    assert call_with_retry(fn, pol, Deadline(10), "x", sleep=lambda s: None) == ("ok", 2)

    class Api(Exception):
        def __init__(self, code):
            self.code = code

    assert is_transient(Api(429), pol) and is_transient(Api(500), pol) and not is_transient(Api(400), pol)
    assert not is_transient(ValueError("x"), pol)
    with pytest.raises(JudgeError, match="ValueError"):  # not transient: no retry
        call_with_retry(lambda t: (_ for _ in ()).throw(ValueError("boom")), pol, Deadline(10), "x")


def test_server_retry_delay_from_retry_info():
    class E(Exception):
        details = {
            "error": {
                "code": 429,
                "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}],
            }
        }

    assert server_retry_delay(E()) == 12.0
    assert server_retry_delay(ValueError()) is None


def test_redaction_in_retry_messages():
    pol = RetryPolicy(max_attempts=1)

    def fn(t):
        raise ValueError("key=sekrit-123 rejected")

    with pytest.raises(JudgeError) as ei:
        call_with_retry(fn, pol, Deadline(10), "x", redact=lambda s: s.replace("sekrit-123", "***"))
    assert "sekrit-123" not in str(ei.value) and "***" in str(ei.value)


def test_answer_cache_roundtrip_and_corruption(tmp_path):
    c = AnswerCache(tmp_path)
    k = request_key({"media": "abc", "model": "m"})
    assert k == request_key({"model": "m", "media": "abc"})  # order-independent
    assert c.get(k) is None
    c.put(k, {"answers": [{"ID": 1, "Answer": "Yes"}]})
    assert c.get(k)["answers"] == [{"ID": 1, "Answer": "Yes"}]
    c.path_for(k).write_text("{truncated")
    assert c.get(k) is None  # unreadable entry -> a miss (asked again), never a crash
    c.put(k, {"answers": []})
    assert c.get(k)["answers"] == [] and json.loads(c.path_for(k).read_text())["key"] == k
    assert AnswerCache(None).get(k) is None  # no dir: caching off
