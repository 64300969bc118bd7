"""One translation point for SSH errors (`watchdog.follow.sources.ssherrors`), one for an HTTP request's
(`watchdog.httpclient`), and one exception tree.

asyncssh's ConfigParseError is a configuration error (exit 78), not a refused authentication; an https health
URL whose TLS handshake fails says the TLS problem instead of "no answer"; every exception lives in
`watchdog.exceptions` and carries the fields its message is built from.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import asyncssh
import pytest
from sshd_server import SSHDServer

import watchdog.exceptions as exceptions
from watchdog.exceptions import (
    AuthError,
    ChannelRefused,
    ConfigError,
    ConfigRuleError,
    ConnectionLost,
    DeliveryError,
    HostKeyError,
    InvalidShard,
    ReaderProtocolError,
    TargetError,
    TLSError,
    TransientDeliveryError,
    UsageError,
    WatchdogError,
)
from watchdog.follow.probes.health import HealthProbe
from watchdog.follow.sources.ssherrors import map_ssh_error, translate_ssh_errors
from watchdog.httpclient import tls_problem

WHERE = "ops@gpu-7 port 2222"

# -- the SSH translation ---------------------------------------------------------------------------------


def test_a_config_parse_error_is_a_config_error() -> None:
    """A broken SSH config is a configuration problem (exit 78), at whatever step it is met."""
    exc = asyncssh.ConfigParseError("/home/ops/.ssh/config line 2: Invalid Port integer value: x")
    for step in ("connect", "session", "run", "identity", "forward"):
        mapped = map_ssh_error(exc, WHERE, step)  # type: ignore[arg-type]
        assert isinstance(mapped, ConfigError), step
        assert not isinstance(mapped, TargetError)
        assert "line 2: Invalid Port integer value: x" in str(mapped)
        assert WHERE in str(mapped)


def test_the_context_manager_raises_ours_from_theirs() -> None:
    exc = asyncssh.ConfigParseError("cfg line 1: bad")
    with pytest.raises(ConfigError) as info, translate_ssh_errors(WHERE, "connect"):
        raise exc
    assert info.value.__cause__ is exc


@pytest.mark.parametrize(
    ("exc", "kind", "message"),
    [
        pytest.param(
            asyncssh.PermissionDenied("no keys"),
            AuthError,
            f"authentication to {WHERE} was refused (no keys); check the user name, "
            "the identity file or agent keys, and the remote authorized_keys",
            id="auth",
        ),
        pytest.param(
            asyncssh.HostKeyNotVerifiable("bad key"),
            HostKeyError,
            f"host key of {WHERE} could not be verified: bad key",
            id="hostkey",
        ),
        pytest.param(
            ConnectionRefusedError(111, "Connection refused"),
            ConnectionLost,
            f"cannot connect to {WHERE}: [Errno 111] Connection refused",
            id="refused",
        ),
        pytest.param(TimeoutError(), ConnectionLost, f"cannot connect to {WHERE}: ", id="timeout"),
    ],
)
def test_connect_errors(exc: BaseException, kind: type[TargetError], message: str) -> None:
    """The connection step keeps today's messages, now with the host (and the reason) as fields."""
    mapped = map_ssh_error(exc, WHERE, "connect")
    assert type(mapped) is kind
    assert str(mapped) == message
    assert isinstance(mapped, TargetError)
    assert mapped.host == WHERE


def test_the_host_key_checks_own_account_wins() -> None:
    mapped = map_ssh_error(asyncssh.HostKeyNotVerifiable("x"), WHERE, "connect", detail="the key CHANGED")
    assert isinstance(mapped, HostKeyError)
    assert str(mapped) == "the key CHANGED"


def test_channel_errors() -> None:
    """A channel open refused for good is ChannelRefused; any error on a connection now closed is a lost one."""
    refused = asyncssh.ChannelOpenError(asyncssh.OPEN_UNKNOWN_CHANNEL_TYPE, "nope")
    mapped = map_ssh_error(refused, WHERE, "session")
    assert isinstance(mapped, ChannelRefused)
    assert (mapped.host, mapped.reason, str(mapped)) == (
        WHERE,
        "nope",
        f"{WHERE} refused a session channel: nope",
    )
    lost = map_ssh_error(refused, WHERE, "session", closed=True)
    assert type(lost) is ConnectionLost
    assert str(lost) == f"connection to {WHERE} lost: nope"
    run = map_ssh_error(BrokenPipeError(32, "Broken pipe"), WHERE, "run")
    assert type(run) is ConnectionLost
    assert str(run) == f"running a command on {WHERE} failed: [Errno 32] Broken pipe"


def test_identity_errors() -> None:
    mapped = map_ssh_error(FileNotFoundError(2, "No such file or directory"), WHERE, "identity", detail="/k")
    assert isinstance(mapped, AuthError)
    assert str(mapped) == f"identity file /k for {WHERE} cannot be read: No such file or directory"


def test_what_is_not_an_ssh_error_passes_through() -> None:
    assert map_ssh_error(KeyError("bug"), WHERE, "run") is None
    assert map_ssh_error(ConnectionLost("ours already"), WHERE, "run") is None
    with pytest.raises(KeyError), translate_ssh_errors(WHERE, "run"):
        raise KeyError("bug")


def test_a_closed_connection_is_discarded() -> None:
    class Closed:
        def is_closed(self) -> bool:
            return True

    conn = Closed()
    discarded: list[object] = []
    with (
        pytest.raises(ConnectionLost, match="lost"),
        translate_ssh_errors(WHERE, "run", conn=conn, discard=discarded.append),  # type: ignore[arg-type]
    ):
        raise asyncssh.ConnectionLost("reset")
    assert discarded == [conn]


def test_a_broken_ssh_config_is_exit_78(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`watchdog watch alias:/path` with an unparsable ~/.ssh/config: a configuration error, not an auth one."""
    from watchdog.cli.app import main  # noqa: PLC0415

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host gpu-alias\n  Port notanumber\n")
    (home / ".ssh" / "known_hosts").write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    code = main(["watch", "gpu-alias:/var/log/x.log", "--timeout", "10"])
    err = capsys.readouterr().err
    assert code == 78, err
    assert "configuration error" in err
    assert "Invalid Port integer value: notanumber" in err


# -- TLS on an https health URL ----------------------------------------------------------------------------


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def plain_http() -> Iterator[int]:
    """A plain-http server: an https URL for it meets no TLS at all."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def self_signed(tmp_path: Path) -> Iterator[int]:
    """An https server whose certificate no system trust store knows."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
         "-days", "1", "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.anyio
async def test_an_untrusted_certificate_is_a_tls_problem(self_signed: int) -> None:
    url = f"https://127.0.0.1:{self_signed}/health"
    async with HealthProbe(url, timeout=5) as probe:
        with pytest.raises(TLSError) as info, anyio.fail_after(10):
            await probe.check()
    assert info.value.url == url
    assert "certificate verify failed" in str(info.value)
    assert str(info.value).startswith(f"health URL {url}: TLS problem: ")
    assert isinstance(info.value, TargetError)
    assert not isinstance(info.value, ConnectionLost)  # not taken for "no answer"


@pytest.mark.anyio
async def test_https_to_a_plain_http_port_is_a_tls_problem(plain_http: int) -> None:
    url = f"https://127.0.0.1:{plain_http}/health"
    async with HealthProbe(url, timeout=5) as probe:
        with pytest.raises(TLSError, match="TLS problem"), anyio.fail_after(10):
            await probe.check()


@pytest.mark.anyio
async def test_no_server_is_still_no_answer() -> None:
    """Nothing listening is no answer (None), as before: only a TLS failure is an error."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        async with HealthProbe(f"https://127.0.0.1:{port}/health", timeout=5) as probe:
            assert await probe.check() is None


def test_a_dropped_tls_connection_is_not_a_tls_problem() -> None:
    assert tls_problem(ssl.SSLEOFError(8, "EOF occurred")) is None
    assert tls_problem(OSError("reset")) is None
    wrong = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    wrong.reason = "WRONG_VERSION_NUMBER"  # type: ignore[misc]  # as the ssl module sets it
    assert tls_problem(wrong) == "wrong version number (is it a plain http port?)"


# -- one tree, with fields -----------------------------------------------------------------------------------


def test_every_exception_is_in_the_one_module_and_drawn() -> None:
    """The classes that lived elsewhere live in watchdog.exceptions, keep their old import paths, and are drawn."""
    from watchdog.alerts.delivery import TransientDeliveryError as from_delivery  # noqa: PLC0415
    from watchdog.config.models import _KeyProblem  # noqa: PLC0415
    from watchdog.config.shard import InvalidShard as from_shard  # noqa: PLC0415
    from watchdog.follow.sources.sshpool import ChannelRefused as from_pool  # noqa: PLC0415

    assert from_delivery is TransientDeliveryError
    assert _KeyProblem is ConfigRuleError
    assert from_shard is InvalidShard
    assert from_pool is ChannelRefused
    tree = exceptions.__doc__ or ""
    for name in exceptions.__all__:
        obj = getattr(exceptions, name)
        if isinstance(obj, type):
            assert obj.__module__ == "watchdog.exceptions"
            assert name in tree, f"{name} is not drawn in the tree"
            assert issubclass(obj, WatchdogError), name


def test_the_fields_of_each_exception() -> None:
    """Each exception carries what its message is built from; the message is today's."""
    target = TargetError(host="gpu-7", reason="gone")
    assert (target.host, target.reason, str(target)) == ("gpu-7", "gone", "gpu-7: gone")
    lost = ConnectionLost(f"cannot connect to {WHERE}: boom", host=WHERE, reason="boom")
    assert (lost.host, lost.reason, str(lost)) == (WHERE, "boom", f"cannot connect to {WHERE}: boom")
    assert TargetError("just a message").host is None  # the old one-string form still works

    refused = ChannelRefused("gpu-7", "open failed")
    assert (refused.where, refused.host, refused.detail, refused.reason) == (
        "gpu-7",
        "gpu-7",
        "open failed",
        "open failed",
    )
    assert str(refused) == "gpu-7 refused a session channel: open failed"

    garbled = ReaderProtocolError("gpu-7", b"\x00junk")
    assert (garbled.host, garbled.output) == ("gpu-7", b"\x00junk")
    assert str(garbled) == "unexpected output from the reader on gpu-7: b'\\x00junk'"

    tls = TLSError("https://h/health", "certificate verify failed", host="gpu-7")
    assert (tls.url, tls.reason, tls.host) == ("https://h/health", "certificate verify failed", "gpu-7")

    rule = ConfigRuleError("launches.a.notify", "unknown notifier")
    assert (rule.path, rule.key, rule.problem) == ("config", "launches.a.notify", "unknown notifier")
    assert str(rule) == "config: launches.a.notify: unknown notifier"

    shard = InvalidShard("3/2", "the index must be below the count")
    assert isinstance(shard, ValueError)
    assert (shard.text, shard.problem, str(shard)) == (
        "3/2",
        "the index must be below the count",
        "'3/2': the index must be below the count",
    )

    delivery = DeliveryError("cannot deliver", receiver="ops-slack", status=400)
    assert (delivery.receiver, delivery.status, str(delivery)) == ("ops-slack", 400, "cannot deliver")
    transient = TransientDeliveryError("503", 12.0, receiver="ops-slack", status=503)
    assert (transient.retry_after, transient.receiver, transient.status) == (12.0, "ops-slack", 503)
    assert TransientDeliveryError("x").retry_after is None

    usage = UsageError("cannot read corpus.log", file="corpus.log")
    assert (usage.file, str(usage)) == ("corpus.log", "cannot read corpus.log")


# -- permanent and transient SSH failures ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "step", "permanent"),
    [
        pytest.param(asyncssh.PermissionDenied("no keys"), "connect", True, id="auth"),
        pytest.param(asyncssh.HostKeyNotVerifiable("changed"), "connect", True, id="hostkey"),
        pytest.param(asyncssh.ConfigParseError("cfg line 1: bad"), "connect", True, id="config"),
        pytest.param(OSError(13, "Permission denied"), "identity", True, id="identity-file"),
        pytest.param(ConnectionRefusedError(111, "Connection refused"), "connect", False, id="refused"),
        pytest.param(TimeoutError(), "connect", False, id="timeout"),
        pytest.param(ConnectionResetError(104, "Connection reset by peer"), "connect", False, id="reset"),
        pytest.param(asyncssh.ConnectionLost("gone"), "run", False, id="lost"),
    ],
)
def test_permanent_and_transient_failures_are_told_apart(
    exc: BaseException, step: str, permanent: bool
) -> None:
    """A refusal retrying will not fix (auth, host key, SSH config) is a `PermanentError`; a connection that
    failed or dropped is a `ConnectionLost` (retried), never both."""
    from watchdog.exceptions import PermanentError  # noqa: PLC0415

    mapped = map_ssh_error(exc, WHERE, step)  # type: ignore[arg-type]
    assert mapped is not None
    assert isinstance(mapped, PermanentError) is permanent
    assert isinstance(mapped, ConnectionLost) is not permanent


@pytest.mark.anyio
@pytest.mark.sshd
async def test_a_real_sshds_refusals_are_permanent(sshd: SSHDServer, tmp_path: Path) -> None:
    """Against a real sshd: a key it does not know and a host key we do not know are `PermanentError`s; a port
    nothing listens on is a transient `ConnectionLost`."""
    from watchdog.exceptions import PermanentError  # noqa: PLC0415
    from watchdog.follow.sources.sshpool import SSHOptions, SSHPool  # noqa: PLC0415

    stranger = tmp_path / "stranger_key"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(stranger))
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    cases = [
        (
            SSHOptions(
                known_hosts=str(sshd.known_hosts), identity=str(stranger), config=None, use_agent=False
            ),
            sshd.port,
        ),
        (
            SSHOptions(known_hosts=str(empty), identity=str(sshd.client_key), config=None, use_agent=False),
            sshd.port,
        ),
    ]
    for options, port in cases:
        async with SSHPool(options) as pool:
            with anyio.fail_after(20), pytest.raises(PermanentError):
                await pool.connect(sshd.host, port=port, user=sshd.user)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # bound, not listening: refused
        options = SSHOptions(
            known_hosts=str(sshd.known_hosts), identity=str(sshd.client_key), config=None, use_agent=False
        )
        async with SSHPool(options) as pool:
            with anyio.fail_after(20), pytest.raises(ConnectionLost) as caught:
                await pool.connect("127.0.0.1", port=closed, user=sshd.user)
    assert not isinstance(caught.value, PermanentError)
