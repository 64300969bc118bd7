"""Tests for asyncssh's receive path made shorter (`watchdog.follow.sources.packets`): the same bytes, the same
ciphers' output, fewer steps a data packet."""

from __future__ import annotations

import os
import shlex
from typing import Any

import anyio
import asyncssh
import pytest
from asyncssh.crypto import cipher as asyncssh_cipher
from sshd_server import SSHDServer

from watchdog.follow.sources import packets
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool

# A remote writer of `n` writes of `size` bytes, most its own packet (a pause between them), each write's bytes
# telling its number: what comes can be checked whole and in order.
WRITER = """\
import os, sys, time
n, size = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    os.write(1, (b"%08d" % i).ljust(size - 1, b".") + b"\\n")
    time.sleep(0.0002)
"""


def _expected(n: int, size: int) -> bytes:
    return b"".join((b"%08d" % i).ljust(size - 1, b".") + b"\n" for i in range(n))


_MSG_CHANNEL_WINDOW_ADJUST = 93  # RFC 4254 section 5.2


def _adjusts(sizes: list[int], window: int) -> list[int]:
    """The window adjustments asyncssh sends for data packets of these sizes: each counted once against the
    window, and the window made whole again once under half of it."""
    whole, sent = window, []
    for size in sizes:
        window -= size
        if window < whole / 2:
            sent.append(whole - window)
            window = whole
    return sent


def test_the_gcm_cipher_seals_and_opens_as_asyncssh_s_own_and_makes_its_key_once() -> None:
    assert packets.reuse_gcm_keys()
    assert packets.reuse_gcm_keys()  # once per process: a second call changes nothing
    gcm = asyncssh_cipher.GCMCipher
    seal, open_ = gcm._watchdog_original  # type: ignore[attr-defined]
    key, iv = os.urandom(16), os.urandom(12)
    ours, theirs, reader = (gcm("aes128-gcm", key, iv) for _ in range(3))
    made = []
    for number in range(20):
        header, data = b"\0\0\0" + bytes([number]), os.urandom(16 * (number + 1))
        sealed = ours.encrypt_and_sign(header, data)
        assert sealed == seal(theirs, header, data)  # the same bytes and tag, packet after packet
        assert ours._iv == theirs._iv
        assert reader.verify_and_decrypt(header, sealed[0][4:], sealed[1]) == data
        made.append(vars(ours)["_watchdog_gcm"][0])
    assert all(aead is made[0] for aead in made)  # one AESGCM for the key, not one a packet
    # a packet whose tag does not match: None, and its invocation counted all the same (as asyncssh counts it)
    header = b"\0\0\0\1"
    sealed = ours.encrypt_and_sign(header, b"x" * 32)
    assert reader.verify_and_decrypt(header, sealed[0][4:], bytes(16)) is None
    assert open_(theirs, header, sealed[0][4:], bytes(16)) is None
    assert (
        reader._iv
        == ours._iv
        == theirs._iv
        == iv[:4] + (int.from_bytes(iv[4:], "big") + 21).to_bytes(8, "big")
    )


class _Awaitable:
    """Awaitable by its `__await__` (what `collections.abc.Awaitable` checks), not a coroutine."""

    def __await__(self) -> Any:
        yield


def test_asyncssh_s_connection_asks_isawaitable_of_a_bool_at_once_and_of_the_rest_as_before() -> None:
    assert packets.quick_awaitable_check()
    assert packets.quick_awaitable_check()
    check = vars(asyncssh.connection)["inspect"]
    assert isinstance(check, packets._Inspect)
    assert check.isawaitable(True) is False
    assert check.isawaitable(None) is False
    assert check.isawaitable(False) is False
    assert check.isawaitable(_Awaitable()) is True
    assert check.signature is __import__("inspect").signature  # anything else: `inspect`'s own


class _Sink(asyncssh.SSHClientSession[bytes]):
    """What comes, in order; its channel set up as a follower's (`CommandOutput.connection_made`)."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.chan: Any = None
        self.done = anyio.Event()
        self.direct = False
        self.adjusts: list[int] = []  # the window adjustments the channel sent, in bytes

    def connection_made(self, chan: Any) -> None:
        self.chan = chan
        self.direct = packets.direct_data(chan)
        send = chan.send_packet

        def sent(pkttype: int, *args: bytes) -> None:
            if pkttype == _MSG_CHANNEL_WINDOW_ADJUST:
                self.adjusts.append(int.from_bytes(b"".join(args), "big"))
            send(pkttype, *args)

        chan.send_packet = sent

    def data_received(self, data: bytes, datatype: Any) -> None:
        self.got.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set()


def _options(server: SSHDServer) -> SSHOptions:
    return SSHOptions(
        known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
    )


@pytest.mark.anyio
async def test_data_packets_reach_the_session_whole_and_in_order_past_asyncssh_s_dispatch(
    sshd: SSHDServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # asyncssh's own `_recv_packet`, counted: what the connection's direct path hands back to it
    usual = asyncssh.connection.SSHConnection._recv_packet
    handed: list[int] = []

    def counted(self: Any) -> bool:
        handed.append(1)
        return bool(usual(self))

    monkeypatch.setattr(asyncssh.connection.SSHConnection, "_recv_packet", counted)
    n, size = 3000, 1000  # 3 MB: past the channel's 2 MB window, so its adjustment must be sent
    async with SSHPool(_options(sshd)) as pool:
        conn = await pool.connect(sshd.host, port=sshd.port, user=sshd.user)
        seq = conn._recv_seq
        handed.clear()
        command = shlex.join(["python3", "-c", WRITER, str(n), str(size)])
        _chan, session = await conn.create_session(_Sink, command, encoding=None)
        sink: Any = session
        with anyio.fail_after(60):
            await sink.done.wait()
        received = conn._recv_seq - seq
    assert sink.direct
    assert b"".join(sink.got) == _expected(n, size)
    # each packet counted once against the window, as the installed release counts it (asyncssh 2.24.1 counts
    # in `_accept_data`, the releases before in `_deliver_data`: a count on both ways would ask for more)
    assert sink.adjusts == _adjusts([len(data) for data in sink.got], sink.chan._init_recv_window)
    assert len(sink.adjusts) >= 2
    assert (
        received >= 300
    )  # (sshd sends what it reads of the pipe at once: most writes a packet of their own)
    # only what is not a data packet went asyncssh's way: the session's open and its requests, the window's
    # adjustments, the exit status, EOF and close
    assert len(handed) < 30 < received


class _Held(list[Any]):
    """A channel's `_recv_buf` that says when it holds ten packets."""

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.ten = anyio.Event()

    def append(self, item: Any) -> None:
        super().append(item)
        if len(self) >= 10:
            self.ten.set()


@pytest.mark.anyio
async def test_a_paused_channel_s_packets_wait_as_asyncssh_has_them_wait(sshd: SSHDServer) -> None:
    n, size = 400, 500
    async with SSHPool(_options(sshd)) as pool:
        conn = await pool.connect(sshd.host, port=sshd.port, user=sshd.user)
        command = shlex.join(["python3", "-c", WRITER, str(n), str(size)])
        chan, session = await conn.create_session(_Sink, command, encoding=None)
        sink: Any = session
        held = _Held(chan._recv_buf)
        chan._recv_buf = held  # asyncssh's list of what a paused channel holds
        chan.pause_reading()
        before = len(sink.got)  # (what came before the pause, if anything)
        with anyio.fail_after(30):
            await held.ten.wait()  # held by asyncssh while paused, not handed on
        assert len(sink.got) == before
        chan.resume_reading()
        with anyio.fail_after(60):
            await sink.done.wait()
    assert b"".join(sink.got) == _expected(n, size)


class _Chan:
    """What `direct_data` looks for on an asyncssh channel, open both ways, its window whole."""

    _recv_state = _send_state = "open"
    _recv_paused = False
    _recv_window = _init_recv_window = 1 << 21
    _encoding: str | None = None
    _session = None

    def process_packet(self, *_args: object) -> bool:
        return True

    def _deliver_data(self, *_args: object) -> None:
        pass


def test_a_channel_is_left_as_it_is_where_asyncssh_logs_each_packet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asyncssh.logging.SSHLogger, "_debug_level", 2)
    assert not packets.direct_data(_Chan())
    monkeypatch.setattr(asyncssh.logging.SSHLogger, "_debug_level", 1)
    chan = _Chan()
    assert packets.direct_data(chan)
    assert hasattr(chan, "_watchdog_take")
    chan._encoding = "utf-8"
    assert not packets.direct_data(chan)  # text: asyncssh decodes it


def test_a_release_of_asyncssh_not_read_keeps_its_own_receive_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shortcuts repeat asyncssh's receive steps as its releases 2.23.0-2.24.1 take them: under another release
    (`asyncssh.__version__`) no channel, connection or cipher is touched, whatever attributes it has."""

    monkeypatch.setattr(asyncssh.logging.SSHLogger, "_debug_level", 1)
    assert packets.direct_data(_Chan())  # the release the tests run: taken
    monkeypatch.setattr(asyncssh, "__version__", "2.25.0")
    chan = _Chan()
    assert not packets.direct_data(chan)
    assert not hasattr(chan, "_watchdog_take")
    assert not packets.direct_packets(object())
    monkeypatch.setattr(asyncssh.crypto.cipher.GCMCipher, "_watchdog_reused", False, raising=False)
    assert not packets.reuse_gcm_keys()
