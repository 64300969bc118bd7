"""A follower's updates handed to a listener (`LaunchFollower.listen`, the daemon's way) are the updates its stream
gives, in the same order, each the moment it is published: a relaunch's burst of transitions read in one write comes
whole by the time the write is taken, with no task of the consumer's woken for it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.follow import follower as follower_module
from watchdog.follow.follower import Concluded, LaunchFollower, SourceNoted, Transitioned, Update
from watchdog.follow.sources import parse_target
from watchdog.follow.sources.base import FileRestarted
from watchdog.follow.spec import LaunchSpec
from watchdog.follow.testing import ManualClock, ScriptedSource

pytestmark = pytest.mark.anyio

LOG = (Path(__file__).parents[1] / "watchdog" / "examples" / "sglang-ep8-oom.log").read_bytes()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _said(update: Update) -> tuple[object, ...]:
    # what an update says, comparable between two followers of the same log
    if isinstance(update, Transitioned):
        t = update.transition
        return ("t", t.state, t.previous, t.line, t.reason, t.incarnation)
    if isinstance(update, Concluded):
        return ("c", update.state, update.verdict.to_json(), update.timed_out)
    assert isinstance(update, SourceNoted)
    return ("s", update.kind, update.detail)


async def _follow(listen: bool) -> tuple[list[Update], list[int]]:
    # the crash log, read whole; then relaunched twice (the file cut and written again, once in one write and once
    # a line at a time) with the clock run on between them, so that each crash's report is settled
    clock, source = ManualClock(), ScriptedSource()
    follower = LaunchFollower(LaunchSpec(name="l", target=parse_target("/l.log")), source=source, clock=clock)
    got: list[Update] = []
    per_write: list[int] = []  # how many updates had come when each write had been taken
    async with anyio.create_task_group() as tg:
        if listen:
            follower.listen(got.append)
        else:

            async def collect() -> None:
                with follower.updates:
                    async for update in follower.updates:
                        got.append(update)  # noqa: PERF401  (each as it comes: `per_write` counts them)

            tg.start_soon(collect)
        tg.start_soon(follower.run)
        await source.append(LOG)
        await source.catch_up()
        await source.settle()
        per_write.append(len(got))
        await clock.advance(5.0)
        for whole in (True, False):
            await source.push(FileRestarted("truncated"))
            source.offset = 0
            lines = LOG.splitlines(keepends=True)
            for part in [LOG] if whole else lines:
                await source.append(part)
                await source.catch_up()
                await source.settle()
                per_write.append(len(got))
                await clock.advance(0.01)
            await clock.advance(5.0)
        await source.settle()
        if listen:
            with pytest.raises(anyio.ClosedResourceError):
                follower.updates.receive_nowait()  # closed: never read
        tg.cancel_scope.cancel()
    return got, per_write


async def test_a_listener_takes_every_update_in_the_order_the_stream_gives_them() -> None:
    """Listened to, a follower hands over the updates its stream gives, the same ones in the same order (each
    relaunch's transitions, its crash's report, the file's notes), each by the time the write that made it is taken."""
    listened, per_write = await _follow(listen=True)
    streamed, streamed_per_write = await _follow(listen=False)
    assert [_said(u) for u in listened] == [_said(u) for u in streamed]
    states = [u.transition.state.value for u in listened if isinstance(u, Transitioned)]
    assert states.count("crashed") == 3
    assert sum(isinstance(u, Concluded) for u in listened) == 3
    # a relaunch read in one write: its whole burst of transitions came with the write (a stream's reader, a task of
    # its own, may not have been run yet when the write is taken; a listener is called as each is published)
    assert per_write[1] - per_write[0] >= 4
    assert per_write == sorted(per_write)
    assert streamed_per_write[-1] <= per_write[-1]


async def test_a_listener_is_called_in_the_task_that_publishes() -> None:
    """The listener is a plain call: made in the follower's own task (or its clock's and settle's), never in a task of
    the consumer's, and a relaunch's burst is handed over without the event loop turning between its updates."""
    clock, source = ManualClock(), ScriptedSource()
    follower = LaunchFollower(LaunchSpec(name="l", target=parse_target("/l.log")), source=source, clock=clock)
    turns = 0
    seen: list[tuple[int, asyncio.Task[object] | None]] = []

    def listener(update: Update) -> None:
        seen.append((turns, asyncio.current_task()))

    follower.listen(listener)
    async with anyio.create_task_group() as tg:
        tg.start_soon(follower.run)
        await source.append(LOG)
        await source.catch_up()
        await source.settle()
        await clock.advance(5.0)
        await source.push(FileRestarted("truncated"))
        source.offset = 0
        turns = 1  # what the relaunch's write makes comes after this line, and before the next
        await source.append(LOG)
        await source.settle()
        burst = [task for at, task in seen if at == 1]
        tg.cancel_scope.cancel()
    assert len(burst) >= 5  # starting ... crashed: one write, one burst
    assert asyncio.current_task() not in {task for _, task in seen}
    assert len({id(task) for task in burst}) == 1  # one task published the burst, in one go


async def test_launches_of_one_engine_starting_together_make_its_pieces_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each follower asks for its engine's pieces (`Analyzer.prepare`, in a worker thread) once the engine is known;
    followers of one process share them, so one launch makes them: at a daemon's start, forty worker threads making
    the same regexes at once took the GIL from the event loop (a 51 ms callback in CI) and the start's CPU forty
    times over."""
    monkeypatch.setattr(follower_module, "_PREPARED", {})
    made: list[int] = []
    prepare = Analyzer.prepare

    def counted(analyzer: Analyzer) -> Iterator[None]:
        made.append(id(analyzer))
        return prepare(analyzer)

    monkeypatch.setattr(Analyzer, "prepare", counted)
    asked: list[str] = []
    prepare_soon = LaunchFollower._prepare_soon

    def noted(follower: LaunchFollower) -> None:
        asked.append(follower.spec.name)
        prepare_soon(follower)

    monkeypatch.setattr(LaunchFollower, "_prepare_soon", noted)
    names = [f"l{i}" for i in range(5)]
    sources = {name: ScriptedSource() for name in names}
    followers = [
        LaunchFollower(
            LaunchSpec(name=n, target=parse_target(f"/{n}.log")), source=sources[n], clock=ManualClock()
        )
        for n in names
    ]
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for follower in followers:
                follower.listen(lambda _: None)
                tg.start_soon(follower.run)
            for source in sources.values():
                await source.append(
                    b"".join(LOG.splitlines(keepends=True)[:30])
                )  # the engine known, no error yet
                await source.catch_up()
                await source.settle()
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    assert sorted(asked) == names  # every launch asked ...
    assert len(made) == 1  # ... one made them
