"""Tests for spreading session channels over SSH connections, against a real sshd with a low MaxSessions."""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import asyncssh
import pytest
import structlog
from sshd_server import SSHDServer, SSHDUnavailable, start_sshd, stop_sshd

import watchdog.follow.sources.ssh as ssh_module
from watchdog.follow.follower import LaunchFollower, LaunchSpec
from watchdog.follow.sources.base import CaughtUp, Chunk, Connected, Disconnected, SourceItem
from watchdog.follow.sources.ssh import SSHSource
from watchdog.follow.sources.sshpool import ChannelRefused, SSHOptions, SSHPool
from watchdog.follow.sources.target import Target

pytestmark = [pytest.mark.anyio, pytest.mark.sshd]


@pytest.fixture(autouse=True)
def _no_fingerprint_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count channels. A follower whose log grows again after `FINGERPRINT_QUIET` (2 s) of quiet
    compares the file's first bytes over a short channel of its own: on a loaded machine the pause between
    a test's writes can be that long, and 14 such channels at once on full connections open more of them."""
    monkeypatch.setattr(ssh_module, "FINGERPRINT_QUIET", math.inf)


FAST = 0.05
MAX_SESSIONS = 10  # sshd's default, set explicitly: the test sshd of conftest allows 100


def _sshd(workdir: Path, max_sessions: int) -> Iterator[SSHDServer]:
    try:
        server = start_sshd(workdir, extra_config=[f"MaxSessions {max_sessions}"])
    except SSHDUnavailable as exc:
        if os.environ.get("WATCHDOG_REQUIRE_SSHD") == "1":
            pytest.fail(f"WATCHDOG_REQUIRE_SSHD=1 but {exc}")
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        stop_sshd(server)


@pytest.fixture
def sshd10(tmp_path: Path) -> Iterator[SSHDServer]:
    """An sshd of this test alone that allows 10 sessions per connection, as OpenSSH does by default."""
    yield from _sshd(tmp_path / "sshd", MAX_SESSIONS)


@pytest.fixture
def sshd0(tmp_path: Path) -> Iterator[SSHDServer]:
    """An sshd that allows no session at all on any connection (MaxSessions 0)."""
    yield from _sshd(tmp_path / "sshd", 0)


def options_for(server: SSHDServer, **more: Any) -> SSHOptions:
    """Options that reach `server` and nothing else."""
    return SSHOptions(
        known_hosts=str(server.known_hosts),
        identity=str(server.client_key),
        config=None,
        use_agent=False,
        **more,
    )


def make_source(pool: SSHPool, server: SSHDServer, path: Path) -> SSHSource:
    """A follower of `path` on `server`, with short intervals."""
    return SSHSource(
        pool,
        server.host,
        str(path),
        port=server.port,
        user=server.user,
        poll_interval=FAST,
        stat_interval=FAST,
    )


async def read_to(items: AsyncIterator[SourceItem], end: int, start: int = 0, within: float = 40.0) -> bytes:
    """The chunks from byte `start` up to byte `end`, looking past connection notes and CaughtUp (`within`: 14
    readers' shells started at once by one sshd took more than 15 s in a loaded CI run)."""
    data = b""
    with anyio.fail_after(within):
        while start + len(data) < end:
            item = await anext(items)
            if isinstance(item, Chunk):
                assert item.offset == start + len(data)
                data += item.data
            else:
                assert isinstance(item, Connected | CaughtUp), item
    return data


async def follow_all(
    stack: AsyncExitStack, pool: SSHPool, server: SSHDServer, logs: list[Path]
) -> list[AsyncIterator[SourceItem]]:
    """Start a follower per log at once, then read each to the end of what its file holds."""
    streams = [await stack.enter_async_context(make_source(pool, server, log).open_follow()) for log in logs]
    results: dict[int, bytes] = {}

    async def catch_up(index: int) -> None:
        results[index] = await read_to(streams[index], logs[index].stat().st_size)

    async with anyio.create_task_group() as tg:
        for index in range(len(streams)):
            tg.start_soon(catch_up, index)
    for index, log in enumerate(logs):
        assert results[index] == log.read_bytes()
    return streams


def write_logs(directory: Path, count: int) -> list[Path]:
    """`count` log files with a distinct first line each."""
    directory.mkdir()
    logs = [directory / f"launch{index:02d}.log" for index in range(count)]
    for index, log in enumerate(logs):
        log.write_bytes(f"launch {index} starting\n".encode())
    return logs


@pytest.mark.parametrize(
    ("max_channels", "counts", "reason"),
    [
        pytest.param(None, [10, 4], "refused", id="learned-from-refusals"),
        pytest.param(5, [5, 5, 4], "max_channels", id="max-channels-5"),
    ],
)
async def test_fourteen_followers_on_one_host(
    sshd10: SSHDServer, tmp_path: Path, max_channels: int | None, counts: list[int], reason: str
) -> None:
    """14 followers of one MaxSessions-10 host all catch up and see new lines, on the fewest connections allowed."""
    server = sshd10
    logs = write_logs(tmp_path / "logs", 14)
    key: dict[str, Any] = {"port": server.port, "user": server.user}
    before = set(server.session_pids())  # a connection of the test before may still be closing
    with structlog.testing.capture_logs() as logged:
        async with SSHPool(options_for(server, max_channels=max_channels)) as pool, AsyncExitStack() as stack:
            streams = await follow_all(stack, pool, server, logs)
            assert pool.channel_counts(server.host, **key) == counts
            assert len(set(server.session_pids()) - before) == len(counts)  # what sshd itself serves
            sizes = [log.stat().st_size for log in logs]
            for index, log in enumerate(logs):
                with log.open("ab") as file:
                    file.write(f"launch {index} ready\n".encode())

            async def see_ready(index: int) -> None:
                data = await read_to(streams[index], logs[index].stat().st_size, sizes[index])
                assert data == f"launch {index} ready\n".encode()

            async with anyio.create_task_group() as tg:
                for index in range(len(streams)):
                    tg.start_soon(see_ready, index)
            assert pool.channel_counts(server.host, **key) == counts
            if max_channels is None:
                assert pool.learned_capacity(server.host, **key) == MAX_SESSIONS
    opened = [entry for entry in logged if entry["event"] == "opened another SSH connection"]
    assert len(opened) == len(counts) - 1
    assert {entry["reason"] for entry in opened} == {reason}
    assert opened[0]["host"] == f"{server.user}@{server.host} port {server.port}"
    assert opened[0]["channels"] == counts[:1]


async def test_extra_connection_closes_with_its_last_channel(sshd10: SSHDServer, tmp_path: Path) -> None:
    """When the followers on the second connection stop, that connection is closed (after its linger) and the
    first stays."""
    server = sshd10
    logs = write_logs(tmp_path / "logs", 12)
    key: dict[str, Any] = {"port": server.port, "user": server.user}
    async with SSHPool(options_for(server), idle_linger=0.2) as pool, AsyncExitStack() as first_ten:
        await follow_all(first_ten, pool, server, logs[:10])
        async with AsyncExitStack() as last_two:
            await follow_all(last_two, pool, server, logs[10:])
            conns = pool.connections(server.host, **key)
            assert pool.channel_counts(server.host, **key) == [10, 2]
        with anyio.fail_after(10):
            await conns[1].wait_closed()
        assert pool.connections(server.host, **key) == conns[:1]
        assert pool.channel_counts(server.host, **key) == [10]
        # The capacity learned is kept: the next follower goes straight to a new connection.
        async with AsyncExitStack() as again:
            await follow_all(again, pool, server, logs[10:11])
            assert pool.channel_counts(server.host, **key) == [10, 1]
            assert pool.learned_capacity(server.host, **key) == MAX_SESSIONS


async def test_eleventh_launch_gets_through(sshd10: SSHDServer, tmp_path: Path) -> None:
    """A launch follower that starts after 10 others fill the connection is refused there, and reads its log."""
    server = sshd10
    logs = write_logs(tmp_path / "logs", 11)
    logs[10].write_bytes(b"".join(f"line {n}\n".encode() for n in range(1, 6)))
    key: dict[str, Any] = {"port": server.port, "user": server.user}
    async with SSHPool(options_for(server)) as pool, AsyncExitStack() as stack:
        await follow_all(stack, pool, server, logs[:10])
        assert pool.channel_counts(server.host, **key) == [10]
        assert pool.learned_capacity(server.host, **key) is None  # nothing refused yet
        target = Target(host=server.host, user=server.user, port=server.port, path=str(logs[10]))
        follower = LaunchFollower(LaunchSpec(name="eleventh", target=target, engine="generic"), pool=pool)

        async def drain() -> None:
            with follower.updates:
                async for _ in follower.updates:
                    pass  # the follower's status is what this test looks at

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            with anyio.fail_after(15):
                await tg.start(follower.run)  # ready once the log as it was has been read
            assert follower.status().to_json()["lines_read"] == 5
            tg.cancel_scope.cancel()
        assert pool.learned_capacity(server.host, **key) == MAX_SESSIONS
        assert len(pool.connections(server.host, **key)) == 2


async def test_refusal_on_a_connection_used_outside_the_pool(sshd10: SSHDServer, tmp_path: Path) -> None:
    """Sessions the pool does not know of fill its connection: the follower is moved to a new one."""
    server = sshd10
    logs = write_logs(tmp_path / "logs", 1)
    key: dict[str, Any] = {"port": server.port, "user": server.user}
    async with SSHPool(options_for(server)) as pool, AsyncExitStack() as stack:
        conn = await pool.connect(server.host, **key)
        for _ in range(MAX_SESSIONS):
            chan, _session = await conn.create_session(asyncssh.SSHClientSession, "sleep 60")
            stack.callback(chan.close)
        await follow_all(stack, pool, server, logs)
        assert pool.channel_counts(server.host, **key) == [0, 1]


async def test_no_session_allowed_is_said_not_hidden(sshd0: SSHDServer, tmp_path: Path) -> None:
    """A host that refuses every session gives the follower a Disconnected note naming the refusal, not silence."""
    server = sshd0
    logs = write_logs(tmp_path / "logs", 1)
    key: dict[str, Any] = {"port": server.port, "user": server.user}
    async with SSHPool(options_for(server)) as pool:
        with pytest.raises(ChannelRefused, match="refused a session channel"):
            await pool.run(server.host, "true", **key)
        async with make_source(pool, server, logs[0]).open_follow() as items:
            with anyio.fail_after(10):
                assert isinstance(await anext(items), Connected)
                note = await anext(items)
            assert isinstance(note, Disconnected)
            assert "refused a session channel" in note.reason
            assert "MaxSessions" in note.reason
        # The connection opened to try again is closed; only the first one is kept.
        assert len(pool.connections(server.host, **key)) == 1


async def test_a_host_that_refuses_every_session_is_not_logged_in_to_again_and_again(
    sshd0: SSHDServer, tmp_path: Path
) -> None:
    """Five followers of a host that takes logins but refuses every session share one backoff: a handful of logins
    in 6 s (not one per follower every few hundred milliseconds), each follower told of the refusal."""
    server = sshd0
    logs = write_logs(tmp_path / "logs", 5)
    notes: dict[Path, list[SourceItem]] = {path: [] for path in logs}

    async def follow(path: Path) -> None:
        async with make_source(pool, server, path).open_follow() as items:
            async for item in items:
                notes[path].append(item)

    async with SSHPool(options_for(server)) as pool:
        # a window of time, not a wait for something: the logins in it are what is counted
        with anyio.move_on_after(6):
            async with anyio.create_task_group() as tg:
                for path in logs:
                    tg.start_soon(follow, path)
    logins = [line for line in server.log if "Accepted publickey" in line]
    assert len(logins) <= 6, logins
    told = [[note for note in said if isinstance(note, Disconnected)] for said in notes.values()]
    assert all(told), told
    assert any("refused a session channel" in note.reason for said in told for note in said)


async def test_short_commands_on_a_full_host_reuse_the_extra_connection(
    sshd10: SSHDServer, tmp_path: Path
) -> None:
    """Probe commands overflowing a full connection share one lingering extra connection, not one each."""
    server = sshd10
    logs = write_logs(tmp_path / "logs", 10)
    key: dict[str, Any] = {"port": server.port, "user": server.user}
    async with SSHPool(options_for(server, max_channels=MAX_SESSIONS)) as pool, AsyncExitStack() as stack:
        await follow_all(stack, pool, server, logs)
        outputs = [(await pool.run(server.host, f"echo {n}", **key)).stdout for n in range(3)]
        assert outputs == ["0\n", "1\n", "2\n"]
        conns = pool.connections(server.host, **key)
        assert len(conns) == 2
        assert pool.channel_counts(server.host, **key) == [10, 0]
        assert (await pool.run(server.host, "echo again", **key)).stdout == "again\n"
        assert pool.connections(server.host, **key) == conns
