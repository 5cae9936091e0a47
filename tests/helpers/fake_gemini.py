"""A stdlib fake of the Gemini API endpoints google-genai 3.x calls, for tests without network.

Endpoints (found by reading ``google/genai/models.py``, ``files.py`` and ``_api_client.py``):

* ``POST /{version}/models/{model}:generateContent`` — JSON body with ``contents`` (parts carry
  ``inlineData`` {data: URL-safe base64, mimeType} or ``fileData`` {fileUri, mimeType} or ``text``),
  ``systemInstruction`` and ``generationConfig``.
* ``POST /upload/{version}/files`` — resumable upload *start*: headers ``X-Goog-Upload-Protocol:
  resumable``, ``X-Goog-Upload-Command: start``, ``X-Goog-Upload-Header-Content-Length/-Type``; body
  ``{"file": {...}}``. The reply carries the session URL in the ``x-goog-upload-url`` header.
* ``POST <session url>`` — chunks with ``X-Goog-Upload-Command: upload`` (or ``upload, finalize`` for
  the last) and ``X-Goog-Upload-Offset``; the reply must carry ``x-goog-upload-status`` (``active`` /
  ``final``); the final reply's JSON is ``{"file": {name, uri, mimeType, sizeBytes, state}}``.
  The SDK sends no API key on chunk requests, so the fake does not demand one there.
* ``GET /{version}/files/{id}`` — file metadata; ``state`` goes PROCESSING -> ACTIVE.
* ``DELETE /{version}/files/{id}``.

Every other request must carry ``x-goog-api-key`` equal to the expected key (else 401). The fake
records requests (never the key itself) so tests can check what was sent.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse


@dataclass
class GenerateCall:
    """One generateContent request as the fake saw it."""

    model: str
    version: str
    media: bytes | None
    media_mime: str | None
    media_sha256: str | None
    text: str
    system: str
    config: dict[str, Any]
    via_file: bool


@dataclass
class Reply:
    """What the fake answers to one generateContent call."""

    text: str | None = None  # model text (JSON or not)
    status: int = 200  # non-200 -> an error body with this code
    message: str = "scripted failure"  # error message for non-200 replies
    delay_s: float = 0.0  # sleep before answering (timeouts)
    usage: dict[str, int] = field(
        default_factory=lambda: {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120}
    )


_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class FakeGemini:
    """Start with ``with FakeGemini(api_key, answer) as fake: ... fake.base_url``.

    ``answer(call) -> Reply | str`` decides each generateContent reply; ``fake.script`` is a list of
    replies consumed first (one per call), for 429/500/slow sequences.
    """

    def __init__(
        self,
        api_key: str,
        answer: Callable[[GenerateCall], Reply | str] | None = None,
        processing_polls: int = 1,
    ):
        self.api_key = api_key
        self.answer = answer or (lambda call: Reply(text="[]"))
        self.script: list[Reply] = []
        self.calls: list[GenerateCall] = []
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self.key_ok: list[bool] = []  # per keyed request: did the header match?
        self.files: dict[str, dict[str, Any]] = {}  # id -> metadata (+ bytes under "_bytes")
        self.sessions: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.processing_polls = processing_polls
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> FakeGemini:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        serve = self._server.serve_forever
        threading.Thread(target=serve, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def generate_calls(self) -> int:
        return len(self.calls)

    def next_reply(self, call: GenerateCall) -> Reply:
        with self._lock:
            self.calls.append(call)
            scripted = self.script.pop(0) if self.script else None
        got = scripted if scripted is not None else self.answer(call)
        return Reply(text=got) if isinstance(got, str) else got


class _Handler(BaseHTTPRequestHandler):
    owner: FakeGemini
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
            self.close_connection = True

    def handle_route(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as e:  # a fake bug must surface as a 500 the test can see, not a hang
            self._error(500, f"fake server error: {type(e).__name__}: {e}")

    # -- helpers --------------------------------------------------------------------------------
    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(
            status,
            {"error": {"code": status, "message": message, "status": _STATUS_NAMES.get(status, "UNKNOWN")}},
        )

    def _check_key(self) -> bool:
        ok = self.headers.get("x-goog-api-key") == self.owner.api_key
        self.owner.key_ok.append(ok)
        if not ok:
            self._error(401, "API key missing or wrong")
        return ok

    # -- routes ---------------------------------------------------------------------------------
    def do_POST(self) -> None:
        self.handle_route(self._do_POST)

    def _do_POST(self) -> None:
        path = urlparse(self.path).path
        self.owner.requests.append(("POST", path))
        body = self._body()
        if path.startswith("/upload-session/"):
            return self._upload_chunk(path.rsplit("/", 1)[-1], body)
        if not self._check_key():
            return
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "upload" and parts[2] == "files":
            return self._upload_start(parts[1], body)
        if len(parts) == 3 and parts[1] == "models" and parts[2].endswith(":generateContent"):
            return self._generate(parts[0], parts[2][: -len(":generateContent")], body)
        self._error(404, f"no route {path}")

    def do_GET(self) -> None:
        self.handle_route(self._do_GET)

    def _do_GET(self) -> None:
        path = urlparse(self.path).path
        self.owner.requests.append(("GET", path))
        if not self._check_key():
            return
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[1] == "files" and parts[2] in self.owner.files:
            meta = self.owner.files[parts[2]]
            meta["_polls"] += 1
            if meta["_polls"] > self.owner.processing_polls:
                meta["state"] = "ACTIVE"
            return self._send(200, {k: v for k, v in meta.items() if not k.startswith("_")})
        self._error(404, f"no file {path}")

    def do_DELETE(self) -> None:
        self.handle_route(self._do_DELETE)

    def _do_DELETE(self) -> None:
        path = urlparse(self.path).path
        self.owner.requests.append(("DELETE", path))
        if not self._check_key():
            return
        fid = path.rsplit("/", 1)[-1]
        if self.owner.files.pop(fid, None) is None:
            return self._error(404, f"no file {path}")
        self.owner.deleted.append(fid)
        self._send(200, {})

    def _upload_start(self, version: str, body: bytes) -> None:
        if (
            self.headers.get("X-Goog-Upload-Protocol") != "resumable"
            or self.headers.get("X-Goog-Upload-Command") != "start"
        ):
            return self._error(400, "expected a resumable upload start")
        size = int(self.headers.get("X-Goog-Upload-Header-Content-Length") or -1)
        mime = self.headers.get("X-Goog-Upload-Header-Content-Type") or ""
        sid = hashlib.sha256(f"{time.time_ns()}-{len(self.owner.sessions)}".encode()).hexdigest()[:12]
        meta = json.loads(body or b"{}").get("file", {})
        self.owner.sessions[sid] = {
            "size": size,
            "mime": mime,
            "data": bytearray(),
            "version": version,
            "display": meta.get("displayName", ""),
        }
        self._send(
            200,
            {},
            {
                "x-goog-upload-url": f"{self.owner.base_url}/upload-session/{sid}",
                "x-goog-upload-status": "active",
            },
        )

    def _upload_chunk(self, sid: str, body: bytes) -> None:
        sess = self.owner.sessions.get(sid)
        if sess is None:
            return self._error(404, "unknown upload session")
        cmd = self.headers.get("X-Goog-Upload-Command", "")
        if int(self.headers.get("X-Goog-Upload-Offset") or -1) != len(sess["data"]):
            return self._error(400, "bad upload offset")
        sess["data"].extend(body)
        if "finalize" not in cmd:
            return self._send(200, {}, {"x-goog-upload-status": "active"})
        if len(sess["data"]) != sess["size"]:
            return self._error(400, "size mismatch")
        fid = f"f{len(self.owner.files) + len(self.owner.deleted)}{sid[:6]}"
        uri = f"{self.owner.base_url}/{sess['version']}/files/{fid}"
        meta = {
            "name": f"files/{fid}",
            "uri": uri,
            "mimeType": sess["mime"],
            "sizeBytes": str(sess["size"]),
            "state": "PROCESSING",
            "displayName": sess["display"],
            "_polls": 0,
            "_bytes": bytes(sess["data"]),
        }
        self.owner.files[fid] = meta
        self._send(
            200,
            {"file": {k: v for k, v in meta.items() if not k.startswith("_")}},
            {"x-goog-upload-status": "final"},
        )

    def _generate(self, version: str, model: str, body: bytes) -> None:
        req = json.loads(body)
        media = mime = None
        via_file = False
        texts = []
        for content in req.get("contents", []):
            for part in content.get("parts", []):
                if "inlineData" in part:
                    media = base64.urlsafe_b64decode(part["inlineData"]["data"])
                    mime = part["inlineData"].get("mimeType") or part["inlineData"].get("mime_type")
                elif "fileData" in part:
                    # the SDK sends snake_case keys inside fileData/inlineData; the API accepts both
                    fd = part["fileData"]
                    uri = fd.get("fileUri") or fd.get("file_uri")
                    f = next((m for m in self.owner.files.values() if m["uri"] == uri), None)
                    if f is None or f["state"] != "ACTIVE":
                        return self._error(400, f"file {uri} is not ACTIVE")
                    media, mime, via_file = f["_bytes"], fd.get("mimeType") or fd.get("mime_type"), True
                elif "text" in part:
                    texts.append(part["text"])
        system = " ".join(p.get("text", "") for p in (req.get("systemInstruction") or {}).get("parts", []))
        call = GenerateCall(
            model=model,
            version=version,
            media=media,
            media_mime=mime,
            media_sha256=hashlib.sha256(media).hexdigest() if media is not None else None,
            text="\n".join(texts),
            system=system,
            config=req.get("generationConfig", {}),
            via_file=via_file,
        )
        reply = self.owner.next_reply(call)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if reply.status != 200:
            return self._error(reply.status, reply.message)
        self._send(
            200,
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": reply.text or ""}]},
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": reply.usage,
                "modelVersion": model,
            },
        )


# -- helpers for answer functions ----------------------------------------------------------------------
def questions_in(text: str) -> list[dict[str, Any]]:
    """The question list a prompt carries (the first JSON array of objects with an "ID")."""
    i = text.find('[{"ID"')
    if i < 0:
        return []
    value, _ = json.JSONDecoder().raw_decode(text[i:])
    return value


def answer_items(
    questions: list[dict[str, Any]], truth: dict[str, str], default: str = "No"
) -> list[dict[str, Any]]:
    """Reply items for ``questions``, answering each from ``truth`` ({str(ID): "Yes"|"No"})."""
    out = []
    for q in questions:
        ans = truth.get(str(q["ID"]), default)
        positive = str(q.get("Dimension Polarity", "Positive")).lower() == "positive"
        verdict = "Pass" if (ans == "Yes") == positive else "Fail"
        out.append({**q, "Answer": ans, "Verdict": verdict, "Reasoning": "fake judge"})
    return out


def truth_answerer(truth_by_media: dict[str, dict[str, str]], default: str = "No"):
    """An ``answer`` function that identifies the video by the sha256 of the bytes it received and
    answers the prompt's questions from that video's truth table."""

    def answer(call: GenerateCall) -> Reply:
        truth = truth_by_media.get(call.media_sha256 or "", {})
        return Reply(text=json.dumps(answer_items(questions_in(call.text), truth, default)))

    return answer
