"""Tests for watchdog.follow.sources.journald: entries of a unit or identifier as lines, resumed by cursor."""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from journald_server import unique_identifier, write_all
from sshd_server import SSHDServer

from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import build_verdict
from watchdog.exceptions import ConnectionLost, UsageError
from watchdog.follow.replay import replay_path
from watchdog.follow.sources import journald as jd
from watchdog.follow.sources.base import (
    CaughtUp,
    Chunk,
    Connected,
    Disconnected,
    Ended,
    FileRestarted,
    SourceItem,
)
from watchdog.follow.sources.journald import (
    JournaldSource,
    JournalMatch,
    entry_line,
    parse_entry,
    parse_match,
    parse_unit_state,
    read_command,
    state_command,
)
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
from watchdog.profiles.loader import load_engine

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
JOURNAL = FIXTURES / "journald"
CORPUS = FIXTURES / "corpus"
UNIT_LINES = (JOURNAL / "unit-vllm.json").read_bytes().splitlines()
INV1, INV2 = "a3c9f2e1b4d84f6a8e7c1d2b3a4f5e60", "f0e1d2c3b4a5968778695a4b3c2d1e0f"


def show(name: str, **changes: str) -> str:
    """A recorded `systemctl show` output, with some properties changed."""
    lines = (JOURNAL / f"systemctl-show-{name}.txt").read_text().splitlines()
    return "".join(f"{k}={changes.get(k, v)}\n" for k, v in (line.split("=", 1) for line in lines))


# -- the pure parts, on recorded output ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [
        pytest.param("vllm.service", "_SYSTEMD_UNIT", "vllm.service", id="unit"),
        pytest.param("vllm", "_SYSTEMD_UNIT", "vllm.service", id="unit-without-type"),
        pytest.param("vllm-0.9", "_SYSTEMD_UNIT", "vllm-0.9.service", id="dot-not-a-type"),
        pytest.param("serve@1.socket", "_SYSTEMD_UNIT", "serve@1.socket", id="other-type"),
        pytest.param("identifier=vllm-demo", "SYSLOG_IDENTIFIER", "vllm-demo", id="identifier"),
    ],
)
def test_parse_match(name: str, field: str, value: str) -> None:
    """A unit name gets `.service` where it has no unit type, as `journalctl -u` does; `identifier=` names
    SYSLOG_IDENTIFIER."""
    assert parse_match(name) == JournalMatch(field, value)


@pytest.mark.parametrize("name", ["", "identifier=", "a/b"])
def test_parse_match_refuses(name: str) -> None:
    """An empty name or identifier, or a path, is a usage error."""
    with pytest.raises(UsageError):
        parse_match(name)


def test_entries_of_systemd_cat_are_lines() -> None:
    """Real `journalctl -o json` entries: a string MESSAGE, an array of byte values (not UTF-8, with ANSI
    colours) and a message sent whole with newlines each come out as newline-terminated lines, byte for byte."""
    entries = [parse_entry(line) for line in (JOURNAL / "systemd-cat.json").read_bytes().splitlines()]
    assert all(e is not None and e.matches(parse_match("identifier=vllm-demo")) for e in entries)
    data = b"".join(entry_line(e) for e in entries if e is not None)
    assert data == (
        b"INFO 12-04 17:40:01 [api_server.py:1] vLLM API server version 0.9.1\n"
        b"WARNING \xff\xfe not utf-8 \x1b[33mcolour\x1b[0m\n"
        b"last line without newline\n"
        b'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
        b"RuntimeError: sent whole with newlines\n"
    )
    assert entries[0] is not None
    assert entries[0].cursor.startswith("s=")


def test_parse_entry_ignores_what_is_not_an_entry() -> None:
    """A blank line, a notice, or JSON without a cursor is no entry."""
    for line in (b"", b"-- No entries --", b'{"MESSAGE": "x"}', b"[1, 2]"):
        assert parse_entry(line) is None


def test_unit_match_keeps_the_units_own_lines() -> None:
    """Of a unit's entries, only its processes' (`_SYSTEMD_UNIT`) match: systemd's own lines about the unit
    (`UNIT=`, from init.scope) are not the server's log; each run carries its invocation id."""
    match = parse_match("vllm")
    entries = [e for e in map(parse_entry, UNIT_LINES) if e is not None and e.matches(match)]
    assert [e.invocation for e in entries] == [INV1, INV1, INV1, INV2, INV2]
    assert entry_line(entries[2]) == b"RuntimeError: CUDA error: out of memory \xff\n"


@pytest.mark.parametrize(
    ("name", "ended", "exit_code", "restarting", "oom", "detail"),
    [
        pytest.param("running", None, None, False, False, "", id="running"),
        pytest.param("never-started", None, None, False, False, "", id="never-started"),
        pytest.param("failed-exit", True, 1, False, False, "main process exited with status 1", id="exit-1"),
        pytest.param("failed-signal", True, 137, False, False, "was killed by SIGKILL", id="sigkill"),
        pytest.param("failed-core-dump", True, 134, False, False, "dumped core on SIGABRT", id="core-dump"),
        pytest.param("oom-kill", True, 137, False, True, "result oom-kill", id="oom-kill"),
        pytest.param("auto-restart", True, 1, True, False, "is being restarted", id="auto-restart"),
        pytest.param("stopped", True, 0, False, False, "was killed by SIGTERM", id="systemctl-stop"),
    ],
)
def test_unit_state(
    name: str, ended: bool | None, exit_code: int | None, restarting: bool, oom: bool, detail: str
) -> None:
    """`systemctl show` output gives the process evidence: a main process that exited, was killed or dumped
    core ends the stream with its status (a signal as 128 + N, a stop systemd counts a success as 0)."""
    state = parse_unit_state(show(name))
    assert state is not None
    assert state.ended is bool(ended)
    if ended:
        event = state.ended_event("vllm.service")
        assert (event.exit_code, event.oom_killed) == (exit_code, oom)
        assert ("is being restarted" in event.detail) is restarting
        assert detail in event.detail
        assert event.memory_limit == (68719476736 if oom else None)


def test_no_systemd() -> None:
    """Where systemd is not init, the state command says so and there is no unit state."""
    assert parse_unit_state(jd.NO_SYSTEMD + "\n") is None


@pytest.mark.parametrize("hostile", ["x'; touch /tmp/pwned; '", "$(reboot)", "a b\nc", "-f"])
def test_commands_quote_every_argument(hostile: str) -> None:
    """Nothing from a target reaches the shell unquoted: the command splits back into the exact arguments."""
    match = parse_match(f"identifier={hostile}")
    argv = read_command(match, after=hostile, follow=True)
    assert argv[:2] == ["sh", "-c"]
    assert argv[3:] == [
        "watchdog-journal",
        "follow-after",
        hostile,
        "SYSLOG_IDENTIFIER",
        hostile,
    ]
    assert shlex.split(shlex.join(argv)) == argv  # as sent to a host
    assert state_command(hostile)[3:] == ["watchdog-unit", hostile]


def test_insufficient_permissions_says_what_to_do() -> None:
    """journalctl's refusal (an account outside the systemd-journal group) is a usage error that says the fix."""
    runner = jd.LocalRunner()
    with pytest.raises(UsageError, match="systemd-journal"):
        jd._check_reader(runner, 1, "No journal files were opened due to insufficient permissions.\n")


# -- the follow logic over recorded unit output (no units can run here) ----------------------------------------


class _Scripted:
    """Output a test feeds (a follow) or that ends after recorded bytes."""

    def __init__(self, data: bytes, *, endless: bool) -> None:
        self.data = data
        self.endless = endless
        self.send, self.recv = anyio.create_memory_object_stream[bytes](10)

    async def receive(self) -> bytes | None:
        if self.data:
            data, self.data = self.data, b""
            return data
        if not self.endless:
            return None
        return await self.recv.receive()

    def ended(self) -> tuple[int | None, str]:
        return 0, ""


class _RecordedHost:
    """Answers the source's commands with recorded output: `systemctl show` from a list of states (the last
    repeats), the backlog from recorded lines, and a follow that the test feeds."""

    where = "recorded"

    def __init__(self, states: list[str], backlog: list[bytes]) -> None:
        self.states = states
        self.backlog = backlog
        self.follow: _Scripted | None = None

    @asynccontextmanager
    async def open(self, argv: list[str]) -> AsyncIterator[_Scripted]:
        if argv[3] == "watchdog-unit":
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            output = _Scripted(state.encode(), endless=False)
        elif argv[4].startswith("follow-"):
            output = self.follow = _Scripted(b"", endless=True)
        else:
            output = _Scripted(b"".join(line + b"\n" for line in self.backlog), endless=False)
        with output.send, output.recv:
            yield output


def recorded_source(host: _RecordedHost) -> JournaldSource:
    source = JournaldSource("vllm", state_interval=0.02)
    source._runner = host
    return source


async def next_item(items: AsyncIterator[SourceItem], within: float = 10.0) -> SourceItem:
    with anyio.fail_after(within):
        return await anext(items)


async def test_unit_from_start_reads_the_current_invocation() -> None:
    """Read from the start, a unit's stream is its current invocation's lines: an earlier run's and systemd's
    own lines are left out."""
    host = _RecordedHost([show("running")], UNIT_LINES)
    async with recorded_source(host).open_follow() as items:
        chunk = await next_item(items)
        assert isinstance(chunk, Chunk)
        assert chunk.offset == 0
        assert chunk.data == (
            b"INFO 12-04 08:54:40 [api_server.py:1043] vLLM API server version 0.9.1\n"
            b"INFO 12-04 08:55:02 [launcher.py:29] Available routes are:\n"
        )
        assert chunk.cursor is not None
        assert chunk.file == jd.stream_id(f"invocation:{INV2}")
        assert await next_item(items) == CaughtUp(chunk.end)


async def test_unit_crash_then_restart() -> None:
    """A run that systemd says ended (waiting to be restarted, exit status 1) gives `Ended` after its last line
    and CaughtUp; the next invocation's lines are a new stream from offset 0."""
    running = show("running", InvocationID=INV1, NRestarts="0")
    first_run = [line for line in UNIT_LINES if INV1.encode() in line]
    second_run = [line for line in UNIT_LINES if INV2.encode() in line]
    host = _RecordedHost([running, running, show("auto-restart")], first_run)
    async with recorded_source(host).open_follow() as items:
        chunk = await next_item(items)
        assert isinstance(chunk, Chunk)
        assert chunk.data.endswith(b"out of memory \xff\n")
        assert await next_item(items) == CaughtUp(chunk.end)
        ended = await next_item(items)
        assert isinstance(ended, Ended)
        assert ended.exit_code == 1
        assert "is being restarted" in ended.detail
        assert host.follow is not None
        await host.follow.send.send(b"".join(line + b"\n" for line in second_run))
        assert await next_item(items) == FileRestarted("restarted")
        chunk = await next_item(items)
        assert isinstance(chunk, Chunk)
        assert chunk.offset == 0
        assert chunk.data.startswith(b"INFO 12-04 08:54:40")
        assert chunk.file == jd.stream_id(f"invocation:{INV2}")


# -- against the real journald ---------------------------------------------------------------------------------


async def collect(items: AsyncIterator[SourceItem], lines: int, within: float = 15.0) -> list[Chunk]:
    """Chunks until `lines` lines were read, checking that each starts where the previous ended."""
    chunks: list[Chunk] = []
    count = 0
    with anyio.fail_after(within):
        async for item in items:
            if isinstance(item, Chunk):
                assert item.offset == (chunks[-1].end if chunks else item.offset)
                assert item.cursor is not None
                assert item.data.endswith(b"\n")
                chunks.append(item)
                count += item.data.count(b"\n")
                if count >= lines:
                    break
    assert count == lines
    return chunks


async def until_caught_up(items: AsyncIterator[SourceItem], within: float = 15.0) -> list[SourceItem]:
    """The items up to and with the next CaughtUp."""
    seen: list[SourceItem] = []
    with anyio.fail_after(within):
        async for item in items:
            seen.append(item)
            if isinstance(item, CaughtUp):
                return seen
    raise AssertionError(f"the items ended before CaughtUp: {seen}")


async def test_follow_identifier_live(journald: None) -> None:
    """An identifier's backlog, then lines written while it is followed, come through exactly, each chunk with
    its cursor and the stream's id (the one `stream_id` gives)."""
    ident = unique_identifier("live")
    write_all(ident, b"one\ntwo\n")
    source = JournaldSource(f"identifier={ident}")
    async with source.open_follow() as items:
        seen = await until_caught_up(items)
        assert b"".join(i.data for i in seen if isinstance(i, Chunk)) == b"one\ntwo\n"
        assert seen[-1] == CaughtUp(8)
        write_all(ident, b"three \xff\n\x1b[31mfour\x1b[0m\n")
        chunks = await collect(items, 2)
    assert b"".join(c.data for c in chunks) == b"three \xff\n\x1b[31mfour\x1b[0m\n"
    assert chunks[0].offset == 8
    assert chunks[-1].file == await source.stream_id()


async def test_nothing_yet(journald: None) -> None:
    """An identifier with no entry yet is caught up at 0 and has no stream; its first line comes when written."""
    ident = unique_identifier("empty")
    source = JournaldSource(f"identifier={ident}")
    assert await source.stream_id() is None
    async with source.open_follow() as items:
        assert await until_caught_up(items) == [CaughtUp(0)]
        write_all(ident, b"hello\n")
        assert [c.data for c in await collect(items, 1)] == [b"hello\n"]


async def test_unit_without_systemd(journald: None) -> None:
    """A unit where systemd does not run has no state (said once in the log): its log is followed alone."""
    source = JournaldSource(unique_identifier("unit") + ".service", state_interval=0.02)
    async with source.open_follow() as items:
        assert await until_caught_up(items) == [CaughtUp(0)]
    assert source.systemd is False
    assert await source.unit_state() is None


async def test_resume_by_cursor_loses_and_repeats_nothing(journald: None) -> None:
    """A follower stopped in the middle (a daemon restart) and resumed from its last chunk's offset and cursor
    reads exactly the lines after it, numbered on, in the same stream."""
    ident = unique_identifier("resume")
    lines = [b"line %d\n" % i for i in range(200)]
    write_all(ident, b"".join(lines[:120]))
    source = JournaldSource(f"identifier={ident}")
    async with source.open_follow() as items:
        first = await collect(items, 120)
    write_all(ident, b"".join(lines[120:]))
    again = JournaldSource(f"identifier={ident}")
    assert await again.stream_id() == first[-1].file
    async with again.open_follow(first[-1].end, first[-1].cursor) as items:
        rest = await collect(items, 80)
    assert rest[0].offset == first[-1].end
    assert b"".join(c.data for c in first + rest) == b"".join(lines)


def corpus_cases() -> list[Any]:
    """Per engine, one case of each outcome (crash, ready, stall: the log just ends, stop)."""
    import json  # noqa: PLC0415

    picked: dict[tuple[str, str], Path] = {}
    for label in sorted(CORPUS.glob("*/*.json")):
        outcome = json.loads(label.read_text())["outcome"]
        picked.setdefault((label.parent.name, outcome), label.with_suffix(".log"))
    return [
        pytest.param(path, id=f"{engine}-{outcome}") for (engine, outcome), path in sorted(picked.items())
    ]


def verdict_of(data: bytes) -> tuple[object, ...]:
    analyzer = Analyzer(load_engine(None))
    analyzer.feed(data, 0.0)
    analyzer.finish(0.0)
    v = build_verdict(analyzer).to_json()
    error = v["error"] or {}
    return v["state"], v["phase"], error.get("category"), error.get("summary")


def file_verdict(path: Path) -> tuple[object, ...]:
    v = replay_path(path)[1].to_json()
    error = v["error"] or {}
    return v["state"], v["phase"], error.get("category"), error.get("summary")


async def through_journal(source: JournaldSource, ident: str, log: bytes) -> bytes:
    """The log written through `systemd-cat -t ident` in two halves (the second once the first was read),
    as the source streams it."""
    lines = log.splitlines(keepends=True)
    kept = sum(1 for line in lines if line.strip(b"\r\n"))  # journald keeps no empty line
    half = len(lines) // 2
    first_kept = sum(1 for line in lines[:half] if line.strip(b"\r\n"))
    async with source.open_follow() as items:
        assert [i for i in await until_caught_up(items) if not isinstance(i, Connected)] == [CaughtUp(0)]
        write_all(ident, b"".join(lines[:half]))
        chunks = await collect(items, first_kept) if first_kept else []
        write_all(ident, b"".join(lines[half:]))
        chunks += await collect(items, kept - first_kept)
    return b"".join(c.data for c in chunks)


@pytest.mark.parametrize("path", corpus_cases())
async def test_corpus_through_journald(journald: None, path: Path) -> None:
    """A corpus log written into the journal gives the verdict of the file (state, phase, category, summary)."""
    ident = unique_identifier(path.parent.name)
    log = await anyio.Path(path).read_bytes()
    data = await through_journal(JournaldSource(f"identifier={ident}"), ident, log)
    assert verdict_of(data) == file_verdict(path)


@pytest.fixture
async def pool(ssh_options: SSHOptions, anyio_backend: str) -> AsyncIterator[SSHPool]:
    """A connection pool to the test sshd, closed after the test."""
    async with SSHPool(ssh_options) as pool:
        yield pool


def remote(pool: SSHPool, sshd: SSHDServer, ident: str) -> JournaldSource:
    return JournaldSource(f"identifier={ident}", pool=pool, host=sshd.host, port=sshd.port, user=sshd.user)


@pytest.mark.parametrize(
    "path", [case for case in corpus_cases() if case.id.endswith(("-crashed", "vllm-ready"))]
)
async def test_corpus_through_journald_over_ssh(
    journald: None, sshd: SSHDServer, pool: SSHPool, path: Path
) -> None:
    """Read on the host over SSH, a corpus log in the journal gives the verdict of the file."""
    ident = unique_identifier("ssh")
    log = await anyio.Path(path).read_bytes()
    data = await through_journal(remote(pool, sshd, ident), ident, log)
    assert verdict_of(data) == file_verdict(path)


async def test_cut_connection_loses_and_repeats_nothing(
    journald: None, sshd: SSHDServer, pool: SSHPool
) -> None:
    """The SSH connection cut in the middle of the log: Disconnected, Connected, and every line once, in order."""
    ident = unique_identifier("cut")
    lines = [b"line %d of the launch\n" % i for i in range(300)]
    write_all(ident, b"".join(lines[:150]))
    async with remote(pool, sshd, ident).open_follow() as items:
        assert isinstance(await next_item(items), Connected)
        data = b"".join(c.data for c in await collect(items, 150))
        assert [type(i) for i in await until_caught_up(items)] == [CaughtUp]
        # one line through the follow: its command is running now (a cut between the backlog's command and the
        # follow's would be healed by a new connection before any command saw it)
        write_all(ident, lines[150])
        data += b"".join(c.data for c in await collect(items, 1))
        assert sshd.kill_sessions()
        events = [await next_item(items, within=20)]  # the cut is seen before the rest is written
        while isinstance(events[-1], CaughtUp):
            events = [await next_item(items, within=20)]
        write_all(ident, b"".join(lines[151:]))
        with anyio.fail_after(20):
            async for item in items:
                if isinstance(item, Chunk):
                    data += item.data
                elif not isinstance(item, CaughtUp):
                    events.append(item)
                if data.count(b"\n") >= len(lines):
                    break
    assert [type(e) for e in events] == [Disconnected, Connected]
    assert data == b"".join(lines)


async def test_unreachable_host_is_an_error(pool: SSHPool) -> None:
    """A host that never answers: said (`Disconnected`), tried again, then `ConnectionLost` ends the iteration."""
    import socket  # noqa: PLC0415

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = JournaldSource("identifier=x", pool=pool, host="127.0.0.1", port=port)
    seen: list[SourceItem] = []

    async def drain() -> None:
        async with source.open_follow() as items:
            async for item in items:
                seen.append(item)  # noqa: PERF401 - what came before the error is kept

    with anyio.fail_after(30), pytest.raises(ConnectionLost):
        await drain()
    assert [type(i) for i in seen] == [Disconnected]
