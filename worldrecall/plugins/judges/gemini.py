"""The reference VLM judge: Gemini through the ``google-genai`` SDK.

One request = the video (inline bytes when small, a Files API upload otherwise) + one text prompt, with
a system instruction, temperature 0 and a JSON response schema. Transient failures (429, 5xx, timeouts,
dropped connections) are retried with exponential backoff, bounded both by a number of tries and by a
total time per request. A reply that is not valid JSON gets one text-only *repair* call; questions the
reply left out get one follow-up call asking only those. Validated, complete answers are cached on disk (see
:mod:`.answer_cache`), so a rerun costs no calls; a reply that could not be parsed, an endpoint that failed and
questions left unanswered are never kept, so the next run asks again. The cache key holds the request, the
repair switch, the endpoint and the digest of the parsing code.

The API key is read from ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY`` only (never from config), is handed to
the SDK client and nowhere else: it is not logged, not cached, and redacted from error messages.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from worldrecall.core.judges import (
    QUESTIONS_TOKEN,
    JudgeError,
    JudgeResponse,
    MissingAnswers,
    id_key,
    media_digest,
)
from worldrecall.plugins.judges.answer_cache import AnswerCache, request_key
from worldrecall.plugins.judges.errors import JudgeUnavailable, redact
from worldrecall.plugins.judges.media import Media, prepare_media
from worldrecall.plugins.judges.parsing import ReplyError, parse_reply
from worldrecall.plugins.judges.retry import Deadline, RetryPolicy, call_with_retry, wait_until

log = logging.getLogger(__name__)

OFFICIAL_MODEL = "gemini-3.1-pro-preview"  # MemoBench's code default (all commits)
ALTERNATIVE_MODEL = "gemini-3-flash-preview"  # MemoBench's docs default and its question generator
KEY_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

DEFAULTS: dict[str, Any] = {
    "model_id": OFFICIAL_MODEL,
    "api_version": "",  # "" = the SDK's default; e.g. "v1beta"
    "base_url": "",  # "" = the SDK's default (which also honours GOOGLE_GEMINI_BASE_URL)
    "inline_max_bytes": 15_000_000,  # larger media go through the Files API (requests are capped ~20 MB)
    "temperature": 0.0,
    "timeout_s": 300.0,  # per HTTP call
    "max_attempts": 5,  # per HTTP call, first try included
    "initial_backoff_s": 2.0,
    "max_backoff_s": 60.0,
    "backoff_multiplier": 2.0,
    "max_total_s": 1200.0,  # per ask(): upload + processing wait + generation + repairs
    "retry_statuses": [408, 429, 500, 502, 503, 504],
    "poll_interval_s": 5.0,  # Files API state polling (the official step polls every 5 s)
    "delete_uploaded": True,  # remove uploaded files once answered
    "cache_dir": "",  # judge answer cache; "" = no disk cache
    "repair": True,  # one repair call for invalid JSON / omitted questions
}


def api_key_from_env() -> str:
    """The Gemini API key from ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY``, or raise :class:`JudgeUnavailable`."""
    for var in KEY_ENV_VARS:
        val = os.environ.get(var, "").strip()
        if val:
            return val
    raise JudgeUnavailable(
        "gemini judge: no API key in the environment; set GEMINI_API_KEY (or GOOGLE_API_KEY) to run "
        "VLM-judged metrics (keys are read from the environment only, never from config)"
    )


def render_prompt(prompt: str, questions: Sequence[Mapping[str, Any]]) -> str:
    """The user text: ``prompt`` with the question list (JSON) at ``{questions_json}``, or appended."""
    if not questions:
        return prompt
    qjson = json.dumps(list(questions), ensure_ascii=False)
    if QUESTIONS_TOKEN in prompt:
        return prompt.replace(QUESTIONS_TOKEN, qjson)
    return f"{prompt}\n\n{qjson}" if prompt else qjson


class GeminiJudge:
    """A :class:`~worldrecall.core.judges.Judge` backed by a ``google.genai.Client``."""

    def __init__(
        self, options: Mapping[str, Any], *, client: Any = None, api_key: str | None = None, sleep: Any = None
    ):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise JudgeError(
                f"gemini judge: unknown option(s) {', '.join(sorted(unknown))} "
                f"(known: {', '.join(sorted(DEFAULTS))})"
            )
        self.options = {**DEFAULTS, **dict(options)}
        self.model_id = str(self.options["model_id"])
        self.policy = RetryPolicy(
            max_attempts=int(self.options["max_attempts"]),
            initial_backoff_s=float(self.options["initial_backoff_s"]),
            max_backoff_s=float(self.options["max_backoff_s"]),
            backoff_multiplier=float(self.options["backoff_multiplier"]),
            timeout_s=float(self.options["timeout_s"]),
            max_total_s=float(self.options["max_total_s"]),
            retry_statuses=tuple(int(s) for s in self.options["retry_statuses"]),
        )
        self.cache = AnswerCache(self.options["cache_dir"] or None)
        self._secrets = [api_key] if api_key else []
        self._sleep = sleep
        self._client = client if client is not None else self._make_client(api_key or api_key_from_env())
        self._siblings: dict[str, GeminiJudge] = {}
        self._lock = threading.Lock()
        self.calls = 0  # HTTP generate calls made by this judge (tests and reports read it)

    def __repr__(self) -> str:  # never shows the key
        return f"GeminiJudge(model_id={self.model_id!r})"

    # -- construction ---------------------------------------------------------------------------
    def _make_client(self, api_key: str) -> Any:
        self._secrets = [api_key]
        try:
            from google import genai
            from google.genai import types
        except ImportError:
            raise JudgeUnavailable(
                "gemini judge: the google-genai package is not installed; pip install 'worldrecall[vlm]'"
            ) from None
        http = {"timeout": int(self.policy.timeout_s * 1000)}
        if self.options["base_url"]:
            http["base_url"] = str(self.options["base_url"])
        if self.options["api_version"]:
            http["api_version"] = str(self.options["api_version"])
        return genai.Client(api_key=api_key, http_options=types.HttpOptions(**http))

    def for_model(self, model_id: str) -> GeminiJudge:
        """The same judge (client, options, cache) asking another model id."""
        if model_id == self.model_id:
            return self
        with self._lock:
            if model_id not in self._siblings:
                sib = GeminiJudge.__new__(GeminiJudge)
                sib.__dict__.update(self.__dict__)
                sib.options = {**self.options, "model_id": model_id}
                sib.model_id = model_id
                sib._siblings, sib._lock, sib.calls = {}, threading.Lock(), 0
                self._siblings[model_id] = sib
            return self._siblings[model_id]

    def close(self) -> None:
        """Release the SDK client's connections."""
        close = getattr(self._client, "close", None)
        if callable(close):
            close()

    # -- the Judge protocol ---------------------------------------------------------------------
    def ask(
        self,
        video: Path | Sequence[Any],
        system_prompt: str,
        questions: Sequence[Mapping[str, Any]],
        schema: Mapping[str, Any],
        *,
        prompt: str = "",
    ) -> JudgeResponse:
        """Answer ``questions`` about ``video``; raise :class:`JudgeError` (or :class:`MissingAnswers`)."""
        user_text = render_prompt(prompt, questions)
        digest = media_digest(video)
        key = request_key(
            {
                "v": 2,
                "media": digest,
                "model": self.model_id,
                "system": system_prompt,
                "user": user_text,
                "schema": schema,
                "temperature": float(self.options["temperature"]),
                # what else decides the answer kept: whether a reply was repaired, where it was asked, and
                # the code that turned the reply into answers
                "repair": bool(self.options["repair"]),
                "endpoint": self._endpoint(),
                "parsing": parsing_code_digest(),
            }
        )
        cached = self.cache.get(key)
        if cached is not None and not cached.get("missing"):  # an incomplete answer is never reused
            return JudgeResponse(
                answers=cached["answers"],
                usage={**cached.get("usage", {}), "cached": True},
                raw=cached.get("raw", ""),
                model_id=cached.get("model_id", self.model_id),
            )
        deadline = Deadline(self.policy.max_total_s)
        with tempfile.TemporaryDirectory(prefix="wr-judge-") as tmp:
            media = prepare_media(video, Path(tmp))
            uploaded = None
            try:
                part, uploaded = self._media_part(media, deadline)
                resp, missing = self._answer(part, system_prompt, user_text, questions, schema, deadline)
            finally:
                if uploaded is not None and self.options["delete_uploaded"]:
                    self._delete(uploaded)
        resp.usage["uploaded"] = uploaded is not None
        resp.usage["media_bytes"] = media.size
        entry = {
            "answers": resp.answers,
            "usage": resp.usage,
            "raw": resp.raw,
            "model_id": resp.model_id,
            "media_digest": digest,
        }
        if missing:  # not kept: the next run asks again
            msg = f"gemini judge ({self.model_id}) left question ID(s) {', '.join(missing)} unanswered" + (
                " after a follow-up call" if self.options["repair"] else " (follow-up calls disabled)"
            )
            raise MissingAnswers(msg, resp, missing)
        self.cache.put(key, entry)
        return resp

    def _endpoint(self) -> str:
        """Where requests go: the configured base URL and API version, else the SDK's (which reads
        ``GOOGLE_GEMINI_BASE_URL``)."""
        base = str(self.options["base_url"] or os.environ.get("GOOGLE_GEMINI_BASE_URL", "") or "default")
        return f"{base} {self.options['api_version'] or 'default'}"

    # -- steps ----------------------------------------------------------------------------------
    def _retry(self, fn: Any, deadline: Deadline, what: str) -> tuple[Any, int]:
        kw = {"sleep": self._sleep} if self._sleep else {}
        return call_with_retry(fn, self.policy, deadline, what, redact=self._redact, **kw)

    def _redact(self, s: str) -> str:
        return redact(s, self._secrets)

    def _http(self, timeout_s: float) -> Any:
        from google.genai import types

        return types.HttpOptions(timeout=max(1, int(timeout_s * 1000)))

    def _media_part(self, media: Media, deadline: Deadline) -> tuple[Any, Any]:
        from google.genai import types

        if media.size <= int(self.options["inline_max_bytes"]):
            return types.Part.from_bytes(data=media.path.read_bytes(), mime_type=media.mime_type), None
        up, _ = self._retry(
            lambda t: self._client.files.upload(
                file=str(media.path),
                config=types.UploadFileConfig(
                    mime_type=media.mime_type,
                    display_name=f"wr-{media.digest[:16]}",
                    http_options=self._http(t),
                ),
            ),
            deadline,
            f"gemini upload of {media.path.name}",
        )
        name = up.name

        def active(t: float) -> Any:
            f, _ = self._retry(
                lambda tt: self._client.files.get(name=name, config={"http_options": self._http(tt)}),
                deadline,
                f"gemini file status {name}",
            )
            state = str(getattr(f.state, "name", f.state) or "")
            if state.endswith("FAILED"):
                raise JudgeError(f"gemini upload of {media.path.name}: the Files API reports state FAILED")
            return f if state.endswith("ACTIVE") else None

        kw = {"sleep": self._sleep} if self._sleep else {}
        f = (
            up
            if str(getattr(up.state, "name", up.state) or "").endswith("ACTIVE")
            else wait_until(
                active, deadline, float(self.options["poll_interval_s"]), f"gemini file {name}", **kw
            )
        )
        return types.Part.from_uri(file_uri=f.uri, mime_type=f.mime_type or media.mime_type), f

    def _delete(self, f: Any) -> None:
        try:
            self._client.files.delete(name=f.name)
        except Exception as e:  # best effort: the Files API also expires uploads after 48 h
            log.warning(
                "gemini judge: could not delete uploaded file %s (%s)", f.name, self._redact(type(e).__name__)
            )

    def _generate(
        self,
        contents: list[Any],
        system_prompt: str,
        schema: Mapping[str, Any],
        deadline: Deadline,
        what: str,
    ) -> tuple[str, dict[str, Any]]:
        from google.genai import types

        def once(t: float) -> Any:
            with self._lock:
                self.calls += 1
            return self._client.models.generate_content(
                model=self.model_id,
                contents=contents,
                config=types.GenerateContentConfig(
                    system_instruction=system_prompt or None,
                    temperature=float(self.options["temperature"]),
                    response_mime_type="application/json",
                    response_schema=dict(schema),
                    http_options=self._http(t),
                ),
            )

        r, tries = self._retry(once, deadline, what)
        u = getattr(r, "usage_metadata", None)
        usage = {
            "prompt_tokens": getattr(u, "prompt_token_count", None) or 0,
            "output_tokens": getattr(u, "candidates_token_count", None) or 0,
            "total_tokens": getattr(u, "total_token_count", None) or 0,
            "tries": tries,
            "model_version": getattr(r, "model_version", None) or "",
        }
        try:
            text = r.text
        except Exception:  # no candidates (blocked reply): treated like unparsable output
            text = None
        return text or "", usage

    def _answer(
        self,
        part: Any,
        system_prompt: str,
        user_text: str,
        questions: Sequence[Mapping[str, Any]],
        schema: Mapping[str, Any],
        deadline: Deadline,
    ) -> tuple[JudgeResponse, list[str]]:
        what = f"gemini judge ({self.model_id})"
        raw, usage = self._generate([part, user_text], system_prompt, schema, deadline, what)
        total = _Usage(usage)
        repairs: list[dict[str, Any]] = []
        try:
            answers = parse_reply(raw, schema)
        except ReplyError as e:
            if not self.options["repair"]:
                raise JudgeError(f"{what}: invalid reply ({e}); repair disabled") from None
            fix = (
                f"Your previous reply could not be used: {e}. Reply again with only the JSON value the "
                f"response schema asks for, keeping your answers unchanged.\n\nPrevious reply:\n{raw}"
            )
            raw2, usage2 = self._generate([fix], system_prompt, schema, deadline, f"{what} repair")
            total.add(usage2)
            repairs.append({"reason": str(e), "raw": raw2})
            try:
                answers = parse_reply(raw2, schema)
            except ReplyError as e2:
                raise JudgeError(f"{what}: invalid JSON after a repair attempt ({e2})") from None
        missing = _missing_ids(questions, answers)
        if missing and self.options["repair"]:
            todo = [q for q in questions if id_key(q.get("ID")) in set(missing)]
            ask_again = (
                f"Your previous reply left out question ID(s) {', '.join(missing)}. Answer only these "
                f"questions about the same video, in the same JSON format:\n\n"
                f"{json.dumps(todo, ensure_ascii=False)}"
            )
            raw3, usage3 = self._generate(
                [part, ask_again], system_prompt, schema, deadline, f"{what} follow-up"
            )
            total.add(usage3)
            repairs.append({"reason": f"missing IDs {', '.join(missing)}", "raw": raw3})
            try:
                extra = parse_reply(raw3, schema)
            except ReplyError:
                extra = []
            wanted = set(missing)
            answers = list(answers) + [
                a for a in extra if isinstance(a, dict) and id_key(a.get("ID")) in wanted
            ]
            missing = _missing_ids(questions, answers)
        usage_out = total.as_dict()
        if repairs:
            usage_out["repairs"] = repairs
        return JudgeResponse(
            answers=answers if isinstance(answers, list) else [answers],
            usage=usage_out,
            raw=raw,
            model_id=self.model_id,
        ), missing


class _Usage:
    def __init__(self, first: Mapping[str, Any]):
        self.d = dict(first)
        self.d["calls"] = 1

    def add(self, u: Mapping[str, Any]) -> None:
        for k in ("prompt_tokens", "output_tokens", "total_tokens", "tries"):
            self.d[k] = int(self.d.get(k) or 0) + int(u.get(k) or 0)
        self.d["calls"] += 1

    def as_dict(self) -> dict[str, Any]:
        return dict(self.d)


def _missing_ids(questions: Sequence[Mapping[str, Any]], answers: Any) -> list[str]:
    if not questions or not isinstance(answers, list):
        return []
    got = {id_key(a.get("ID")) for a in answers if isinstance(a, dict)}
    return [k for k in (id_key(q.get("ID")) for q in questions if "ID" in q) if k not in got]


@functools.cache
def parsing_code_digest() -> str:
    """sha256 of the code that turns a reply into answers (:mod:`.parsing`): part of the answer cache key."""
    from worldrecall.plugins.judges import parsing

    return hashlib.sha256(Path(parsing.__file__).read_bytes()).hexdigest()


def make_gemini_judge(options: Mapping[str, Any]) -> GeminiJudge:
    """JudgeSpec factory: raises :class:`JudgeUnavailable` without an API key or without the SDK."""
    return GeminiJudge(options)
