"""The follower's launch-mode hooks, on a scripted source and a manual clock: a run started in the middle of a
log is a new incarnation from its first byte, and an end that a stop asked for is `stopped`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from watchdog.core.arguments import from_command
from watchdog.core.compare import Baseline
from watchdog.follow.follower import Concluded, LaunchFollower, LaunchSpec, Update
from watchdog.follow.launching import ContainerCommand, Killed, LaunchCommand
from watchdog.follow.sources import Ended, parse_target
from watchdog.follow.testing import ManualClock, ScriptedSource
from watchdog.vocabulary import State

pytestmark = pytest.mark.anyio

LLAMACPP = Path(__file__).parent / "fixtures" / "corpus" / "llamacpp"
# a ready launch whose log goes on serving: without the capture's last line, llama-server's own word that the
# operator stopped it ('cleaning up before exit...'), so that how it ends is for the platform to say
READY = b"".join(
    line
    for line in (LLAMACPP / "captured-llamacpp-ready-cpu.log").read_bytes().splitlines(keepends=True)
    if b"cleaning up before exit" not in line
)
CRASH = (LLAMACPP / "captured-llamacpp-context-too-large-cpu.log").read_bytes()


class _Run:
    def __init__(self, **follower: Any) -> None:
        self.clock = ManualClock()
        self.source = ScriptedSource()
        spec = LaunchSpec(name="t", target=parse_target("/x.log"), engine="llamacpp")
        self.follower = LaunchFollower(spec, source=self.source, clock=self.clock, **follower)
        self.updates: list[Update] = []

    async def collect(self) -> None:
        with self.follower.updates:
            async for update in self.follower.updates:
                self.updates.append(update)

    def verdicts(self) -> list[tuple[int, State]]:
        return [(u.verdict.incarnation, u.state) for u in self.updates if isinstance(u, Concluded)]


async def test_a_run_started_mid_log_is_a_new_incarnation_from_its_first_byte() -> None:
    """After a crashed run, a run started at byte N (an engine whose first line is no start marker) is a new
    incarnation from exactly that byte, even when one read holds the old run's tail and the new run's head."""
    run = _Run()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.follower.run)
        tg.start_soon(run.collect)
        await run.source.append(CRASH[:-40])
        await run.source.catch_up()
        await run.source.settle()
        await run.clock.advance(1)  # the crash's report goes out
        await run.source.settle()
        run.follower.expect_run_at(len(CRASH))
        await run.source.append(CRASH[-40:] + READY)  # one read across the boundary
        await run.source.catch_up()
        await run.source.settle()
        await run.clock.advance(5)
        await run.source.settle()
        tg.cancel_scope.cancel()
    assert run.verdicts()[0] == (1, State.CRASHED)
    assert run.verdicts()[-1] == (2, State.READY)
    status = run.follower.status().verdict
    assert status.incarnations == 2
    assert status.to_json()["timeline"][0]["line"] == 1  # counted from the new run's first line


@pytest.mark.parametrize(
    ("asked", "state"),
    [pytest.param(True, State.STOPPED, id="stop-asked"), pytest.param(False, State.CRASHED, id="not-asked")],
)
async def test_an_end_a_stop_asked_for_is_stopped_not_a_crash(asked: bool, state: State) -> None:
    """A ready launch whose process ends after `expect_stop` is `stopped` in phase ready, even when the end comes
    as the platform's word with a signal's exit code (a container's `docker stop`); unasked, that end is a crash."""
    run = _Run()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.follower.run)
        tg.start_soon(run.collect)
        await run.source.append(READY)
        await run.source.catch_up()
        await run.source.settle()
        await run.clock.advance(5)
        if asked:
            run.follower.expect_stop("stopped by watchdog stop")
        await run.source.push(Ended("exited with code 143", exit_code=143))
        await run.source.settle()
        await run.clock.advance(5)
        tg.cancel_scope.cancel()
    verdict = run.follower.status().verdict
    assert (verdict.state, verdict.phase) == (state, State.READY)


def test_what_is_started_and_what_is_said() -> None:
    """A container's run argv puts the environment and directory before the configured arguments; a command
    must be a command; what was ended reads plainly."""
    command = ContainerCommand(
        "docker", "c", ("--gpus", "all", "img", "serve"), env=(("A", "b c"),), cwd="/w"
    )
    assert command.run_argv() == [
        "docker", "run", "-d", "--name", "c", "-e", "A=b c", "-w", "/w", "--gpus", "all", "img", "serve",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="not a command"):
        LaunchCommand(("-x",), "/x.log")
    with pytest.raises(ValueError, match="needs a command"):
        LaunchCommand((), "/x.log")
    assert LaunchCommand(("x",), "logs/a.log").pid_file == "logs/a.log.pid"
    assert str(Killed(42, (42, 43, 44), "SIGTERM")) == "ended process group 42 (3 processes, SIGTERM)"
    assert str(Killed(42, (), None)) == "process group 42: nothing left running"


async def test_a_relaunch_names_the_command_flag_that_changed() -> None:
    """A run launch mode started with a command (llama.cpp prints no command line) has that command's
    arguments besides the log's, and compared with the run before, its verdict names the flag whose value
    changed (a secret's value masked)."""
    words = ["llama-server", "-m", "/m/q.gguf", "--ctx-size", "{}", "--api-key", "sekrit"]
    before = Baseline(1, arguments=from_command([w.format(4096) for w in words]))
    run = _Run(numbered_after=1, earlier=(before,), command=[w.format(8192) for w in words])
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.follower.run)
        tg.start_soon(run.collect)
        await run.source.append(READY)
        await run.source.catch_up()
        await run.source.settle()
        await run.clock.advance(5)
        await run.source.settle()
        tg.cancel_scope.cancel()
    verdict = run.follower.status().verdict
    assert ("--api-key", "<redacted>") in [(a.flag, a.value) for a in verdict.arguments]
    assert verdict.changes is not None
    assert [(c.flag, c.before, c.after) for c in verdict.changes.arguments] == [
        ("--ctx-size", "4096", "8192")
    ]
