"""From verdicts to the people who act on them: who hears which alert, silences, reminders, and delivery
(docs/notifiers.md says how; docs/architecture.md, "The alerts", shows the calls)."""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import aiohttp
import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from watchdog.alerts.alert import PROBLEMS, Alert, AlertKind, rfc3339
from watchdog.alerts.delivery import RETRY_SLEEP, TransientDeliveryError, open_client
from watchdog.alerts.outbox import REPEAT, Item, Notes, Outbox, Problem
from watchdog.alerts.senders import Notifier
from watchdog.backoff import AT_LEAST, backoff
from watchdog.clock import Clock, WallClock, wake_up
from watchdog.exceptions import DeliveryError
from watchdog.vocabulary import format_duration

__all__ = ["Alerting"]

log = structlog.get_logger("watchdog.alerting")

RETRY_BASE_SECONDS = 2.0  # the outbox's first retry after a failed delivery (doubled per attempt)
RETRY_MAX_SECONDS = 300.0
PRUNE_EVERY_SECONDS = 3600.0


@dataclass
class _Active:
    """An unresolved problem: the alert said, who heard it, when each was last told."""

    alert: Alert
    notifiers: tuple[str, ...]  # who it goes to, by name (a restarted daemon knows them by name only)
    told: dict[str, float]  # notifier name -> monotonic time it was last told (first, reminded or re-sent)
    key: str = ""  # its outbox key
    repeats: Counter[str] = field(default_factory=Counter)
    # monotonic time the problem began (its alert's `started_at`, as of when it became active): how long it has
    # been unresolved, in a reminder's words, whatever the wall clock does in the meantime
    began: float = 0.0


class _Bucket:
    """A token bucket: `rate` a minute, bursts of as many."""

    def __init__(self, rate: int, clock: Clock) -> None:
        self.rate = rate
        self._clock = clock
        self._tokens = float(rate)
        self._at = clock.monotonic()

    async def take(self) -> None:
        while True:
            now = self._clock.monotonic()
            self._tokens = min(float(self.rate), self._tokens + (now - self._at) * self.rate / 60.0)
            self._at = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return
            await self._clock.sleep((1.0 - self._tokens) * 60.0 / self.rate)


class Alerting:
    """Who hears which alert, its silences, reminders and re-sends, and the delivery tasks."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        silences: Callable[[], Awaitable[Mapping[str, float]]] | None = None,
        on_change: Callable[[], None] = lambda: None,
        clock: Clock | None = None,
        retry_base: float = RETRY_BASE_SECONDS,
        retry_max: float = RETRY_MAX_SECONDS,
        repeat_check: float = 5.0,
    ) -> None:
        """`silences()` gives the silenced launches (name -> until, unix time); `on_change` is called after
        each delivery (the daemon's status changes); `clock` gives unix time and waits (`WallClock`; a
        `ManualClock` in tests; its monotonic time for every timer); the rest are for tests."""
        self._outbox = outbox
        self._silences = silences
        self._on_change = on_change
        self._clock: Clock = clock if clock is not None else WallClock()
        self._retry_base = retry_base
        self._retry_max = retry_max
        self._repeat_check = repeat_check
        self._notifiers: dict[str, Notifier] = {}
        # one queue and one delivery task per (notifier, URL): a URL that is down holds back no other
        self._queues: dict[tuple[str, int], list[tuple[float, int, Item]]] = {}
        # a delivery task's wake-up: set when its queue gets an item (a bare future, as the clock waits on)
        self._wake: dict[tuple[str, int], asyncio.Future[object]] = {}
        self._scopes: dict[tuple[str, int], anyio.CancelScope] = {}  # each delivery task's, to stop it
        self._in_flight = 0  # items taken from their queue and being delivered (retries included)
        self._buckets: dict[str, _Bucket] = {}
        self._active: dict[tuple[str, AlertKind], _Active] = {}
        self._tg: TaskGroup | None = None
        self._client: aiohttp.ClientSession | None = None
        self.sent: Counter[str] = Counter()  # notifier -> alerts delivered
        self.failed: Counter[str] = Counter()  # notifier -> alerts given up (refused for good)
        self.silenced: Counter[str] = Counter()  # launch -> alerts held by a silence

    def depth(self) -> int:
        """Alerts not delivered yet: those waiting in their queues and those being attempted now."""
        return self._in_flight + sum(len(queue) for queue in self._queues.values())

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Deliver until cancelled: what the outbox still holds first, then what `say` enqueues."""
        async with open_client() as client, anyio.create_task_group() as tg:
            self._client = client
            self._tg = tg
            for item in await self._outbox.pending():
                self._push(item)
            self._restore(await self._outbox.problems())
            for name in list(self._notifiers):
                self._start_worker(name)
            tg.start_soon(self._repeat_loop)
            tg.start_soon(self._prune_loop)
            tg.start_soon(self._outbox.keep_written)  # what the state file could not take yet
            task_status.started()
            await anyio.sleep_forever()

    def use(self, notifiers: Iterable[Notifier]) -> None:
        """Know these notifiers (by name; a newer config's replaces an older one) and deliver to them."""
        for notifier in notifiers:
            self._notifiers[notifier.name] = notifier
            bucket = self._buckets.get(notifier.name)
            if bucket is None or bucket.rate != notifier.rate_limit:
                self._buckets[notifier.name] = _Bucket(notifier.rate_limit, self._clock)
            self._start_worker(notifier.name)

    async def use_only(self, notifiers: Sequence[Notifier]) -> None:
        """Know exactly these notifiers (a reload's): `use` them, and retire every other one.

        A retired notifier's delivery tasks stop, so nothing is sent to a URL the config no longer names:
        what was queued for it is dropped (logged, and marked given up in the outbox, so that a restart does
        not send it either), and the active problems it heard no longer tell it their resolution.
        """
        self.use(notifiers)
        keep = {n.name for n in notifiers}
        for name in [name for name in self._notifiers if name not in keep]:
            del self._notifiers[name]
            self._buckets.pop(name, None)
            for where in [where for where in self._scopes if where[0] == name]:
                self._scopes.pop(where).cancel()
            dropped = []
            for where in [where for where in self._queues if where[0] == name]:
                dropped += [item for _, _, item in self._queues.pop(where)]
                self._wake.pop(where, None)
            for item in dropped:
                await self._outbox.failed(item, self._clock.now(), "its notifier was removed from the config")
            for active in self._active.values():
                active.notifiers = tuple(n for n in active.notifiers if n != name)
                active.told.pop(name, None)
            log.info("notifier removed", notifier=name, alerts_dropped=len(dropped))
        self._on_change()

    async def say(
        self,
        alert: Alert,
        notifiers: Sequence[Notifier],
        *,
        enqueue: bool = True,
        key: str | None = None,
        announce: tuple[str, int, str] | None = None,
    ) -> bool:
        """Enqueue `alert` for each of `notifiers` that says its kind (unless its launch is silenced).

        A problem becomes active, for its resolution, reminders and re-sends, and is kept in the state file with
        the alert's rows (a restarted daemon still resolves it). `enqueue=False` only makes it active, in
        memory. `key` replaces the outbox key (`Alert.dedup_key`): a launch's second stall in one incarnation
        is another alert than its first. `announce` (launch, incarnation, verdict key): the verdict this says,
        noted as announced in the same transaction; returns whether that was written (else the caller notes
        it: its incarnation is not in the file yet, or the file cannot be written now).
        """
        key = key or alert.dedup_key
        self.use(notifiers)
        # a silence holds back what a notifier would say: with none to say it, there is nothing to look up
        heard = any(alert.kind in n.on for n in notifiers)
        silenced = enqueue and heard and await self._is_silenced(alert.launch)
        opened = None
        if alert.kind in PROBLEMS:
            now = self._clock.monotonic()
            # who heard it: they hear its end (a notifier that does not say this kind hears neither)
            told = {} if silenced else {n.name: now for n in notifiers if alert.kind in n.on}
            names = tuple(n.name for n in notifiers)
            began = now - max(0.0, self._clock.now() - alert.started_at.timestamp())
            self._active[(alert.launch, alert.kind)] = _Active(alert, names, told, key, began=began)
            if told or self._outbox.keeps(alert.launch, alert.kind.value):  # else no row is needed (`Outbox`)
                opened = Problem(
                    alert.launch,
                    alert.kind.value,
                    key,
                    alert.to_dict(),
                    names,
                    tuple(told),
                    self._clock.now(),
                )
        if not enqueue:
            return False
        if silenced:
            self.silenced[alert.launch] += 1
            log.info("alert silenced", launch=alert.launch, kind=alert.kind.value)
        said = [] if silenced else [n for n in notifiers if alert.kind in n.on]
        return await self._enqueue(alert, said, key, Notes(announced=announce, opened=opened))

    async def resolve(self, launch: str, problems: Iterable[AlertKind], detail: str = "") -> None:
        """End the active problems of `launch` of these kinds: each notifier told of one hears it ended."""
        for kind in problems:
            active = self._active.pop((launch, kind), None)
            if active is None:
                continue
            told = [
                notifier
                for name in active.notifiers
                if name in active.told
                and (notifier := self._notifiers.get(name)) is not None
                and AlertKind.RESOLVED in notifier.on
            ]
            if not told and not self._outbox.keeps(launch, kind.value):
                continue  # told to no one, kept nowhere (`Outbox.keeps`): nothing to end
            resolution = active.alert.resolution(datetime.fromtimestamp(self._clock.now(), UTC), detail)
            key = f"{active.key}/resolved" if active.key else None
            await self._enqueue(resolution, told, key, Notes(closed=(launch, kind.value)))

    def active(self) -> list[tuple[str, AlertKind]]:
        """The problems said and not resolved: (launch, kind)."""
        return list(self._active)

    def is_active(self, launch: str, kind: AlertKind) -> bool:
        """Whether this problem of `launch` was said and is not resolved."""
        return (launch, kind) in self._active

    def _restore(self, problems: Iterable[Problem]) -> None:
        # what a daemon before this one said and did not resolve: active again, to be resolved once
        now = self._clock.monotonic()
        for problem in problems:
            try:
                alert, kind = Alert.from_dict(problem.alert), AlertKind(problem.kind)
            except (KeyError, ValueError) as exc:
                log.warning("problem unreadable; not resolved", launch=problem.launch, error=str(exc))
                continue
            told = dict.fromkeys(problem.told, now)
            # its repeats numbered on past those of the daemon before (their outbox keys stay unique)
            repeats = Counter(dict.fromkeys(problem.told, int(self._clock.now())))
            began = now - max(0.0, self._clock.now() - alert.started_at.timestamp())
            self._active[(problem.launch, kind)] = _Active(
                alert, problem.notifiers, told, problem.key, repeats, began
            )
        if self._active:
            log.info("problems still open", problems=len(self._active))

    # -- delivery ----------------------------------------------------------------------------------------

    async def _enqueue(
        self, alert: Alert, notifiers: Iterable[Notifier], key: str | None = None, notes: Notes | None = None
    ) -> bool:
        targets = [(n.name, n.destinations) for n in notifiers]
        if not targets and not notes:
            return False
        items, noted = await self._outbox.put_all(
            targets, key or alert.dedup_key, alert.to_dict(), self._clock.now(), notes
        )
        for item in items:
            self._push(item)
        return noted

    def _push(self, item: Item) -> None:
        where = (item.notifier, item.destination)
        if item.due is None:
            item.due = self._clock.monotonic() + self._wait_from_file(item)
        heapq.heappush(self._queues.setdefault(where, []), (item.due, item.id, item))
        wake = self._wake.get(where)
        if wake is not None:
            wake_up(wake)
        self._wake[where] = asyncio.get_running_loop().create_future()
        self._start_worker(item.notifier)

    def _wait_from_file(self, item: Item) -> float:
        """How long an item read from the file still waits, on the monotonic clock, from now.

        Its `next_try` is unix time, written by a daemon whose wall clock may have been ahead (or read after the
        clock was stepped back): an item never tried waits for nothing, and a next try further ahead than the
        longest backoff (`retry_max`) is taken for a step of the clock, not a backoff: due now (a receiver that
        asked for a longer Retry-After answers so again). Only a plausible backoff is waited out, for what is
        left of it.
        """
        if item.attempts == 0:
            return 0.0
        wait = item.next_try - self._clock.now()
        return wait if 0.0 < wait <= self._retry_max else 0.0

    def _start_worker(self, name: str) -> None:
        notifier = self._notifiers.get(name)
        if self._tg is None or notifier is None:
            return
        wanted = {(name, d) for d in range(notifier.destinations)}
        wanted |= {where for where in self._queues if where[0] == name}  # what the outbox holds for it
        for where in sorted(wanted - self._scopes.keys()):
            self._scopes[where] = scope = anyio.CancelScope()
            if where not in self._wake:
                self._wake[where] = asyncio.get_running_loop().create_future()
            self._tg.start_soon(self._work, where, scope)

    async def _work(self, where: tuple[str, int], scope: anyio.CancelScope) -> None:
        RETRY_SLEEP.set(self._clock.sleep)  # a delivery's retries wait on this clock (this task's context)
        name = where[0]
        queue = self._queues.setdefault(where, [])
        with scope:
            while True:
                wake = self._wake[where]
                if wake.done():  # its wait timed out (the clock's timer sets it) or was cancelled: a new one
                    wake = self._wake[where] = asyncio.get_running_loop().create_future()
                if not queue:
                    await wake
                    continue
                due, _, item = queue[0]
                pause = due - self._clock.monotonic()
                if pause > 0:
                    await self._clock.sleep(pause, wake)
                    continue
                heapq.heappop(queue)
                self._in_flight += 1  # still not delivered: counted until it is, or is back in its queue
                try:
                    notifier = self._notifiers[name]
                    await self._buckets[name].take()
                    await self._deliver(notifier, item)
                finally:
                    self._in_flight -= 1
                self._on_change()

    async def _deliver(self, notifier: Notifier, item: Item) -> None:
        assert self._client is not None
        try:
            alert = Alert.from_dict(item.alert)
            said = await notifier.send(alert, item.destination, self._client)
        except TransientDeliveryError as exc:
            await self._retry(item, str(exc), exc.retry_after)
        except DeliveryError as exc:
            item.attempts += 1
            self.failed[notifier.name] += 1
            log.warning("alert refused; given up", notifier=notifier.name, key=item.key, error=str(exc))
            await self._outbox.failed(item, self._clock.now(), str(exc))
        except (KeyError, ValueError) as exc:
            self.failed[notifier.name] += 1
            # said in words: a KeyError's repr (`KeyError('started_at')`) is no message for a person
            why = (
                f"its field {exc.args[0]} is missing" if isinstance(exc, KeyError) and exc.args else str(exc)
            )
            log.error("outbox item unreadable; given up", notifier=notifier.name, key=item.key, error=why)
            await self._outbox.failed(item, self._clock.now(), f"unreadable: {why}")
        except Exception as exc:  # a notifier's own bug must not end delivery: logged, tried again later
            log.exception("notifier failed", notifier=notifier.name, key=item.key)
            await self._retry(item, f"{type(exc).__name__}: {exc}", None)
        else:
            item.attempts += 1
            # noted first: the log line means it is kept
            await self._outbox.delivered(item, self._clock.now())
            if said:
                self.sent[notifier.name] += 1
                log.info("alert delivered", notifier=notifier.name, key=item.key, attempts=item.attempts)

    async def _retry(self, item: Item, error: str, retry_after: float | None) -> None:
        item.attempts += 1
        if retry_after is None:
            pause = backoff(item.attempts - 1, first=self._retry_base, cap=self._retry_max, jitter=AT_LEAST)
        else:
            pause = retry_after
        item.next_try = self._clock.now() + pause  # kept in the file (a restart schedules it from there)
        item.due = self._clock.monotonic() + pause
        log.warning(
            "alert not delivered yet; trying again",
            notifier=item.notifier,
            key=item.key,
            in_seconds=round(pause, 1),
            error=error,
        )
        await self._outbox.retry(item, error)
        self._push(item)

    # -- repeats -----------------------------------------------------------------------------------------

    async def _repeat_loop(self) -> None:
        while True:
            await self._clock.sleep(self._repeat_check)
            await self._repeat()

    async def _repeat(self) -> None:
        now = self._clock.monotonic()
        for active in list(self._active.values()):
            for name in active.notifiers:
                notifier = self._notifiers.get(name)
                last = active.told.get(name)
                if notifier is None or last is None or active.alert.kind not in notifier.on:
                    continue  # silenced when it happened, or not a kind this notifier says
                resend, remind = notifier.resend_every, notifier.remind_every
                if resend is not None and now - last >= resend:
                    alert, what = active.alert, "resend"
                elif remind is not None and now - last >= remind:
                    since = format_duration(now - active.began)
                    note = f"still unresolved after {since} (since {rfc3339(active.alert.started_at)})"
                    alert = dataclasses.replace(active.alert, detail=note)
                    what = "reminder"
                else:
                    continue
                active.told[notifier.name] = now
                active.repeats[notifier.name] += 1
                key = f"{active.key or active.alert.dedup_key}{REPEAT}{what}-{active.repeats[notifier.name]}"
                await self._enqueue(alert, [notifier], key)

    async def _prune_loop(self) -> None:
        while True:
            await self._clock.sleep(PRUNE_EVERY_SECONDS)
            await self._outbox.prune(self._clock.now())  # an error is logged, and pruning goes on

    async def _is_silenced(self, launch: str) -> bool:
        if self._silences is None:
            return False
        until = (await self._silences()).get(launch)
        return until is not None and until > self._clock.now()
