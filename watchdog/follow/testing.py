"""Test doubles that ship with the package: a scripted in-memory log source and a manual clock.

With them a follower test runs in milliseconds and never sleeps::

    clock, source = ManualClock(), ScriptedSource()
    follower = LaunchFollower(spec, source=source, clock=clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(follower.run)
        await source.append(b"... Load weight begin ...\\n")
        await source.catch_up()
        await clock.advance(6.0)  # the crash grace passes; the follower's ticks run
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from watchdog.clock import wake_up
from watchdog.follow.follower import Concluded, LaunchFollower
from watchdog.follow.sources.base import CaughtUp, Chunk, SourceItem
from watchdog.follow.sources.target import parse_target
from watchdog.follow.spec import LaunchSpec
from watchdog.vocabulary import State

__all__ = ["ManualClock", "PacedRun", "ScriptedSource", "follow_at_pace"]


async def _all_blocked() -> None:
    """Return once every other task waits on something (anyio's wait_all_tasks_blocked, without its 0.1 s
    real-time naps on asyncio: a follower test runs at CPU speed)."""
    try:
        this = asyncio.current_task()
    except RuntimeError:  # not asyncio (trio)
        await anyio.wait_all_tasks_blocked()
        return
    # asyncio's own loop: the callbacks due now, a woken task's among them. None of them once this task is
    # resumed means that no other task can run: each waits on something. That is one look where the loop of
    # every task would be a pass over all of them, including other loops' done tasks that a cycle keeps alive
    # until a full collection (anyio before 4.16 kept each test's loop and its tasks so: 20 times the work)
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    while True:
        await asyncio.sleep(0)
        if ready is not None:
            if not ready:
                return
        elif all(
            t is this or (t._fut_waiter is not None and not t._fut_waiter.done())  # type: ignore[attr-defined]
            for t in asyncio.all_tasks()
        ):
            return


class ManualClock:
    """A clock that moves only when told (`advance`); `sleep` waits for virtual time."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._stepped = 0.0  # what `step` moved the wall time by
        self._sleepers: list[tuple[float, int, asyncio.Future[object]]] = []
        self._order = itertools.count()
        self._slept: asyncio.Future[None] | None = None  # done when a sleeper is added (`asleep`)

    def now(self) -> float:
        """The virtual time in seconds (the wall time: `step` moves it, as an NTP correction would)."""
        return self._now + self._stepped

    def monotonic(self) -> float:
        """The virtual time that only `advance` moves (what sleepers wait on)."""
        return self._now

    def step(self, seconds: float) -> None:
        """Step the wall time (`now`) by `seconds`, back or forward, as a corrected system clock does: no
        virtual time passes, no sleeper wakes."""
        self._stepped += seconds

    async def sleep(self, seconds: float, wake: asyncio.Future[object] | None = None) -> None:
        """Wait until the virtual time has advanced by `seconds`, or less if `wake` is done first."""
        future = wake if wake is not None else asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._order), future))
        if self._slept is not None and not self._slept.done():
            self._slept.set_result(None)
        await future

    async def asleep(self, due: Callable[[float], bool]) -> None:
        """Wait until some task sleeps until a virtual time that `due` accepts (it reached that wait)."""
        while not any(due(at) for at, _, future in self._sleepers if not future.done()):
            self._slept = asyncio.get_running_loop().create_future()
            await self._slept

    async def advance(self, seconds: float) -> None:
        """Move the time forward by `seconds`, from deadline to deadline, letting each woken sleeper run (a
        loop that ticks every 0.25 s ticks at each of them, as it would in real time)."""
        end = self._now + seconds
        while True:
            await _all_blocked()
            while self._sleepers and self._sleepers[0][0] <= self._now:
                wake_up(heapq.heappop(self._sleepers)[2], None)
                await _all_blocked()
            if self._now >= end:
                return
            self._now = min(end, self._sleepers[0][0]) if self._sleepers else end


class ScriptedSource:
    """A log source whose bytes and events a test pushes; followed like a real one."""

    def __init__(self) -> None:
        self.offset = 0
        self.followed = anyio.Event()  # set once a follower has opened it
        self._send, self._receive = anyio.create_memory_object_stream[SourceItem](math.inf)

    def open_follow(
        self, offset: int = 0, cursor: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Follow the scripted items (from the start: `offset` and `cursor` are ignored)."""
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[AsyncIterator[SourceItem]]:
        self.followed.set()
        try:
            yield self._receive
        finally:
            self._receive.close()
            self._send.close()

    async def append(self, data: bytes) -> None:
        """The log grew by `data`."""
        await self._send.send(Chunk(self.offset, data))
        self.offset += len(data)

    async def catch_up(self) -> None:
        """The reader reached the end of what was written."""
        await self._send.send(CaughtUp(self.offset))

    async def push(self, item: SourceItem) -> None:
        """Any other item (FileRestarted, FileMissing, Connected, ...)."""
        if isinstance(item, Chunk):
            self.offset = item.end
        await self._send.send(item)

    async def settle(self) -> None:
        """Wait until the follower has taken everything pushed so far and acted on it."""
        await _all_blocked()

    def close(self) -> None:
        """The source ends (the follower's run returns)."""
        self._send.close()


@dataclass(frozen=True)
class PacedRun:
    """What a follower said of a log fed to it at its recorded pace (`follow_at_pace`)."""

    verdict: dict[str, Any] | None  # the first verdict (`Concluded`: what `watch` says), None if none came
    status: dict[str, Any]  # the follower's status at the end
    verdict_after: float | None  # seconds from the crash's error line to its verdict (no crash: to the first)
    # the last verdict (what the daemon, which follows on, says in the end)
    last: dict[str, Any] | None = None
    first_at: float | None = None  # seconds from the first line to the first verdict


async def follow_at_pace(
    data: bytes, times: Sequence[float] | None = None, *, engine: str | None = None, linger: float = 10.0
) -> PacedRun:
    """Feed `data` to a follower line by line at the offsets `times` gives (seconds from the start, one per
    line; None: all at once), the reader catching up after each read, as a live log written by a launch
    would be followed, to its end (the daemon follows on after a verdict); then let up to `linger` seconds
    pass for a verdict still due. Runs on a manual clock: no real waiting."""
    # lines end at "\n" only, as the capture timed them ("\r" is a progress bar's redraw inside a line)
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    at = list(times) if times is not None else [0.0] * len(lines)
    at += [at[-1] if at else 0.0] * (len(lines) - len(at))
    clock, source = ManualClock(), ScriptedSource()
    spec = LaunchSpec(name="paced", target=parse_target("/paced.log"), engine=engine)
    follower = LaunchFollower(spec, source=source, clock=clock)
    concluded: list[tuple[Concluded, float]] = []

    async def collect() -> None:
        with follower.updates:
            async for update in follower.updates:
                if isinstance(update, Concluded):
                    concluded.append((update, clock.now()))  # noqa: PERF401  (each as it comes, with its time)

    async with anyio.create_task_group() as tg:
        tg.start_soon(follower.run)
        tg.start_soon(collect)
        i = 0
        while i < len(lines):
            j = i
            while j < len(lines) and at[j] <= at[i]:
                j += 1
            if at[i] > clock.now():
                await clock.advance(at[i] - clock.now())
            await source.append(b"".join(lines[i:j]))
            await source.catch_up()
            await source.settle()
            i = j
        fed = len(concluded)
        end = clock.now() + linger
        while len(concluded) == fed and clock.now() < end:
            await clock.advance(min(0.05, end - clock.now()))
        status = follower.status().to_json()
        tg.cancel_scope.cancel()
    if not concluded:
        return PacedRun(None, status, None)
    # how long the crash took to be called (the first crash verdict), or else the first verdict
    update, when = next(((u, w) for u, w in concluded if u.state == State.CRASHED), concluded[0])
    error = update.verdict.error
    line = error.line if error is not None and update.state == State.CRASHED else 0
    said = at[min(line, len(at)) - 1] if line and at else (at[-1] if at else 0.0)
    first, last = concluded[0][0].verdict.to_json(), concluded[-1][0].verdict.to_json()
    return PacedRun(first, status, max(0.0, when - said), last, concluded[0][1])
