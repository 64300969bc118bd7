"""The verdict a follower reports is its newest incarnation's: a crash whose report is still settling when the
next start's verdict comes (a relaunch read in one go, as after a daemon restart) is concluded and said, but does
not become the launch's verdict again."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from watchdog.follow.follower import Concluded, LaunchFollower, Update
from watchdog.follow.sources import parse_target
from watchdog.follow.sources.base import FileRestarted
from watchdog.follow.spec import LaunchSpec
from watchdog.follow.testing import ManualClock, ScriptedSource
from watchdog.vocabulary import State

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parents[1]
CRASH = (ROOT / "watchdog" / "examples" / "sglang-ep8-oom.log").read_bytes()
READY = (
    ROOT / "tests" / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
).read_bytes()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_crash_concluded_after_the_next_starts_ready_leaves_the_newest_verdict() -> None:
    clock, source = ManualClock(), ScriptedSource()
    follower = LaunchFollower(LaunchSpec(name="l", target=parse_target("/l.log")), source=source, clock=clock)
    got: list[Update] = []
    follower.listen(got.append)
    async with anyio.create_task_group() as tg:
        tg.start_soon(follower.run)
        await source.catch_up()
        await source.settle()
        await source.append(CRASH)  # read live: its crash report settles (the other ranks, the log's quiet)
        await source.catch_up()
        await source.settle()
        assert follower.analyzer.lifecycle.current.state == State.CRASHED
        assert not [u for u in got if isinstance(u, Concluded)]  # still settling
        await source.push(FileRestarted("truncated"))  # the relaunch, read before the crash's report went out
        source.offset = 0
        await source.append(READY)
        await source.catch_up()
        await source.settle()
        await clock.advance(10.0)
        await source.settle()
        concluded = [(u.verdict.incarnation, u.state) for u in got if isinstance(u, Concluded)]
        status = follower.status().verdict
        tg.cancel_scope.cancel()
    # both verdicts said, the crash's last (its report settled after the relaunch's ready)
    assert concluded == [(2, State.READY), (1, State.CRASHED)]
    # the launch's verdict is its newest start's, not the late crash report's
    assert (status.incarnation, status.state) == (2, State.READY)
    assert follower.concluded is not None
    assert follower.concluded.verdict.incarnation == 2
