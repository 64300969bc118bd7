"""A host's outage state machine (`watchdog.daemon.outages`) on a manual clock: its states, its grace, the
one backoff its launches share while it refuses us, and who waits for whose attempt."""

from __future__ import annotations

import anyio
import pytest

from watchdog.daemon.outages import REFUSED_PAUSE_MAX, RESTART_PAUSE, Outages, Reach
from watchdog.daemon.reload import PlanChanges, diff_plans
from watchdog.follow.testing import ManualClock

pytestmark = pytest.mark.anyio

START = 1_700_000_000.0  # the manual clock's wall time at the start


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_outage_is_overdue_past_its_grace_from_when_the_failed_attempt_began() -> None:
    """A host down since an attempt that began 3 s ago, with a 10 s grace, is overdue 7 s later, not 10 s:
    and its shown start is that attempt's wall time."""
    clock = ManualClock(START)
    outages = Outages(clock, grace=10.0)
    host = outages.host("gpu1")
    assert host.reach is Reach.ANSWERS
    await clock.advance(3.0)  # the connect attempt that began at the start timed out now
    host.down("timed out", since=START)
    assert host.reach is Reach.UNREACHABLE
    assert host.down_since == START
    await clock.advance(6.9)
    assert outages.overdue() == []
    await clock.advance(0.1)
    assert outages.overdue() == [host]
    host.said = True
    assert outages.overdue() == []  # said once per outage


async def test_a_later_failure_keeps_the_outage_s_start_and_takes_the_latest_reason() -> None:
    """A second failure of the same outage does not restart its grace; its error is the latest one."""
    clock = ManualClock(START)
    host = Outages(clock, grace=5.0).host("gpu1")
    host.down("refused")
    await clock.advance(4.0)
    host.down("reset")
    assert (host.down_at, host.error) == (START, "reset")


def test_a_step_of_the_wall_clock_neither_fires_nor_holds_the_grace() -> None:
    """The grace is counted on the monotonic clock: a wall clock stepped an hour ahead fires nothing."""
    clock = ManualClock(START)
    outages = Outages(clock, grace=5.0)
    outages.host("gpu1").down("reset")
    clock.step(3600.0)
    assert outages.overdue() == []


def test_answering_ends_the_outage_and_says_whether_it_was_said() -> None:
    """`up` ends the outage (no longer overdue, nothing shown) and returns whether its resolution is owed."""
    clock = ManualClock(START)
    outages = Outages(clock, grace=0.0)
    host = outages.host("gpu1")
    host.down("reset")
    assert host.up() is False  # not said: no resolution owed
    host.down("reset")
    host.said = True
    assert host.up() is True
    assert (host.reach, host.down_since, host.said, outages.overdue()) == (Reach.ANSWERS, None, False, [])


def test_refusals_double_the_shared_backoff_up_to_its_bound() -> None:
    """The first refusal waits RESTART_PAUSE; each failed attempt of a backoff doubles it, up to
    REFUSED_PAUSE_MAX; other launches refused meanwhile do not."""
    clock = ManualClock(START)
    host = Outages(clock).host("gpu1")
    host.refused("auth failed", tried=False)
    assert (host.reach, host.pause, host.retry_in()) == (Reach.REFUSED, RESTART_PAUSE, RESTART_PAUSE)
    host.refused("auth failed", tried=False)  # another launch's first attempt: the same backoff
    assert host.pause == RESTART_PAUSE
    pauses = []
    for _ in range(8):
        host.refused("auth failed", tried=True)
        pauses.append(host.pause)
    assert pauses == [10.0, 20.0, 40.0, 80.0, 160.0, REFUSED_PAUSE_MAX, REFUSED_PAUSE_MAX, REFUSED_PAUSE_MAX]


def test_a_lost_connection_turns_a_refusal_into_an_outage_to_retry() -> None:
    """A host that refused us, then drops a connection (it answered, if not with a session), is unreachable,
    no longer a refusal: its launches stop waiting for a turn."""
    host = Outages(ManualClock(START)).host("gpu1")
    host.refused("host key changed", tried=False)
    host.lost("connection reset")
    assert (host.reach, host.refusing, host.error) == (Reach.UNREACHABLE, False, "connection reset")


async def test_one_launch_tries_at_the_end_of_the_backoff_and_the_others_wait_for_its_outcome() -> None:
    """While a host refuses us, launches wait; at the end of the backoff exactly one gets the turn (TRYING),
    the others wait for its outcome however long; its success (`up`) lets them all go."""
    clock = ManualClock(START)
    host = Outages(clock).host("gpu1")
    host.refused("auth failed", tried=False)
    turns: list[bool] = []
    notes: list[str] = []

    async def launch() -> None:
        turns.append(await host.wait_turn(notes.append))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(launch)
        await clock.advance(RESTART_PAUSE - 0.1)
        assert turns == []
        assert notes[0] == "refused: auth failed; trying again in 5.0s"
        await clock.advance(0.1)
        assert (turns, host.reach) == ([True], Reach.TRYING)
        await clock.advance(1000.0)  # the attempt takes long: the others still wait for it
        assert turns == [True]
        host.up()
    assert turns == [True, False, False]
    assert host.reach is Reach.ANSWERS


async def test_a_failed_attempt_sets_the_next_turn_after_the_doubled_backoff() -> None:
    """The one attempt fails (`refused(tried=True)`): the waiting launches wait the doubled backoff, then one
    of them tries."""
    clock = ManualClock(START)
    host = Outages(clock).host("gpu1")
    host.refused("auth failed", tried=False)
    turns: list[bool] = []

    async def launch() -> None:
        turns.append(await host.wait_turn(lambda _: None))

    async with anyio.create_task_group() as tg:
        tg.start_soon(launch)
        tg.start_soon(launch)
        await clock.advance(RESTART_PAUSE)
        assert turns == [True]
        host.refused("auth failed", tried=True)  # the attempt failed: 10 s now
        await clock.advance(9.9)
        assert turns == [True]
        await clock.advance(0.1)
        assert turns == [True, True]
        host.up()


async def test_an_attempt_given_up_passes_the_turn_and_a_reload_ends_the_wait() -> None:
    """A launch cancelled during its attempt gives the turn back (another one takes it at once); a reload
    (`retry_now`) makes the next attempt due now, the backoff reset."""
    clock = ManualClock(START)
    host = Outages(clock).host("gpu1")
    host.refused("auth failed", tried=False)
    host.refused("auth failed", tried=True)
    host.refused("auth failed", tried=True)  # 20 s
    turns: list[bool] = []

    async def launch() -> None:
        turns.append(await host.wait_turn(lambda _: None))

    async with anyio.create_task_group() as tg:
        tg.start_soon(launch)
        tg.start_soon(launch)
        await clock.advance(1.0)
        assert turns == []
        host.retry_now()
        await clock.advance(0.0)
        assert (turns, host.pause) == ([True], 0.0)
        host.give_up_turn()
        await clock.advance(0.0)
        assert turns == [True, True]
        assert host.reach is Reach.TRYING
        host.up()


async def test_a_cancelled_waiter_does_not_cancel_the_others() -> None:
    """Each waiting launch has its own wake: one cancelled (its launch removed) leaves the others waiting."""
    clock = ManualClock(START)
    host = Outages(clock).host("gpu1")
    host.refused("auth failed", tried=False)
    turns: list[bool] = []

    async def launch() -> None:
        turns.append(await host.wait_turn(lambda _: None))

    async with anyio.create_task_group() as tg:
        tg.start_soon(launch)
        async with anyio.create_task_group() as gone:
            gone.start_soon(launch)
            await clock.advance(1.0)
            gone.cancel_scope.cancel()
        await clock.advance(RESTART_PAUSE)
        assert turns == [True]
        host.up()
    assert turns == [True]


@pytest.mark.parametrize(
    ("new", "changes"),
    [
        pytest.param({"a": 1, "b": 2}, PlanChanges(), id="unchanged"),
        pytest.param({"a": 1, "b": 2, "c": 3}, PlanChanges(added=("c",)), id="added"),
        pytest.param({"a": 1}, PlanChanges(removed=("b",)), id="removed"),
        pytest.param({"b": 5, "a": 1}, PlanChanges(restarted=("b",)), id="changed"),
        pytest.param({"c": 3, "b": 9}, PlanChanges(("c",), ("a",), ("b",)), id="all"),
    ],
)
def test_a_new_plan_adds_removes_and_restarts_only_what_changed(
    new: dict[str, int], changes: PlanChanges
) -> None:
    """The plan diff of a reload: new names added, missing ones removed, changed ones restarted, the rest left."""
    assert diff_plans({"a": 1, "b": 2}, new) == changes  # type: ignore[arg-type]
