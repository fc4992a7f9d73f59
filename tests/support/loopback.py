"""Loopback servers speaking the real wire protocols, backed by the calibration world.

One ``ThreadingHTTPServer`` on 127.0.0.1 serves, by path:

- ``POST /v1/chat/completions`` (OpenAI / vLLM / OpenRouter): requests with image parts go to a
  ``ReferenceVLM``, text-only ones to the ``RuleBasedLLM``; with ``modalities: ["image", ...]`` the
  ``SceneEditor`` edits the image and the reply carries it in ``message.images`` (OpenRouter).
- ``GET /v1/models`` (health check).
- ``POST /v1/images/edits`` (OpenAI images, multipart) → ``SceneEditor``, ``b64_json`` reply.
- BFL: ``POST /v1/<model>`` → ``{id, polling_url, cost}`` (docs.bfl.ai FLUX.2 reference: ``cost`` in
  credits); the polling URL is *regional* (``/eu2/v1/get_result?id=``: BFL returns
  ``api.eu2.bfl.ai`` and says "always use the polling_url returned"); polls answer Pending, then
  Ready with a signed ``sample`` URL that redirects (307) to ``/delivery/<id>.png?sig=`` (BFL's
  official client downloads with ``follow_redirects=True``), 404 after the first download, like an
  expiring signed URL. An unknown id is HTTP 200 with status ``Task not found`` (docs.bfl.ml
  ``get-result``: 200 ``ResultResponse`` or 422, statuses ``Ready, Pending, Request Moderated,
  Content Moderated, Task not found, Error``); ``bfl_status`` forces another status (an API change).
  ``bfl_lose_jobs`` forgets the first n jobs (BFL: the job is gone); ``bfl_accept_then`` creates and
  bills the job and then answers ``502`` or stalls past the client's read timeout (the case BFL's
  official client ``src/bfl/_transport.py`` refuses to resubmit); past ``bfl_credits`` accepted jobs a
  submit answers 402 (docs.bfl.ml ``errors.md``: insufficient credits).
- OpenAI quota: ``quota_exhausted`` answers every POST with 429 ``insufficient_quota`` ("You
  exceeded your current quota", OpenAI's error object ``{message, type, code}``).
- Model ids: ``POST /v1/images/edits`` refuses a model the installed openai SDK lists as shut down
  or retired (``openai/types/image_model.py``) with 404 ``model_not_found`` (OpenAI's error object;
  the exact status for a retired id is not in the SDK).
- Reasoning: vLLM 0.33 returns it as ``message.reasoning`` (``ChatMessage`` in
  ``vllm/entrypoints/openai/chat_completion/protocol.py``; ``reasoning_content`` is deprecated).

Faults are deterministic: a request is identified by its body (plus path), and the n-th time the
same request arrives it fails when ``hash(body, n)`` falls under ``rate`` and fewer than
``max_consecutive`` faults have hit it, so every request eventually succeeds and a run with faults
must give the same scores as one without.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from model_adapters.contracts import ChatMessage, GenerationParams
from model_adapters.errors import BackendError, BadInput, EditRefused
from model_adapters.openai_images import retired_image_models

CHAT_FAULTS = ("rate_limited", "server_error", "timeout", "malformed", "dropped")
UNTIL_CLOSED = 3600.0
"""A stall (``FaultPlan.stall_s``) that ends only when the server closes: longer than any client
timeout, whatever the machine's load, and it costs the test nothing (the server ends it on exit)."""


@dataclass
class FaultPlan:
    rate: float = 0.0
    kinds: Sequence[str] = CHAT_FAULTS
    max_consecutive: int = 2
    retry_after: str = "0"
    """Value of Retry-After on 429 (seconds); ``retry-after-ms: 1`` is sent as well unless None."""
    retry_after_ms: str | None = "1"
    stall_s: float = 1.0
    """How long a ``timeout`` fault stalls before answering (more than the client's timeout); a
    stall ends without an answer when the server closes (``UNTIL_CLOSED``: the client's timeout
    fires first whatever the machine's load)."""
    seen: Counter = field(default_factory=Counter)
    injected: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, key: bytes) -> str | None:
        digest = hashlib.sha256(key).hexdigest()
        with self.lock:
            n = self.seen[digest]
            self.seen[digest] += 1
            if n >= self.max_consecutive or self.rate <= 0:
                return None
            u = int(hashlib.sha256(f"{digest}:{n}".encode()).hexdigest()[:8], 16) / 16**8
            if u >= self.rate:
                return None
            kind = self.kinds[int(u / self.rate * len(self.kinds)) % len(self.kinds)]
            self.injected[kind] += 1
            return kind


def png(image: Image.Image) -> bytes:
    info = PngInfo()
    for k, v in image.info.items():
        if isinstance(k, str) and k.startswith("edct_") and isinstance(v, str):
            info.add_text(k, v)
    buf = io.BytesIO()
    image.save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


def open_image(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        meta = {k: v for k, v in im.info.items() if isinstance(k, str) and k.startswith("edct_")}
        out = im.convert("RGB")
    out.info.update(meta)
    return out


def image_from_uri(uri: str) -> Image.Image:
    return open_image(base64.b64decode(uri.split(",", 1)[1]))


def structured_reply(name: str, text: str) -> str:
    """The rule-based reply as the JSON object the schema ``name`` asks for (as a constrained
    server would write it); the text unchanged when it cannot be read."""
    from edct_task import parsing

    readers: dict[str, tuple[Any, Any]] = {
        "edct_concepts": (lambda t: parsing.parse_concepts(t, 10), lambda v: {"concepts": v}),
        "edct_edit_instructions": (
            lambda t: parsing.parse_instructions(t, 10),
            lambda v: {"edits": [e.model_dump() for e in v]},
        ),
        "edct_edit_target": (parsing.parse_edit_target, lambda v: {"type": v.type, "target": v.target}),
        "edct_binary_verdict": (
            parsing.parse_binary_judgement,
            lambda v: {"ac_reason": v.ac_reason, "ef_reason": v.ef_reason, "ac": v.ac, "ef": v.ef},
        ),
        "edct_graded_verdict": (
            parsing.parse_graded_judgement,
            lambda v: {"reason": v.reason, "score": v.score},
        ),
    }
    if name not in readers:
        return text
    read, as_json = readers[name]
    result = read(text)
    if isinstance(result, parsing.Unparsed):
        return text
    return json.dumps(as_json(result.value))


class CalibrationWorld:
    """The in-process calibration backends the servers put behind the wire."""

    def __init__(self, behavior: str = "faithful", resize_to: tuple[int, int] | None = None) -> None:
        from edct_task.calibration import ReferenceVLM, RuleBasedLLM, SceneEditor

        self.vlm = ReferenceVLM(behavior)
        self.llm = RuleBasedLLM()
        self.editor = SceneEditor()
        self.resize_to = resize_to

    def complete(self, prompt: str, params: GenerationParams) -> str:
        """The rule-based LLM's reply; prompts from no EDCT template are echoed (for wire tests)."""
        try:
            return self.llm.complete(prompt, params).text
        except BackendError:
            return f"echo: {prompt}"

    def edit(self, image: Image.Image, instruction: str, seed: int) -> Image.Image:
        out = self.editor.edit(image, instruction, seed=seed)
        if self.resize_to is not None and out.size != self.resize_to:
            meta = dict(out.info)
            out = out.resize(self.resize_to, Image.Resampling.NEAREST)
            out.info.update(meta)
        return out


class Loopback(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        world: CalibrationWorld,
        *,
        faults: FaultPlan | None = None,
        api_key: str | None = None,
        reasoning: bool = False,
        report_cost: bool = False,
        moderate: float = 0.0,
        moderate_first_attempts_only: bool = False,
        down: bool = False,
        latency_s: float = 0.0,
        structured: bool = True,
        quota_exhausted: bool = False,
        bfl_credits: int | None = None,
        bfl_status: str | None = None,
        bfl_lose_jobs: int = 0,
        bfl_accept_then: str | None = None,
        bfl_cost: float = 3.0,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.world = world
        self.latency_s = latency_s
        """Seconds each chat completion takes (for benchmarks; tests leave it at 0)."""
        self.faults = faults or FaultPlan()
        self.api_key = api_key
        self.reasoning = reasoning
        self.report_cost = report_cost
        self.moderate = moderate
        self.moderate_first_attempts_only = moderate_first_attempts_only
        """Moderate only first attempts (the protocol's attempt a of edit j uses seed 1000·j + a), so
        every moderated edit succeeds on its retry."""
        self.down = down
        self.structured = structured
        """Honour ``response_format`` json_schema (like vLLM); False: reject it with a 400 (like a
        server without structured output)."""
        self.quota_exhausted = quota_exhausted
        self.bfl_credits = bfl_credits
        """Jobs the account can still pay for (None: unlimited)."""
        self.bfl_status = bfl_status
        self.bfl_lose_jobs = bfl_lose_jobs
        self.bfl_accept_then = bfl_accept_then
        """``server_error`` / ``read_timeout``: the submit is accepted (and billed) first."""
        self.bfl_cost = bfl_cost
        self.bfl_billed = 0.0
        """Credits of every job BFL accepted (what the account would be charged)."""
        self.requests: Counter = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.chats: list[list[tuple[str, str]]] = []
        """Every chat request's messages as ``(role, text)``, images left out."""
        self.headers_seen: list[dict[str, str]] = []
        self.bfl_jobs: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.closing = threading.Event()
        """Set as the server closes: a stalled reply ends then."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> Loopback:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.shutdown()
        self.server_close()

    def moderated(self, key: bytes, seed: int | None = None) -> bool:
        if self.moderate <= 0:
            return False
        if self.moderate_first_attempts_only and (seed is None or seed % 1000 != 0):
            return False
        u = int(hashlib.sha256(b"mod:" + key).hexdigest()[:8], 16) / 16**8
        return u < self.moderate


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in separate writes: no 40 ms delayed-ACK stall
    server: Loopback

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing -------------------------------------------------------------------------------
    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers=headers)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(length) if length else b""

    def _authorised(self) -> bool:
        key = self.server.api_key
        if key is None:
            return True
        given = self.headers.get("Authorization", "") or ""
        if given == f"Bearer {key}" or self.headers.get("x-key") == key:
            return True
        shown = given[:14] + "***" if given else "(none)"
        self._json(401, {"error": {"message": f"Incorrect API key provided: {shown}. Key was {given}"}})
        return False

    def _fault(self, key: bytes) -> bool:
        """Inject the planned fault, if any; True when the request was answered by it."""
        ctype = self.headers.get("Content-Type", "")
        if "boundary=" in ctype:  # multipart: the same request has a fresh boundary on every try
            key = key.replace(ctype.split("boundary=", 1)[1].strip('"').encode(), b"")
        kind = self.server.faults.decide(self.path.encode() + b"|" + key)
        if kind is None:
            return False
        plan = self.server.faults
        if kind == "rate_limited":
            headers = {"Retry-After": plan.retry_after}
            if plan.retry_after_ms is not None:
                headers["retry-after-ms"] = plan.retry_after_ms
            self._json(429, {"error": {"message": "Rate limit reached", "type": "rate_limit"}}, headers)
        elif kind == "server_error":
            self._json(500, {"error": {"message": "internal server error"}})
        elif kind == "timeout":
            if self.server.closing.wait(plan.stall_s):
                self.close_connection = True  # the server closes: the stall ends unanswered
            else:
                self._json(504, {"error": {"message": "too late"}})
        elif kind == "malformed":
            self._send(200, b'{"id": "chatcmpl-x", "choices": [{"mess')
        elif kind == "dropped":
            self.close_connection = True
        return True

    def _record(self, headers: bool = True) -> None:
        with self.server.lock:
            self.server.requests[self.path.split("?")[0]] += 1
            if headers:
                self.server.headers_seen.append(dict(self.headers.items()))

    # -- routes ---------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._record()
        if self.server.down:
            self.close_connection = True
            return
        parts = urllib.parse.urlsplit(self.path)
        if parts.path == "/v1/models":  # like vLLM with --api-key, the listing needs the key
            if self._authorised():
                self._json(200, {"object": "list", "data": [{"id": "loopback"}]})
        elif parts.path in ("/v1/get_result", "/eu2/v1/get_result"):
            self._bfl_poll(urllib.parse.parse_qs(parts.query).get("id", [""])[0])
        elif parts.path.startswith("/redirect/"):
            target = parts.path.replace("/redirect/", "/delivery/", 1) + "?" + parts.query
            self._send(307, b"", "text/plain", {"Location": target})
        elif parts.path.startswith("/delivery/"):
            self._bfl_download(parts)
        else:
            self._json(404, {"error": {"message": f"no route {parts.path}"}})

    def do_POST(self) -> None:
        self._record()
        body = self._body()
        if self.server.down:
            self.close_connection = True
            return
        if not self._authorised():
            return
        path = urllib.parse.urlsplit(self.path).path
        if self.server.quota_exhausted:
            quota = {
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
            self._json(429, {"error": quota})
            return
        if path.startswith(("/v1/flux", "/v1/bfl-")) and self.server.bfl_credits is not None:
            with self.server.lock:
                broke = self.server.bfl_credits <= 0
                self.server.bfl_credits -= 0 if broke else 1
            if broke:
                self._json(402, {"detail": "Insufficient credits"})
                return
        if self._fault(body):
            return
        if path == "/v1/chat/completions":
            self._chat(json.loads(body))
        elif path == "/v1/images/edits":
            self._openai_images_edit(body)
        elif path.startswith("/v1/flux") or path.startswith("/v1/bfl-"):
            self._bfl_submit(path.rsplit("/", 1)[1], json.loads(body), body)
        else:
            self._json(404, {"error": {"message": f"no route {path}"}})

    # -- OpenAI chat ----------------------------------------------------------------------------
    def _chat(self, body: dict[str, Any]) -> None:
        if self.server.latency_s:
            time.sleep(self.server.latency_s)
        with self.server.lock:
            self.server.bodies.append({k: v for k, v in body.items() if k != "messages"})
        world = self.server.world
        messages = body["messages"]
        conversation: list[ChatMessage] = []
        for m in messages:
            content = m["content"]
            if isinstance(content, list):
                text = "".join(p.get("text", "") for p in content if p["type"] == "text")
                images = tuple(
                    image_from_uri(p["image_url"]["url"]) for p in content if p["type"] == "image_url"
                )
            else:
                text, images = content, ()
            conversation.append(ChatMessage(m["role"], text, images))
        with self.server.lock:
            self.server.chats.append([(m.role, m.text) for m in conversation])
        params = GenerationParams(
            max_new_tokens=body.get("max_tokens") or body.get("max_completion_tokens"),
            temperature=body.get("temperature", 0.0),
            top_p=body.get("top_p", 1.0),
            seed=body.get("seed", 0),
        )
        message: dict[str, Any] = {"role": "assistant"}
        if "image" in (body.get("modalities") or []):
            image = next(img for m in conversation for img in m.images)
            if self.server.moderated(json.dumps(body, sort_keys=True).encode()):
                message["content"] = "I can't help with editing this image."
                message["refusal"] = "content policy"
            else:
                try:
                    edited = world.edit(image, conversation[-1].text, seed=int(body.get("seed", 0)))
                except EditRefused as exc:
                    message["content"] = f"I could not make this edit: {exc}"
                else:
                    uri = "data:image/png;base64," + base64.b64encode(png(edited)).decode()
                    message["content"] = "Here is the edited image."
                    message["images"] = [{"type": "image_url", "image_url": {"url": uri}}]
        elif any(m.images for m in conversation):
            out = world.vlm.generate([conversation], params)[0]
            if isinstance(out, BackendError):
                self._json(400, {"error": {"message": str(out)}})
                return
            message["content"] = out.text
        else:
            message["content"] = world.complete(conversation[-1].text, params)
            schema = (body.get("response_format") or {}).get("json_schema")
            if schema is not None:
                if not self.server.structured:
                    self._json(400, {"error": {"message": "response_format json_schema is not supported"}})
                    return
                message["content"] = structured_reply(schema["name"], message["content"])
        if self.server.reasoning and message.get("content"):
            message["reasoning"] = "The user wants an answer. Let me look at the evidence carefully."
        prompt_chars = sum(len(json.dumps(m)) for m in messages)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": len(message["content"]) // 4,
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if self.server.report_cost:
            usage["cost"] = 0.001
        self._json(
            200,
            {
                "id": "chatcmpl-loopback",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage,
            },
        )

    # -- OpenAI images.edit (multipart) ---------------------------------------------------------
    def _openai_images_edit(self, body: bytes) -> None:
        ctype = self.headers.get("Content-Type", "")
        msg = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
        fields: dict[str, Any] = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[name] = part.get_payload(decode=True)
        model = fields.get("model", b"").decode()
        if model in retired_image_models():
            error = {
                "message": f"The model `{model}` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
            self._json(404, {"error": error})
            return
        image = open_image(fields["image"] if "image" in fields else fields["image[]"])
        prompt = fields["prompt"].decode()
        if self.server.moderated(body):
            self._json(
                400,
                {
                    "error": {
                        "message": "Your request was rejected as a result of our safety system.",
                        "code": "moderation_blocked",
                        "type": "image_generation_user_error",
                    }
                },
            )
            return
        try:
            edited = self.server.world.edit(image, prompt, seed=0)
        except (EditRefused, BadInput) as exc:  # a real server answers 400 for an image it cannot edit
            self._json(400, {"error": {"message": str(exc), "code": "invalid_request"}})
            return
        self._json(
            200,
            {
                "created": 0,
                "data": [{"b64_json": base64.b64encode(png(edited)).decode()}],
                "usage": {"input_tokens": 100, "output_tokens": 50, "total_tokens": 150},
            },
        )

    # -- BFL --------------------------------------------------------------------------------------
    def _bfl_submit(self, model: str, body: dict[str, Any], raw: bytes) -> None:
        job = hashlib.sha256(raw + str(time.perf_counter_ns()).encode()).hexdigest()[:16]
        image = (
            image_from_uri("x," + body["input_image"])
            if not body["input_image"].startswith("data:")
            else image_from_uri(body["input_image"])
        )
        record: dict[str, Any] = {"polls": 0, "model": model}
        if self.server.moderated(raw, int(body.get("seed") or 0)):
            record["status"] = "Request Moderated"
        else:
            try:
                edited = self.server.world.edit(image, body["prompt"], seed=int(body.get("seed") or 0))
            except EditRefused as exc:
                record["status"] = "Error"
                record["error"] = str(exc)
            else:
                record["status"] = "Ready"
                record["png"] = png(edited)
        server = self.server
        with server.lock:
            server.bfl_billed += server.bfl_cost
            if server.bfl_lose_jobs > 0:
                server.bfl_lose_jobs -= 1  # accepted, then gone
            else:
                server.bfl_jobs[job] = record
        if server.bfl_accept_then == "server_error":
            self._json(502, {"detail": "Bad gateway"})
            return
        if server.bfl_accept_then == "read_timeout":
            server.closing.wait(server.faults.stall_s)
            self.close_connection = True
            return
        polling_url = f"{server.url}/eu2/v1/get_result?id={job}"
        self._json(200, {"id": job, "polling_url": polling_url, "cost": server.bfl_cost})

    def _bfl_poll(self, job: str) -> None:
        with self.server.lock:
            record = self.server.bfl_jobs.get(job)
            if record is not None:
                record["polls"] += 1
        if record is None:
            self._json(200, {"id": job, "status": "Task not found", "result": None})
            return
        if self.server.bfl_status is not None:
            self._json(200, {"id": job, "status": self.server.bfl_status, "result": None})
            return
        if record["polls"] < 2:
            self._json(200, {"id": job, "status": "Pending", "result": None, "progress": 0.5})
            return
        status = record["status"]
        if status == "Ready":
            sample = f"{self.server.url}/redirect/{job}.png?se=2099&sig=s3cr3tsignature"
            self._json(200, {"id": job, "status": "Ready", "result": {"sample": sample, "seed": 1}})
        else:
            self._json(
                200,
                {
                    "id": job,
                    "status": status,
                    "result": None,
                    "details": {"reason": record.get("error", "moderated")},
                },
            )

    def _bfl_download(self, parts: urllib.parse.SplitResult) -> None:
        job = parts.path.rsplit("/", 1)[1].split(".")[0]
        with self.server.lock:
            record = self.server.bfl_jobs.get(job)
            data = record.pop("png", None) if record else None
        if data is None:
            self._send(404, b"<Error><Code>NoSuchKey</Code></Error>", "application/xml")
        else:
            self._send(200, data, "image/png")


def openai_retry_waits(records: Sequence[Any]) -> list[float]:
    """The waits the openai client chose before its retries, from its log (``caplog.records``).

    The client logs ``Retrying request in <seconds> seconds (retry n of m)`` at INFO from
    ``openai._base_client`` right before it sleeps.
    """
    return [
        float(r.args[0])
        for r in records
        if r.name == "openai._base_client" and r.msg.startswith("Retrying request in")
    ]


def served_roles_config(path: Path, url: str, key_env: str, **extra: Any) -> Path:
    """An EDCT config file whose non-target roles are real backends served by a loopback server
    (``openai-chat`` text roles, the ``openai-images`` editor) and the offline OpenCV detector:
    what a user names for real data, where the calibration-only backends are refused."""
    from edct_task.config import calibration_config

    raw = calibration_config().model_dump(mode="json")
    chat = {
        "backend": "openai-chat",
        "model": "calibration-llm",
        "base_url": f"{url}/v1",
        "api_key_env": key_env,
    }
    raw["roles"].update(
        extractor=chat,
        judge=chat,
        edit_parser=chat,
        editor={
            "backend": "openai-images",
            "model": "gpt-image-1.5",
            "base_url": f"{url}/v1",
            "api_key_env": key_env,
        },
        detector={"backend": "opencv-cascade"},
    )
    raw.update(progress=False, **extra)
    path.write_text(yaml.safe_dump(raw))
    return path
