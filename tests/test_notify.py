"""Tests for webhook delivery against a real HTTP receiver on loopback."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from watchdog.alerts.delivery import post_json, redact_url
from watchdog.exceptions import DeliveryError
from watchdog.vocabulary import DEFAULT_DELIVERY_ATTEMPTS

pytestmark = pytest.mark.anyio

SECRET_PATH = "/services/T0SECRET/B0SECRET/XyZsecretToken123"
SECRET_QUERY = "key=AIzaSecret&token=hunter2"


@dataclass
class Received:
    """One request as the receiver saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A loopback HTTP server that answers with scripted statuses and records what it got."""

    host: str
    port: int
    statuses: list[int] = field(default_factory=list)
    answer: bytes = b"ok"
    requests: list[Received] = field(default_factory=list)

    def url(self, path: str = SECRET_PATH) -> str:
        """The URL of this receiver with a secret-looking path."""
        return f"http://{self.host}:{self.port}{path}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A real ThreadingHTTPServer on 127.0.0.1, port 0, for the duration of one test."""
    state = Receiver(host="127.0.0.1", port=0)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with lock:
                state.requests.append(
                    Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                status = state.statuses.pop(0) if state.statuses else 200
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(state.answer)))
            self.end_headers()
            self.wfile.write(state.answer)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep the test output clean."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    # A short poll interval so that shutdown() returns quickly at teardown.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _chain_text(exc: BaseException) -> str:
    parts = []
    current: BaseException | None = exc
    while current is not None:
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


async def test_body_received_exactly(receiver: Receiver) -> None:
    """The receiver gets one POST to the full URL with the payload as compact UTF-8 JSON."""
    payload = {
        "launch": "kimi-ep",
        "state": "crashed",
        "summary": "RuntimeError: Not enough memory …",
        "n": [1, 2],
    }
    await post_json(receiver.url(f"{SECRET_PATH}?{SECRET_QUERY}"), payload, backoff=0)
    (request,) = receiver.requests
    assert request.path == f"{SECRET_PATH}?{SECRET_QUERY}"
    assert request.body == json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert json.loads(request.body) == payload
    assert request.headers["content-type"] == "application/json; charset=utf-8"
    assert request.headers["user-agent"].startswith("llm-launch-watchdog/")


@pytest.mark.parametrize(
    "failures",
    [
        pytest.param([500, 500], id="500-twice"),
        pytest.param([503], id="503-once"),
        pytest.param([429, 502], id="429-then-502"),
    ],
)
async def test_transient_failures_are_retried(receiver: Receiver, failures: list[int]) -> None:
    """5xx and 429 answers are retried, and a 200 within the attempts is success."""
    receiver.statuses = [*failures, 200]
    await post_json(receiver.url(), {"ok": True}, backoff=0.001)
    assert len(receiver.requests) == len(failures) + 1
    assert {r.body for r in receiver.requests} == {b'{"ok":true}'}


async def test_gives_up_after_the_default_attempts(receiver: Receiver) -> None:
    """DEFAULT_DELIVERY_ATTEMPTS (4) 500 answers in a row raise DeliveryError naming the status and the attempts."""
    receiver.statuses = [500] * DEFAULT_DELIVERY_ATTEMPTS + [200]
    with pytest.raises(DeliveryError, match=rf"HTTP 500 .*\({DEFAULT_DELIVERY_ATTEMPTS} attempts\)") as info:
        await post_json(receiver.url(), {"x": 1}, backoff=0)
    assert len(receiver.requests) == DEFAULT_DELIVERY_ATTEMPTS == 4
    assert SECRET_PATH not in _chain_text(info.value)


@pytest.mark.parametrize(
    "status",
    [
        pytest.param(301, id="301"),
        pytest.param(400, id="400"),
        pytest.param(403, id="403"),
        pytest.param(404, id="404"),
        pytest.param(410, id="410"),
    ],
)
async def test_client_errors_raise_without_retry_or_secret(receiver: Receiver, status: int) -> None:
    """A 3xx or a 4xx other than 429 raises DeliveryError at once, showing only scheme://host:port."""
    receiver.statuses = [status]
    receiver.answer = f"no_service for {SECRET_PATH}".encode()
    url = receiver.url(f"{SECRET_PATH}?{SECRET_QUERY}")
    with pytest.raises(DeliveryError) as info:
        await post_json(url, {"x": 1}, backoff=0)
    message = str(info.value)
    assert f"webhook http://127.0.0.1:{receiver.port} answered HTTP {status}" in message
    assert "no_service" in message
    text = _chain_text(info.value)
    assert SECRET_PATH not in text
    assert "XyZsecretToken123" not in text
    assert "hunter2" not in text
    assert len(receiver.requests) == 1


async def test_connection_refused_raises_delivery_error() -> None:
    """A port with nobody listening raises DeliveryError, after the retries, without the secret path."""
    with socket.socket() as bound:
        # Bound but not listening: the kernel refuses connections, and no other test can take the port.
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        with pytest.raises(
            DeliveryError,
            match=rf"cannot reach webhook http://127\.0\.0\.1:{port}: connection refused \(4 attempts\)",
        ):
            await post_json(f"http://127.0.0.1:{port}{SECRET_PATH}", {"x": 1}, backoff=0)


async def test_receiver_that_never_answers_times_out() -> None:
    """A receiver that accepts the connection but never answers raises DeliveryError after the timeout."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        with pytest.raises(DeliveryError, match=r"\(1 attempt\)") as info:
            await post_json(f"http://127.0.0.1:{port}{SECRET_PATH}", {"x": 1}, timeout=0.2, attempts=1)
    assert SECRET_PATH not in _chain_text(info.value)


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("ftp://example.com/secret", id="ftp"),
        pytest.param("file:///etc/passwd", id="file"),
        pytest.param("hooks.slack.com/services/T0/B0/x", id="no-scheme"),
        pytest.param("", id="empty"),
    ],
)
async def test_non_http_urls_are_refused(url: str) -> None:
    """Only http:// and https:// URLs are posted to; others raise DeliveryError without the URL."""
    with pytest.raises(DeliveryError, match="only http:// and https://") as info:
        await post_json(url, {"x": 1})
    assert "secret" not in str(info.value)
    assert "passwd" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param(
            "https://hooks.slack.com/services/T0/B0/XYZ", "https://hooks.slack.com", id="slack-path-token"
        ),
        pytest.param(
            "https://chat.googleapis.com/v1/spaces/AAA/messages?key=k&token=t",
            "https://chat.googleapis.com",
            id="google-chat-query-token",
        ),
        pytest.param("http://127.0.0.1:8080/hook", "http://127.0.0.1:8080", id="port-kept"),
        pytest.param("https://user:pa55@alerts.example:8443/x", "https://alerts.example:8443", id="userinfo"),
        pytest.param("http://[::1]:9093/api/v2/alerts", "http://[::1]:9093", id="ipv6"),
        pytest.param("HTTPS://Example.com#frag", "https://Example.com", id="scheme-lowercased"),
        pytest.param("  https://ntfy.sh/secret-topic  ", "https://ntfy.sh", id="surrounding-space"),
        pytest.param("not a url", "<invalid URL>", id="garbage"),
        pytest.param("http://[::1/x", "<invalid URL>", id="broken-ipv6"),
        pytest.param("", "<invalid URL>", id="empty"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    """redact_url keeps only scheme://host[:port], dropping credentials, path, query and fragment."""
    assert redact_url(url) == expected
