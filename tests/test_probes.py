"""Tests for watchdog.follow.probes: process liveness and the HTTP health probe, locally and over a real sshd."""

from __future__ import annotations

import random
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from sshd_server import SSHDServer

from watchdog import httpclient
from watchdog.exceptions import ConfigError, TLSError, UsageError
from watchdog.follow.probes.health import HealthProbe, parse_health_url
from watchdog.follow.probes.process import LocalProcessProbe, SSHProcessProbe, wait_until_gone
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
from watchdog.follow.sources.target import parse_target
from watchdog.follow.spec import LaunchSpec

pytestmark = pytest.mark.anyio

FAST = 0.05


@pytest.fixture
async def pool(ssh_options: SSHOptions, anyio_backend: str) -> AsyncIterator[SSHPool]:
    """A connection pool to the test sshd, closed after the test."""
    async with SSHPool(ssh_options) as pool:
        yield pool


class _Health(BaseHTTPRequestHandler):
    status = 200
    hosts: list[str | None]  # the Host header of each request, set per server

    def do_GET(self) -> None:
        self.hosts.append(self.headers["Host"])
        body = b"ok" if self.status == 200 else b"not ready"
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


@pytest.fixture
def health_server() -> Iterator[ThreadingHTTPServer]:
    """A real HTTP server on 127.0.0.1:0 whose /health answers `server.RequestHandlerClass.status`."""
    handler = type("Handler", (_Health,), {"status": 200, "hosts": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _set_status(server: ThreadingHTTPServer, status: int) -> None:
    server.RequestHandlerClass.status = status  # type: ignore[attr-defined]


def _hosts(server: ThreadingHTTPServer) -> list[str | None]:
    hosts: list[str | None] = server.RequestHandlerClass.hosts  # type: ignore[attr-defined]
    return hosts


@pytest.fixture
def localhost_tls(health_server: ThreadingHTTPServer, tmp_path: Path) -> Path:
    """`health_server` speaking https, with a certificate for the name `localhost` only; its path."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    health_server.socket = context.wrap_socket(health_server.socket, server_side=True)
    return cert


async def test_local_process_probe_sees_death(sleeper: tuple[Process, str]) -> None:
    """A local process is alive by pid and by pattern until it is killed, then gone."""
    process, pattern = sleeper
    by_pid = LocalProcessProbe(pid=process.pid)
    by_pattern = LocalProcessProbe(pattern=pattern)
    assert await by_pid.alive()
    assert await by_pattern.alive()
    process.kill()
    await process.wait()
    assert not await by_pid.alive()
    assert not await by_pattern.alive()


@pytest.mark.sshd
async def test_ssh_process_probe_sees_death(
    sshd: SSHDServer, pool: SSHPool, sleeper: tuple[Process, str]
) -> None:
    """Over SSH, `kill -0 PID` and `pgrep -f PATTERN` see the process, and the follow loop its death."""
    process, pattern = sleeper
    by_pid = SSHProcessProbe(pool, sshd.host, port=sshd.port, user=sshd.user, pid=process.pid)
    by_pattern = SSHProcessProbe(pool, sshd.host, port=sshd.port, user=sshd.user, pattern=pattern)
    assert await by_pid.alive()
    assert await by_pattern.alive()
    absent = SSHProcessProbe(pool, sshd.host, port=sshd.port, user=sshd.user, pattern=pattern + "0 'x")
    assert not await absent.alive()
    async with anyio.create_task_group() as tg:
        gone = anyio.Event()

        async def watch() -> None:
            await wait_until_gone(by_pattern, interval=FAST)
            gone.set()

        tg.start_soon(watch)
        process.kill()
        await process.wait()
        with anyio.fail_after(10):
            await gone.wait()
    assert not await by_pid.alive()


async def test_local_pid_file_probe_follows_the_file(sleeper: tuple[Process, str], tmp_path: Path) -> None:
    """A pid file naming a live process is alive; without a pid in it, unknown (alive); its process killed,
    gone."""
    process, _ = sleeper
    pid_file = tmp_path / "server.pid"
    probe = LocalProcessProbe(pid_file=str(pid_file))
    assert await probe.alive()  # no file yet: unknown, not a death
    pid_file.write_text(f"{process.pid}\n")
    assert await probe.alive()
    process.kill()
    await process.wait()
    assert not await probe.alive()


@pytest.mark.sshd
async def test_ssh_pid_file_probe_reads_the_file_on_the_host(
    sshd: SSHDServer, pool: SSHPool, sleeper: tuple[Process, str], tmp_path: Path
) -> None:
    """Over SSH the pid file is read on the host (its path quoted): alive, unknown, then gone."""
    process, _ = sleeper
    pid_file = tmp_path / "it's a server.pid"
    probe = SSHProcessProbe(pool, sshd.host, port=sshd.port, user=sshd.user, pid_file=str(pid_file))
    assert await probe.alive()  # missing: unknown
    pid_file.write_text("garbage")
    assert await probe.alive()
    pid_file.write_text(f" {process.pid}\n")
    assert await probe.alive()
    process.kill()
    await process.wait()
    assert not await probe.alive()


def test_process_probe_needs_one_spec() -> None:
    """A probe is given exactly one of pid and pattern."""
    with pytest.raises(ValueError, match="exactly one"):
        LocalProcessProbe()
    with pytest.raises(ValueError, match="pid and pattern are exclusive"):
        LocalProcessProbe(pid=1, pattern="x")
    with pytest.raises(ValueError, match="pid and pid_file are exclusive"):
        LocalProcessProbe(pid=1, pid_file="/run/x.pid")


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        pytest.param({"pid": 7, "process": "sglang"}, "a pid and a process pattern are exclusive", id="two"),
        pytest.param({"pid": 0}, "0 is not a valid process id", id="pid-zero"),
        pytest.param({"pid": 1 << 22}, "is not a valid process id", id="pid-past-pid-max"),
        pytest.param({"process": "a\nb"}, "one line", id="pattern-two-lines"),
    ],
)
def test_launch_spec_checks_its_process_as_the_probe_does(fields: dict[str, Any], problem: str) -> None:
    """A launch spec refuses two ways of naming its process, or a bad one, as a config error at key `pid`."""
    with pytest.raises(ConfigError, match=problem) as caught:
        LaunchSpec(name="a", target=parse_target("/x.log"), **fields)
    assert (caught.value.path, caught.value.key) == ("launch 'a'", "pid")


async def test_local_health_probe(health_server: ThreadingHTTPServer) -> None:
    """The probe returns the status the server answers, and None when nothing listens."""
    port = health_server.server_address[1]
    async with HealthProbe(f"http://127.0.0.1:{port}/health", timeout=5) as probe:
        assert await probe.check() == 200
        _set_status(health_server, 503)
        assert await probe.check() == 503
        health_server.shutdown()
        health_server.server_close()
        assert await probe.check() is None


@pytest.mark.sshd
async def test_health_probe_through_ssh_forward(
    sshd: SSHDServer, pool: SSHPool, health_server: ThreadingHTTPServer
) -> None:
    """A remote health URL is reached through a local forward on the shared connection, across a reconnect."""
    port = health_server.server_address[1]
    async with HealthProbe(
        f"http://127.0.0.1:{port}/health", pool=pool, host=sshd.host, port=sshd.port, user=sshd.user
    ) as probe:
        assert await probe.check() == 200
        _set_status(health_server, 503)
        assert await probe.check() == 503
        # The request goes to the forwarded port but names the URL's host and port.
        assert _hosts(health_server) == [f"127.0.0.1:{port}"] * 2
        sshd.kill_sessions()
        with anyio.fail_after(10):
            status = None
            while status != 503:
                # The first check after the cut may meet the dead forward; the next one re-forwards.
                status = await probe.check()
        health_server.shutdown()
        health_server.server_close()
        assert await probe.check() is None


@pytest.mark.sshd
async def test_https_health_probe_through_ssh_forward_checks_the_urls_name(
    sshd: SSHDServer,
    pool: SSHPool,
    health_server: ThreadingHTTPServer,
    localhost_tls: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the forward (to 127.0.0.1), https sends the URL's name as TLS server name and Host header, and
    checks the certificate for that name: valid for `localhost`, a TLS problem for `127.0.0.1`."""
    monkeypatch.setattr(httpclient, "tls_context", lambda: ssl.create_default_context(cafile=localhost_tls))
    port = health_server.server_address[1]
    for name, status in (("localhost", 200), ("127.0.0.1", None)):
        url = f"https://{name}:{port}/health"
        async with HealthProbe(url, pool=pool, host=sshd.host, port=sshd.port, user=sshd.user) as probe:
            if status is None:
                with pytest.raises(TLSError, match="certificate verify failed"):
                    await probe.check()
            else:
                assert await probe.check() == status
    assert _hosts(health_server) == [f"localhost:{port}"]


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("ftp://x/health", id="scheme"),
        pytest.param("http:///health", id="no-host"),
        pytest.param("http://x:99999/", id="port"),
        pytest.param("http://x/a b", id="space"),
    ],
)
def test_health_url_rejected(url: str) -> None:
    """URLs the probe cannot GET are refused with UsageError."""
    with pytest.raises(UsageError):
        parse_health_url(url)


@pytest.mark.sshd
@pytest.mark.parametrize(
    "pattern",
    # Each is found only in the probe's own remote command, never in another process of a shared machine (a
    # CI runner's `sh -c '... || exit 1'` once matched a pattern as loose as "exit 1").
    ["watchdog-pgrep", "read -r p [|][|] exit 2", 'exec pgrep -f -- "[$]p" >/dev/null'],
    ids=["name", "script", "tail"],
)
async def test_ssh_process_probe_never_finds_itself(sshd: SSHDServer, pool: SSHPool, pattern: str) -> None:
    """Over SSH, a pattern found only in the probe's own remote command (its shell, the login shell that
    ran it) is no process: the probe does not keep a dead server alive by matching itself.

    Its own processes are there at each of its checks, so a probe that matched itself would say alive every
    time; another probe's (a pytest-xdist worker's, running the same script on this machine at the same
    moment) is there now and then. So: not alive at least once in a few checks."""
    probe = SSHProcessProbe(pool, sshd.host, port=sshd.port, user=sshd.user, pattern=pattern)
    answers = [await probe.alive() for _ in range(5)]
    assert False in answers


async def test_local_process_probe_skips_its_ancestors(tmp_path: Path) -> None:
    """Locally, the pattern on the command line of watchdog's own ancestors (`timeout 45m watchdog ...`, the
    shell) is no server: a child shell that holds the pattern and runs the probe finds nothing."""
    pattern = f"wdtest-ancestor-{random.randrange(10**9)}"
    code = (
        "import anyio, sys; from watchdog.follow.probes.process import LocalProcessProbe; "
        "sys.exit(0 if anyio.run(LocalProcessProbe(pattern=sys.argv[1]).alive) else 3)"
    )
    # sh (holding the pattern) -> timeout (holding it) -> python (holding it): none of them is the server
    result = await anyio.run_process(
        ["sh", "-c", f'timeout 30 {sys.executable} -c "$1" "$0"', pattern, code], check=False
    )
    assert result.returncode == 3, result.stderr.decode()
    async with await anyio.open_process(["sh", "-c", "sleep 1000", pattern]) as server:
        try:
            assert await LocalProcessProbe(pattern=pattern).alive()
        finally:
            server.kill()
            await server.wait()


async def test_https_probes_share_one_tls_context(
    health_server: ThreadingHTTPServer, localhost_tls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two launches' https health probes, checked again and again, build one TLS context between them
    (building one costs tens of milliseconds of the event loop), not one per probe or per check."""
    monkeypatch.setenv(
        "SSL_CERT_FILE", str(localhost_tls)
    )  # the default context trusts the test's certificate
    built: list[ssl.SSLContext] = []
    real = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        built.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return built[-1]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    httpclient.tls_context.cache_clear()
    try:
        url = f"https://localhost:{health_server.server_address[1]}/health"
        async with HealthProbe(url) as first, HealthProbe(url) as second:
            for _ in range(3):
                assert await first.check() == 200
                assert await second.check() == 200
    finally:
        httpclient.tls_context.cache_clear()
    assert len(built) == 1
