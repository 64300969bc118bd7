"""Tests for alert routing and delivery: the outbox, faults of real HTTP receivers, silences and repeats."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from http_receiver import Answer, Got, Receiver, running_receiver
from snapshots import status_from_json

from watchdog.alerts import senders as senders_module
from watchdog.alerts.alerting import Alerting
from watchdog.alerts.notifiers import Alert, AlertKind
from watchdog.alerts.outbox import Outbox
from watchdog.alerts.senders import AppriseNotifier, ConsoleAlerts, ServiceNotifier, alert_line
from watchdog.follow.testing import ManualClock
from watchdog.store import open_store
from watchdog.vocabulary import State

pytestmark = pytest.mark.anyio
DEADLINE = 20.0
STARTED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # when `_alert`'s problem began
NOW = STARTED.timestamp()  # a ManualClock's start: the alerting's clock is unix time


def _alert(kind: AlertKind = AlertKind.CRASHED, launch: str = "kimi", incarnation: int = 1) -> Alert:
    """A crash of an SGLang launch during graph capture."""
    status = {
        "name": launch,
        "host": "gpu1",
        "engine": "sglang",
        "state": kind.value if kind.value in {s.value for s in State} else "crashed",
        "phase": "capturing_graphs",
        "incarnation": incarnation,
        "error": {
            "category": "oom",
            "summary": "torch.OutOfMemoryError: CUDA out of memory",
            "ranks": ["TP0"],
        },
    }
    return Alert.from_status(kind, status_from_json(status), now=STARTED)


def _webhook(receiver: Receiver, name: str = "hook", **over: object) -> ServiceNotifier:
    notifier = ServiceNotifier(name=name, kind="webhook", urls=(receiver.url(),), timeout=2.0)
    return dataclasses.replace(notifier, **over)  # type: ignore[arg-type]


class Changes:
    """Called by the Alerting after each delivery attempt; tests wait on it instead of sleeping."""

    def __init__(self) -> None:
        self.event = anyio.Event()

    def __call__(self) -> None:
        self.event.set()
        self.event = anyio.Event()

    async def until(self, predicate: Callable[[], bool], deadline: float = DEADLINE) -> None:
        """Wait until `predicate()` holds, checked after each delivery attempt."""
        with anyio.fail_after(deadline):
            while not predicate():
                event = self.event
                await event.wait()


@asynccontextmanager
async def _running(outbox: Outbox | None = None, **kwargs: object) -> AsyncIterator[Alerting]:
    box = outbox or await Outbox.open(None)
    changes = Changes()
    kwargs = {"retry_base": 0.05, "retry_max": 0.5, **kwargs}
    alerting = Alerting(box, on_change=changes, **kwargs)  # type: ignore[arg-type]
    alerting.changes = changes  # type: ignore[attr-defined]
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(alerting.run)
            yield alerting
            tg.cancel_scope.cancel()
    finally:
        if outbox is None:
            await box.close()


async def _sent(alerting: Alerting, name: str, count: int) -> None:
    """Wait until the Alerting counts `count` alerts delivered to `name` (it learns after the receiver)."""
    await alerting.changes.until(lambda: alerting.sent[name] >= count)  # type: ignore[attr-defined]
    assert alerting.sent[name] == count


def _keys(receiver: Receiver) -> list[str]:
    return [g.json()["dedup_key"] for g in receiver.delivered()]


async def test_outbox_keeps_what_is_not_delivered_and_enqueues_a_key_once(tmp_path: Path) -> None:
    """Items survive closing the outbox; the same key is enqueued once; delivered items are not pending."""
    path = tmp_path / "watchdog.sqlite3"
    box = await Outbox.open(path)
    data = _alert().to_dict()
    first = await box.put("hook", 2, "kimi/1/crashed", data, 100.0)
    assert [item.destination for item in first] == [0, 1]
    assert await box.put("hook", 2, "kimi/1/crashed", data, 101.0) == []
    await box.delivered(first[0], 102.0)
    await box.close()
    again = await Outbox.open(path)
    try:
        pending = await again.pending()
        assert [(i.notifier, i.destination, i.key) for i in pending] == [("hook", 1, "kimi/1/crashed")]
        assert Alert.from_dict(pending[0].alert).to_dict() == data
    finally:
        await again.close()


async def test_outbox_shares_the_state_file_with_the_store(tmp_path: Path) -> None:
    """The outbox lives in the daemon's state file, beside the store's tables."""
    async with open_store(tmp_path) as store:
        box = await Outbox.open(store.path)
        try:
            await box.put("hook", 1, "k", {"kind": "crashed"}, 1.0)
            assert [i.key for i in await box.pending()] == ["k"]
        finally:
            await box.close()
        assert await store.silences() == {}


async def test_500s_then_success_deliver_the_alert_exactly_once(receiver: Receiver) -> None:
    """Two 500s (one delivery's retries) and another later: the alert arrives once, by the outbox's retry."""
    receiver.script = [Answer(500)] * 5
    clock = ManualClock(NOW)
    async with _running(clock=clock) as alerting:
        await alerting.say(_alert(), [_webhook(receiver)])
        await _advance_until(clock, lambda: alerting.sent["hook"] >= 1)
        got = await receiver.wait_for(1)
        await _sent(alerting, "hook", 1)
        assert alerting.depth() == 0
    assert len(receiver.got) == 6
    assert [g.json()["dedup_key"] for g in got] == ["kimi/1/crashed"]


def _waiting(alerting: Alerting) -> list[float]:
    """When each item in the queues is due (unix time of the alerting's clock)."""
    return sorted(item.next_try for queue in alerting._queues.values() for _, _, item in queue)


async def test_429_retry_after_is_honoured(receiver: Receiver) -> None:
    """A 429 asking for more than one delivery waits (Retry-After: 120; a delivery's own retries honour up
    to 60 s) is left to the outbox: tried again 120 s later on the alerting's clock, not before."""
    receiver.script = [Answer(429, headers={"Retry-After": "120"})]
    clock = ManualClock(NOW)
    async with _running(clock=clock) as alerting:
        await alerting.say(_alert(), [_webhook(receiver)])
        await alerting.changes.until(lambda: alerting_failed_once(alerting))  # type: ignore[attr-defined]
        assert _waiting(alerting) == [NOW + 120.0]
        await clock.advance(119.5)
        assert _waiting(alerting) == [NOW + 120.0]  # still in its queue: not tried again
        assert len(receiver.got) == 1
        await clock.advance(0.5)
        await receiver.wait_for(1)
        await _sent(alerting, "hook", 1)
    assert len(receiver.got) == 2


async def test_a_receiver_down_then_back_gets_each_alert_once() -> None:
    """The receiver's port refuses connections, then a receiver starts there: each alert arrives once."""
    async with running_receiver() as probe:
        port = probe.port  # a port that is free once this receiver stops
    notifier = ServiceNotifier(
        name="hook", kind="webhook", urls=(f"http://127.0.0.1:{port}/hook",), timeout=2.0
    )
    clock = ManualClock(NOW)
    async with _running(clock=clock) as alerting:
        await alerting.say(_alert(launch="a"), [notifier])
        await alerting.say(_alert(launch="b"), [notifier])
        await _through_retries(clock, alerting)
        async with running_receiver(port) as back:
            await _advance_until(clock, lambda: alerting.sent["hook"] >= 2)
            await back.wait_for(2)
            assert sorted(_keys(back)) == ["a/1/crashed", "b/1/crashed"]
            await _sent(alerting, "hook", 2)


async def _advance_until(clock: ManualClock, done: Callable[[], bool], step: float = 0.05) -> None:
    """Let time pass on the alerting's manual clock (its retry pauses, the outbox's) until `done()`."""
    with anyio.fail_after(DEADLINE):
        while not done():
            await clock.advance(step)


async def _through_retries(clock: ManualClock, alerting: Alerting) -> None:
    """Let a delivery's retry pauses pass, in small steps (so that the outbox's own retry, 0.05 s after the
    failure, is not yet due), until the delivery has failed once."""
    await _advance_until(clock, lambda: alerting_failed_once(alerting), step=0.005)


def _retry_due(alerting: Alerting) -> float:
    """When (on the monotonic clock) the first item put back after a failure is tried again."""
    return min(
        item.due or 0.0 for queue in alerting._queues.values() for _, _, item in queue if item.attempts
    )


def alerting_failed_once(alerting: Alerting) -> bool:
    """Whether an item has been tried and put back (the receiver was really down)."""
    return any(item.attempts > 0 for queue in alerting._queues.values() for _, _, item in queue)


async def test_a_timeout_is_retried_and_the_receiver_can_deduplicate(receiver: Receiver) -> None:
    """The first request times out: the alert is sent again with the same dedup key."""
    receiver.script = [Answer(hang=True)]
    async with _running() as alerting:
        await alerting.say(_alert(), [_webhook(receiver, timeout=0.3)])
        await receiver.wait_for(1)
        await _sent(alerting, "hook", 1)
    assert {g.json()["dedup_key"] for g in receiver.got} == {"kimi/1/crashed"}


async def test_a_hanging_notifier_never_delays_another(receiver: Receiver) -> None:
    """One notifier's receiver never answers (a 300 s timeout); the other's alert arrives meanwhile, within
    the test's deadline (a fraction of that timeout), on a clock that never moves."""
    async with running_receiver() as hanging:
        hanging.script = [Answer(hang=True)] * 10
        slow = ServiceNotifier(name="slow", kind="webhook", urls=(hanging.url(),), timeout=300.0)
        async with _running(clock=ManualClock(NOW)) as alerting:
            await alerting.say(_alert(), [slow, _webhook(receiver)])
            await receiver.wait_for(1, deadline=DEADLINE)
            await _sent(alerting, "hook", 1)
            assert alerting.sent["slow"] == 0
            assert alerting.depth() == 1  # the slow one's, still being attempted


async def test_a_400_is_given_up_and_counted(receiver: Receiver) -> None:
    """A permanent refusal is not retried: it counts as failed and leaves the queue."""
    receiver.script = [Answer(400, body="bad payload")]
    async with _running() as alerting:
        await alerting.say(_alert(), [_webhook(receiver)])
        await alerting.changes.until(lambda: alerting.failed["hook"] > 0)  # type: ignore[attr-defined]
        assert alerting.depth() == 0
    assert len(receiver.got) == 1


async def test_each_url_of_a_notifier_gets_the_alert_even_when_another_is_down(receiver: Receiver) -> None:
    """Two URLs (an Alertmanager pair): the one that is up gets it although the other refuses."""
    async with running_receiver() as probe:
        down = probe.url()
    notifier = ServiceNotifier(name="pair", kind="webhook", urls=(down, receiver.url()), timeout=1.0)
    clock = ManualClock(NOW)
    async with _running(clock=clock) as alerting:  # advanced only through the delivery's own retries
        await alerting.say(_alert(), [notifier])
        await receiver.wait_for(1)
        await _through_retries(clock, alerting)
        assert [item.destination for queue in alerting._queues.values() for _, _, item in queue] == [0]
        assert len(receiver.got) == 1


async def test_undelivered_alerts_are_sent_by_the_next_alerting(tmp_path: Path, receiver: Receiver) -> None:
    """An alert enqueued while the receiver refused is delivered after a restart, once."""
    path = tmp_path / "watchdog.sqlite3"
    receiver.script = [Answer(503)] * 100
    box = await Outbox.open(path)
    clock = ManualClock(NOW)
    async with _running(box, clock=clock) as alerting:
        await alerting.say(_alert(), [_webhook(receiver)])
        await _through_retries(clock, alerting)
    await box.close()
    receiver.script = []
    again = await Outbox.open(path)
    try:
        async with _running(again) as alerting:
            alerting.use([_webhook(receiver)])
            await receiver.wait_for(1)
            await _sent(alerting, "hook", 1)
            assert await again.pending() == []
    finally:
        await again.close()
    assert _keys(receiver) == ["kimi/1/crashed"]


async def test_a_silenced_launch_says_nothing_until_the_silence_ends(receiver: Receiver) -> None:
    """A silenced launch's crash is held; another launch's is said."""
    silences = {"kimi": time.time() + 3600}

    async def active() -> dict[str, float]:
        return silences

    async with _running(silences=active) as alerting:
        await alerting.say(_alert(launch="kimi"), [_webhook(receiver)])
        await alerting.say(_alert(launch="other"), [_webhook(receiver)])
        await receiver.wait_for(1)
        assert alerting.silenced["kimi"] == 1
        await alerting.resolve("kimi", [AlertKind.CRASHED])  # its problem was not said: nor is its end
        await alerting.say(_alert(launch="third"), [_webhook(receiver)])
        await receiver.wait_for(2)
    assert _keys(receiver) == ["other/1/crashed", "third/1/crashed"]


async def test_a_resolution_goes_to_who_heard_the_problem(receiver: Receiver) -> None:
    """A stall, then progress: its notifier hears the stall and then that it is resolved."""
    async with _running() as alerting:
        await alerting.say(_alert(AlertKind.STALLED), [_webhook(receiver)])
        assert [kind for launch, kind in alerting._active if launch == "kimi"] == [AlertKind.STALLED]
        await alerting.resolve("kimi", [AlertKind.STALLED], "progress again: loading_weights")
        got = await receiver.wait_for(2)
        assert [kind for launch, kind in alerting._active if launch == "kimi"] == []
    assert [g.json()["kind"] for g in got] == ["stalled", "resolved"]
    assert got[1].json()["resolves"] == "stalled"
    assert got[1].json()["detail"] == "progress again: loading_weights"


async def test_reminders_repeat_an_unresolved_problem_until_it_ends(receiver: Receiver) -> None:
    """With remind_every, an unresolved crash is said again when that time has passed (checked every 5 s of
    the alerting's clock), marked as a reminder; resolved, no more."""
    notifier = _webhook(receiver, remind_every=60.0)
    clock = ManualClock(NOW)
    async with _running(clock=clock, repeat_check=5.0) as alerting:
        await alerting.say(_alert(), [notifier])
        await _sent(alerting, "hook", 1)
        await clock.advance(55.0)
        assert (alerting.sent["hook"], alerting.depth()) == (1, 0)  # not yet
        await clock.advance(5.0)
        got = await receiver.wait_for(2)
        assert got[1].json()["detail"] == "still unresolved after 1m00s (since 2026-11-30T12:00:00.000Z)"
        await alerting.resolve("kimi", [AlertKind.CRASHED])
        got = await receiver.wait_until(lambda got: any(g.json()["kind"] == "resolved" for g in got))
        await alerting.changes.until(lambda: alerting.depth() == 0)  # type: ignore[attr-defined]
        count = len(receiver.got)
        await alerting._repeat()
        assert alerting.depth() == 0  # nothing more to remind of
    assert len(receiver.got) == count
    assert [g.json()["kind"] for g in got].count("resolved") == 1


@pytest.mark.parametrize("step", [-3600.0, 3600.0])
async def test_a_reminder_says_how_long_on_the_clock_no_one_steps(receiver: Receiver, step: float) -> None:
    """The wall clock steps (an hour back or forward) while a crash is unresolved: its reminder still comes
    after remind_every and says how long it has really been unresolved (not -59m nor 1h01m)."""
    notifier = _webhook(receiver, remind_every=60.0)
    clock = ManualClock(NOW)
    async with _running(clock=clock, repeat_check=5.0) as alerting:
        await alerting.say(_alert(), [notifier])
        await _sent(alerting, "hook", 1)
        clock.step(step)
        await clock.advance(60.0)
        got = await receiver.wait_for(2)
    assert got[1].json()["detail"] == "still unresolved after 1m00s (since 2026-11-30T12:00:00.000Z)"


async def test_alertmanager_is_sent_a_firing_alert_again(receiver: Receiver) -> None:
    """An Alertmanager gets an unresolved crash again (unchanged), so that it does not expire it."""
    notifier = ServiceNotifier(name="am", kind="alertmanager", urls=(receiver.url(""),), timeout=2.0)
    clock = ManualClock(NOW)
    async with _running(clock=clock) as alerting:
        await alerting.say(_alert(), [notifier])
        await _sent(alerting, "am", 1)
        await clock.advance(senders_module.ALERTMANAGER_RESEND_SECONDS - 5.0)
        assert (alerting.sent["am"], alerting.depth()) == (1, 0)  # not yet
        await clock.advance(5.0)
        got = await receiver.wait_for(2)
    first, second = got[0].json()[0], got[1].json()[0]
    assert first == second
    assert "endsAt" not in first


async def test_the_rate_limit_holds_alerts_back_without_dropping_them(receiver: Receiver) -> None:
    """With 60 a minute, 60 alerts go at once and the 61st one second later on the alerting's clock; none
    is dropped."""
    notifier = _webhook(receiver, rate_limit=60)
    clock = ManualClock(NOW)
    async with _running(clock=clock) as alerting:
        for n in range(61):
            await alerting.say(_alert(launch=f"l{n}"), [notifier])
        await receiver.wait_for(60, deadline=30)
        await _sent(alerting, "hook", 60)
        await clock.advance(0.5)
        assert (alerting.sent["hook"], alerting.depth(), len(receiver.got)) == (60, 1, 60)  # held back
        await clock.advance(0.5)
        await receiver.wait_for(61)
        await _sent(alerting, "hook", 61)
    assert len(set(_keys(receiver))) == 61


def test_outbox_keys_tell_outages_and_resolutions_apart() -> None:
    """Each unreachable outage has its own key; a stall's and a crash's resolutions differ."""
    first = _alert(AlertKind.UNREACHABLE)
    second = dataclasses.replace(first, started_at=datetime(2026, 11, 30, 13, 0, tzinfo=UTC))
    assert first.dedup_key != second.dedup_key
    at = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)
    stall, crash = _alert(AlertKind.STALLED), _alert(AlertKind.CRASHED)
    assert stall.resolution(at).dedup_key == "kimi/1/stalled/resolved"
    assert crash.resolution(at).dedup_key == "kimi/1/crashed/resolved"


async def test_console_says_one_line_per_alert() -> None:
    """The console notifier prints the alert's line."""
    out = io.StringIO()
    async with _running() as alerting:
        await alerting.say(_alert(), [ConsoleAlerts(out=out)])
        await alerting.changes.until(lambda: alerting.sent["console"] > 0)  # type: ignore[attr-defined]
    assert out.getvalue() == alert_line(_alert()) + "\n"
    assert out.getvalue().startswith("kimi on gpu1: crashed during capturing_graphs on ranks TP0: torch.")


async def test_apprise_urls_are_called_off_the_event_loop(receiver: Receiver) -> None:
    """An apprise `json://` URL reaches a real receiver through apprise, in a worker thread."""
    pytest.importorskip("apprise", reason="the apprise extra is not installed")
    notifier = AppriseNotifier(name="any", urls=(f"json://127.0.0.1:{receiver.port}/apprise",))
    async with _running() as alerting:
        await alerting.say(_alert(), [notifier])
        got = await receiver.wait_for(1)
        await _sent(alerting, "any", 1)
    body = got[0].json()
    assert body["title"] == "kimi on gpu1 crashed in capturing_graphs (oom)"
    assert "torch.OutOfMemoryError" in body["message"]


async def test_a_notifier_that_did_not_say_the_problem_does_not_say_its_end(receiver: Receiver) -> None:
    """A notifier of crashes and resolutions hears neither a stall nor the stall's end."""
    notifier = _webhook(receiver, on=frozenset({AlertKind.CRASHED, AlertKind.RESOLVED}))
    async with _running() as alerting:
        await alerting.say(_alert(AlertKind.STALLED), [notifier])
        await alerting.resolve("kimi", [AlertKind.STALLED], "progress again")
        await alerting.say(_alert(AlertKind.CRASHED), [notifier])
        got = await receiver.wait_for(1)
        await _sent(alerting, "hook", 1)
        assert alerting.depth() == 0
    assert [g.json()["kind"] for g in got] == ["crashed"]


# -- what receivers see of a launch that stalls three times ------------------------------------------------

READY_LOG = (
    Path(__file__).parent / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
)


def _at(got: list[Got], path: str) -> list[Any]:
    return [g.json() for g in got if g.path.startswith(path)]


async def test_three_stalls_of_one_incarnation_each_have_their_key_and_their_resolution(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A daemon's launch that stalls, resumes, three times in one incarnation: a webhook gets six distinct
    dedup keys, each resolution carrying its stall's key; PagerDuty three incidents each resolved by its own
    dedup_key; Alertmanager three alerts with different labels, each ended by a resolution with its labels."""
    from watchdog.daemon.supervisor import Daemon, LaunchPlan  # noqa: PLC0415
    from watchdog.follow.follower import LaunchSpec  # noqa: PLC0415
    from watchdog.follow.sources import parse_target  # noqa: PLC0415

    log = tmp_path / "slow.log"
    lines = READY_LOG.read_bytes().splitlines(keepends=True)
    notifiers = (
        ServiceNotifier(name="hook", kind="webhook", urls=(receiver.url("/hook"),), timeout=5.0),
        ServiceNotifier(
            name="pd",
            kind="pagerduty",
            urls=(receiver.url("/pd"),),
            options={"routing_key": "k"},
            timeout=5.0,
        ),
        ServiceNotifier(name="am", kind="alertmanager", urls=(receiver.url("/am"),), timeout=5.0),
    )
    spec = LaunchSpec(name="slow", target=parse_target(str(log)), stall_after=0.5)
    daemon = Daemon({"slow": LaunchPlan(spec, alerts=notifiers)}, handle_signals=False)
    with anyio.fail_after(DEADLINE * 2):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            log.write_bytes(b"".join(lines[:6]))  # loading weights, shard 1 of 4: stalls
            for n, line in enumerate(lines[6:9], start=1):
                await receiver.wait_until(lambda got, n=n: len(_at(got, "/hook")) == 2 * n - 1)  # stall n
                with log.open("ab") as f:
                    f.write(line)  # the next shard: progress again
                await receiver.wait_until(lambda got, n=n: len(_at(got, "/hook")) == 2 * n)  # its resolution
            await receiver.wait_until(lambda got: len(_at(got, "/pd")) == 6 and len(_at(got, "/am")) >= 6)
            tg.cancel_scope.cancel()
    got = receiver.delivered()
    hooks = _at(got, "/hook")
    assert [h["dedup_key"] for h in hooks] == [
        "slow/1/stalled",
        "slow/1/stalled/resolved",
        "slow/1/stalled#2",
        "slow/1/stalled#2/resolved",
        "slow/1/stalled#3",
        "slow/1/stalled#3/resolved",
    ]
    for problem, resolution in zip(hooks[::2], hooks[1::2], strict=True):
        assert resolution["kind"] == "resolved"
        assert resolution["incident_key"] == problem["incident_key"] == problem["dedup_key"]
    pd = _at(got, "/pd")
    assert [e["event_action"] for e in pd] == ["trigger", "resolve"] * 3
    assert len({e["dedup_key"] for e in pd}) == 3
    assert all(t["dedup_key"] == r["dedup_key"] for t, r in zip(pd[::2], pd[1::2], strict=True))
    am = [item for body in _at(got, "/am") for item in body]
    firing = [a for a in am if "endsAt" not in a]
    ended = [a for a in am if "endsAt" in a]
    assert len({json.dumps(a["labels"], sort_keys=True) for a in firing}) == 3
    assert [a["labels"] for a in ended] == [a["labels"] for a in firing[:3]]


_CRAFTED = "@everyone @here @channel <!channel> <@123456789> [Fix: run this](https://evil.example/fix.sh)"


async def test_apprise_gets_plain_text_that_pings_nobody(receiver: Receiver) -> None:
    """Through apprise a crash line with @everyone, <!channel>, <@id> and a Markdown link arrives as plain
    text with none of them live: apprise's own Discord plugin finds no one to ping in it."""
    apprise = pytest.importorskip("apprise", reason="the apprise extra is not installed")
    alert = dataclasses.replace(_alert(), summary=f"RuntimeError: {_CRAFTED}")
    notifier = AppriseNotifier(name="any", urls=(f"json://127.0.0.1:{receiver.port}/apprise",))
    async with _running() as alerting:
        await alerting.say(alert, [notifier])
        (got,) = await receiver.wait_for(1)
        await _sent(alerting, "any", 1)
    message = got.json()["message"]
    assert "@everyone" not in message
    assert "<@1" not in message
    assert "](" not in message
    assert "@everyone" in message.replace("\u200b", "")  # still said, as text
    discord = apprise.Apprise.instantiate("discord://1234567890/t0ken")
    assert discord.ping_payload(message) == {}


async def test_apprise_refusing_is_given_up_after_a_few_attempts(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An apprise service that keeps refusing (apprise says only False) is tried a few times, then given
    up and counted as failed, not retried forever."""
    pytest.importorskip("apprise", reason="the apprise extra is not installed")
    monkeypatch.setattr(senders_module, "APPRISE_BACKOFF", (0.01, 0.01), raising=False)
    receiver.script = [Answer(400, body="no")] * 10
    notifier = AppriseNotifier(name="any", urls=(f"json://127.0.0.1:{receiver.port}/apprise",))
    async with _running() as alerting:
        await alerting.say(_alert(), [notifier])
        await alerting.changes.until(lambda: alerting.failed["any"] == 1)  # type: ignore[attr-defined]
        assert alerting.depth() == 0
        assert alerting.sent["any"] == 0
    assert len(receiver.got) == 3  # 1 + len(APPRISE_BACKOFF)


# -- what a source's events read as: no Python repr reaches a person ----------------------------------------

_REPR = re.compile(r"\b[A-Z]\w*\(\w+=")


def _lost(note: str) -> bool:
    # what a follower's note says once its connection is gone: lost, then each attempt to connect again
    return note.startswith(("connection to ", "cannot connect to "))


@pytest.mark.sshd
async def test_a_lost_connection_reads_as_words_in_status_and_alert(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A daemon following a log over a real sshd that then goes away: the /status note (connected, then the
    connection lost) and the unreachable alert a webhook receives say it in words, never `Connected(host=`
    or `Disconnected(host=..., reason=...)`."""
    from conftest import unavailable  # noqa: PLC0415
    from sshd_server import SSHDUnavailable, start_sshd, stop_sshd  # noqa: PLC0415

    from watchdog.daemon.supervisor import Daemon, LaunchPlan  # noqa: PLC0415
    from watchdog.follow.follower import LaunchSpec  # noqa: PLC0415
    from watchdog.follow.sources import SSHOptions, parse_target  # noqa: PLC0415

    try:
        server = start_sshd(tmp_path / "sshd")
    except SSHDUnavailable as exc:
        unavailable(str(exc))
    log = tmp_path / "remote.log"
    log.write_bytes(b"")
    plan = LaunchPlan(
        LaunchSpec(name="far", target=parse_target(f"ssh://{server.user}@{server.host}:{server.port}{log}")),
        host="gpu1",
        ssh=SSHOptions(
            known_hosts=str(server.known_hosts),
            identity=str(server.client_key),
            config=None,
            use_agent=False,
            connect_timeout=2.0,
        ),
        alerts=(_webhook(receiver),),
    )
    daemon = Daemon({"far": plan}, handle_signals=False, unreachable_after=0.5)
    notes: list[str] = []

    def noted(statuses: list[dict[str, Any]], start: str) -> bool:
        note = str(statuses[0].get("note") or "")
        if note and note not in notes:
            notes.append(note)
        return note.startswith(start)

    try:
        with anyio.fail_after(DEADLINE * 2):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                await daemon.wait_until(lambda s: noted(s, "connected to "))

                async def record() -> None:  # every note the daemon shows from now on
                    await daemon.wait_until(lambda s: noted(s, "\0"))

                tg.start_soon(record)
                await anyio.to_thread.run_sync(stop_sshd, server)
                (got,) = await receiver.wait_for(1)
                await daemon.wait_until(lambda s: noted(s, "\0") or any(map(_lost, notes)))
                tg.cancel_scope.cancel()
    finally:
        stop_sshd(server)
    alert = got.json()
    assert alert["kind"] == "unreachable"
    assert notes[0] == f"connected to {server.host}"
    assert alert["detail"]
    said = [*notes, alert["detail"], alert["text"]]
    assert [text for text in said if _REPR.search(text)] == []
    lost = [note for note in notes if _lost(note)]
    assert lost
    assert all(
        note.count("connection to ") + note.count("cannot connect to ") == 1 for note in lost
    )  # said once, not wrapped in itself


@pytest.mark.parametrize("step", [-3600.0, -300.0, -90.0, 3600.0])
async def test_a_step_of_the_wall_clock_neither_holds_nor_hurries_an_alert(
    receiver: Receiver, step: float
) -> None:
    """The wall clock is stepped (back by 90 s, 5 min, an hour; forward an hour) between two alerts: the next one
    is delivered at once, the rate limit still spaces a burst by the time that passed (not by the step), and a
    retry still waits its backoff."""
    clock = ManualClock(NOW)
    notifier = _webhook(receiver, rate_limit=2)  # a burst of 2, then one each 30 s
    async with _running(clock=clock) as alerting:
        await alerting.say(_alert(launch="a"), [notifier])
        await receiver.wait_for(1)
        clock.step(step)  # no time passes: only the wall clock moves, as an NTP correction would move it
        await alerting.say(_alert(launch="b"), [notifier])
        await receiver.wait_for(2)  # on the clock that never moved: at once
        await alerting.say(_alert(launch="c"), [notifier])
        await clock.advance(29.0)
        assert _keys(receiver) == ["a/1/crashed", "b/1/crashed"]  # the bucket is empty until 30 s passed
        await clock.advance(1.0)
        await receiver.wait_for(3)
        other = _webhook(receiver, name="other")  # no rate limit in the way of its retry
        # down until the test says otherwise: the manual clock may run ahead of the requests in flight and of the
        # outbox's writes, so the item is seen back in its queue only once a retry's pause is long enough
        receiver.script = [Answer(503)] * 1000
        await alerting.say(_alert(launch="d"), [other])
        await _through_retries(clock, alerting)
        tried, receiver.script = len(receiver.got), []
        clock.step(-step)
        # 0.04 s, or less where the retry's due time (which its failure set) is nearer: the manual clock may have run
        # on while the failure was written (0.04 s went past it once in a loaded CI run)
        await clock.advance(max(0.0, min(0.04, _retry_due(alerting) - clock.monotonic() - 0.005)))
        assert len(receiver.got) == tried  # its retry waits its backoff (0.05 s), whatever the wall clock did
        # then it comes (the manual clock may have run ahead of requests in flight: the outbox's later retries
        # wait longer, so the time is let pass until it is there, not a fixed amount)
        await _advance_until(clock, lambda: len(receiver.got) > tried, step=0.05)
        await receiver.wait_for(4)
        await _sent(alerting, "other", 1)
    assert _keys(receiver) == ["a/1/crashed", "b/1/crashed", "c/1/crashed", "d/1/crashed"]


async def test_an_item_written_while_the_wall_clock_was_ahead_is_not_held(
    tmp_path: Path, receiver: Receiver
) -> None:
    """Outbox rows whose next try is an hour ahead (written before the clock was stepped back: one never tried,
    one retried) are sent at once by the next alerting, while a retry due within the longest backoff still
    waits what is left of it."""
    path = tmp_path / "watchdog.sqlite3"
    box = await Outbox.open(path)
    try:
        await box.put("hook", 1, "fresh/1/crashed", _alert(launch="fresh").to_dict(), NOW + 3600.0)
        for launch, pause in [("stepped", 3600.0), ("backoff", 60.0)]:
            (item,) = await box.put("hook", 1, f"{launch}/1/crashed", _alert(launch=launch).to_dict(), NOW)
            item.attempts, item.next_try = 1, NOW + pause
            await box.retry(item, "HTTP 503")
        clock = ManualClock(NOW)
        async with _running(box, clock=clock, retry_max=300.0) as alerting:
            alerting.use([_webhook(receiver)])
            await receiver.wait_for(2)  # no time passes on the alerting's clock
            await _sent(alerting, "hook", 2)
            assert sorted(_keys(receiver)) == ["fresh/1/crashed", "stepped/1/crashed"]
            await clock.advance(59.0)
            assert len(receiver.got) == 2  # the plausible backoff is waited out
            await clock.advance(1.0)
            await receiver.wait_for(3)
            await _sent(alerting, "hook", 3)
        assert _keys(receiver)[2] == "backoff/1/crashed"
    finally:
        await box.close()


RETRIED = "alert not delivered yet; trying again"


async def test_a_delivery_retried_later_is_not_said_to_be_given_up(receiver: Receiver) -> None:
    """A delivery whose attempts all failed is tried again by the outbox: its log line says that, and not also
    "gave up" (it said both)."""
    from structlog.testing import capture_logs  # noqa: PLC0415

    receiver.script = [Answer(503)] * 20
    with capture_logs() as logs:
        clock = ManualClock(NOW)
        async with _running(clock=clock) as alerting:
            await alerting.say(_alert(), [_webhook(receiver)])
            # until its log says so (what the test is about; the queue's state between the failure and the
            # outbox's retry is a window a loaded machine can step over)
            await _advance_until(clock, lambda: any(e["event"] == RETRIED for e in logs), step=0.005)
    retried = [e for e in logs if e["event"] == RETRIED]
    assert retried
    assert all("gave up" not in e["error"] for e in retried), retried
    assert "attempts)" in retried[0]["error"]


async def test_a_hosts_outage_alert_has_its_facts_as_values_not_one_string(
    tmp_path: Path, receiver: Receiver
) -> None:
    """What a real webhook receiver gets for a host that refuses connections: facts as values like any alert's
    (how many launches, which, since when, the host's error), not one string."""
    from watchdog.daemon.supervisor import Daemon, LaunchPlan  # noqa: PLC0415
    from watchdog.follow.follower import LaunchSpec  # noqa: PLC0415
    from watchdog.follow.sources import SSHOptions, parse_target  # noqa: PLC0415

    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    plan = LaunchPlan(
        LaunchSpec(name="far", target=parse_target("ssh://nobody@127.0.0.1:1/srv/server.log")),
        host="gpu1",
        ssh=SSHOptions(known_hosts=str(known_hosts), config=None, use_agent=False, connect_timeout=2.0),
        alerts=(_webhook(receiver),),
    )
    before = datetime.now(UTC).replace(microsecond=0)
    daemon = Daemon({"far": plan}, handle_signals=False, unreachable_after=0.5)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            (got,) = await receiver.wait_for(1)
            tg.cancel_scope.cancel()
    body = got.json()
    assert body["kind"] == "unreachable"
    facts = body["facts"]
    assert isinstance(facts, dict)
    assert sorted(facts) == ["error", "launches", "not_followed", "since"]
    assert facts["launches"] == 1
    assert facts["not_followed"] == "far"
    assert before <= datetime.fromisoformat(facts["since"]) <= datetime.now(UTC)
    assert facts["error"].startswith("cannot connect to nobody@127.0.0.1 port 1")


_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _strings(value: Any) -> list[str]:
    """Every string in a decoded JSON body."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


async def test_control_characters_of_a_log_reach_no_notifier(tmp_path: Path, receiver: Receiver) -> None:
    """A crash line with BEL, backspace, a C1 CSI (U+009B) and U+0085 in it, followed by a running daemon: what
    every notifier kind's real receiver got holds no control character (as JSON text, once decoded)."""
    from watchdog.alerts.notifiers import KINDS, OPTIONS  # noqa: PLC0415
    from watchdog.daemon.supervisor import Daemon, LaunchPlan  # noqa: PLC0415
    from watchdog.follow.follower import LaunchSpec  # noqa: PLC0415
    from watchdog.follow.sources import parse_target  # noqa: PLC0415

    notifiers = tuple(
        ServiceNotifier(
            name=kind,
            kind=kind,
            urls=(receiver.url(f"/{kind}"),),
            options=dict.fromkeys(OPTIONS[kind][0], "x"),
            timeout=5.0,
        )
        for kind in KINDS
    )
    log = tmp_path / "bell.log"
    lines = READY_LOG.read_bytes().splitlines(keepends=True)
    crash = (
        "[2025-01-23 19:35:21 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/srt/managers/scheduler.py", line 1200, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args)\n"
        "RuntimeError: Not enough memory.\x07\x07 rm -rf\x08\x08\x08\x08\x08safe \u009b2J\u0085 done\n"
    )
    spec = LaunchSpec(name="bell", target=parse_target(str(log)))
    daemon = Daemon({"bell": LaunchPlan(spec, alerts=notifiers)}, handle_signals=False)
    with anyio.fail_after(DEADLINE * 2):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            log.write_bytes(b"".join(lines[:12]) + crash.encode())
            await receiver.wait_until(lambda got: {g.path.split("/")[1] for g in got} >= set(KINDS))
            tg.cancel_scope.cancel()
    for got in receiver.delivered():
        text = got.body.decode()
        try:
            strings = _strings(json.loads(text))
        except ValueError:
            strings = [text]
        said = [s for s in strings if _CONTROLS.search(s)]
        assert said == [], (got.path, said)
        assert "Not enough memory" in text or got.path.startswith("/alertmanager"), got.path


def test_the_console_log_writes_no_control_character() -> None:
    """The daemon's console log (a terminal): an event whose fields hold BEL, backspace or a C1 CSI is written
    without them (JSON escapes them by itself)."""
    from watchdog.daemon.logs import configure_logging  # noqa: PLC0415

    out = io.StringIO()
    configure_logging("console", out, cache=False)
    try:
        import structlog  # noqa: PLC0415

        structlog.get_logger("t").warning("host refused us", error="bad\x07 key\x08\x08 \u009b2J")
    finally:
        configure_logging("json", cache=False)
    written = out.getvalue()
    assert "host refused us" in written
    assert "bad key 2J" in written
    assert _CONTROLS.search(written.replace("\n", "")) is None


async def test_a_deliverys_retries_wait_on_the_alertings_clock(receiver: Receiver) -> None:
    """The pause between one delivery's attempts is on the alerting's clock: on a manual clock the retry after
    a 500 waits for the clock to pass the backoff (half a second, and up to a quarter more), however long real
    time runs; then it goes, and the alert is delivered once."""
    receiver.script = [Answer(500)]
    clock = ManualClock(NOW)
    async with _running(clock=clock) as alerting:
        await alerting.say(_alert(), [_webhook(receiver)])
        with anyio.fail_after(DEADLINE):
            await clock.asleep(lambda at: NOW + 0.5 <= at <= NOW + 0.625)
        assert len(receiver.got) == 1  # the 500: the retry waits on the clock
        await clock.advance(0.625)
        await receiver.wait_for(1)
        await _sent(alerting, "hook", 1)
    assert len(receiver.got) == 2


def _problem_rows(path: Path) -> list[tuple[str, str, str]]:
    """The problems the state file keeps (launch, kind, who heard them), as another connection sees them."""
    import sqlite3  # noqa: PLC0415

    other = sqlite3.connect(path)
    try:
        return [
            (str(a), str(b), str(c)) for a, b, c in other.execute("SELECT launch, kind, told FROM problems")
        ]
    finally:
        other.close()


async def test_a_problem_no_notifier_heard_keeps_no_row_and_writes_no_end(tmp_path: Path) -> None:
    """A crash said to no notifier (none says crashes) is active in memory, but the state file gets neither a
    problem row nor, at its resolution, anything: its end tells no one, a restarted daemon's neither."""
    path = tmp_path / "watchdog.sqlite3"
    quiet = ConsoleAlerts(out=io.StringIO(), on=frozenset({AlertKind.READY}))
    box = await Outbox.open(path)
    try:
        async with _running(box) as alerting:
            await alerting.say(_alert(), [quiet])
            assert alerting.is_active("kimi", AlertKind.CRASHED)
            assert _problem_rows(path) == []
            await alerting.resolve("kimi", [AlertKind.CRASHED], "a new start")
            assert not alerting.is_active("kimi", AlertKind.CRASHED)
            assert _problem_rows(path) == []
            assert await box.pending() == []
    finally:
        await box.close()


@pytest.mark.parametrize("readable", [True, False], ids=["restored", "unreadable"])
async def test_a_problem_no_notifier_heard_replaces_the_row_the_file_kept(
    tmp_path: Path, readable: bool
) -> None:
    """Where the file keeps a row of the same launch and kind (said before a restart, or a row that does not
    decode), a problem no notifier heard still replaces it, and its resolution deletes it: no stale row is
    restored and resolved by a later daemon."""
    path = tmp_path / "watchdog.sqlite3"
    box = await Outbox.open(path)
    try:
        async with _running(box) as alerting:
            await alerting.say(_alert(), [ConsoleAlerts(out=io.StringIO())])
        assert _problem_rows(path) == [("kimi", "crashed", '["console"]')]
    finally:
        await box.close()
    if not readable:
        import sqlite3  # noqa: PLC0415

        other = sqlite3.connect(path)
        with other:
            other.execute("UPDATE problems SET alert = 'not json'")
        other.close()
    box = await Outbox.open(path)
    try:
        async with _running(box) as alerting:  # a restarted daemon
            assert alerting.is_active("kimi", AlertKind.CRASHED) is readable
            await alerting.say(_alert(incarnation=2), [])
            assert _problem_rows(path) == [("kimi", "crashed", "[]")]
            await alerting.resolve("kimi", [AlertKind.CRASHED], "a new start")
            assert _problem_rows(path) == []
    finally:
        await box.close()
