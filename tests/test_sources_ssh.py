"""Tests for watchdog.follow.sources.ssh against a real OpenSSH sshd: streaming, reconnects, host keys, cleanup."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import asyncssh
import pytest
from sshd_server import SSHDServer, assert_no_reader_left, busy_until_pending, readers_of, wait_gone

from watchdog.exceptions import AuthError, ConnectionLost, HostKeyError, UsageError
from watchdog.follow.sources.base import (
    CaughtUp,
    Chunk,
    Connected,
    Disconnected,
    FileMissing,
    FileRestarted,
    Merges,
    SourceItem,
)
from watchdog.follow.sources.channel import _HIGH_WATER, CommandOutput
from watchdog.follow.sources.readslices import READ_MAX, READ_SLICE
from watchdog.follow.sources.ssh import SSHSource
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool

pytestmark = [pytest.mark.anyio, pytest.mark.sshd]

FAST = 0.05
# How long a follower at the end of an unchanged file must stay silent: many poll and stat intervals.
QUIET = 0.5
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
async def pool(ssh_options: SSHOptions, anyio_backend: str) -> AsyncIterator[SSHPool]:
    """A connection pool to the test sshd, closed after the test."""
    async with SSHPool(ssh_options) as pool:
        yield pool


def make_source(pool: SSHPool, sshd: SSHDServer, path: Path, **options: Any) -> SSHSource:
    """A follower of `path` on the test sshd, with short intervals."""
    options.setdefault("poll_interval", FAST)
    options.setdefault("stat_interval", FAST)
    return SSHSource(pool, sshd.host, str(path), port=sshd.port, user=sshd.user, **options)


async def next_item(items: AsyncIterator[SourceItem], within: float = 10.0) -> SourceItem:
    """The next item other than Connected and CaughtUp (the tests of chunks and events look past them)."""
    with anyio.fail_after(within):
        while True:
            item = await anext(items)
            if not isinstance(item, Connected | CaughtUp):
                return item


async def read_until(items: AsyncIterator[SourceItem], size: int, start: int = 0) -> bytes:
    """Collect chunks of the current file from `start` until it holds `size` bytes; check offsets."""
    data = b""
    while start + len(data) < size:
        item = await next_item(items)
        assert isinstance(item, Chunk), item
        assert item.offset == start + len(data)
        data += item.data
    assert start + len(data) == size
    return data


async def append(path: Path, data: bytes) -> None:
    """Append bytes to a file, as a log writer does."""
    with path.open("ab") as file:
        file.write(data)


async def read_to_caught_up(
    items: AsyncIterator[SourceItem], end: int, start: int = 0, within: float = 10.0
) -> bytes:
    """Exactly: chunks covering bytes `start`..`end` in order, then CaughtUp(end) and nothing between."""
    data = b""
    with anyio.fail_after(within):
        while start + len(data) < end:
            item = await anext(items)
            assert isinstance(item, Chunk), f"{item!r} before byte {end} was delivered"
            assert item.offset == start + len(data)
            data += item.data
        assert start + len(data) == end
        assert await anext(items) == CaughtUp(end)
    return data


async def assert_quiet(items: AsyncIterator[SourceItem], window: float = QUIET) -> None:
    """No item at all arrives within `window` seconds (waits for an absence, so it takes the window)."""
    item: SourceItem | None = None
    with anyio.move_on_after(window):
        item = await anext(items)
    assert item is None, f"{item!r} arrived while the file did not change"


def has_tail(pids: set[int]) -> bool:
    """Whether one of `pids` is a tail process."""
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "tail":
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize("stream", [pytest.param(None, id="stream"), pytest.param(False, id="poll")])
async def test_follows_growing_file(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None
) -> None:
    """Existing and appended bytes arrive exactly, with absolute offsets, streaming or polling."""
    log = tmp_path / "grow.log"
    log.write_bytes(b"0123456789\n")
    async with make_source(pool, sshd, log, stream=stream).open_follow(3) as items:
        with anyio.fail_after(10):
            assert await anext(items) == Connected(sshd.host)
        assert await read_until(items, 11, start=3) == b"3456789\n"
        expected = b"".join(b"line %d \x00\xff\r\n" % i for i in range(200))
        for part in (expected[:100], expected[100:5000], expected[5000:]):
            await append(log, part)
        assert await read_until(items, 11 + len(expected), start=11) == expected


async def test_reconnects_without_loss_or_duplicates(sshd: SSHDServer, pool: SSHPool, tmp_path: Path) -> None:
    """Connections cut three times while the log grows at ~5k lines/s: every line arrives exactly once."""
    log = tmp_path / "burst.log"
    log.write_bytes(b"")
    lines = [b"line %06d %s\n" % (i, b"x" * (i % 40)) for i in range(12_000)]
    expected = b"".join(lines)
    kills = [len(expected) * share // 100 for share in (10, 35, 60)]
    kill_at = list(kills)
    cut = [anyio.Event() for _ in kills]  # set as the connection is cut at kills[i]
    data = bytearray()
    disconnects = 0
    connected = True

    async def writer() -> None:
        written, k = 0, 0
        for start in range(0, len(lines), 50):
            batch = b"".join(lines[start : start + 50])
            await append(log, batch)
            written += len(batch)
            await anyio.sleep(0.01)  # pacing the writer at ~5k lines/s, not waiting for anything
            if k < len(kills) and written >= kills[k]:
                # past a cut's point the log grows on only once that cut was made: a loaded machine's reader
                # must not find the rest of the log in one read after a reconnection (one cut, not three)
                await cut[k].wait()
                k += 1

    async with make_source(pool, sshd, log).open_follow() as items, anyio.create_task_group() as tg:
        tg.start_soon(writer)
        with anyio.fail_after(45):
            async for item in items:
                if isinstance(item, Chunk):
                    assert item.offset == len(data)
                    data += item.data
                    if kill_at and connected and len(data) >= kill_at[0]:
                        kill_at.pop(0)
                        assert sshd.kill_sessions()
                        connected = False
                        cut[len(kills) - len(kill_at) - 1].set()
                    if len(data) >= len(expected):
                        break
                elif isinstance(item, Disconnected):
                    disconnects += 1
                elif isinstance(item, Connected):
                    connected = True
                elif isinstance(item, CaughtUp):
                    assert item.offset == len(data)
                else:
                    pytest.fail(f"unexpected {item}")
    assert disconnects >= 3
    assert not kill_at
    assert bytes(data) == expected
    got = bytes(data).splitlines(keepends=True)
    assert len(got) == len(lines)
    assert len(set(got)) == len(got)


async def test_rotation(sshd: SSHDServer, pool: SSHPool, tmp_path: Path) -> None:
    """Rename + create: the rest of the old file, then FileRestarted('rotated') and the new file from 0."""
    log = tmp_path / "rot.log"
    log.write_bytes(b"old 1\n")
    async with make_source(pool, sshd, log).open_follow() as items:
        assert await read_until(items, 6) == b"old 1\n"
        log.rename(tmp_path / "rot.log.1")
        await append(tmp_path / "rot.log.1", b"old 2\n")
        log.write_bytes(b"new 1\n")
        assert await read_until(items, 12, start=6) == b"old 2\n"
        assert await next_item(items) == FileRestarted("rotated")
        assert await read_until(items, 6) == b"new 1\n"
        await append(log, b"new 2\n")
        assert await read_until(items, 12, start=6) == b"new 2\n"


@pytest.mark.parametrize("stream", [pytest.param(None, id="stream"), pytest.param(False, id="poll")])
async def test_truncation(sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None) -> None:
    """copytruncate: FileRestarted('truncated'), then the bytes written after it from offset 0."""
    log = tmp_path / "trunc.log"
    log.write_bytes(b"first incarnation\n")
    async with make_source(pool, sshd, log, stream=stream).open_follow() as items:
        await read_until(items, 18)
        os.truncate(log, 0)
        assert await next_item(items) == FileRestarted("truncated")
        await append(log, b"second\n")
        assert await read_until(items, 7) == b"second\n"


@pytest.mark.parametrize("stream", [pytest.param(None, id="stream"), pytest.param(False, id="poll")])
async def test_replacement(sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None) -> None:
    """A new file moved over the path gives FileRestarted('replaced') and the new file from 0."""
    log = tmp_path / "repl.log"
    log.write_bytes(b"launch 1\n")
    async with make_source(pool, sshd, log, stream=stream).open_follow() as items:
        await read_until(items, 9)
        fresh = tmp_path / "fresh"
        fresh.write_bytes(b"launch 2\n")
        os.replace(fresh, log)
        assert await next_item(items) == FileRestarted("replaced")
        assert await read_until(items, 9) == b"launch 2\n"


async def test_missing_then_created(sshd: SSHDServer, pool: SSHPool, tmp_path: Path) -> None:
    """A log not created yet gives FileMissing, then its bytes once it appears."""
    log = tmp_path / "later.log"
    async with make_source(pool, sshd, log).open_follow() as items:
        assert await next_item(items) == FileMissing(str(log))
        log.write_bytes(b"started\n")
        assert await read_until(items, 8) == b"started\n"


async def test_directory_is_usage_error(sshd: SSHDServer, pool: SSHPool, tmp_path: Path) -> None:
    """A remote path that is not a readable regular file raises UsageError."""
    async with make_source(pool, sshd, tmp_path).open_follow() as items:
        with pytest.raises(UsageError, match="not a readable regular file"):
            await next_item(items)


async def test_unknown_host_key_refused(sshd: SSHDServer, ssh_options: SSHOptions, tmp_path: Path) -> None:
    """An unknown host key is refused with HostKeyError saying how to record it; nothing is written."""
    known = tmp_path / "known_hosts"
    known.write_text("")
    options = replace(ssh_options, known_hosts=str(known))
    async with SSHPool(options) as pool, make_source(pool, sshd, tmp_path / "x.log").open_follow() as items:
        with pytest.raises(HostKeyError, match="unknown host key") as info:
            await next_item(items)
    assert "ssh-keyscan" in str(info.value)
    assert known.read_text() == ""


async def test_accept_new_host_key_records_it(
    sshd: SSHDServer, ssh_options: SSHOptions, tmp_path: Path
) -> None:
    """With accept_new_host_key an unknown key is appended to known_hosts, and trusted afterwards."""
    known = tmp_path / "ssh" / "known_hosts"
    options = replace(ssh_options, known_hosts=str(known), accept_new_host_key=True)
    async with SSHPool(options) as pool:
        conn = await pool.connect(sshd.host, port=sshd.port, user=sshd.user)
        assert (await conn.run("echo ok", check=True)).stdout == "ok\n"
    assert known.read_text() == sshd.host_key_line + "\n"
    strict = replace(ssh_options, known_hosts=str(known))
    async with SSHPool(strict) as pool:
        await pool.connect(sshd.host, port=sshd.port, user=sshd.user)
    assert known.read_text() == sshd.host_key_line + "\n"


@pytest.mark.parametrize("accept_new", [False, True])
async def test_changed_host_key_refused(
    sshd: SSHDServer, ssh_options: SSHOptions, tmp_path: Path, accept_new: bool
) -> None:
    """A host key that differs from the recorded one is refused, even when new keys are accepted."""
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()
    known = tmp_path / "known_hosts"
    recorded = f"[{sshd.host}]:{sshd.port} {other[0]} {other[1]}\n"
    known.write_text(recorded)
    options = replace(ssh_options, known_hosts=str(known), accept_new_host_key=accept_new)
    async with SSHPool(options) as pool:
        with pytest.raises(HostKeyError, match="CHANGED") as info:
            await pool.connect(sshd.host, port=sshd.port, user=sshd.user)
    assert "ssh-keygen -R" in str(info.value)
    assert known.read_text() == recorded


async def test_auth_failure(sshd: SSHDServer, ssh_options: SSHOptions, tmp_path: Path) -> None:
    """A key the server does not accept raises AuthError, and is not retried."""
    stranger = tmp_path / "id_stranger"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(stranger))
    options = replace(ssh_options, identity=str(stranger))
    async with SSHPool(options) as pool, make_source(pool, sshd, tmp_path / "x.log").open_follow() as items:
        with pytest.raises(AuthError, match="refused"):
            await next_item(items)


async def test_one_connection_per_host(sshd: SSHDServer, pool: SSHPool, tmp_path: Path) -> None:
    """Two followers of the same host share one SSH connection."""
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    for log in logs:
        log.write_bytes(b"x\n")
    # by pid, not by count: a connection of the test before may still be closing, and go, meanwhile
    before = set(sshd.session_pids())
    async with (
        make_source(pool, sshd, logs[0]).open_follow() as a,
        make_source(pool, sshd, logs[1]).open_follow() as b,
    ):
        assert await read_until(a, 2) == b"x\n"
        assert await read_until(b, 2) == b"x\n"
        assert len(set(sshd.session_pids()) - before) == 1


async def test_no_tail_left_after_close(sshd: SSHDServer, pool: SSHPool, tmp_path: Path) -> None:
    """Leaving the follow block stops the remote tail while the connection stays up."""
    log = tmp_path / "close-me.log"
    log.write_bytes(b"x\n")
    async with make_source(pool, sshd, log).open_follow() as items:
        await read_until(items, 2)
        remote = readers_of(str(log))
        assert has_tail(remote)
    await wait_gone(remote)
    await assert_no_reader_left(log)


async def test_no_tail_left_after_cancellation(sshd: SSHDServer, pool: SSHPool, tmp_path: Path) -> None:
    """Cancelling the consumer (as Ctrl-C does) stops the remote tail."""
    log = tmp_path / "cancel-me.log"
    log.write_bytes(b"x\n")
    remote: set[int] = set()
    with anyio.CancelScope() as scope:
        async with make_source(pool, sshd, log).open_follow() as items:
            await read_until(items, 2)
            remote = readers_of(str(log))
            assert has_tail(remote)
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    await wait_gone(remote)
    await assert_no_reader_left(log)


_FOLLOWER = """
import json, sys, anyio
from watchdog.follow.sources import Chunk, SSHOptions, SSHPool, SSHSource
cfg = json.loads(sys.argv[1])
async def main():
    options = SSHOptions(known_hosts=cfg["known_hosts"], identity=cfg["key"], config=None, use_agent=False)
    async with SSHPool(options) as pool:
        source = SSHSource(pool, cfg["host"], cfg["path"], port=cfg["port"], user=cfg["user"])
        async with source.open_follow() as items:
            async for item in items:
                if isinstance(item, Chunk):
                    print("ready", flush=True)
anyio.run(main)
"""


async def test_no_tail_left_after_sigkill(sshd: SSHDServer, tmp_path: Path) -> None:
    """A follower process killed with SIGKILL leaves no remote tail behind."""
    log = tmp_path / "kill-me.log"
    log.write_bytes(b"x\n")
    cfg = {
        "known_hosts": str(sshd.known_hosts),
        "key": str(sshd.client_key),
        "host": sshd.host,
        "port": sshd.port,
        "user": sshd.user,
        "path": str(log),
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    async with await anyio.open_process(
        [sys.executable, "-c", _FOLLOWER, json.dumps(cfg)], env=env, stderr=None
    ) as process:
        assert process.stdout is not None
        output = b""
        with anyio.fail_after(20):
            while b"\n" not in output:
                output += await process.stdout.receive()
        assert output.startswith(b"ready")
        remote = readers_of(str(log))
        assert has_tail(remote)
        process.send_signal(signal.SIGKILL)
        await process.wait()
    await wait_gone(remote)
    await assert_no_reader_left(log)


async def test_frozen_peer_is_noticed_by_keepalive(
    sshd: SSHDServer, ssh_options: SSHOptions, tmp_path: Path
) -> None:
    """A peer that stops answering (its sshd session frozen) is dropped by keepalive within seconds, then resumed."""
    log = tmp_path / "frozen.log"
    log.write_bytes(b"before\n")
    options = replace(ssh_options, keepalive_interval=0.5, keepalive_count_max=2)
    async with SSHPool(options) as pool, make_source(pool, sshd, log).open_follow() as items:
        assert await read_until(items, 7) == b"before\n"
        frozen = sshd.session_pids()
        assert frozen, "a session to freeze"
        for pid in frozen:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            item = await next_item(items, within=10.0)
            assert isinstance(item, Disconnected), item
            assert time.monotonic() - started < 5.0
        finally:
            for pid in frozen:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # a stopped process dies of SIGKILL too
        with log.open("ab") as f:
            f.write(b"after\n")
        assert await read_until(items, 13, start=7) == b"after\n"


async def test_a_busy_connection_re_arms_no_keepalive_timer_per_read(
    sshd: SSHDServer, ssh_options: SSHOptions, tmp_path: Path
) -> None:
    """Reads of a connection that carries a growing log only note their time: the keepalive timer armed is the
    one timer until it is due (asyncssh alone makes a new one at each read), and when due after reads it waits
    the rest of the interval from the last one, asking nothing of the peer."""
    log = tmp_path / "busy.log"
    log.write_bytes(b"0\n")
    options = replace(ssh_options, keepalive_interval=30.0)
    async with SSHPool(options) as pool, make_source(pool, sshd, log).open_follow() as items:
        assert await read_until(items, 2) == b"0\n"
        [conn] = pool.connections(sshd.host, port=sshd.port, user=sshd.user)
        armed = conn._keepalive_timer
        assert armed is not None
        await _grow(items, log, 2, range(1, 20))
        assert conn._keepalive_timer is armed, "re-armed at a read"
        # due now, as if the interval had passed since it was armed: a read came 0-1 s ago, so it is armed again
        # for the rest of the interval from that read, and no keepalive is asked for
        armed.cancel()
        conn._keepalive_timer_callback()
        assert conn._keepalive_count == 0
        again = conn._keepalive_timer
        assert again is not None
        assert again is not armed
        assert 28.0 < again.when() - asyncio.get_running_loop().time() <= 30.0


async def test_a_backlog_is_read_a_bounded_piece_a_turn_and_handed_to_asyncssh_in_slices(
    pool: SSHPool, sshd: SSHDServer, tmp_path: Path
) -> None:
    """What the socket brought while the event loop was busy (256 KB) is read `READ_MAX` bytes a turn of the loop,
    not in one read of the transport's 256 KiB (whose parsing, feeding and judging would be one long callback, and
    every task woken by it would wait for all of it); asyncssh is given each read `READ_SLICE` bytes at a time, so
    the buffer it cuts each packet from never holds the whole read (it copies the rest of its buffer for each
    packet), and the bytes come whole and in order."""
    log = tmp_path / "backlog.log"
    log.write_bytes(b"0\n")
    async with make_source(pool, sshd, log).open_follow() as items:
        assert await read_until(items, 2) == b"0\n"
        [conn] = pool.connections(sshd.host, port=sshd.port, user=sshd.user)
        reads: list[int] = []  # the sizes the socket's transport handed over
        buffered: list[int] = []  # what asyncssh's buffer held each time it parsed
        sliced, parse = conn.data_received, conn._recv_data

        def data_received(data: bytes, datatype: Any = None) -> None:
            reads.append(len(data))
            sliced(data, datatype)

        def recv_data() -> None:
            buffered.append(len(conn._inpbuf))
            parse()

        conn.data_received, conn._recv_data = data_received, recv_data
        backlog = b"".join(b"%06d %s\n" % (i, b"x" * 120) for i in range(2000))  # 256 KB
        await append(log, backlog)
        busy_until_pending(conn.get_extra_info("socket"), 4 * READ_SLICE)
        assert await read_until(items, 2 + len(backlog), start=2) == backlog
    assert max(reads) == READ_MAX  # the socket held more than that at once
    assert len(reads) >= len(backlog) // READ_MAX
    # a slice and what is left of a packet (up to 32 KiB of data) before it
    assert max(buffered) <= READ_SLICE + 34 * 1024


@pytest.mark.skipif(
    tuple(int(part) for part in asyncssh.__version__.split(".")[:2]) < (2, 24),
    reason="asyncssh 2.23 has no packet length limit: a corrupted length waits for more bytes, nothing is dropped",
)
async def test_a_read_is_not_handed_on_past_a_slice_that_dropped_the_connection(
    sshd: SSHDServer, ssh_options: SSHOptions
) -> None:
    """Bytes that are no packet (a corrupted stream) make asyncssh drop the connection at the first slice of a
    large read: the slices after it are not parsed."""
    async with SSHPool(ssh_options) as pool:
        conn = await pool.connect(sshd.host, port=sshd.port, user=sshd.user)
        parsed: list[int] = []
        parse = conn._recv_data

        def recv_data() -> None:
            parsed.append(len(conn._inpbuf))
            parse()

        conn._recv_data = recv_data
        conn.data_received(b"\xff" * (3 * READ_SLICE))
        assert parsed == [READ_SLICE]
        with anyio.fail_after(10):
            await conn.wait_closed()


async def _grow(items: Any, log: Path, size: int, numbers: range) -> None:
    """Append each number's line to `log` (now `size` bytes) and read it back, one at a time."""
    for i in numbers:
        line = b"%d\n" % i
        await append(log, line)
        assert await read_until(items, size + len(line), start=size) == line
        size += len(line)


@pytest.mark.parametrize("debug_level", [1, 3])
async def test_a_log_s_channel_describes_its_packets_only_for_a_debug_log(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, debug_level: int
) -> None:
    """A followed log's channel does not have asyncssh describe each packet it sends or receives for a debug log
    that does not take them (below asyncssh's packet debug level, 3); at that level its packets are logged."""
    import asyncssh.packet  # noqa: PLC0415

    described: list[str] = []
    original = asyncssh.packet.SSHPacketLogger._log_packet

    def counted(self: Any, msg: str, pkttype: int, *args: Any) -> None:
        described.append(type(self).__name__)
        original(self, msg, pkttype, *args)

    monkeypatch.setattr(asyncssh.packet.SSHPacketLogger, "_log_packet", counted)
    monkeypatch.setattr(asyncssh.logging.SSHLogger, "_debug_level", debug_level)
    log = tmp_path / "described.log"
    log.write_bytes(b"0\n")
    async with make_source(pool, sshd, log).open_follow() as items:
        assert await read_until(items, 2) == b"0\n"
        described.clear()
        await _grow(items, log, 2, range(1, 6))
    channels = [name for name in described if "Channel" in name]
    if debug_level < 3:
        assert channels == []
    else:
        assert len(channels) >= 5


STREAM_OR_POLL = pytest.mark.parametrize(
    "stream", [pytest.param(None, id="stream"), pytest.param(False, id="poll")]
)


@STREAM_OR_POLL
async def test_caught_up_once_after_existing_bytes(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None
) -> None:
    """A remote file's existing bytes all arrive as chunks, then one CaughtUp(size), and nothing more while it is unchanged."""
    log = tmp_path / "existing.log"
    payload = b"".join(b"line %d\n" % i for i in range(1000))
    log.write_bytes(payload)
    async with make_source(pool, sshd, log, stream=stream).open_follow() as items:
        with anyio.fail_after(10):
            assert await anext(items) == Connected(sshd.host)
        assert await read_to_caught_up(items, len(payload)) == payload
        await assert_quiet(items)


@STREAM_OR_POLL
async def test_caught_up_again_after_append(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None
) -> None:
    """Bytes appended to a followed remote file arrive as chunks, then CaughtUp with the new size, once."""
    log = tmp_path / "grow.log"
    log.write_bytes(b"first\n")
    async with make_source(pool, sshd, log, stream=stream).open_follow() as items:
        with anyio.fail_after(10):
            assert await anext(items) == Connected(sshd.host)
        assert await read_to_caught_up(items, 6) == b"first\n"
        await append(log, b"second\nthird\n")
        assert await read_to_caught_up(items, 19, start=6) == b"second\nthird\n"
        await assert_quiet(items)


@STREAM_OR_POLL
async def test_merged_the_read_that_reaches_the_end_says_so(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None
) -> None:
    """With `merge` set (`Merges`), the chunk that reaches the end of the remote file is its CaughtUp as well
    (`caught_up`), with no CaughtUp item of its own, for the file as it was and for an append."""
    log = tmp_path / "grow.log"
    log.write_bytes(b"first\n")
    async with make_source(pool, sshd, log, stream=stream).open_follow() as items:
        assert isinstance(items, Merges)
        items.merge = True
        seen: list[SourceItem] = []
        with anyio.fail_after(10):
            assert await anext(items) == Connected(sshd.host)
            while not (seen and isinstance(seen[-1], Chunk) and seen[-1].caught_up):
                seen.append(await anext(items))
            await append(log, b"second\nthird\n")
            while not (isinstance(seen[-1], Chunk) and seen[-1].end == 19):
                seen.append(await anext(items))
        assert not any(isinstance(item, CaughtUp) for item in seen), seen
        chunks = [item for item in seen if isinstance(item, Chunk)]
        assert b"".join(c.data for c in chunks) == b"first\nsecond\nthird\n"
        assert chunks[-1].caught_up
        await assert_quiet(items)


@STREAM_OR_POLL
@pytest.mark.parametrize(
    ("content", "offset"),
    [pytest.param(b"", 0, id="empty"), pytest.param(b"already read\n", 13, id="read")],
)
async def test_caught_up_first_when_nothing_to_read(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None, content: bytes, offset: int
) -> None:
    """Following an empty remote file (or from its end) gives CaughtUp(offset) first, then the appended bytes."""
    log = tmp_path / "empty.log"
    log.write_bytes(content)
    async with make_source(pool, sshd, log, stream=stream).open_follow(offset) as items:
        with anyio.fail_after(10):
            assert await anext(items) == Connected(sshd.host)
            assert await anext(items) == CaughtUp(offset)
        await assert_quiet(items)
        await append(log, b"hello\n")
        assert await read_to_caught_up(items, offset + 6, start=offset) == b"hello\n"


@STREAM_OR_POLL
async def test_caught_up_only_after_a_large_file_is_delivered(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None
) -> None:
    """A file larger than a channel read (and than a poll read) gives CaughtUp only once every byte is delivered."""
    log = tmp_path / "large.log"
    payload = os.urandom(2 * 1024 * 1024 + 4321)
    log.write_bytes(payload)
    async with make_source(pool, sshd, log, stream=stream).open_follow() as items:
        with anyio.fail_after(10):
            assert await anext(items) == Connected(sshd.host)
        chunks = 0
        data = b""
        with anyio.fail_after(30):
            while True:
                item = await anext(items)
                if isinstance(item, CaughtUp):
                    break
                assert isinstance(item, Chunk), item
                assert item.offset == len(data)
                data += item.data
                chunks += 1
        assert item == CaughtUp(len(payload))
        assert data == payload
        assert chunks > 1, "the file should take more than one read"
        await assert_quiet(items)


@STREAM_OR_POLL
async def test_caught_up_again_in_a_truncated_file(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None
) -> None:
    """A file cut to empty after being read gives FileRestarted('truncated'), then CaughtUp(0), then its new bytes."""
    log = tmp_path / "trunc.log"
    log.write_bytes(b"first incarnation\n")
    async with make_source(pool, sshd, log, stream=stream).open_follow() as items:
        with anyio.fail_after(10):
            assert await anext(items) == Connected(sshd.host)
        await read_to_caught_up(items, 18)
        os.truncate(log, 0)
        with anyio.fail_after(10):
            assert await anext(items) == FileRestarted("truncated")
            assert await anext(items) == CaughtUp(0)
        await assert_quiet(items)
        await append(log, b"second\n")
        assert await read_to_caught_up(items, 7) == b"second\n"


@pytest.mark.parametrize(
    ("config_line", "cipher"),
    [
        (None, "aes128-gcm@openssh.com"),
        ("Ciphers chacha20-poly1305@openssh.com", "chacha20-poly1305@openssh.com"),
        ("ciphers=aes256-ctr", "aes256-ctr"),
    ],
    ids=["preferred", "config-says", "config-says-with-equals"],
)
async def test_aes_gcm_is_offered_first_unless_the_ssh_config_names_ciphers(
    tmp_path: Path, sshd: SSHDServer, ssh_options: SSHOptions, config_line: str | None, cipher: str
) -> None:
    """The cheapest AEAD cipher for asyncssh is negotiated with a stock sshd; a `Ciphers` line in the SSH
    config used wins."""
    options = ssh_options
    if config_line is not None:
        config = tmp_path / "ssh_config"
        config.write_text(f"Host *\n    {config_line}\n")
        options = replace(ssh_options, config=(str(config),))
    async with SSHPool(options) as pool:
        conn = await pool.connect(sshd.host, port=sshd.port, user=sshd.user)
        assert conn.get_extra_info("send_cipher") == cipher
        assert conn.get_extra_info("recv_cipher") == cipher


async def test_a_command_s_output_is_read_no_further_than_the_high_water_mark(
    sshd: SSHDServer, ssh_options: SSHOptions
) -> None:
    """A reader that does not keep up stops the channel at `_HIGH_WATER` queued packets (the SSH window then
    stops the remote command); reading on resumes it, and every byte arrives, in order."""
    total = 8_000_000
    async with SSHPool(ssh_options) as pool:
        _, session = await pool.open_session(
            sshd.host,
            CommandOutput,
            f"head -c {total} /dev/zero | tr '\\0' x",
            port=sshd.port,
            user=sshd.user,
        )
        try:
            with anyio.fail_after(10):
                while True:  # the channel's own pace: polled
                    if len(session._packets) >= _HIGH_WATER:
                        break
                    await anyio.sleep(0.01)
            await anyio.sleep(0.3)  # an absence: nothing more is queued while nobody reads
            assert len(session._packets) == _HIGH_WATER
            received = 0
            with anyio.fail_after(30):
                while True:
                    kind, data, _ = await session.receive()
                    if kind == "closed":
                        break
                    assert kind == "out"
                    assert data.count(b"x") == len(data)
                    received += len(data)
            assert received == total
        finally:
            session.close()


async def test_a_cancelled_wait_for_the_next_item_loses_and_repeats_nothing(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path
) -> None:
    """Waits cancelled while the log is quiet (a timeout around `anext`) leave the iteration usable: what is
    appended after each arrives once, at its offset; and no remote reader is left once the block is left."""
    log = tmp_path / "cancelled.log"
    log.write_bytes(b"first\n")
    async with make_source(pool, sshd, log).open_follow() as items:
        with anyio.fail_after(10):
            assert await anext(items) == Connected(sshd.host)
        assert await read_to_caught_up(items, 6) == b"first\n"
        end = 6
        for i in range(3):
            with anyio.move_on_after(0.2) as scope:
                await anext(items)
            assert scope.cancelled_caught
            line = b"line %d\n" % i
            await append(log, line)
            assert await read_to_caught_up(items, end + len(line), start=end) == line
            end += len(line)
        await assert_quiet(items)
    await assert_no_reader_left(log)


@pytest.fixture
def silent_port() -> Any:
    """A loopback port that takes TCP connections and never says a word (no SSH banner)."""
    import socket  # noqa: PLC0415

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = False

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop:
            with suppress(TimeoutError):
                accepted.append(listener.accept()[0])  # held open, never written to

    import threading  # noqa: PLC0415

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop = True
        thread.join(5)
        for conn in accepted:
            conn.close()
        listener.close()


async def test_a_port_that_never_speaks_ssh_says_no_banner(silent_port: int, sshd: SSHDServer) -> None:
    """A host that accepts TCP and never sends the SSH banner: the error says so, with the wait, instead of an
    empty reason."""
    options = SSHOptions(known_hosts=str(sshd.known_hosts), config=None, use_agent=False, connect_timeout=1.0)
    async with SSHPool(options) as pool:
        with anyio.fail_after(15), pytest.raises(ConnectionLost) as caught:
            await pool.connect("127.0.0.1", port=silent_port, user="nobody")
    assert str(caught.value) == (
        f"cannot connect to nobody@127.0.0.1 port {silent_port}: no SSH banner within 1 s "
        "(the port takes TCP connections, but no SSH server answers)"
    )
    assert caught.value.reason == str(caught.value).split(": ", 1)[1]


async def test_a_black_holed_host_is_said_disconnected_at_the_first_timeout(
    black_hole: int, sshd: SSHDServer
) -> None:
    """A host whose packets are dropped: the follower says `Disconnected` (no TCP connection within the connect
    timeout) when the first attempt times out, not after every attempt has."""
    options = SSHOptions(known_hosts=str(sshd.known_hosts), config=None, use_agent=False, connect_timeout=1.0)
    async with SSHPool(options) as pool:
        source = SSHSource(pool, "127.0.0.1", "/x.log", port=black_hole, user="nobody", connect_attempts=5)
        began = time.monotonic()
        async with source.open_follow() as items:
            with anyio.fail_after(4.5):  # 5 attempts take at least 5 s
                first = await anext(items)
        said_at = time.monotonic()
    assert isinstance(first, Disconnected), first
    # it carries when the failed attempt began (the host's outage counts from there, on the monotonic clock)
    assert first.since is not None
    assert began - 0.1 <= first.since <= said_at - 0.9  # on the monotonic clock
    assert first.reason.endswith(
        "no TCP connection within 1 s (the host does not answer: down, or packets dropped)"
    )


@pytest.mark.parametrize("stream", [pytest.param(None, id="stream"), pytest.param(False, id="poll")])
async def test_a_relaunch_in_the_same_second_rewritten_to_the_same_size_is_a_restart(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over SSH, a relaunch within the same second rewrites the log to the same size (the same banner, times
    included, other last lines), then goes on: a restart read from 0, not an append to the old launch's lines."""
    import watchdog.follow.sources.ssh as ssh_module  # noqa: PLC0415

    monkeypatch.setattr(ssh_module, "FINGERPRINT_QUIET", 0.0, raising=False)  # check at once, not after 2 s
    banner = b"[2025-01-23 19:35:14] server_args=ServerArgs(model_path='m', tp_size=8)\n" * 4
    first = banner + b"[2025-01-23 19:35:14] launch 1: RuntimeError: CUDA out of memory!\n"
    second = banner + b"[2025-01-23 19:35:14] launch 2: Load weight begin. avail mem=7.09\n"
    assert len(first) == len(second)
    log = tmp_path / "same-second.log"
    log.write_bytes(first)
    async with make_source(pool, sshd, log, stream=stream).open_follow() as items:
        assert await read_until(items, len(first)) == first
        with log.open("r+b") as file:  # in one go: cut, then the new launch's bytes, to the same size
            file.truncate(0)
            file.write(second)
        await append(log, b"next\n")  # the new launch goes on
        assert await next_item(items) == FileRestarted("truncated")
        assert await read_until(items, len(second) + 5) == second + b"next\n"


@pytest.mark.parametrize("stream", [pytest.param(None, id="stream"), pytest.param(False, id="poll")])
async def test_an_append_after_a_quiet_spell_to_a_long_log_is_no_restart(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over SSH, bytes appended to a log longer than the identity windows after it was quiet are read on from
    the offset: the host's first bytes and those before the offset are the ones read, so no restart (the look
    on the host once split its answer by the wrong window and took every such append for a truncation)."""
    import watchdog.follow.sources.ssh as ssh_module  # noqa: PLC0415

    monkeypatch.setattr(ssh_module, "FINGERPRINT_QUIET", 0.0, raising=False)  # check at once, not after 2 s
    first = b"".join(
        b"[2025-01-23 19:35:%02d] Decode batch. #running-req: %d\n" % (i % 60, i) for i in range(200)
    )
    assert len(first) > 2 * ssh_module.FINGERPRINT
    more = b"[2025-01-23 19:36:00] Scheduler hit an exception\n"
    log = tmp_path / "long.log"
    log.write_bytes(first)
    async with make_source(pool, sshd, log, stream=stream).open_follow() as items:
        assert await read_until(items, len(first)) == first
        await append(log, more)
        assert await read_until(items, len(first) + len(more), start=len(first)) == more


@pytest.mark.parametrize("stream", [pytest.param(None, id="stream"), pytest.param(False, id="poll")])
async def test_truncated_and_rewritten_in_one_step_is_a_restart(
    sshd: SSHDServer, pool: SSHPool, tmp_path: Path, stream: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over SSH, `: > log` and the relaunch's first bytes within one of tail's polls, to the same size, then its
    next line: the file's first bytes on the host differ, so it is a restart read from 0, not an append."""
    import watchdog.follow.sources.ssh as ssh_module  # noqa: PLC0415

    monkeypatch.setattr(ssh_module, "FINGERPRINT_QUIET", 0.0, raising=False)  # check at once, not after 2 s
    first = b"[2025-01-23 19:35:14] launch 1 banner\n" * 4
    second = b"[2025-02-24 08:10:01] launch 2 banner\n" * 4
    log = tmp_path / "rewrite.log"
    log.write_bytes(first)
    async with make_source(pool, sshd, log, stream=stream).open_follow() as items:
        assert await read_until(items, len(first)) == first
        with log.open("r+b") as file:  # in one go: cut, then the new launch's bytes, to the same size
            file.truncate(0)
            file.write(second)
        await append(log, b"next\n")  # the new launch goes on
        assert await next_item(items) == FileRestarted("truncated")
        assert await read_until(items, len(second) + 5) == second + b"next\n"
