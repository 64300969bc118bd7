"""What the daemon says when: a new start, a verdict (once per incarnation and key, across restarts: the
announcement dedup), progress that resolves a stall, a host's outage past its grace and its end."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import structlog

from watchdog.alerts.alert import HOST_LAUNCH_PREFIX, PROBLEMS
from watchdog.alerts.alerting import Alerting
from watchdog.alerts.notifiers import Alert, AlertKind
from watchdog.clock import Clock
from watchdog.core.lifecycle import State
from watchdog.core.serving import RESUMED as SERVING_RESUMED
from watchdog.core.verdict import Status, Verdict
from watchdog.daemon.launches import Follower, LaunchPlan, Running
from watchdog.daemon.outages import Host, Outages
from watchdog.exceptions import reason_of
from watchdog.follow.follower import Concluded
from watchdog.vocabulary import PROBLEM_STATES, UNBEGUN_STATES, Category

if TYPE_CHECKING:
    from watchdog.store import StateStore

__all__ = ["Announcer"]

log = structlog.get_logger("watchdog.daemon")

_ALERT_KINDS = {
    State.CRASHED: AlertKind.CRASHED,
    State.STALLED: AlertKind.STALLED,
    State.READY: AlertKind.READY,
}
UNREACHABLE_CHECK_SECONDS = 1.0  # how often hosts that cannot be reached are checked against their grace


class Announcer:
    """The alert policy of the daemon's launches and hosts, said through `Alerting`, noted in the store."""

    def __init__(
        self,
        alerting: Alerting,
        store: StateStore | None,
        *,
        clock: Clock,
        link: Callable[[str], str],
        change: Callable[[], None],
        crashes: Counter[tuple[str, str, Category]],
    ) -> None:
        """`link(name)` is a launch's address on the status page; `change()` is called when a status changed;
        `crashes` counts the crashes announced, by (launch, host, category)."""
        self._alerting = alerting
        self._store = store
        self._clock = clock
        self._link = link
        self._change = change
        self.crashes = crashes

    async def transitioned(
        self, run: Running, follower: Follower, incarnation: int, state: State, reason: str
    ) -> None:
        # a new start resolves the old one's problems and is said; progress again resolves a stall
        name = run.plan.spec.name
        if incarnation < run.incarnation:
            return  # an earlier launch of a log read again from its start: said and resolved before
        if incarnation > run.incarnation:
            if run.incarnation:
                await self._alerting.resolve(
                    name, (AlertKind.CRASHED, AlertKind.STALLED), f"a new start (#{incarnation}) began"
                )
                await self._replaced(run, follower, incarnation, reason)
            run.incarnation, run.began = incarnation, False
        if state not in UNBEGUN_STATES:
            run.began = True
        if state not in PROBLEM_STATES:
            # a serving hang's end says how it ended: tokens flow again, or no request is left
            said = f": {reason}" if state is State.READY and reason in SERVING_RESUMED else ""
            await self._alerting.resolve(name, (AlertKind.STALLED,), f"progress again: {state.value}{said}")

    async def _replaced(self, run: Running, follower: Follower, incarnation: int, reason: str) -> None:
        # a new start, said to the notifiers that say one; with none, no status is made for it (a crash loop's
        # every relaunch): `say` would enqueue nothing
        if not any(AlertKind.REPLACED in n.on for n in run.plan.alerts):
            self._alerting.use(run.plan.alerts)  # known and delivered to, as `say` makes them
            return
        name = run.plan.spec.name
        status = follower.status()
        status = replace(
            status,
            verdict=replace(status.verdict, incarnation=incarnation),
            host=run.plan.host,
            labels=tuple(run.plan.labels.items()),
        )
        alert = Alert.from_status(AlertKind.REPLACED, status, link=self._link(name), detail=reason)
        await self._alerting.say(alert, run.plan.alerts)

    async def conclude(self, run: Running, update: Concluded) -> None:
        name, verdict = run.plan.spec.name, update.verdict
        incarnation = verdict.incarnation
        said = _verdict_key(update.state, verdict)
        key = (incarnation, said)
        if key in run.announced:
            return
        run.announced.add(key)
        if update.state == State.CRASHED:
            category = verdict.error.category if verdict.error is not None else Category.OTHER
            self.crashes[(name, run.plan.host, category)] += 1
            if incarnation >= run.incarnation:
                await self._alerting.resolve(name, (AlertKind.STALLED,), "it crashed")
        announced = marked = False
        kind = _ALERT_KINDS.get(update.state)
        # said to no one (no notifier says its kind): no outbox row to note the announcement with, so the store
        # notes it with the verdict, in one write
        quiet = kind is not None and not any(kind in n.on for n in run.plan.alerts)
        if self._store is not None:
            try:  # a file that cannot be written keeps the verdict for later (`StateStore.failing`)
                announced = await self._store.record_verdict(name, incarnation, verdict, said, announce=quiet)
                marked = quiet
            except Exception as exc:  # a damaged file: the alert is said (again, rather than never)
                log.warning("verdict not stored", launch=name, incarnation=incarnation, error=reason_of(exc))
        if kind is None:
            return
        if announced:
            # said before a restart: its problem, if still open, is in the state file with it (`Alerting`)
            log.info("already announced", launch=name, state=update.state.value, incarnation=incarnation)
            return
        # enqueued in the durable outbox, then delivered by the notifiers' own tasks: never slows the follower;
        # the announcement is noted in the same transaction as the outbox rows (never said twice, nor lost)
        outbox = f"{name}/{incarnation}/{said}" if said != update.state.value else None
        announce = (name, incarnation, said) if self._store is not None and not marked else None
        if quiet and announce is None and kind not in PROBLEMS:
            # said to no one, nothing to note (the store noted it with the verdict, or there is no store), and no
            # problem that stays active: all `say` would do is know the notifiers, so the alert is not made (a
            # ready verdict, which notifiers do not say unless asked: `DEFAULT_ON`)
            self._alerting.use(run.plan.alerts)
            noted = False
        else:
            status = replace(
                _timing(run.follower, verdict),
                name=name,
                host=run.plan.host,
                labels=tuple(run.plan.labels.items()),
            )
            usual = sum(run.typical.values()) if run.typical else None
            alert = Alert.from_status(kind, status, link=self._link(name), usual_seconds=usual)
            noted = await self._alerting.say(alert, run.plan.alerts, key=outbox, announce=announce)
        if self._store is not None and announce is not None and not noted:
            try:  # its incarnation not in the file yet, or the file cannot be written: kept, written later
                await self._store.mark_announced(name, incarnation, said)
            except Exception as exc:
                log.warning(
                    "announcement not stored", launch=name, incarnation=incarnation, error=reason_of(exc)
                )
        log.info("announced", launch=name, state=update.state.value, incarnation=incarnation)
        if incarnation < run.incarnation and kind in PROBLEMS:
            # a crash (or stall) of a launch already relaunched (both in one read, or while the daemon was
            # down): said, and ended by the new start as at once
            await self._alerting.resolve(name, (kind,), f"a new start (#{run.incarnation}) began")
        self._change()

    async def host_answers(self, host: Host) -> None:
        """`host` answered: its outage is over; resolved if it was said, by this daemon or the one before it
        (still open in the state file)."""
        launch = f"{HOST_LAUNCH_PREFIX}{host.name}"
        if host.up() or self._alerting.is_active(launch, AlertKind.UNREACHABLE):
            log.info("host answers again", host=host.name)
            await self._alerting.resolve(launch, (AlertKind.UNREACHABLE,), "connected again")

    async def watch_outages(self, outages: Outages, plans: Callable[[str], list[LaunchPlan]]) -> None:
        """Say a host that stays unreachable past its grace, once per outage, naming its launches
        (`plans(host)`; a host no launch is on is not said); resolved when it answers again."""
        while True:
            await self._clock.sleep(UNREACHABLE_CHECK_SECONDS)
            for host in outages.overdue():
                on = plans(host.name)
                if not on or not outages.is_overdue(host):  # no launch on it, or it answered meanwhile
                    continue
                host.said = True
                notifiers = list({n.name: n for plan in on for n in plan.alerts}.values())
                launches = sorted(plan.spec.name for plan in on)
                assert host.down_since is not None
                alert = Alert.host_unreachable(
                    host.name,
                    launches,
                    since=datetime.fromtimestamp(host.down_since, UTC),
                    error=host.error,
                    link=self._link(launches[0]) if len(launches) == 1 else self._link(""),
                )
                log.warning("host unreachable", host=host.name, launches=len(launches), error=host.error)
                await self._alerting.say(alert, notifiers)
                self._change()


def _verdict_key(state: State, verdict: Verdict) -> str:
    """What a verdict is announced (and stored) as: its state; a launch that stalls again in the same
    incarnation (after progress resumed) stalls anew: `stalled#2`, `stalled#3`, ..."""
    if state is not State.STALLED or verdict.stalls <= 1:
        return state.value
    return f"{state.value}#{verdict.stalls}"


def _timing(follower: Follower | None, verdict: Verdict) -> Status:
    """A verdict with what it lacks for its alert (time in phase, since start, the last line): the follower's
    clock and last line, when it still reports the verdict's incarnation."""
    now = follower.timing(verdict.incarnation) if follower is not None else None
    if now is None:
        return Status(verdict)
    return Status(verdict, elapsed=now[0], last_line=now[1])
