"""The Moondream ``/detect`` detector against a loopback server speaking its wire protocol.

The server replays a script of replies (status, headers, body, delay) and records each request.
Backoff sleeps are injected (recorded, not slept); only the timeout test waits for real (two client
timeouts of 0.15 s: its stalled replies never come, so they time out on any machine).
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import skimage.data
from PIL import Image
from support.backends import build
from support.hang_guard import hang_limit

from model_adapters.errors import PermanentBackendError, RateLimited, Timeout, TransientBackendError
from model_adapters.moondream_detector import moondream_from_options
from model_adapters.transport import MalformedReply
from verification.check import check_edit

KEY = "md-test-key-123456"
STALL = float("inf")
"""A reply ``delay`` that lasts until the server closes."""


class Script:
    def __init__(self) -> None:
        self.replies: list[tuple[int, dict[str, str], bytes, float]] = []
        self.requests: list[dict] = []
        self.closing = threading.Event()

    def add(
        self, status: int, body: object, headers: dict[str, str] | None = None, delay: float = 0.0
    ) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.replies.append((status, headers or {}, raw, delay))


@pytest.fixture
def server():
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            body = self.rfile.read(length)
            script.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            status, headers, raw, delay = script.replies.pop(0) if script.replies else (500, {}, b"{}", 0.0)
            if delay == STALL:
                script.closing.wait()
                return
            if delay:
                time.sleep(delay)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    script.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield script
    script.closing.set()
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def image() -> Image.Image:
    return Image.fromarray(np.ascontiguousarray(skimage.data.astronaut()[:, :400]))


def _detector(server, monkeypatch, sleeps, **options):
    monkeypatch.setenv("MD_KEY", KEY)
    opts = {"base_url": server.url, "api_key_env": "MD_KEY", "max_retries": 2, **options}
    opts.setdefault("timeout_s", hang_limit(5))  # a hang guard: only the timeout test stalls
    return moondream_from_options(opts, sleep=sleeps.append)


def test_detect_speaks_the_wire_protocol(server, monkeypatch, image):
    server.add(
        200,
        {
            "request_id": "r1",
            "objects": [
                {"x_min": 0.25, "y_min": 0.1, "x_max": 0.75, "y_max": 0.5},
                {"x_min": 0.9, "y_min": 0.9, "x_max": 1.2, "y_max": 1.0},
            ],
        },
    )
    sleeps: list[float] = []
    det = _detector(server, monkeypatch, sleeps)
    d = det.detect(image, "The Astronaut's face.")
    assert d.boxes == ((100.0, 51.2, 300.0, 256.0), (360.0, 460.8, 400.0, 512.0))  # second one clipped
    assert d.scores == (1.0, 1.0) and sleeps == []
    (req,) = server.requests
    assert req["path"] == "/v1/detect" and req["headers"]["X-Moondream-Auth"] == KEY
    body = json.loads(req["body"])
    assert set(body) == {"image_url", "object"} and body["object"] == "astronaut's face"
    prefix = "data:image/jpeg;base64,"
    assert body["image_url"].startswith(prefix)
    sent = Image.open(io.BytesIO(base64.b64decode(body["image_url"][len(prefix) :])))
    assert sent.format == "JPEG" and sent.size == (400, 512)
    assert KEY not in d.detail


def test_large_images_are_downscaled_before_upload(server, monkeypatch, image):
    server.add(200, {"objects": [{"x_min": 0.5, "y_min": 0.5, "x_max": 1.0, "y_max": 1.0}]})
    det = _detector(server, monkeypatch, [], max_side=128)
    d = det.detect(image, "face")
    sent = json.loads(server.requests[0]["body"])["image_url"].split(",", 1)[1]
    assert Image.open(io.BytesIO(base64.b64decode(sent))).size == (100, 128)
    assert d.boxes == ((200.0, 256.0, 400.0, 512.0),)  # normalised boxes map to the full image


def test_no_objects_is_not_found(server, monkeypatch, image):
    server.add(200, {"request_id": "r2", "objects": []})
    d = _detector(server, monkeypatch, []).detect(image, "unicorn")
    assert not d.found and "target not found: the detector returned no boxes" in d.detail


def test_429_waits_for_retry_after_then_succeeds(server, monkeypatch, image):
    server.add(429, {"error": "slow down"}, headers={"Retry-After": "3"})
    server.add(200, {"objects": [{"x_min": 0, "y_min": 0, "x_max": 0.5, "y_max": 0.5}]})
    sleeps: list[float] = []
    d = _detector(server, monkeypatch, sleeps).detect(image, "face")
    assert d.found and len(server.requests) == 2 and len(sleeps) == 1 and sleeps[0] >= 3.0


def test_5xx_is_retried_then_raised(server, monkeypatch, image):
    for _ in range(3):
        server.add(500, {"error": "boom"})
    sleeps: list[float] = []
    with pytest.raises(TransientBackendError, match="HTTP 500: boom"):
        _detector(server, monkeypatch, sleeps).detect(image, "face")
    assert len(server.requests) == 3 and len(sleeps) == 2  # max_retries = 2


def test_rate_limit_exhausted_is_raised(server, monkeypatch, image):
    for _ in range(3):
        server.add(429, {"error": "quota"}, headers={"Retry-After": "1"})
    with pytest.raises(RateLimited):
        _detector(server, monkeypatch, []).detect(image, "face")


def test_401_is_permanent_and_names_the_key_variable(server, monkeypatch, image):
    server.add(401, {"error": "invalid key"})
    sleeps: list[float] = []
    with pytest.raises(
        PermanentBackendError, match=r"HTTP 401: invalid key \(check the key in \$MD_KEY\)"
    ) as err:
        _detector(server, monkeypatch, sleeps).detect(image, "face")
    assert len(server.requests) == 1 and sleeps == [] and KEY not in str(err.value)


@pytest.mark.parametrize(
    "body", [b"<html>not json</html>", {"objects": "none"}, {"objects": [{"x_min": 0.1}]}, {"answer": "hi"}]
)
def test_malformed_replies_are_retried_then_raised(server, monkeypatch, image, body):
    for _ in range(3):
        server.add(200, body)
    sleeps: list[float] = []
    with pytest.raises(MalformedReply):
        _detector(server, monkeypatch, sleeps).detect(image, "face")
    assert len(server.requests) == 3 and len(sleeps) == 2


def test_malformed_then_good_reply_recovers(server, monkeypatch, image):
    server.add(200, b"{truncated")
    server.add(200, {"objects": [{"x_min": 0.1, "y_min": 0.1, "x_max": 0.2, "y_max": 0.2}]})
    assert _detector(server, monkeypatch, []).detect(image, "face").found


def test_timeouts_are_retried_then_raised(server, monkeypatch, image):
    server.add(200, {"objects": []}, delay=STALL)
    server.add(200, {"objects": []}, delay=STALL)
    sleeps: list[float] = []
    det = _detector(server, monkeypatch, sleeps, timeout_s=0.15, max_retries=1)
    with pytest.raises(Timeout, match="timed out"):
        det.detect(image, "face")
    assert len(sleeps) == 1


def test_failures_propagate_through_the_provider_and_check(server, monkeypatch, image):
    """A failed detection is an exception (the engine records it and never caches it), not a verdict."""
    monkeypatch.setenv("MD_KEY", KEY)
    provider = build(
        "detector", "moondream", {"base_url": server.url, "api_key_env": "MD_KEY", "max_retries": 0}
    )
    assert provider.name == "moondream+box"
    server.add(200, {"objects": [{"x_min": 0.25, "y_min": 0.1, "x_max": 0.75, "y_max": 0.5}]})
    loc = provider.locate(image, "face")
    assert loc.found and loc.mask.sum() == 200 * 205
    server.add(503, {"error": "down"})
    with pytest.raises(TransientBackendError):
        check_edit(image, image, edit_type="MODIFY", target="face", locator=provider)


def test_cloud_url_needs_a_key_and_local_servers_do_not(monkeypatch):
    from model_adapters.errors import OptionsError

    monkeypatch.delenv("MOONDREAM_API_KEY", raising=False)
    with pytest.raises(OptionsError, match="MOONDREAM_API_KEY"):
        moondream_from_options({})
    local = moondream_from_options({"base_url": "http://127.0.0.1:2020/v1"})
    assert local.url == "http://127.0.0.1:2020/v1/detect" and "X-Moondream-Auth" not in local._headers
    with pytest.raises(OptionsError, match="must not carry credentials"):
        moondream_from_options({"base_url": "https://user:pw@api.moondream.ai/v1"})
