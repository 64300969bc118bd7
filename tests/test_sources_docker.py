"""A container's log through the runtime's CLI: the parsers on real output, and a real dockerd here and over SSH.

The live tests start their own dockerd (tests/docker_daemon.py) and containers of a static busybox; the SSH
ones reach it through a real sshd whose sessions get DOCKER_HOST (sshd_config `SetEnv`), as a host's
administrator would give the watchdog's account a socket other than the default.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from container_follow import NUMBERED, TWO_RUNS, Collected, SlowLogs, following, offsets_follow_on
from docker_daemon import IMAGE, DockerDaemon
from sshd_server import SSHDServer

from watchdog.follow.sources.base import (
    CaughtUp,
    Chunk,
    Connected,
    Disconnected,
    Ended,
    FileMissing,
    FileRestarted,
    SourceItem,
)
from watchdog.follow.sources.commands import Output
from watchdog.follow.sources.containerlog import (
    ContainerState,
    Cursor,
    LineFilter,
    RecordedEnd,
    Timestamp,
    format_timestamp,
    inspect_command,
    logs_command,
    parse_end_events,
    parse_inspect,
    parse_log_line,
    parse_run_line,
    parse_timestamp,
    run_stream,
)
from watchdog.follow.sources.docker import OOM_SETTLE, REST_READS, ContainerSource
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
from watchdog.follow.sources.target import Target

FIXTURES = Path(__file__).parent / "fixtures" / "docker"
DEADLINE = 20.0


def _inspect(name: str) -> ContainerState:
    state = parse_inspect((FIXTURES / f"inspect-{name}.json").read_bytes())
    assert state is not None
    return state


def _inspect_in(docker: DockerDaemon, name: str) -> ContainerState:
    state = parse_inspect(docker.docker("inspect", name).encode())
    assert state is not None
    return state


# -- the parsers, on output of a real dockerd (20.10) recorded here ---------------------------------------


def test_a_timestamped_log_line_gives_its_time_to_the_nanosecond_and_its_text() -> None:
    """`docker logs --timestamps` lines (recorded) are split into an exact (seconds, nanoseconds) and the text."""
    lines = (FIXTURES / "logs-timestamps.txt").read_bytes().splitlines(keepends=True)
    parsed = [parse_log_line(line) for line in lines]
    assert [text for _, text in filter(None, parsed)] == [b"oops\n", b"start\n", b"start\n", b"oops\n"]
    first = parsed[0]
    assert first is not None
    assert first[0] == (parse_timestamp("2026-12-04T17:37:09Z")[0], 56679204)
    assert format_timestamp(first[0]) == "2026-12-04T17:37:09.056679204Z"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(b"Error response from daemon: No such container: x\n", None, id="the-runtime-speaking"),
        pytest.param(b"2026-12-04T17:37:09Z x", ((1796405829, 0), b"x"), id="no-fraction"),
        pytest.param(b"2026-12-04T18:37:09.5+01:00 x", ((1796405829, 500000000), b"x"), id="an-offset"),
        pytest.param(b"2026-12-04T17:37:09.1Z \tkeeps  spaces", ((1796405829, 100000000), b"\tkeeps  spaces"),
                     id="text-as-is"),
    ],
)  # fmt: skip
def test_lines_without_a_timestamp_are_the_runtimes_own(line: bytes, expected: object) -> None:
    """A line without a leading RFC 3339 time is not the container's; times in other zones come out in UTC."""
    assert parse_log_line(line) == expected


def test_the_state_of_an_oom_killed_container_being_restarted() -> None:
    """A real inspect of a container the kernel OOM-killed, while its restart policy restarts it."""
    state = _inspect("oom-restarting")
    assert (state.running, state.restarting, state.oom_killed, state.exit_code) == (True, True, True, 137)
    assert state.memory_limit == 8 * 1024 * 1024
    assert state.finished_at is not None
    assert state.finished_at > state.started_at  # FinishedAt's 8 digits (Go trims zeros) read right


def test_a_running_first_run_is_read_from_the_log_start_and_a_later_run_after_the_one_before() -> None:
    """The first run of a running container owns the whole log; an exited run begins just before its start."""
    running = _inspect("running")
    assert running.finished_at is None
    assert running.memory_limit is None
    assert running.run_since is None
    exited = _inspect("oom-exited")
    assert exited.run_since is not None
    assert exited.run_since < exited.started_at
    assert exited.stream != _inspect("oom-restarting").stream  # another run: another stream


def test_no_container_is_none_and_garbage_is_an_error() -> None:
    """`[]` (what inspect prints for a name it does not know) is no container; a JSON of another shape is an error."""
    assert parse_inspect(b"[]\n") is None
    assert parse_inspect(b"Error: No such object: x\n") is None
    with pytest.raises(ValueError, match="not a container's state"):
        parse_inspect(b'[{"Id": "x"}]')


def test_the_commands_of_docker_and_podman() -> None:
    """Both runtimes get the same flags; the name comes after `--`, so a name like an option stays a name; the
    `--since` a nanosecond before the time asked (Podman's leaves out the lines stamped with it, Docker's does not)."""
    for runtime in ("docker", "podman"):
        argv = logs_command(runtime, "-c", (1796405829, 5))
        assert argv[:2] == ["sh", "-c"]
        assert argv[3:] == ["watchdog-container-logs", runtime, "-c", "2026-12-04T17:37:09.000000004Z"]
        assert logs_command(runtime, "c", (1796405829, 0))[-1] == "2026-12-04T17:37:08.999999999Z"
        assert inspect_command(runtime, "vllm")[3:] == ["watchdog-container-inspect", runtime, "vllm"]
    assert logs_command("docker", "c", None)[-1] == ""  # no --since: the whole log


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(
            b'watchdog-run ID "2026-12-04T17:37:09.056679204Z" "0001-01-01T00:00:00Z" true', id="json"
        ),
        pytest.param(b"watchdog-run ID 2026-12-04T17:37:09.056679204Z 0001-01-01T00:00:00Z true", id="bare"),
    ],
)
def test_a_run_mark_names_its_run_in_either_form(line: bytes) -> None:
    """The run mark's times as LOGS_SCRIPT prints them (JSON: quoted, the same on Docker and Podman) or as a
    forced-command wrapper of an earlier release does (Docker's bare string) name the same run."""
    known = dataclasses.replace(_inspect("running"), id="ID")
    run = parse_run_line(line, known)
    assert run is not None
    assert (run.started_at, run.finished_at, run.running) == ((1796405829, 56679204), None, True)


def test_a_cursor_reads_back_and_refuses_what_is_not_one() -> None:
    """A cursor survives its text form exactly, with its run's start and restart count or (an older watchdog's)
    without; anything else is a ValueError that names it."""
    cursor = Cursor((1796405829, 56679204), 3, 0xABC)
    assert Cursor.parse(str(cursor)) == cursor
    assert Cursor.parse("1796405829.056679204 3 abc") == cursor
    named = Cursor((1796405829, 56679204), 3, 0xABC, (1796405820, 5), 2)
    assert str(named) == "1796405829.056679204 3 abc 1796405820.000000005 2"
    assert Cursor.parse(str(named)) == named
    for bad in (
        "",
        "1.5 1 a",
        "1.000000000 -1 a",
        "x",
        "1.000000000 1 a 2.000000000",
        "1.000000000 1 a 2.5 1",
    ):
        with pytest.raises(ValueError, match="cursor"):
            Cursor.parse(bad)


def test_a_resumed_reader_skips_the_lines_at_its_cursors_time_it_had_and_no_other() -> None:
    """`--since` gives the cursor's nanosecond again: the first `count` lines there are skipped, the rest new."""
    t1, t2 = (10, 1), (10, 2)
    first = LineFilter(7)
    delivered = [stamp for stamp in (t1, t2, t2) if first.admit(stamp)]
    assert len(delivered) == 3
    assert first.cursor is not None
    resumed = LineFilter(7, cursor=Cursor.parse(first.cursor))
    assert resumed.resume_since() == t2
    # the log from --since t2: the two lines had, a third at the same nanosecond, then a later one
    assert [resumed.admit(stamp) for stamp in (t2, t2, t2, (10, 3))] == [False, False, True, True]
    assert resumed.cursor == str(Cursor((10, 3), 1, 7))
    resumed.restart()  # a second cut: --since (10, 3) gives that line again
    assert [resumed.admit(stamp) for stamp in ((10, 3), (10, 4))] == [False, True]


def test_a_cursor_names_the_run_before_only_when_the_policy_restarted_its_container_once() -> None:
    """The runtime says only the latest run: a cursor's run is the one before it when the container's id and the
    cursor's run start hash to its stream, that run started earlier, and RestartCount is one more than then."""
    now = _inspect("oom-restarting")  # RestartCount 1, restarted by its on-failure policy
    assert (now.restart_count, now.restart_policy) == (1, "on-failure")
    before = (now.started_at[0] - 5, 7)

    def cursor(started: Timestamp, restarts: int, container: str = now.id) -> Cursor:
        return Cursor((now.started_at[0] - 1, 0), 1, run_stream(container, started), started, restarts)

    assert cursor(before, 0).names_run_before(now)
    assert not cursor(before, 1).names_run_before(now)  # restarted again since: runs between, unknown
    assert not cursor(before, 0, "0" * 64).names_run_before(now)  # another container (re-created)
    assert not cursor(now.started_at, 0).names_run_before(now)  # the current run itself
    later = (now.started_at[0] + 5, 0)
    assert not cursor(later, 0).names_run_before(dataclasses.replace(now, restart_count=1))
    assert not cursor(before, 0).names_run_before(dataclasses.replace(now, restart_count=None))
    assert not Cursor((1, 0), 1, run_stream(now.id, before)).names_run_before(now)  # an older cursor
    filtered = LineFilter(now.stream[1], run=now)
    assert filtered.admit((1, 0))
    assert Cursor.parse(filtered.cursor or "") == Cursor((1, 0), 1, now.stream[1], now.started_at, 1)


def test_lines_of_the_run_before_are_not_this_runs() -> None:
    """A run's filter drops the lines at or before the end of the run before it (the same log holds both)."""
    run = LineFilter(1, after=(10, 5))
    assert [run.admit(stamp) for stamp in ((10, 4), (10, 5), (10, 6))] == [False, False, True]


# -- a real dockerd -----------------------------------------------------------------------------------------

pytestmark = pytest.mark.anyio

# Memory grown by the container's only process: a pipeline's child could be the one the kernel kills, and the
# shell that outlives it prints "Killed" into the log (CI saw it once).
GROW = "exec awk 'BEGIN { s = \"a\"; while (1) s = s s }'"


async def _run(docker: DockerDaemon, name: str, script: str, *options: str) -> str:
    """Start a container (in a thread: the follow goes on meanwhile); its id."""
    argv = ("run", "-d", "--name", name, *options, IMAGE, "sh", "-c", script)
    return (await anyio.to_thread.run_sync(lambda: docker.docker(*argv))).strip()


async def test_a_container_not_there_yet_is_waited_for_then_read_and_its_exit_said(
    docker: DockerDaemon,
) -> None:
    """No container: FileMissing; once it runs its lines, then CaughtUp and Ended with its exit code."""
    async with following(ContainerSource("late")) as got:
        await got.until(lambda c: c.of(FileMissing))
        await _run(docker, "late", NUMBERED.format(n=5, pace=1000, code=3))
        await got.until(lambda c: c.of(Ended))
    assert got.lines() == [f"run 0 line {i}".encode() for i in range(5)]
    ended = got.of(Ended)
    assert len(ended) == 1
    assert isinstance(ended[0], Ended)
    assert (ended[0].exit_code, ended[0].oom_killed, ended[0].restarting) == (3, False, False)
    assert isinstance(got.items[-2], CaughtUp)
    offsets_follow_on(got)


async def test_an_oom_killed_container_is_said_within_two_seconds_with_its_limit(
    docker: DockerDaemon,
) -> None:
    """A container the kernel OOM-kills (8 MiB limit, 50 MB allocated) ends with OOMKilled, 137 and the limit,
    said within 2 s of its death."""
    script = f"echo loading; usleep 300000; {GROW}"
    async with following(ContainerSource("oom")) as got:
        await got.until(lambda c: c.of(FileMissing))  # following before the container starts
        await _run(docker, "oom", script, "-m", "8m", "--memory-swap", "8m")
        await got.until(lambda c: c.of(Ended))
        said = time.time()
    ended = got.of(Ended)[0]
    assert isinstance(ended, Ended)
    state = json.loads(docker.docker("inspect", "oom"))[0]["State"]
    died = parse_timestamp(state["FinishedAt"])
    death = died[0] + died[1] / 1e9
    recorded = docker.oom_recorded_at("oom")
    assert recorded is not None, "the kernel did not OOM-kill the container (docker recorded no oom event)"
    assert got.lines() == [b"loading"]
    if recorded - death >= OOM_SETTLE:
        # the runtime recorded the kill after the source had stopped looking for it: the exit is said as it was
        assert (ended.oom_killed, ended.exit_code) == (False, 137), f"recorded {recorded - death:.2f} s late"
        return
    assert (ended.oom_killed, ended.exit_code, ended.memory_limit) == (True, 137, 8 * 1024 * 1024), (
        f"docker recorded the OOM kill {recorded - death:.2f} s after the exit"
    )
    assert "8388608" in ended.detail
    assert said - max(death, recorded) < 2.0


async def test_the_runtimes_record_of_an_oom_kill_tells_it_from_a_plain_sigkill(docker: DockerDaemon) -> None:
    """Docker leaves State.OOMKilled unset when the kernel's OOM event reaches it after the exit, and records
    the event all the same: the source asks the events, which name the OOM-killed run and not a container
    killed by hand (137 as well), nor an OOM kill of the container's run before."""
    oom = 'x=$(head -c 50000000 /dev/zero | tr "\\0" a); echo never'
    await _run(docker, "ate", oom, "-m", "8m", "--memory-swap", "8m")
    await _run(docker, "shot", "echo up; sleep 60")
    await anyio.to_thread.run_sync(lambda: docker.docker("wait", "ate"))
    await anyio.to_thread.run_sync(lambda: docker.docker("kill", "shot"))
    await anyio.to_thread.run_sync(lambda: docker.docker("wait", "shot"))
    ate, shot = _inspect_in(docker, "ate"), _inspect_in(docker, "shot")
    assert (ate.exit_code, shot.exit_code, shot.oom_killed) == (137, 137, False)
    assert docker.oom_recorded_at("ate") is not None
    assert await ContainerSource("ate").oom_recorded(ate)
    assert not await ContainerSource("shot").oom_recorded(shot)
    # the same container's next run began after the kill: its own run has none
    assert ate.finished_at is not None
    later = dataclasses.replace(ate, started_at=(ate.finished_at[0] + 1, 0))
    assert not await ContainerSource("ate").oom_recorded(later)
    assert not await ContainerSource("ate", runtime="podman").oom_recorded(ate)


async def _events(docker: DockerDaemon, container: str, action: str, count: int) -> None:
    """Wait (under the deadline) until `docker` has recorded `count` events `action` of `container`."""
    argv = [
        "docker",
        "events",
        "--since",
        "0",
        "--filter",
        f"container={container}",
        "--filter",
        f"event={action}",
    ]
    async with await anyio.open_process(argv, env=docker.env()) as process:
        assert process.stdout is not None
        seen = b""
        try:
            with anyio.fail_after(DEADLINE):
                async for chunk in process.stdout:
                    seen += chunk
                    if seen.count(b"\n") >= count:
                        return
        finally:
            process.kill()


def _now() -> Timestamp:
    """This moment (the Docker daemon's clock is this machine's): a `--until` not in the future."""
    nanos = time.time_ns()
    return (nanos // 1_000_000_000, nanos % 1_000_000_000)


@pytest.mark.parametrize(
    ("out", "expected"),
    [
        (b"die 3\n", RecordedEnd(3, oom_killed=False)),
        # the kernel's event reaches Docker before or after the exit: either way the run's own
        (b"oom \ndie 137\n", RecordedEnd(137, oom_killed=True)),
        (b"die 137\noom \n", RecordedEnd(137, oom_killed=True)),
        # the next run's end and OOM kill are not this run's
        (b"die 1\ndie 137\noom \n", RecordedEnd(1, oom_killed=False)),
        # a process of the run killed for memory, its main one exiting on its own: OOMKilled as Docker says it
        (b"oom \ndie 1\n", RecordedEnd(1, oom_killed=True)),
        (b"", None),
        (b"oom \n", None),  # no exit recorded
        (b"die \n", None),  # a die event without its exit code (a runtime that does not say it)
        ("die 0\n", RecordedEnd(0, oom_killed=False)),
    ],
)
def test_a_runs_end_is_its_first_die_event(out: bytes | str, expected: RecordedEnd | None) -> None:
    assert parse_end_events(out) == expected


async def test_the_runtimes_events_tell_how_a_run_ended_after_its_next_run_began(
    docker: DockerDaemon,
) -> None:
    """The state says only the latest run: the end of the run before it (its exit code; an OOM kill) is read
    from Docker's events between its start and the next run's, the next run's own end left out; Podman keeps
    no such record."""
    twice = "if [ -e /tmp/once ]; then echo second; exit 4; fi; touch /tmp/once; echo first; exit 3"
    await _run(docker, "twice", twice, "--restart", "on-failure:1")
    oom = 'x=$(head -c 50000000 /dev/zero | tr "\\0" a); echo never'
    await _run(docker, "ate2", oom, "-m", "8m", "--memory-swap", "8m")
    await anyio.to_thread.run_sync(lambda: docker.docker("wait", "ate2"))
    # `docker wait` returns at the first run's exit: the second's is waited for in the runtime's events
    await _events(docker, "twice", "die", 2)
    state = _inspect_in(docker, "twice")
    assert (state.exit_code, state.restart_count) == (4, 1)
    before = dataclasses.replace(
        state, started_at=(state.started_at[0] - 60, 0)
    )  # the container's whole life
    source = ContainerSource("twice")
    assert await source.recorded_end(before, state.started_at) == RecordedEnd(3, oom_killed=False)
    assert await source.recorded_end(state, _now()) == RecordedEnd(4, oom_killed=False)
    ate = _inspect_in(docker, "ate2")
    assert docker.oom_recorded_at("ate2") is not None
    assert await ContainerSource("ate2").recorded_end(ate, _now()) == RecordedEnd(137, True)
    assert await ContainerSource("twice", runtime="podman").recorded_end(before, state.started_at) is None


async def test_a_restart_by_its_policy_is_a_new_stream_with_nothing_lost_or_repeated(
    docker: DockerDaemon,
) -> None:
    """A container that fails and is restarted by `--restart on-failure:2` gives each run as its own stream from
    offset 0, each run's lines exactly once, and an Ended per run."""
    async with following(ContainerSource("again")) as got:
        await got.until(lambda c: c.of(FileMissing))
        # each run lasts 0.6 s: read while it runs (a reader that starts after its run ended and the next began is
        # another path, which the end-to-end tests take)
        await _run(docker, "again", NUMBERED.format(n=30, pace=20000, code=1), "--restart", "on-failure:2")
        await got.until(lambda c: len(c.of(Ended)) == 3)
    assert got.lines() == [f"run {r} line {i}".encode() for r in range(3) for i in range(30)]
    assert [str(item) for item in got.of(FileRestarted)] == ["the log was restarted"] * 2
    # a run whose end the reader saw only once the next had begun has its exit code from the runtime's events
    assert [e.exit_code for e in got.of(Ended) if isinstance(e, Ended)] == [1, 1, 1], got.of(Ended)
    streams = {item.file for item in got.of(Chunk) if isinstance(item, Chunk)}
    assert len(streams) == 3
    offsets_follow_on(got)


class _SeesCreated(ContainerSource):
    """The real source, telling when it has looked at a container created and not yet started."""

    def __init__(self, container: str) -> None:
        super().__init__(container)
        self.saw_created = anyio.Event()

    async def inspect(self) -> ContainerState | None:
        state = await super().inspect()
        if state is not None and not state.started:
            self.saw_created.set()
        return state


async def test_a_container_created_and_not_started_is_waited_for_until_it_runs(docker: DockerDaemon) -> None:
    """A container removed and created again under its name but not started yet (`docker create`; `docker run`
    between its create and its start) has no run to read: it is waited for, then read from its start once it
    runs, another stream."""
    source = _SeesCreated("made")
    async with following(source) as got:
        await got.until(lambda c: c.of(FileMissing))
        await _run(docker, "made", "echo first; sleep 1000")
        await got.until(lambda c: c.lines() == [b"first"])
        await anyio.to_thread.run_sync(lambda: docker.docker("rm", "-f", "made"))
        await got.until(lambda c: c.of(Ended))
        await anyio.to_thread.run_sync(
            lambda: docker.docker("create", "--name", "made", IMAGE, "sh", "-c", "echo up; sleep 1000")
        )
        with anyio.fail_after(DEADLINE):
            await source.saw_created.wait()
        await anyio.to_thread.run_sync(lambda: docker.docker("start", "made"))
        await got.until(lambda c: c.lines() == [b"first", b"up"])
    assert [str(item) for item in got.of(FileRestarted)] == ["the log was replaced"]
    assert len(got.of(Ended)) == 1
    offsets_follow_on(got)


async def test_a_container_re_created_under_its_name_is_another_stream(docker: DockerDaemon) -> None:
    """`docker rm -f` and `docker run` of the same name: the first is said ended, the second read from its start."""
    async with following(ContainerSource("svc")) as got:
        await got.until(lambda c: c.of(FileMissing))
        await _run(docker, "svc", "echo first; sleep 1000")
        await got.until(lambda c: c.lines() == [b"first"])
        await anyio.to_thread.run_sync(lambda: docker.docker("rm", "-f", "svc"))
        await _run(docker, "svc", "echo second; sleep 1000")
        await got.until(lambda c: c.lines() == [b"first", b"second"])
    assert [str(item) for item in got.of(FileRestarted)] == ["the log was replaced"]
    assert len(got.of(Ended)) == 1
    offsets_follow_on(got)


async def test_a_follow_resumed_from_its_cursor_loses_and_repeats_no_line(docker: DockerDaemon) -> None:
    """Stopped in the middle of a log (a daemon's restart) and resumed from the last chunk's offset and cursor,
    the follow gives every line exactly once."""
    await _run(docker, "resume", NUMBERED.format(n=400, pace=2000, code=0))
    async with following(ContainerSource("resume")) as first:
        await first.until(lambda c: len(c.lines()) >= 100)
    chunks = [item for item in first.items if isinstance(item, Chunk)]
    last = chunks[-1]
    source = ContainerSource("resume")
    assert await source.stream_id() == last.file
    async with following(source, last.end, last.cursor) as second:
        await second.until(lambda c: c.of(Ended))
    assert chunks[0].offset == 0
    assert next(item.offset for item in second.items if isinstance(item, Chunk)) == last.end
    assert first.lines() + second.lines() == [f"run 0 line {i}".encode() for i in range(400)]
    assert not second.of(FileRestarted)


async def test_the_rest_of_a_run_restarted_while_nobody_read_is_read_to_its_end(
    docker: DockerDaemon, tmp_path: Path
) -> None:
    """A follow resumed from the cursor of a run that its restart policy replaced meanwhile (the daemon was down)
    reads that run's rest up to its end with a `logs` that ends there, not by waiting for a quiet: with the
    runtime's `logs` slow to print its first line (a loaded host), no line of the rest is lost, its end says its
    exit code, then the next run follows from its start."""
    slow, second = await _resumed_after_a_restart(docker, tmp_path, "rest", SlowLogs)
    [ended] = second.of(Ended)
    assert isinstance(ended, Ended)
    assert ended.exit_code == 3
    # the rest read to its end, then the next run followed
    reads = [name for name in slow.commands if name in ("watchdog-container-rest", "watchdog-container-logs")]
    assert reads[:2] == ["watchdog-container-rest", "watchdog-container-logs"], slow.commands


async def test_a_reader_that_starts_after_its_run_was_replaced_reads_its_rest_to_its_end(
    docker: DockerDaemon, tmp_path: Path
) -> None:
    """The reader of a running run is cut, and starts again only once the run has ended and its restart policy
    has started the next (a loaded host): its run mark names the later run, and the rest of the run read is read
    up to its end by a `logs` that ends there, not taken as given at the first quiet; no line is lost, its end
    says its exit code, then the next run follows."""
    await _run(docker, "late", TWO_RUNS, "-v", f"{tmp_path}:/c", "--restart", "on-failure:1")
    source = ContainerSource("late")
    slow = SlowLogs(source.runner)
    # the reader cut at once after the first run's 10th line; the next waits for `second`
    source.runner, slow.second, slow.cut_after = slow, anyio.Event(), b"run 0 line 9\n"
    async with following(source) as got:
        await got.until(lambda c: len(c.lines()) == 10)
        with anyio.fail_after(DEADLINE):
            await slow.asked.wait()
        (tmp_path / "go").touch()
        await _until_restarted(docker, "late")
        slow.second.set()
        await got.until(lambda c: c.lines()[-1:] == [b"run 1 line 0"])
    assert got.lines() == [f"run 0 line {i}".encode() for i in range(20)] + [b"run 1 line 0"]
    [ended] = got.of(Ended)
    assert isinstance(ended, Ended)
    assert ended.exit_code == 3
    assert "watchdog-container-rest" in slow.commands


class _NoUntil(SlowLogs):
    """The source's runner on a runtime whose `logs` has no `--until` (Docker before 18.06): the rest command fails
    as such a `docker logs` does."""

    @asynccontextmanager
    async def open(self, argv: list[str]) -> AsyncIterator[Output]:
        if argv[3] == "watchdog-container-rest":
            argv = [*argv[:2], "echo 'unknown flag: --until' >&2; exit 125", *argv[3:]]
        async with super().open(argv) as output:
            yield output


async def test_a_runtime_without_until_gets_the_rest_read_as_before(
    docker: DockerDaemon, tmp_path: Path
) -> None:
    """Where the rest command keeps failing, the rest of a run restarted while nobody read is read as a running
    run's after a few tries: every line, its end, then the next run (not held back for good)."""
    runner, second = await _resumed_after_a_restart(docker, tmp_path, "old", _NoUntil)
    assert len(second.of(Ended)) == 1
    assert runner.commands.count("watchdog-container-rest") == REST_READS  # then as before


async def _resumed_after_a_restart(
    docker: DockerDaemon, tmp_path: Path, name: str, runner: type[SlowLogs]
) -> tuple[SlowLogs, Collected]:
    """`TWO_RUNS` followed to its first run's 10th line, then (nobody reading) that run's rest and its restart by
    the policy, then a follow resumed from the cursor through `runner`: every line read once, in order (asserted);
    the runner and what the resumed follow gave."""
    await _run(docker, name, TWO_RUNS, "-v", f"{tmp_path}:/c", "--restart", "on-failure:1")
    async with following(ContainerSource(name)) as first:
        await first.until(lambda c: len(c.lines()) == 10)
    last = [item for item in first.items if isinstance(item, Chunk)][-1]
    (tmp_path / "go").touch()
    await _until_restarted(docker, name)
    source = ContainerSource(name)
    wrapped = runner(source.runner)
    source.runner = wrapped
    async with following(source, last.end, last.cursor) as second:
        await second.until(lambda c: c.lines()[-1:] == [b"run 1 line 0"])
    lines = [f"run 0 line {i}".encode() for i in range(20)] + [b"run 1 line 0"]
    assert first.lines() + second.lines() == lines
    return wrapped, second


async def _until_restarted(docker: DockerDaemon, name: str) -> None:
    """Wait until the container's restart policy has started its next run."""
    with anyio.fail_after(DEADLINE):
        while True:
            out = await anyio.to_thread.run_sync(
                lambda: docker.docker("inspect", "--format", "{{.RestartCount}} {{.State.Status}}", name)
            )
            if out.split() == ["1", "running"]:  # not "restarting": Running is true in its delay too
                return
            await anyio.sleep(0.05)


def _logs_readers(container_id: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmdline[:2] == [b"docker", b"logs"] and container_id.encode() in cmdline:
                found.append(int(entry))
    return found


async def test_a_reader_cut_in_the_middle_goes_on_from_its_cursor(docker: DockerDaemon) -> None:
    """The `docker logs` process killed twice in the middle of a log (as a daemon restart cuts it): every line
    comes exactly once, the offsets follow on."""
    cid = await _run(docker, "cut", NUMBERED.format(n=600, pace=1000, code=0))
    async with following(ContainerSource("cut")) as got:
        for at in (100, 300):
            await got.until(lambda c, at=at: len(c.lines()) >= at)
            for pid in _logs_readers(cid):
                os.kill(pid, signal.SIGKILL)
        await got.until(lambda c: c.of(Ended))
    assert got.lines() == [f"run 0 line {i}".encode() for i in range(600)]
    offsets_follow_on(got)


# 40,000 lines written, read, cut and read again: 27-50 s on a loaded 2-core machine, past 60 s once
@pytest.mark.timeout(150)
async def test_a_reader_cut_as_the_run_ends_reads_the_rest_before_the_end(docker: DockerDaemon) -> None:
    """The `docker logs` reader killed after the container has exited, with much of the log not yet read (the
    follow's consumer held back): the run's end is said only after the rest is read from the cursor (a cut
    reader followed by an exited state is not the end of the log)."""
    n = 40000
    cid = await _run(docker, "drain", NUMBERED.format(n=n, pace=0, code=0))
    collected, go_on = Collected(), anyio.Event()

    async def pump(items: AsyncIterator[SourceItem]) -> None:
        async for item in items:
            collected.add(item)
            if len(collected.lines()) >= 100:
                await go_on.wait()

    async with ContainerSource("drain").open_follow(0, None) as items, anyio.create_task_group() as tg:
        tg.start_soon(pump, items)
        await collected.until(lambda c: len(c.lines()) >= 100)
        with anyio.fail_after(DEADLINE):
            await anyio.to_thread.run_sync(docker.docker, "wait", "drain")  # its exit
        readers = _logs_readers(cid)
        assert readers  # held back by the consumer: still reading
        for pid in readers:
            os.kill(pid, signal.SIGKILL)
        go_on.set()
        await collected.until(lambda c: c.of(Ended))
        tg.cancel_scope.cancel()
    assert collected.lines() == [f"run 0 line {i}".encode() for i in range(n)]
    offsets_follow_on(collected)


# -- over SSH -----------------------------------------------------------------------------------------------


@asynccontextmanager
async def _pool(server: SSHDServer) -> AsyncIterator[SSHPool]:
    options = SSHOptions(
        known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
    )
    async with SSHPool(options) as pool:
        yield pool


def _remote(server: SSHDServer, pool: SSHPool, name: str) -> ContainerSource:
    target = Target(server.host, server.user, server.port, name)
    return ContainerSource(name, pool=pool, target=target)


async def test_over_ssh_a_cut_connection_loses_and_repeats_no_line(
    docker: DockerDaemon, docker_sshd: SSHDServer
) -> None:
    """Over a real sshd, the connection cut twice in the middle of a container's log (every sshd session
    killed): Disconnected, Connected, and every line exactly once."""
    # 5 s of lines, and the run goes on (printing nothing more) until told to end: both cuts land while the logs
    # command streams, however far behind a busy reader is (a loaded CI run read its 80th line after the run ended)
    script = NUMBERED.format(n=500, pace=10000, code=2).replace(
        "; exit 2", "; while [ ! -e /tmp/stop ]; do usleep 10000; done; exit 2"
    )
    await _run(docker, "remote", script)
    async with _pool(docker_sshd) as pool, following(_remote(docker_sshd, pool, "remote")) as got:
        for at in (80, 250):
            await got.until(lambda c, at=at: len(c.lines()) >= at)
            docker_sshd.kill_sessions()
        await anyio.to_thread.run_sync(
            lambda: docker.docker("exec", "remote", "sh", "-c", "echo > /tmp/stop")
        )
        await got.until(lambda c: c.of(Ended))
    assert got.lines() == [f"run 0 line {i}".encode() for i in range(500)]
    assert got.of(Disconnected)
    assert got.of(Connected)
    ended = got.of(Ended)[0]
    assert isinstance(ended, Ended)
    assert ended.exit_code == 2
    offsets_follow_on(got)


@pytest.mark.timeout(120)  # the two ends may take up to 60 s on a loaded runner (below)
async def test_over_ssh_an_oom_kill_and_a_restart_are_said_as_here(
    docker: DockerDaemon, docker_sshd: SSHDServer
) -> None:
    """Over SSH, an OOM-killed container restarted by its policy: Ended with OOMKilled and the limit, then the
    next run as a new stream."""
    script = f"echo up; usleep 1000000; {GROW}"
    async with _pool(docker_sshd) as pool, following(_remote(docker_sshd, pool, "room")) as got:
        await got.until(lambda c: c.of(FileMissing))
        await _run(docker, "room", script, "-m", "8m", "--memory-swap", "8m", "--restart", "on-failure:1")
        # two runs each grown to the kernel's OOM kill, the restart between and the events asked over SSH: past
        # 20 s once in the floors run of a loaded 2-core machine
        await got.until(lambda c: len(c.of(Ended)) == 2, deadline=3 * DEADLINE)
    assert got.lines() == [b"up", b"up"]
    assert got.of(FileRestarted)
    first = got.of(Ended)[0]
    assert isinstance(first, Ended)
    assert first.memory_limit == 8 * 1024 * 1024
    recorded = docker.oom_recorded_at("room")
    assert recorded is not None, "the kernel did not OOM-kill the container (docker recorded no oom event)"
    restarted = parse_timestamp(json.loads(docker.docker("inspect", "room"))[0]["State"]["StartedAt"])
    if recorded >= restarted[0] + restarted[1] / 1e9:
        # the runtime recorded the kill only once the policy had started the next run: its state never held it
        assert first.exit_code == 137, got.items
        return
    assert first.oom_killed, got.items
