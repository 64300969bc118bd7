"""The daemon: follows many launches at once, keeps following after each verdict, and serves what it sees.

One `Daemon` runs one `LaunchFollower` per planned launch, each in its own cancel scope (one launch's failure
never disturbs another: a follower that fails is started again after a pause), one SSH pool per host shared
by that host's launches, the HTTP server (/metrics, /status, /healthz, the status page) and, under systemd,
the notify protocol (READY=1 once the port is bound and the launches started, WATCHDOG=1 from the event loop,
STATUS=, STOPPING=1). SIGHUP reloads the plan (added launches start, removed ones stop, changed ones restart,
unchanged ones are not touched); SIGTERM or SIGINT stops gracefully, a second one at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from watchdog.alerts.alert import PROBLEMS
from watchdog.alerts.alerting import Alerting
from watchdog.alerts.notifiers import Alert, AlertKind
from watchdog.alerts.outbox import Outbox
from watchdog.alerts.senders import ConsoleAlerts, Notifier
from watchdog.backoff import NO_JITTER, backoff
from watchdog.core.expectations import LEARN_FACTOR, eta_to_ready, learned_deadlines, typical_durations
from watchdog.core.lifecycle import State
from watchdog.core.verdict import Status, Unreachable, Verdict
from watchdog.daemon import hangup
from watchdog.daemon.metrics import DaemonStats
from watchdog.daemon.sdnotify import SystemdNotifier, watchdog_interval
from watchdog.exceptions import ConnectionLost, PermanentError, WatchdogError, first_watchdog_error
from watchdog.follow.follower import Concluded, LaunchFollower, LaunchSpec, SourceNoted, Transitioned
from watchdog.follow.probes.gpusampler import HostGpuSampler
from watchdog.follow.sources import SSHOptions, SSHPool
from watchdog.profiles.loader import preload_profiles
from watchdog.vocabulary import (
    DEFAULT_UNREACHABLE_AFTER,
    EXIT_INTERRUPTED,
    PROBLEM_STATES,
    UNBEGUN_STATES,
    Category,
    format_duration,
)

if TYPE_CHECKING:
    from watchdog.store import IncarnationRecord, StateStore

__all__ = ["ConsoleAlerts", "Daemon", "LaunchPlan"]

log = structlog.get_logger("watchdog.daemon")

RESTART_PAUSE = 5.0  # seconds before a follower that failed is started again
REFUSED_PAUSE_MAX = 300.0  # a host that refuses us for good is tried again after 5 s, 10 s, ... at most this
HISTORY_SAMPLES = 50  # past incarnations a launch's expectations are learned from
HISTORY_ALL = 1 << 30  # every incarnation the state file keeps (at most MAX_INCARNATIONS_PER_LAUNCH a launch)
_ALERT_KINDS = {
    State.CRASHED: AlertKind.CRASHED,
    State.STALLED: AlertKind.STALLED,
    State.READY: AlertKind.READY,
}
DRAIN_SECONDS = 5.0  # a graceful stop waits this long at most for the alerts being delivered
UNREACHABLE_CHECK_SECONDS = 1.0  # how often hosts that cannot be reached are checked against their grace
HOST_PREFIX = "host:"  # a host's outage is an alert about "host:NAME", not about each of its launches


@dataclass(frozen=True)
class LaunchPlan:
    """One launch as the daemon runs it: its spec, where it is, and who hears of its verdicts."""

    spec: LaunchSpec
    host: str = ""  # the configured host's name; "" for a file on this machine
    ssh: SSHOptions | None = None  # how to reach the host (one pool per host name)
    labels: Mapping[str, str] = field(default_factory=dict)
    alerts: tuple[Notifier, ...] = ()  # who hears of its alerts (each says the kinds in its `on`)
    learned_factor: float | None = LEARN_FACTOR  # phases past this x their usual p95 are stalled; None: off


@dataclass
class _Running:
    plan: LaunchPlan
    scope: anyio.CancelScope
    follower: LaunchFollower | None = None
    since: float = field(default_factory=time.time)  # Unix time its follow began (again: a new follower)
    announced: set[tuple[int, str]] = field(default_factory=set)
    typical: dict[str, float] = field(default_factory=dict)  # usual phase durations, from the history
    failures: int = 0
    streak: int = 0  # failures in a row, since its follower last got to read its log: its backoff
    said: str = ""  # the failure last logged (a streak logs its reason once, not at each try)
    note: str = ""
    incarnation: int = 0  # the newest incarnation seen (or stored, at the start)
    began: bool = True  # ... and it began (it is not a log that never came: a relaunch is numbered after it)
    effects: Any = None  # the send side of the launch's queue of slow work (store, alerts), in order
    history: list[IncarnationRecord] | None = None  # its past incarnations, when loaded with the others'


@dataclass
class _Host:
    """One configured host as all its launches see it: one outage, one alert, one backoff."""

    name: str
    down_since: float | None = None  # unix time it stopped answering or refused us (None: it answers): shown
    down_at: float | None = None  # ... the same moment on the monotonic clock: what its grace is counted on
    error: str = ""  # what it said last
    said: bool = False  # this outage was alerted
    refused: bool = False  # it refuses for good (auth, host key): launches wait for `retry_at`
    refusals: int = 0  # refusals in a row: its backoff
    retry_at: float = 0.0  # monotonic time of the next attempt while refused
    trying: bool = False  # one launch makes that attempt; the others wait for its outcome
    wake: anyio.Event = field(default_factory=anyio.Event)

    def changed(self) -> None:
        wake, self.wake = self.wake, anyio.Event()
        wake.set()


class Daemon:
    """Runs the planned launches until cancelled or signalled; see the module docstring."""

    def __init__(
        self,
        plans: Mapping[str, LaunchPlan],
        *,
        reload: Callable[[], Awaitable[Mapping[str, LaunchPlan]]] | None = None,
        serve: Callable[..., Coroutine[Any, Any, None]] | None = None,
        store: StateStore | None = None,
        handle_signals: bool = True,
        public_url: str | None = None,
        listen_host: str = "127.0.0.1",
        unreachable_after: float = DEFAULT_UNREACHABLE_AFTER,
    ) -> None:
        """`plans` by launch name; `reload` gives the new plans on SIGHUP; `serve(daemon, task_status=)`
        runs the HTTP server (it calls `task_status.started(port)` once bound). With a `store`, transitions
        and verdicts are kept, and a verdict is announced once, across restarts: a restarted daemon resumes
        each log at its checkpoint (or reads it again from its start when the file changed) and announces only
        what it had not announced (what happened while it was down included). Alerts wait in the outbox (in the store's file, else in memory) until delivered;
        `public_url` is the status page's address in their links (default: http://LISTEN_HOST:PORT); a host
        that cannot be reached for `unreachable_after` seconds is an alert."""
        self._plans = dict(plans)
        self._reload = reload
        self._serve = serve
        self._store = store
        self._handle_signals = handle_signals
        self._running: dict[str, _Running] = {}
        self._pools: dict[str, SSHPool] = {}
        self._samplers: dict[str, HostGpuSampler] = {}  # by host name ("" for this machine)
        self._systemd = SystemdNotifier()
        self._tg: TaskGroup | None = None
        self._public_url = public_url
        self._listen_host = listen_host
        self._unreachable_after = unreachable_after
        self._alerting: Alerting | None = None
        self._hosts: dict[str, _Host] = {}
        self._reload_lock = anyio.Lock()
        self._reloads_asked = 0  # SIGHUPs (or calls) so far
        self._reloads_done = 0  # the asks the last reload answered
        self._outbox: Outbox | None = None
        self.crashes: Counter[tuple[str, str, Category]] = Counter()  # (launch, host, category)
        self._activity: dict[str, float] = {}  # launch -> Unix time its log last grew (see `stats`)
        self.started = anyio.Event()  # the port is bound and every launch has read its log as it was
        self.port: int | None = None  # the HTTP server's port, once bound
        self._changed: anyio.Event | None = None  # made by a waiter; set (and dropped) when a status changed
        self.stopping = False

    # -- what the HTTP server and the metrics read -------------------------------------------------------

    def statuses(self) -> list[Status]:
        """Where every launch stands: its follower's status, with its host, labels, since when it is followed,
        when its current incarnation began (as the follower saw it), its ETA, note and outage."""
        out = []
        for name, run in sorted(self._running.items()):
            host = self._hosts.get(run.plan.host)
            unreachable = None
            if host is not None and host.down_since is not None:  # the page and /status say it plainly
                unreachable = Unreachable(host.down_since, host.error, host.said)
            status = Status(Verdict.pending(), name=name) if run.follower is None else run.follower.status()
            v, note = status.verdict, run.note
            if v.missing_log is not None and v.missing_log.path:  # said for as long as it lasts
                waited = v.missing_log.seconds or 0.0
                note = f"{v.missing_log.path} does not exist (yet): waiting for it ({waited:g}s)"
            eta = began = None
            if status.elapsed is not None and v.timeline:
                eta = eta_to_ready(v, run.typical, status.elapsed - v.timeline[-1].entered)
                # its first timeline entry, on the follower's clock: a wall time
                began = time.time() - (status.elapsed - v.timeline[0].entered)
            elif status.elapsed is not None:
                eta = eta_to_ready(v, run.typical, 0.0)
            out.append(
                replace(
                    status,
                    host=run.plan.host,
                    labels=tuple(run.plan.labels.items()),
                    since=run.since,
                    incarnation_since=began,
                    eta=eta,
                    note=note,
                    unreachable=unreachable,
                )
            )
        return out

    def status_json(self) -> list[dict[str, Any]]:
        """/status: every launch's status as JSON (docs/contracts.md)."""
        return [status.to_json() for status in self.statuses()]

    def health(self) -> str | None:
        """What keeps the daemon from doing its whole job now (for /healthz), None when nothing does."""
        failing = (self._store.failing if self._store is not None else None) or (
            self._outbox.failing if self._outbox is not None else None
        )
        return f"the state file cannot be written ({failing})" if failing else None

    @property
    def alerts_sent(self) -> Counter[str]:
        """Alerts delivered, by notifier."""
        return self._alerting.sent if self._alerting is not None else Counter()

    @property
    def alerts_failed(self) -> Counter[str]:
        """Alerts given up (refused for good), by notifier."""
        return self._alerting.failed if self._alerting is not None else Counter()

    def stats(self) -> DaemonStats:
        """The daemon's own counters, for /metrics."""
        # every configured notifier has its counters from the start, at 0 (a series that appears only at its
        # first failure is one `increase()` and the dashboard do not see)
        notifiers = {n.name: 0 for plan in self._plans.values() for n in plan.alerts}
        # when each log last grew, kept across its follower's restarts (a new follower has read nothing yet)
        self._activity = {name: t for name, t in self._activity.items() if name in self._running}
        for name, run in self._running.items():
            last = run.follower.last_activity if run.follower is not None else None
            if last is not None and last > self._activity.get(name, 0.0):
                self._activity[name] = last
        return DaemonStats(
            crashes=dict(self.crashes),
            ssh_connected={host: pool.connected for host, pool in self._pools.items()},
            ssh_reconnects={host: pool.reconnects for host, pool in self._pools.items()},
            alerts_sent={**notifiers, **self.alerts_sent},
            alerts_failed={**notifiers, **self.alerts_failed},
            outbox_depth=self._alerting.depth() if self._alerting is not None else 0,
            last_log_activity=dict(self._activity),
        )

    async def wait_until(self, predicate: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        """Wait until `predicate(self.status_json())` holds (checked after every change); return that /status."""
        while True:
            changed = self._changed
            if changed is None:
                changed = self._changed = anyio.Event()
            statuses = self.status_json()
            if predicate(statuses):
                return statuses
            await changed.wait()

    def _change(self) -> None:
        # called for every update of every launch: an event is made only when someone waits for one
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def summary(self) -> str:
        """One line: how many launches are in which state (systemd's STATUS=)."""
        counts = Counter(s.state.value for s in self.statuses())
        parts = [f"{n} {state}" for state, n in sorted(counts.items())]
        return f"{len(self._running)} launches: " + (", ".join(parts) if parts else "none")

    # -- running ----------------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve and follow until cancelled (or SIGTERM/SIGINT when signals are handled)."""
        try:
            async with contextlib.AsyncExitStack() as stack, anyio.create_task_group() as tg:
                self._tg = tg
                stack.push_async_callback(self._close_pools)
                if self._handle_signals:
                    await tg.start(self._signals)
                outbox = self._outbox = await Outbox.open(
                    self._store.path if self._store is not None else None
                )
                stack.push_async_callback(outbox.close)
                silences = self._store.silences if self._store is not None else None
                self._alerting = Alerting(outbox, silences=silences, on_change=self._change)
                await tg.start(self._alerting.run)
                if self._store is not None:
                    await tg.start(self._store.write_behind)  # transitions written a batch at a time
                # every bundled profile read and compiled (a TOML file and many regexes each) off the event
                # loop, before the followers need them for the first engine detection
                await anyio.to_thread.run_sync(preload_profiles)
                if self._serve is not None:
                    self.port = await tg.start(self._serve, self)
                # before the launches start: a host down at the start (a black-holed one holds its launch's
                # start for its connect attempts) is said on time, not once every launch has started
                tg.start_soon(self._watch_unreachable)
                await self._apply(self._plans)
                self.started.set()
                self._systemd.notify("READY=1", f"STATUS={self.summary()}")
                task_status.started()
                interval = watchdog_interval()
                if interval is not None:
                    tg.start_soon(self._keepalive, interval)
        finally:
            self._systemd.notify("STOPPING=1")
            self._systemd.close()

    async def stop(self) -> None:
        """Stop every launch and the server (graceful: alerts due now are delivered first, for up to
        `DRAIN_SECONDS`; followers and connections close). What is not delivered waits in the outbox."""
        self.stopping = True
        self._systemd.notify("STOPPING=1")
        alerting = self._alerting
        if alerting is not None:
            with anyio.move_on_after(DRAIN_SECONDS):
                await self.wait_until(lambda _: alerting.depth() == 0)
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    async def reload(self) -> None:
        """Take the new plans: start added launches, stop removed ones, restart changed ones.

        Reloads run one at a time, in the order asked: one asked while another runs waits for it, and all
        those asked meanwhile are answered by one reload after it (the config read then is the newest).
        """
        if self._reload is None:
            return
        await self.started.wait()  # a SIGHUP while starting: the reload comes once the launches run
        self._reloads_asked += 1
        asked = self._reloads_asked
        async with self._reload_lock:
            if self._reloads_done >= asked:
                return  # a reload that began after this was asked has read the config
            self._reloads_done = self._reloads_asked
            try:
                plans = await self._reload()
            except WatchdogError as exc:
                log.error("reload refused; the running configuration stays", error=str(exc))
                return
            for host in self._hosts.values():
                host.retry_at = 0.0  # a reload is the operator's word that something was fixed: try again now
                host.refusals = 0
                host.changed()
            changes = await self._apply(plans)
            log.info("reloaded", launches=len(plans), **{k: sorted(v) for k, v in changes.items()})
            self._systemd.notify(f"STATUS={self.summary()}")

    async def _apply(self, plans: Mapping[str, LaunchPlan]) -> dict[str, list[str]]:
        """Run these plans; return the launch names added, removed and restarted (changed)."""
        assert self._tg is not None
        changes: dict[str, list[str]] = {"added": [], "removed": [], "restarted": []}
        for name in list(self._running):
            if name not in plans or plans[name] != self._running[name].plan:
                self._running.pop(name).scope.cancel()
                changes["removed" if name not in plans else "restarted"].append(name)
        self._plans = dict(plans)
        assert self._alerting is not None
        # notifiers no longer configured stop (their queued alerts dropped): none keeps a secret URL at work
        await self._alerting.use_only([n for plan in plans.values() for n in plan.alerts])
        await self._resolve_unplanned(plans)
        starting = []
        for name, plan in plans.items():
            if name not in self._running:
                run = _Running(plan, anyio.CancelScope())
                self._running[name] = run
                starting.append(run)
                if name not in changes["restarted"]:
                    changes["added"].append(name)
        if starting and self._store is not None:
            # numbered on from the last incarnation stored: a relaunch while the daemon was down is the next
            last = await self._store.last_incarnations()
            for run in starting:
                run.incarnation, run.began = last.get(run.plan.spec.name, (0, False))
        if len(starting) > 1 and self._store is not None:
            # one query (one trip to the store's thread) for every launch starting, not one each: at a cold
            # start of 200 launches, 200 queries queued behind one another before the first log was read
            wanted = {run.plan.spec.name: run for run in starting}
            found: dict[str, list[IncarnationRecord]] = {name: [] for name in wanted}
            for record in await self._store.history(None, limit=HISTORY_ALL):  # newest first
                mine = found.get(record.launch)
                if mine is not None and len(mine) < HISTORY_SAMPLES:
                    mine.append(record)
            for name, records in found.items():
                wanted[name].history = records
        async with anyio.create_task_group() as first_reads:
            for run in starting:
                # each returns once the launch's follower has read the log as it was (or failed to start):
                # `_launch` reports started even when its follower fails
                first_reads.start_soon(self._tg.start, self._launch, run)
        self._change()
        return changes

    async def _launch(self, run: _Running, *, task_status: TaskStatus[None]) -> None:
        plan = run.plan
        host = self._host(plan)
        started = False
        with run.scope:
            send, receive = anyio.create_memory_object_stream[Callable[[], Awaitable[None]]](math.inf)
            run.effects = send
            async with send, anyio.create_task_group() as effects:
                effects.start_soon(self._effects, run, receive)
                while True:
                    pause = RESTART_PAUSE
                    trying = False
                    try:
                        if host is not None and host.refused:
                            if not started:  # a launch waiting out its host's refusal holds up no one
                                started = True
                                task_status.started()
                            trying = await self._wait_turn(run, host)
                            if not trying:
                                continue  # the host answered another launch: go at once
                        spec = await self._learned(run)
                        follower = LaunchFollower(
                            spec,
                            pool=self._pool(plan),
                            gpu_sampler=self._sampler(plan),
                            checkpoints=self._store,
                            # a launch whose log never came goes on with its pending incarnation
                            numbered_after=run.incarnation if run.began else max(0, run.incarnation - 1),
                        )
                        run.follower = follower
                        run.since = time.time()
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(self._consume, run, follower)
                            await tg.start(follower.run)
                            run.streak, run.said = 0, ""  # it reads: a later failure starts a new streak
                            await self._reachable(run)
                            trying = False
                            if not started:
                                started = True
                                task_status.started()
                        run.note = "the log's source ended; following it again"
                    except Exception as exc:  # one launch's failure never disturbs another
                        pause = self._failed(run, host, _cause(exc), trying=trying)
                        trying = False
                    finally:
                        if trying and host is not None:
                            host.trying = False  # cancelled or failed: another launch may try
                            host.changed()
                    if not started:
                        started = True
                        task_status.started()
                    if pause:
                        await anyio.sleep(pause)

    def _failed(self, run: _Running, host: _Host | None, exc: BaseException, *, trying: bool) -> float:
        """Say what a follower's failure means (by the exception tree); return the pause before the next try.

        A host that refuses us for good (a `PermanentError`: auth, host key, or an SSH config that cannot be
        parsed: it refuses again whatever we do until a person fixes it) is an outage of the host that waits
        its backoff, shared by its launches, until then, a reload or a changed config; one that cannot be
        reached is an outage of the host (alerted once, for all its launches, past its grace); a file or reader problem is this launch's note; a state file problem and anything else (a bug) are the
        daemon's own, logged as errors, never an outage.
        """
        run.failures += 1
        run.streak += 1
        self._change()
        name = run.plan.spec.name
        reason = _reason(exc)
        if host is not None and isinstance(exc, PermanentError):
            self._host_down(host, reason)
            if not host.refused or trying:  # the first refusal, or the one attempt of this backoff
                host.refused, host.trying = True, False
                host.refusals += 1
                pause = backoff(
                    host.refusals - 1, first=RESTART_PAUSE, cap=REFUSED_PAUSE_MAX, jitter=NO_JITTER
                )
                host.retry_at = time.monotonic() + pause
                log.error("host refused us", host=host.name, error=reason, next_try_in=pause)
                host.changed()
            run.note = f"refused: {reason}; trying again in {format_duration(max(0.0, host.retry_at - time.monotonic()))}"
            return 0.0  # the wait is the host's (`_wait_turn`)
        run.note = f"follower failed: {reason}; trying again in {RESTART_PAUSE:g}s"
        if host is not None and isinstance(exc, ConnectionLost):
            self._host_down(host, reason)
            if host.refused:  # it answered, if not with a session: no longer a refusal to wait out
                host.refused, host.trying = False, False
                host.changed()
            log.warning("launch follower failed", launch=name, host=host.name, error=reason)
        elif isinstance(exc, sqlite3.Error):
            run.note = f"state file problem: {reason}; trying again in {RESTART_PAUSE:g}s"
            log.error("state file problem", launch=name, error=reason, state_file=self._state_file())
        elif isinstance(exc, WatchdogError):
            # the file or its reader: this launch's, not the host's. One that fails again and again (a reader
            # that answers garbage) waits a pause that doubles per failure in a row, up to REFUSED_PAUSE_MAX,
            # and its reason is logged once a streak (a lost host is tried again soon: its outage is the host's)
            pause = backoff(run.streak - 1, first=RESTART_PAUSE, cap=REFUSED_PAUSE_MAX, jitter=NO_JITTER)
            run.note = f"follower failed: {reason}; trying again in {pause:g}s"
            if run.said != reason:
                log.warning("launch follower failed", launch=name, error=reason, next_try_in=pause)
            run.said = reason
            return pause
        else:
            run.note = f"internal error: {reason}; trying again in {RESTART_PAUSE:g}s"
            log.error("internal error", launch=name, error=reason, exc_info=exc)
        return RESTART_PAUSE

    async def _wait_turn(self, run: _Running, host: _Host) -> bool:
        """Wait while `host` refuses us: True when this launch is the one to try again (its outcome is the
        host's), False when the host answered another launch (or a reload asked for a try: go)."""
        while host.refused:
            if not host.trying and time.monotonic() >= host.retry_at:
                host.trying = True
                return True
            run.note = f"refused: {host.error}; trying again in {format_duration(max(0.0, host.retry_at - time.monotonic()))}"
            wake = host.wake
            with anyio.move_on_after(math.inf if host.trying else host.retry_at - time.monotonic()):
                await wake.wait()
        return False

    def _state_file(self) -> str:
        return str(self._store.path) if self._store is not None else ""

    async def _learned(self, run: _Running) -> LaunchSpec:
        # the launch's own history: its usual phase lengths (for the ETA) and the deadlines they imply
        spec = run.plan.spec
        if self._store is None:
            return spec
        history, run.history = run.history, None  # loaded with the others' at the start; asked anew after
        if history is None:
            history = await self._store.history(spec.name, limit=HISTORY_SAMPLES)
        records = [{"state": r.state, "phase_durations": r.phase_durations} for r in history]
        run.typical = typical_durations(records)
        if run.plan.learned_factor is None:
            return spec
        deadlines = learned_deadlines(records, dict(spec.deadlines), factor=run.plan.learned_factor)
        return dataclasses.replace(spec, deadlines=tuple(sorted(deadlines.items())))

    async def _consume(self, run: _Running, follower: LaunchFollower) -> None:
        # What each update means for the status is taken at once; what waits on the disk or the network (the
        # store's verdicts, the outbox, the silences) goes to the launch's own queue (`_effects`), in order:
        # a slow or locked state file never holds up the reading.
        name = run.plan.spec.name
        effects = run.effects
        assert effects is not None
        with follower.updates:
            async for update in follower.updates:
                self._change()
                if isinstance(update, Transitioned):
                    t = update.transition
                    run.note = ""  # the log is being read: what the source said before is over
                    log.info("transition", launch=name, state=t.state.value, line=t.line, reason=t.reason)
                    if self._store is not None:
                        status = replace(
                            follower.status(), host=run.plan.host, labels=tuple(run.plan.labels.items())
                        )
                        # returns at once: the store's write-behind task writes it (`StateStore.write_behind`)
                        await self._store.record_transition(name, t.incarnation, status)
                    effects.send_nowait(
                        partial(self._transitioned, run, follower, t.incarnation, t.state, t.reason)
                    )
                elif isinstance(update, SourceNoted):
                    run.note = update.detail
                    log.info("source", launch=name, kind=update.kind, detail=update.detail)
                    host = self._hosts.get(run.plan.host)
                    if update.kind == "disconnected" and host is not None:
                        self._host_down(host, update.detail, since=update.since)
                    elif update.kind == "connected":
                        await self._reachable(run)
                elif isinstance(update, Concluded):
                    effects.send_nowait(partial(self._conclude, run, update))

    async def _effects(self, run: _Running, receive: Any) -> None:
        # the launch's slow work, one at a time in the order of its updates; a failure is logged, not fatal
        async with receive:
            async for effect in receive:
                try:
                    await effect()
                except sqlite3.Error as exc:
                    log.error(
                        "state file problem",
                        launch=run.plan.spec.name,
                        error=_reason(exc),
                        state_file=self._state_file(),
                    )
                except Exception as exc:  # a bug: said as one, and the launch goes on being followed
                    log.error("internal error", launch=run.plan.spec.name, error=_reason(exc), exc_info=exc)
                self._change()

    async def _transitioned(
        self, run: _Running, follower: LaunchFollower, incarnation: int, state: State, reason: str
    ) -> None:
        # a new start resolves the old one's problems and is said; progress again resolves a stall
        assert self._alerting is not None
        name = run.plan.spec.name
        if incarnation < run.incarnation:
            return  # an earlier launch of a log read again from its start: said and resolved before
        if incarnation > run.incarnation:
            if run.incarnation:
                await self._alerting.resolve(
                    name, (AlertKind.CRASHED, AlertKind.STALLED), f"a new start (#{incarnation}) began"
                )
                status = follower.status()
                status = replace(
                    status,
                    verdict=replace(status.verdict, incarnation=incarnation),
                    host=run.plan.host,
                    labels=tuple(run.plan.labels.items()),
                )
                alert = Alert.from_status(AlertKind.REPLACED, status, link=self._link(name), detail=reason)
                await self._alerting.say(alert, run.plan.alerts)
            run.incarnation, run.began = incarnation, False
        if state not in UNBEGUN_STATES:
            run.began = True
        if state not in PROBLEM_STATES:
            await self._alerting.resolve(name, (AlertKind.STALLED,), f"progress again: {state.value}")

    async def _conclude(self, run: _Running, update: Concluded) -> None:
        assert self._alerting is not None
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
        announced = False
        if self._store is not None:
            try:  # a file that cannot be written keeps the verdict for later (`StateStore.failing`)
                announced = await self._store.record_verdict(name, incarnation, verdict, said)
            except Exception as exc:  # a damaged file: the alert is said (again, rather than never)
                log.warning("verdict not stored", launch=name, incarnation=incarnation, error=_reason(exc))
        kind = _ALERT_KINDS.get(update.state)
        if kind is None:
            return
        if announced:
            # said before a restart: its problem, if still open, is in the state file with it (`Alerting`)
            log.info("already announced", launch=name, state=update.state.value, incarnation=incarnation)
            return
        status = replace(
            _timing(run.follower, verdict),
            name=name,
            host=run.plan.host,
            labels=tuple(run.plan.labels.items()),
        )
        usual = sum(run.typical.values()) if run.typical else None
        alert = Alert.from_status(kind, status, link=self._link(name), usual_seconds=usual)
        # enqueued in the durable outbox, then delivered by the notifiers' own tasks: never slows the follower;
        # the announcement is noted in the same transaction as the outbox rows (never said twice, nor lost)
        outbox = f"{name}/{incarnation}/{said}" if said != update.state.value else None
        announce = (name, incarnation, said) if self._store is not None else None
        noted = await self._alerting.say(alert, run.plan.alerts, key=outbox, announce=announce)
        if self._store is not None and not noted:
            try:  # its incarnation not in the file yet, or the file cannot be written: kept, written later
                await self._store.mark_announced(name, incarnation, said)
            except Exception as exc:
                log.warning(
                    "announcement not stored", launch=name, incarnation=incarnation, error=_reason(exc)
                )
        log.info("announced", launch=name, state=update.state.value, incarnation=incarnation)
        if incarnation < run.incarnation and kind in PROBLEMS:
            # a crash (or stall) of a launch already relaunched (both in one read, or while the daemon was
            # down): said, and ended by the new start as at once
            await self._alerting.resolve(name, (kind,), f"a new start (#{run.incarnation}) began")
        self._change()

    async def _resolve_unplanned(self, plans: Mapping[str, LaunchPlan]) -> None:
        # the problems of a launch no longer configured (removed by a reload or while the daemon was down, or
        # renamed), and the outage of a host no launch is on any more, end: each resolved once
        assert self._alerting is not None
        hosts = {plan.host for plan in plans.values() if plan.host}
        for launch, kind in self._alerting.active():
            if launch.startswith(HOST_PREFIX):
                host = launch.removeprefix(HOST_PREFIX)
                if host in hosts:
                    continue
                self._hosts.pop(host, None)
            elif launch in plans:
                continue
            log.info("problem resolved: removed from the configuration", launch=launch, kind=kind.value)
            await self._alerting.resolve(launch, (kind,), "removed from the configuration")

    def _host(self, plan: LaunchPlan) -> _Host | None:
        return self._hosts.setdefault(plan.host, _Host(plan.host)) if plan.host else None

    def _host_down(self, host: _Host, error: str, *, since: float | None = None) -> None:
        # the outage counts from when the first failed attempt began (`SourceNoted.since`, monotonic: a
        # black-holed host is said only at the end of its connect timeout), else from now; on the monotonic
        # clock, so that a step of the wall clock neither fires it early nor holds it
        now = time.monotonic()
        began = now if since is None else min(since, now)
        if host.down_at is None or began < host.down_at:
            host.down_at = began
            host.down_since = time.time() - (now - began)
        host.error = error  # the latest reason, not the first one of a long outage

    async def _reachable(self, run: _Running) -> None:
        host = self._hosts.get(run.plan.host)
        if host is None:
            return
        if host.refused or host.trying:
            host.refused = host.trying = False
            host.refusals = 0
            host.changed()  # its other launches go now
        host.down_since = host.down_at = None
        assert self._alerting is not None
        # its outage said by this daemon, or by the one before it (still open in the state file)
        if host.said or self._alerting.is_active(f"{HOST_PREFIX}{host.name}", AlertKind.UNREACHABLE):
            host.said = False
            log.info("host answers again", host=host.name)
            await self._alerting.resolve(
                f"{HOST_PREFIX}{host.name}", (AlertKind.UNREACHABLE,), "connected again"
            )

    async def _watch_unreachable(self) -> None:
        # a host that stays unreachable past its grace is said once per outage, naming its launches (resolved
        # when it answers again)
        assert self._alerting is not None
        while True:
            await anyio.sleep(UNREACHABLE_CHECK_SECONDS)
            now = time.monotonic()
            for host in list(self._hosts.values()):
                since, began = host.down_since, host.down_at
                if since is None or began is None or host.said or now - began < self._unreachable_after:
                    continue
                runs = [run for run in self._running.values() if run.plan.host == host.name]
                if not runs:
                    continue
                host.said = True
                notifiers = list({n.name: n for run in runs for n in run.plan.alerts}.values())
                launches = sorted(run.plan.spec.name for run in runs)
                alert = Alert.host_unreachable(
                    host.name,
                    launches,
                    since=datetime.fromtimestamp(since, UTC),
                    error=host.error,
                    link=self._link(launches[0]) if len(launches) == 1 else self._link(""),
                )
                log.warning("host unreachable", host=host.name, launches=len(launches), error=host.error)
                await self._alerting.say(alert, notifiers)
                self._change()

    def _link(self, name: str) -> str:
        base = self._public_url or (f"http://{self._listen_host}:{self.port}" if self.port else "")
        return f"{base}/#{quote(name)}" if base else ""

    def _pool(self, plan: LaunchPlan) -> SSHPool | None:
        if not plan.host:
            return None
        pool = self._pools.get(plan.host)
        if pool is None or (plan.ssh is not None and pool.options != plan.ssh):
            if pool is not None:  # a reload changed how to reach the host (a new key): connect anew
                assert self._tg is not None
                self._tg.start_soon(pool.aclose)
            pool = self._pools[plan.host] = SSHPool(plan.ssh)
        return pool

    def _sampler(self, plan: LaunchPlan) -> HostGpuSampler | None:
        # one per host, shared by its launches: each is charged with its own processes' GPU memory only
        if not plan.spec.gpu:
            return None
        sampler = self._samplers.get(plan.host)
        if sampler is None:
            target = plan.spec.target
            sampler = self._samplers[plan.host] = HostGpuSampler(
                pool=self._pool(plan),
                host=target.host,
                port=target.port,
                user=target.user,
                interval=plan.spec.gpu_interval,
            )
        return sampler

    async def _close_pools(self) -> None:
        with anyio.CancelScope(shield=True):
            for pool in self._pools.values():
                await pool.aclose()

    async def _keepalive(self, interval: float) -> None:
        while True:
            self._systemd.notify("WATCHDOG=1", f"STATUS={self.summary()}")
            await anyio.sleep(interval)

    async def _signals(self, *, task_status: TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(signal.SIGHUP, signal.SIGTERM, signal.SIGINT) as received:
            task_status.started()
            if hangup.take():  # a SIGHUP while `watchdog run` was starting: the reload it asked for
                assert self._tg is not None
                self._tg.start_soon(self.reload)
            async for signum in received:
                if signum == signal.SIGHUP:
                    assert self._tg is not None
                    self._tg.start_soon(self.reload)
                elif self.stopping:
                    log.warning("stopping at once", signal=signal.Signals(signum).name)
                    os._exit(EXIT_INTERRUPTED)  # the second SIGTERM/SIGINT: no more waiting on anything
                else:
                    log.info("stopping", signal=signal.Signals(signum).name)
                    await self.stop()


def _verdict_key(state: State, verdict: Verdict) -> str:
    """What a verdict is announced (and stored) as: its state; a launch that stalls again in the same
    incarnation (after progress resumed) stalls anew: `stalled#2`, `stalled#3`, ..."""
    if state is not State.STALLED or verdict.stalls <= 1:
        return state.value
    return f"{state.value}#{verdict.stalls}"


def _cause(exc: BaseException) -> BaseException:
    """The error a follower's failure is about: ours first, then a state file error, else the first leaf."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    ours = first_watchdog_error(exc)
    if ours is not None:
        return ours
    store = exc.subgroup(lambda e: isinstance(e, sqlite3.Error))
    leaf: BaseException = store if store is not None else exc
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


def _timing(follower: LaunchFollower | None, verdict: Verdict) -> Status:
    """A verdict with what it lacks for its alert (time in phase, since start, the last line): the follower's
    clock and last line, when it still reports the verdict's incarnation."""
    now = follower.status() if follower is not None else None
    if now is None or now.verdict.incarnation != verdict.incarnation:
        return Status(verdict)
    return Status(verdict, elapsed=now.elapsed, last_line=now.last_line)


def _reason(exc: BaseException) -> str:
    # what went wrong, not "unhandled errors in a TaskGroup": our own error first, else the first leaf
    if isinstance(exc, BaseExceptionGroup):
        ours = first_watchdog_error(exc)
        if ours is not None:
            return str(ours)
        return _reason(exc.exceptions[0])
    return str(exc) or type(exc).__name__
