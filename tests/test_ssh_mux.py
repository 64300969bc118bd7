"""The log readers' multiplexer (`watchdog.follow.sources.mux`): many logs of a host through one SSH channel, against
a real sshd, with the same items and verdicts as one channel per log; and one channel per log where it cannot run.

The source's own tests (tests/test_sources_ssh.py) run here again with the multiplexer on: growth with binary
bytes, a connection cut three times at 5k lines/s (every reader resumes at its offset), rotation, truncation,
replacement, a missing file that appears, a directory, no tail left behind.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from conftest import ssh_options_for, sshd_or_skip
from sshd_server import SSHDServer, assert_no_reader_left, pgrep_f
from test_sources_ssh import (
    make_source,
    read_until,
    test_directory_is_usage_error,
    test_follows_growing_file,
    test_missing_then_created,
    test_no_tail_left_after_cancellation,
    test_no_tail_left_after_close,
    test_reconnects_without_loss_or_duplicates,
    test_replacement,
    test_rotation,
    test_truncation,
)

import watchdog.follow.sources.ssh as ssh_module
from watchdog.follow.follower import Concluded, LaunchFollower, LaunchSpec
from watchdog.follow.sources.base import CaughtUp, Chunk, Connected, Disconnected, SourceItem
from watchdog.follow.sources.channel import _HIGH_WATER
from watchdog.follow.sources.identity import local_identity
from watchdog.follow.sources.mux import MUX_NAME, MUX_PROGRAM
from watchdog.follow.sources.remote import STREAM_NAME, stream_args
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
from watchdog.follow.sources.target import Target

pytestmark = [pytest.mark.anyio, pytest.mark.sshd]

__all__ = [  # the source's tests, run here through the multiplexer (the `pool` fixture below)
    "test_directory_is_usage_error",
    "test_follows_growing_file",
    "test_missing_then_created",
    "test_no_tail_left_after_cancellation",
    "test_no_tail_left_after_close",
    "test_reconnects_without_loss_or_duplicates",
    "test_replacement",
    "test_rotation",
    "test_truncation",
]

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
DEADLINE = 60.0  # an upper bound for a loaded CI machine


@pytest.fixture
async def pool(
    ssh_options: SSHOptions, anyio_backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[SSHPool]:
    """A pool to the test sshd with the multiplexer on; a streaming test's reader went through it."""
    async with SSHPool(replace(ssh_options, multiplex=True)) as pool:
        yield pool
    params = getattr(request.node, "callspec", None)
    if params is None or params.params.get("stream", True) is not False:
        assert pool.muxes_started >= 1, "no reader went through the multiplexer"


def _mux_processes(sshd: SSHDServer) -> list[int]:
    """The multiplexers this test's sshd runs (its sessions' descendants: other tests' sshds, on other workers of
    the same machine, run theirs at the same time)."""

    def parent(pid: int) -> int:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return 0
        return int(stat.rsplit(")", 1)[1].split()[1])

    def under_sshd(pid: int) -> bool:
        while pid > 1:
            pid = parent(pid)
            if pid == sshd.listener_pid:
                return True
        return False

    return [pid for pid in pgrep_f(MUX_NAME) if under_sshd(pid)]


def _logs(directory: Path, count: int) -> list[Path]:
    directory.mkdir()
    logs = [directory / f"launch {index:02d}.log" for index in range(count)]
    for index, log in enumerate(logs):
        log.write_bytes(b"launch %d starting\n" % index)
    return logs


async def test_many_logs_through_one_channel_and_one_closed_leaves_the_others(
    sshd: SSHDServer, ssh_options: SSHOptions, tmp_path: Path
) -> None:
    """30 logs of one host: one channel (one multiplexer process on the host), every log read exactly; closing
    one reader leaves the 29 others reading; the connection cut, each of them resumes at its offset."""
    logs = _logs(tmp_path / "logs", 30)
    key: dict[str, Any] = {"port": sshd.port, "user": sshd.user}
    before = set(_mux_processes(sshd))
    async with SSHPool(replace(ssh_options, multiplex=True)) as pool, AsyncExitStack() as stack:
        streams = [
            await stack.enter_async_context(make_source(pool, sshd, log).open_follow()) for log in logs
        ]
        with anyio.fail_after(DEADLINE):
            for index, items in enumerate(streams):
                assert await read_until(items, logs[index].stat().st_size) == logs[index].read_bytes()
        assert pool.channel_counts(sshd.host, **key) == [1]
        assert pool.multiplexed(sshd.host, **key) == 30
        assert len(set(_mux_processes(sshd)) - before) == 1
        closing = streams.pop(7)
        await closing.aclose()  # type: ignore[attr-defined]
        kept = logs[:7] + logs[8:]
        await assert_no_reader_left(logs[7])  # its reader on the host ended
        await _each_reads_its_append(streams, kept, b"\x00\xff line of %d\r\n")
        assert pool.channel_counts(sshd.host, **key) == [1]
        # the connection cut: every log resumes at its offset, on a new multiplexer
        assert sshd.kill_sessions()
        await _each_reads_its_append(streams, kept, b"after the cut %d\n", cut=True)
        assert pool.channel_counts(sshd.host, **key) == [1]
        assert pool.multiplexed(sshd.host, **key) == 29
    assert pool.muxes_started == 2


async def _each_reads_its_append(
    streams: list[AsyncIterator[SourceItem]], logs: list[Path], line: bytes, *, cut: bool = False
) -> None:
    """Append `line % index` to each log; each stream reads exactly that (past a cut connection's notes: `cut`)."""
    sizes = [log.stat().st_size for log in logs]
    for index, log in enumerate(logs):
        with log.open("ab") as file:
            file.write(line % index)
    with anyio.fail_after(DEADLINE):
        for index, items in enumerate(streams):
            end = logs[index].stat().st_size
            if cut:
                data = await _read_across_cut(items, end, sizes[index])
            else:
                data = await read_until(items, end, start=sizes[index])
            assert data == line % index


async def _read_across_cut(items: AsyncIterator[SourceItem], end: int, start: int) -> bytes:
    """The chunks from byte `start` up to byte `end`, past the notes of a cut connection (said once) and its
    return."""
    data = b""
    notes: list[type] = []
    while start + len(data) < end:
        item = await anext(items)
        if isinstance(item, Chunk):
            assert item.offset == start + len(data)
            data += item.data
        elif not isinstance(item, CaughtUp):
            notes.append(type(item))
    assert notes == [Disconnected, Connected]
    return data


def _corpus_logs(count: int) -> list[Path]:
    """`count` corpus logs (the tuning set, every engine) whose recorded outcome is a verdict, half of them crashed
    and half ready (spread over each outcome's logs, so that a corpus that grows keeps both)."""
    found: dict[str, list[Path]] = {"crashed": [], "ready": []}
    for log in sorted(CORPUS.glob("*/*.log")):
        expected = log.with_suffix(".json")
        if expected.is_file() and (outcome := json.loads(expected.read_text()).get("outcome")) in found:
            found[outcome].append(log)
    picked = []
    for logs, wanted in ((found["crashed"], count - count // 2), (found["ready"], count // 2)):
        picked += logs[:: max(1, len(logs) // wanted)][:wanted]
    return picked


async def _verdicts(pool: SSHPool, sshd: SSHDServer, logs: list[Path]) -> list[dict[str, Any]]:
    """Each log's verdict (state, phase, category, root-cause line, timeline states) followed over `pool` from its
    start, the whole log there (when the rest of a log comes is a matter of timing: a crash's phase may be refined
    by the lines after its verdict only if they come within its settle window)."""

    async def follow(log: Path, results: dict[Path, dict[str, Any]]) -> None:
        target = Target(host=sshd.host, user=sshd.user, port=sshd.port, path=str(log))
        follower = LaunchFollower(LaunchSpec(name=log.stem, target=target), pool=pool)
        with follower.updates:
            async with anyio.create_task_group() as tg:
                await tg.start(follower.run)
                async for update in follower.updates:
                    if isinstance(update, Concluded):
                        got = update.verdict.to_json()
                        error = got["error"] or {}
                        results[log] = {
                            "state": got["state"],
                            "phase": got.get("phase"),
                            "category": error.get("category"),
                            "line": error.get("line"),
                            "timeline": [step["state"] for step in got["timeline"]],
                        }
                        break
                tg.cancel_scope.cancel()

    results: dict[Path, dict[str, Any]] = {}
    for log, source in zip(logs, _corpus_logs(len(logs)), strict=True):
        log.write_bytes(source.read_bytes())
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            for log in logs:
                tg.start_soon(follow, log, results)
    return [results[log] for log in logs]


async def test_the_same_verdicts_with_and_without_the_multiplexer(
    sshd: SSHDServer, ssh_options: SSHOptions, tmp_path: Path
) -> None:
    """12 corpus launches followed over SSH give the same verdicts and transitions through the multiplexer as with
    a channel each."""
    verdicts = {}
    for multiplex in (False, True):
        directory = tmp_path / f"multiplex-{multiplex}"
        directory.mkdir()
        logs = [directory / f"{index:02d}.log" for index in range(12)]
        async with SSHPool(replace(ssh_options, multiplex=multiplex)) as pool:
            verdicts[multiplex] = await _verdicts(pool, sshd, logs)
            assert pool.muxes_started == (1 if multiplex else 0)
    assert verdicts[True] == verdicts[False]
    assert {"crashed", "ready"} <= {verdict["state"] for verdict in verdicts[True]}


@pytest.fixture
def no_python_sshd(tmp_path: Path) -> Iterator[SSHDServer]:
    """An sshd whose sessions' PATH has the reader's tools but no python3 (a host without it)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sh", "tail", "stat", "date", "tr", "sleep", "cat", "head"):
        found = next(Path(d) / tool for d in ("/usr/bin", "/bin") if (Path(d) / tool).exists())
        (tools / tool).symlink_to(found)
    # HOME too: a login shell's rc file (its own PATH) is not read from a home the test did not make
    yield from sshd_or_skip(tmp_path / "sshd", [f"SetEnv PATH={tools} HOME={tmp_path}"])


def _mux_options(server: SSHDServer) -> SSHOptions:
    """Options that reach `server` and nothing else, with the multiplexer on."""
    return replace(ssh_options_for(server), multiplex=True)


@pytest.fixture
def sshd1(tmp_path: Path) -> Iterator[SSHDServer]:
    """An sshd of this test alone that allows one session per connection."""
    yield from sshd_or_skip(tmp_path / "sshd1", extra_config=["MaxSessions 1"])


async def test_a_file_is_identified_through_the_multiplexer_beside_its_readers(
    sshd1: SSHDServer, tmp_path: Path
) -> None:
    """A file's identity (a reader's fingerprint check after a quiet spell, a checkpoint's) is read through the
    host's multiplexer, beside its readers, not in a channel of its own: a host that allows one session per
    connection is identified on the one connection the readers use, and a path that is not there is None."""
    logs = _logs(tmp_path / "logs", 3)
    key: dict[str, Any] = {"port": sshd1.port, "user": sshd1.user}
    async with SSHPool(_mux_options(sshd1), idle_linger=DEADLINE) as pool, AsyncExitStack() as stack:
        sources = [make_source(pool, sshd1, log) for log in logs]
        streams = [await stack.enter_async_context(source.open_follow()) for source in sources]
        with anyio.fail_after(DEADLINE):
            for items, log in zip(streams, logs, strict=True):
                assert await read_until(items, log.stat().st_size) == log.read_bytes()
            for source, log in zip(sources, logs, strict=True):
                size = log.stat().st_size
                assert await source.identify(size) == local_identity(str(log), size)
            assert await make_source(pool, sshd1, tmp_path / "logs" / "not there.log").identify(0) is None
        assert len(pool.connections(sshd1.host, **key)) == 1
        assert pool.channel_counts(sshd1.host, **key) == [1]
        assert pool.multiplexed(sshd1.host, **key) == 3


async def test_a_host_without_python3_gets_a_channel_per_log(
    no_python_sshd: SSHDServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where python3 is not on the account's PATH, the multiplexer does not start: said once in the log, and each
    log is read in a channel of its own."""
    monkeypatch.setattr(
        ssh_module, "FINGERPRINT_QUIET", math.inf
    )  # no identity channel: the counts are the logs'
    server = no_python_sshd
    options = _mux_options(server)
    logs = _logs(tmp_path / "logs", 3)
    key: dict[str, Any] = {"port": server.port, "user": server.user}
    with structlog.testing.capture_logs() as logged:
        async with SSHPool(options) as pool, AsyncExitStack() as stack:
            streams = [
                await stack.enter_async_context(make_source(pool, server, log).open_follow()) for log in logs
            ]
            with anyio.fail_after(DEADLINE):
                for index, items in enumerate(streams):
                    assert await read_until(items, logs[index].stat().st_size) == logs[index].read_bytes()
                with logs[1].open("ab") as file:
                    file.write(b"more\n")
                assert await read_until(streams[1], logs[1].stat().st_size, start=18) == b"more\n"
            assert pool.channel_counts(server.host, **key) == [3]
            assert pool.multiplexed(server.host, **key) is None
    assert pool.muxes_started == 0
    said = [entry for entry in logged if entry["event"] == "SSH multiplexer not started: one channel per log"]
    assert len(said) == 1, logged
    assert "python3" in said[0]["reason"]
    assert said[0]["log_level"] == "info"  # a host without python3 is no fault


async def test_a_reader_s_bytes_reach_it_whole_however_the_frames_are_cut(
    sshd: SSHDServer, ssh_options: SSHOptions, tmp_path: Path
) -> None:
    """A large write (frames larger than an SSH packet, cut across reads) and many small ones of several logs at
    once arrive exact, with their offsets."""
    logs = _logs(tmp_path / "logs", 4)
    async with SSHPool(replace(ssh_options, multiplex=True)) as pool, AsyncExitStack() as stack:
        streams = [
            await stack.enter_async_context(make_source(pool, sshd, log).open_follow()) for log in logs
        ]
        with anyio.fail_after(DEADLINE):
            for index, items in enumerate(streams):
                await read_until(items, logs[index].stat().st_size)
            sizes = [log.stat().st_size for log in logs]
            big = bytes(range(256)) * 1024  # 256 KiB, every byte value
            with logs[0].open("ab") as file:
                file.write(big)
            for round_ in range(50):
                for index, log in enumerate(logs[1:], 1):
                    with log.open("ab") as file:
                        file.write(b"%d line %d \xc3\x28\n" % (index, round_))
            assert await read_until(streams[0], sizes[0] + len(big), start=sizes[0]) == big
            for index in range(1, len(logs)):
                expected = b"".join(b"%d line %d \xc3\x28\n" % (index, r) for r in range(50))
                assert (
                    await read_until(streams[index], sizes[index] + len(expected), start=sizes[index])
                    == expected
                )
    assert pool.muxes_started == 1


async def test_a_reader_that_does_not_keep_up_is_paused_alone(
    sshd: SSHDServer, ssh_options: SSHOptions, tmp_path: Path
) -> None:
    """A reader's output not taken stops at `_HIGH_WATER` queued packets plus what was in flight: the multiplexer
    stops reading that reader alone (its tail then waits), while another log of the same channel goes on; reading
    on resumes it, and every byte arrives, in order."""
    big, small = tmp_path / "big.log", tmp_path / "small.log"
    total = 8_000_000
    big.write_bytes(b"x" * total)
    small.write_bytes(b"")
    key: dict[str, Any] = {"port": sshd.port, "user": sshd.user}
    args = {"stat_interval": 1.0, "tail_interval": 0.01}
    async with SSHPool(replace(ssh_options, multiplex=True)) as pool:
        _, stalled = await pool.open_reader(sshd.host, STREAM_NAME, stream_args(str(big), 0, **args), **key)
        _, going = await pool.open_reader(sshd.host, STREAM_NAME, stream_args(str(small), 0, **args), **key)
        try:
            with anyio.fail_after(DEADLINE):
                while True:  # the channel's own pace: polled
                    if len(stalled._packets) >= _HIGH_WATER:
                        break
                    await anyio.sleep(0.01)
            await anyio.sleep(0.5)  # an absence: what was in flight has come, and no more comes
            queued = len(stalled._packets)
            small.write_bytes(b"still read\n")
            seen = b""
            with anyio.fail_after(DEADLINE):
                while b"still read\n" not in seen:
                    kind, data, _ = await going.receive()
                    seen += data if kind == "out" else b""
            assert len(stalled._packets) == queued
            assert sum(len(data) for kind, data, _ in stalled._packets if kind == "out") < total
            received = b""
            with anyio.fail_after(DEADLINE):
                while received.count(b"x") < total:
                    kind, data, _ = await stalled.receive()
                    assert kind in ("out", "err"), kind
                    received += data if kind == "out" else b""
            header, _, rest = received.partition(b"\n")
            assert header.startswith(b"ok ")
            assert rest == b"x" * total
        finally:
            stalled.close()
            going.close()


def _hexed(*words: str) -> str:
    return " ".join(word.encode().hex() for word in words)


async def test_the_multiplexer_writes_what_its_readers_write_within_its_wait_together(tmp_path: Path) -> None:
    """With `w MS`, bytes another reader has ready within MS of the first reader's leave the multiplexer in the same
    write (one SSH packet on a channel): two logs written 10 ms apart come in one read of its stdout."""
    python3 = shutil.which("python3", path="/usr/bin:/bin")
    if python3 is None:
        pytest.skip("no python3 in /usr/bin or /bin")
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    for log in logs:
        log.write_bytes(b"")
    args = {"stat_interval": 1.0, "tail_interval": 0.01}
    control = b"w 50\n" + b"".join(
        b"o %d %s %s\n" % (index, STREAM_NAME.encode(), _hexed(*stream_args(str(log), 0, **args)).encode())
        for index, log in enumerate(logs, 1)
    )
    async with await anyio.open_process([python3, "-c", MUX_PROGRAM, MUX_NAME]) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        await process.stdin.send(control)
        seen = b""
        with anyio.fail_after(DEADLINE):
            while seen.count(b"\nW\n") < 2:  # both readers have started and settled (their stat loops wait)
                seen += await process.stdout.receive()
            logs[0].write_bytes(b"first log\n")
            await anyio.sleep(0.01)  # the second log's write comes 10 ms after the first's
            logs[1].write_bytes(b"second log\n")
            read = await process.stdout.receive()
        await process.stdin.aclose()
    assert b"1 o 10\nfirst log\n" in read
    assert b"2 o 11\nsecond log\n" in read
