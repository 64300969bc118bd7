"""watchdog.httpclient: one TLS context for every request, the environment's proxy for alerts only, and a
request's errors in words, against real receivers on loopback."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from http_receiver import SECRET_PATH, Receiver, running_receiver, self_signed

from watchdog import httpclient
from watchdog.alerts.delivery import post_json
from watchdog.exceptions import TransientDeliveryError
from watchdog.follow.probes.health import HealthProbe

pytestmark = pytest.mark.anyio

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")


@pytest.fixture
def https(tmp_path: Path) -> tuple[Path, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1 (its path) and a server context that presents it."""
    cert, key = self_signed(tmp_path)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    return cert, server


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No proxy in the environment (either case), whatever the machine's; the monkeypatch to set one."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ssl.SSLContext]]:
    """Every TLS context `ssl.create_default_context` builds in this test; `tls_context()` built anew."""
    contexts: list[ssl.SSLContext] = []
    real = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        contexts.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return contexts[-1]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    httpclient.tls_context.cache_clear()
    try:
        yield contexts
    finally:
        httpclient.tls_context.cache_clear()


async def test_alerts_and_health_probes_share_one_tls_context(
    https: tuple[Path, ssl.SSLContext], built: list[ssl.SSLContext], no_proxy: pytest.MonkeyPatch
) -> None:
    """Two deliveries (each with a session of its own, as the alerting's and `test-notify`'s) and an https
    health probe build one TLS context between them, which trusts the authority SSL_CERT_FILE names."""
    cert, server = https
    no_proxy.setenv("SSL_CERT_FILE", str(cert))
    async with running_receiver(tls=server) as receiver:
        await post_json(receiver.url(), {"n": 1}, attempts=1)
        await post_json(receiver.url(), {"n": 2}, attempts=1)
        async with HealthProbe(receiver.url("/health")) as probe:
            assert await probe.check() == 200
    assert [(g.method, g.status) for g in receiver.got] == [("POST", 200), ("POST", 200), ("GET", 200)]
    assert len(built) == 1


async def test_an_untrusted_certificate_is_said_as_a_tls_problem(
    https: tuple[Path, ssl.SSLContext], built: list[ssl.SSLContext], no_proxy: pytest.MonkeyPatch
) -> None:
    """A webhook whose certificate no trusted authority signed: the delivery says the TLS problem in words."""
    async with running_receiver(tls=https[1]) as receiver:
        with pytest.raises(TransientDeliveryError) as info:
            await post_json(receiver.url(), {"n": 1}, attempts=1)
    assert str(info.value).startswith(
        f"cannot reach webhook https://127.0.0.1:{receiver.port}: TLS problem: certificate verify failed: self"
    )
    assert str(info.value).endswith("signed certificate (1 attempt)")
    assert receiver.got == []


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        pytest.param("refused", "connection refused", id="refused"),
        pytest.param("plain-http", "TLS problem: wrong version number (is it a plain http port?)", id="tls"),
        pytest.param("no-name", "cannot resolve watchdog-test.invalid: ", id="dns"),
    ],
)
async def test_why_a_webhook_got_no_answer_reads_in_words(
    receiver: Receiver, no_proxy: pytest.MonkeyPatch, where: str, reason: str
) -> None:
    """Nothing listening, https to a plain-http port, a name that does not resolve: each said in words, after
    the receiver's scheme://host[:port] only."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound, not listening: refused
        base = {
            "refused": f"http://127.0.0.1:{bound.getsockname()[1]}",
            "plain-http": f"https://127.0.0.1:{receiver.port}",
            "no-name": "http://watchdog-test.invalid",
        }[where]
        with pytest.raises(TransientDeliveryError) as info:
            await post_json(base + SECRET_PATH, {"n": 1}, attempts=1)
    assert str(info.value).startswith(f"cannot reach webhook {base}: {reason}")
    assert str(info.value).endswith(" (1 attempt)")
    assert "XyZsecret" not in str(info.value)


async def test_alerts_go_through_the_proxy_the_environment_names(
    receiver: Receiver, no_proxy: pytest.MonkeyPatch
) -> None:
    """With HTTP_PROXY set, a webhook is posted through that proxy (here a receiver that takes it itself)."""
    no_proxy.setenv("HTTP_PROXY", f"http://127.0.0.1:{receiver.port}")
    await post_json(f"http://hooks.watchdog-test.invalid{SECRET_PATH}", {"n": 1}, attempts=1)
    (got,) = receiver.got
    assert (got.method, got.path, got.headers["Host"]) == ("POST", SECRET_PATH, "hooks.watchdog-test.invalid")
    assert got.json() == {"n": 1}


async def test_health_probes_ignore_the_proxy(receiver: Receiver, no_proxy: pytest.MonkeyPatch) -> None:
    """A health URL is the server's own (often on its loopback): it is asked directly, whatever HTTP_PROXY says."""
    async with running_receiver() as proxy:
        no_proxy.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        async with HealthProbe(receiver.url("/health")) as probe:
            assert await probe.check() == 200
    assert [g.path for g in receiver.got] == ["/health"]
    assert proxy.got == []
