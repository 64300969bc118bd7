"""The daemon: follows many launches at once, keeps following after each verdict, and serves what it sees.

One `Daemon` runs one `LaunchFollower` per planned launch, each in its own cancel scope (one launch's failure
never disturbs another: a follower that fails is started again after a pause), one SSH pool per host shared
by that host's launches, the HTTP server (/metrics, /status, /healthz, the status page) and, under systemd,
the notify protocol (READY=1 once the port is bound and the launches started, WATCHDOG=1 from the event loop,
STATUS=, STOPPING=1). SIGHUP reloads the plan (added launches start, removed ones stop, changed ones restart,
unchanged ones are not touched: `daemon.reload`); SIGTERM or SIGINT stops gracefully, a second one at once.
What each update means for the alerts is `daemon.announce`'s; a host's outage is `daemon.outages`'.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sqlite3
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from watchdog.alerts.alerting import Alerting
from watchdog.alerts.outbox import Outbox
from watchdog.alerts.senders import ConsoleAlerts
from watchdog.backoff import NO_JITTER, backoff
from watchdog.clock import Clock, MonotonicClock, WallClock
from watchdog.core.expectations import eta_to_ready, learned_deadlines, typical_durations
from watchdog.core.verdict import Status, Unreachable, Verdict
from watchdog.daemon import hangup
from watchdog.daemon.ahead import make_ahead
from watchdog.daemon.announce import Announcer
from watchdog.daemon.collector import (
    SWEEP_MIN,
    TRIM_MIN,
    freeze_after_full_collections,
    freeze_survivors,
    next_sweep_in,
    next_trim_in,
    sweep,
    trim_heap,
)
from watchdog.daemon.effects import Effects
from watchdog.daemon.launches import Follower, LaunchControl, LaunchPlan, Running
from watchdog.daemon.logs import flush_log
from watchdog.daemon.metrics import DaemonStats
from watchdog.daemon.outages import REFUSED_PAUSE_MAX, RESTART_PAUSE, Host, Outages
from watchdog.daemon.reload import PlanChanges, Reloads, diff_plans, resolve_unplanned
from watchdog.daemon.sdnotify import SystemdNotifier, watchdog_interval
from watchdog.exceptions import ConnectionLost, PermanentError, WatchdogError, first_watchdog_error, reason_of
from watchdog.follow.follower import Concluded, LaunchFollower, LaunchSpec, SourceNoted, Transitioned, Update
from watchdog.follow.launching import LaunchCommand
from watchdog.follow.nodes import Node, NodesFollower
from watchdog.follow.probes.gpusampler import HostGpuSampler
from watchdog.follow.sources.commands import LocalRunner, Runner, SSHRunner
from watchdog.profiles.model import Profile
from watchdog.vocabulary import DEFAULT_UNREACHABLE_AFTER, EXIT_INTERRUPTED, Category, State

if TYPE_CHECKING:
    from watchdog.daemon.control import ControlAnswer
    from watchdog.follow.sources import SSHOptions, SSHPool
    from watchdog.store import IncarnationRecord, StateStore

__all__ = ["ConsoleAlerts", "Daemon", "LaunchPlan"]

log = structlog.get_logger("watchdog.daemon")

HISTORY_SAMPLES = 50  # past incarnations a launch's expectations are learned from
HISTORY_ALL = 1 << 30  # every incarnation the state file keeps (at most MAX_INCARNATIONS_PER_LAUNCH a launch)
DRAIN_SECONDS = 5.0  # a graceful stop waits this long at most for the alerts being delivered


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
        clock: Clock | None = None,
        freeze: bool = False,
    ) -> None:
        """`plans` by launch name; `reload` gives the new plans on SIGHUP; `serve(daemon, task_status=)`
        runs the HTTP server (it calls `task_status.started(port)` once bound). With a `store`, transitions
        and verdicts are kept, and a verdict is announced once, across restarts: a restarted daemon resumes
        each log at its checkpoint (or reads it again from its start when the file changed) and announces only
        what it had not announced (what happened while it was down included). Alerts wait in the outbox (in the store's file, else in memory) until delivered;
        `public_url` is the status page's address in their links (default: http://LISTEN_HOST:PORT); a host
        that cannot be reached for `unreachable_after` seconds is an alert. `clock` gives the time and the
        waits (restart pauses, outages, backoffs) of the daemon, its followers and its alerting (default: the
        real clocks; tests give a `ManualClock`). `freeze`: once the launches have started, what the process
        holds is left out of later garbage collections (`daemon.collector`; for the process's owner to ask:
        `watchdog run`)."""
        self._plans = dict(plans)
        self._reloads = Reloads(reload) if reload is not None else None
        self._serve = serve
        self._store = store
        self._handle_signals = handle_signals
        self._freeze = freeze
        self._running: dict[str, Running] = {}
        self._pools: dict[str, SSHPool] = {}
        self._samplers: dict[str, HostGpuSampler] = {}  # by host name ("" for this machine)
        self._systemd = SystemdNotifier()
        self._tg: TaskGroup | None = None
        self._public_url = public_url
        self._listen_host = listen_host
        self._clock: Clock = clock if clock is not None else WallClock()
        self._follower_clock = clock  # None: each follower on the monotonic clock
        self._outages = Outages(self._clock, unreachable_after)
        self._alerting: Alerting | None = None
        self._announcer: Announcer | None = None
        self._outbox: Outbox | None = None
        self.crashes: Counter[tuple[str, str, Category]] = Counter()  # (launch, host, category)
        self._activity: dict[str, float] = {}  # launch -> Unix time its log last grew (see `stats`)
        self.started = anyio.Event()  # the port is bound and every launch has read its log as it was
        self.port: int | None = None  # the HTTP server's port, once bound
        self._changed: anyio.Event | None = None  # made by a waiter; set (and dropped) when a status changed
        self.stopping = False

    # -- what the HTTP server and the metrics read -------------------------------------------------------

    def statuses(self, only: str | None = None) -> list[Status]:
        """Where every launch stands: its follower's status, with its host, labels, since when it is followed,
        when its current incarnation began (as the follower saw it), its ETA, note and outage; with `only`,
        that launch's alone (none when it is not followed)."""
        out = []
        runs = self._running.items() if only is None else [(only, self._running.get(only))]
        for name, run in sorted((n, r) for n, r in runs if r is not None):
            host = self._outages.get(run.plan.host)
            unreachable = None
            if host is not None and host.down_since is not None:  # the page and /status say it plainly
                unreachable = Unreachable(host.down_since, host.error, host.said)
            status = Status(Verdict.pending(), name=name) if run.follower is None else run.follower.status()
            v, note = status.verdict, run.note
            if v.missing_log is not None and v.missing_log.path:  # said for as long as it lasts
                waited = round(v.missing_log.seconds or 0.0, 1)
                note = f"{v.missing_log.path} does not exist (yet): waiting for it ({waited:g}s)"
            eta = began = None
            if status.elapsed is not None:
                in_phase = status.elapsed - v.timeline[-1].entered if v.timeline else 0.0
                eta = eta_to_ready(v, run.typical, in_phase)
                if v.timeline:  # its first timeline entry, on the follower's clock: a wall time
                    began = self._clock.now() - (status.elapsed - v.timeline[0].entered)
            out.append(
                dataclasses.replace(
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

    def status(self, name: str) -> Status | None:
        """Where launch `name` stands (as `statuses` says it), None when it is not followed."""
        found = self.statuses(only=name)
        return found[0] if found else None

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
        # the followers' states alone: a status is a verdict built, ~0.13 ms a launch, every keepalive
        counts = Counter(
            (State.PENDING if run.follower is None else run.follower.state()).value
            for run in self._running.values()
        )
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
                self._alerting = Alerting(
                    outbox, silences=silences, on_change=self._change, clock=self._clock
                )
                announcer = self._announcer = Announcer(
                    self._alerting,
                    self._store,
                    clock=self._clock,
                    link=self._link,
                    change=self._change,
                    crashes=self.crashes,
                )
                await tg.start(self._alerting.run)
                if self._store is not None:
                    await tg.start(self._store.write_behind)  # transitions written a batch at a time
                # every profile and its databases made off the event loop, before the followers need them
                await anyio.to_thread.run_sync(make_ahead, _user_profiles(self._plans))
                if self._serve is not None:
                    self.port = await tg.start(self._serve, self)
                # before the launches start: a host down at the start (a black-holed one holds its launch's
                # start for its connect attempts) is said on time, not once every launch has started
                tg.start_soon(announcer.watch_outages, self._outages, self._plans_on)
                await self._apply(self._plans)
                for name, plan in self._plans.items():
                    if plan.control is not None and plan.control.on_boot:  # launch mode's start = "on_boot"
                        tg.start_soon(self._start_on_boot, name)
                self.started.set()
                if self._freeze:
                    freeze_survivors()  # what each launch's start made lives as long as the launch
                    # and from now on what lives through a full collection
                    stack.callback(freeze_after_full_collections())
                    tg.start_soon(self._sweeps)
                    tg.start_soon(self._trims)
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
        """Take the new plans: start added launches, stop removed ones, restart changed ones (one reload at a
        time, those asked meanwhile answered by one: `daemon.reload.Reloads`)."""
        if self._reloads is None:
            return
        await self.started.wait()  # a SIGHUP while starting: the reload comes once the launches run
        await self._reloads.run(self._reloaded)

    async def _reloaded(self, plans: Mapping[str, LaunchPlan]) -> None:
        await anyio.to_thread.run_sync(make_ahead, _user_profiles(plans))  # a new user profile's
        changes = await self._apply(plans)
        log.info("reloaded", launches=len(plans), **dataclasses.asdict(changes))
        self._systemd.notify(f"STATUS={self.summary()}")

    async def _apply(self, plans: Mapping[str, LaunchPlan]) -> PlanChanges:
        """Run these plans; return the launches added, removed and restarted (changed)."""
        assert self._tg is not None
        changes = diff_plans({name: run.plan for name, run in self._running.items()}, plans)
        for name in (*changes.removed, *changes.restarted):
            self._running.pop(name).scope.cancel()
        # new plans are the operator's word that something was fixed: each host's backoff ends now. Only once
        # the launches of the old plans are stopped (no await between): one woken earlier took the fresh turn
        # with its old config, and its refusal armed the backoff again for the new plans (a CI run saw it)
        for host in self._outages.values():
            host.retry_now()
        self._plans = dict(plans)
        assert self._alerting is not None
        # notifiers no longer configured stop (their queued alerts dropped): none keeps a secret URL at work
        await self._alerting.use_only([n for plan in plans.values() for n in plan.alerts])
        await resolve_unplanned(self._alerting, self._outages, plans)
        starting = []
        for name, plan in plans.items():
            if name not in self._running:
                run = self._running[name] = Running(plan, anyio.CancelScope(), since=self._clock.now())
                starting.append(run)
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

    async def _launch(self, run: Running, *, task_status: TaskStatus[None]) -> None:
        plan = run.plan
        host = self._outages.host(plan.host) if plan.host else None
        started = False
        with run.scope:
            queue = run.effects = Effects()
            async with queue, anyio.create_task_group() as effects:
                effects.start_soon(self._effects, run, queue)
                while True:
                    pause = RESTART_PAUSE
                    trying = False
                    try:
                        if host is not None and host.refusing:
                            if not started:  # a launch waiting out its host's refusal holds up no one
                                started = True
                                task_status.started()
                            trying = await host.wait_turn(partial(setattr, run, "note"))
                            if not trying:
                                continue  # the host answered another launch: go at once
                        spec = await self._learned(run)
                        follower = self._follower(run, spec)
                        run.follower = follower
                        run.since = self._clock.now()
                        follower.listen(partial(self._updated, run, follower))
                        async with anyio.create_task_group() as tg:
                            await tg.start(follower.run)
                            run.streak, run.said = 0, ""  # it reads: a later failure starts a new streak
                            await self._answers(run)
                            trying = False
                            if not started:
                                started = True
                                task_status.started()
                        run.note = "the log's source ended; following it again"
                    except Exception as exc:  # one launch's failure never disturbs another
                        failing = host
                        node = getattr(run.follower, "failed_node", None)
                        if node is not None and node.host != plan.host:
                            # a node's follower failed: its host's outage, not the serving node's host's
                            failing = self._outages.host(node.host) if node.host else None
                        pause = self._failed(run, failing, _cause(exc), trying=trying and failing is host)
                        trying = False
                    finally:
                        if trying and host is not None:
                            host.give_up_turn()  # cancelled: another launch may try
                    if not started:
                        started = True
                        task_status.started()
                    if pause:
                        await self._clock.sleep(pause)

    def _follower(self, run: Running, spec: LaunchSpec) -> Follower:
        # the launch's follower: of its one source, or of its nodes (one follower each, their checkpoints
        # kept per node under LAUNCH@NODE, their learned deadlines the launch's)
        plan = run.plan
        # a launch whose log never came goes on with its pending incarnation
        numbered_after = run.incarnation if run.began else max(0, run.incarnation - 1)
        if not plan.nodes:
            return LaunchFollower(
                spec,
                pool=self._pool(plan),
                gpu_sampler=self._sampler(plan),
                checkpoints=self._store,
                numbered_after=numbered_after,
                clock=self._follower_clock,
                earlier=run.earlier,
                command=_command_words(plan.control),
            )
        clock = self._follower_clock or MonotonicClock()  # one clock for the nodes: their times compare
        nodes = [
            Node(
                node.name,
                LaunchFollower(
                    dataclasses.replace(node.spec, deadlines=spec.deadlines),
                    pool=self._pool_of(node.host, node.ssh),
                    gpu_sampler=self._sampler(
                        dataclasses.replace(plan, spec=node.spec, host=node.host, ssh=node.ssh)
                    ),
                    checkpoints=self._store,
                    numbered_after=numbered_after,
                    clock=clock,
                    earlier=run.earlier
                    if node.serve
                    else (),  # the launch's arguments are its serving node's
                ),
                host=node.host,
                serve=node.serve,
            )
            for node in plan.nodes
        ]
        return NodesFollower(spec.name, nodes, clock=clock, settle=spec.settle)

    def _failed(self, run: Running, host: Host | None, exc: BaseException, *, trying: bool) -> float:
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
        reason = reason_of(exc)
        if host is not None and isinstance(exc, PermanentError):
            host.refused(reason, tried=trying)
            run.note = f"refused: {reason}; trying again in {host.retry_in():.0f}s"
            return 0.0  # the wait is the host's (`Host.wait_turn`)
        run.note = f"follower failed: {reason}; trying again in {RESTART_PAUSE:g}s"
        if host is not None and isinstance(exc, ConnectionLost):
            host.lost(reason)
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

    def _state_file(self) -> str:
        return str(self._store.path) if self._store is not None else ""

    async def _learned(self, run: Running) -> LaunchSpec:
        # the launch's own history: its usual phase lengths (for the ETA) and the deadlines they imply
        spec = run.plan.spec
        if self._store is None:
            return spec
        history, run.history = run.history, None  # loaded with the others' at the start; asked anew after
        if history is None:
            history = await self._store.history(spec.name, limit=HISTORY_SAMPLES)
        records = [{"state": r.state, "phase_durations": r.phase_durations} for r in history]
        run.earlier = tuple(r.baseline() for r in history)
        run.typical = typical_durations(records)
        if run.plan.learned_factor is None:
            return spec
        deadlines = learned_deadlines(records, dict(spec.deadlines), factor=run.plan.learned_factor)
        return dataclasses.replace(spec, deadlines=tuple(sorted(deadlines.items())))

    def _updated(self, run: Running, follower: Follower, update: Update) -> None:
        # Each update of the launch's follower, handed over by a plain call in the follower's task
        # (`LaunchFollower.listen`), not put on a stream that a task of the daemon's is woken to read: what it means
        # for the status is taken at once; what waits on the disk or the network (the store's verdicts, the outbox,
        # the silences, a host's answer) goes to the launch's own queue (`_effects`), in order: a slow or locked
        # state file never holds up the reading.
        name = run.plan.spec.name
        effects, announcer = run.effects, self._announcer
        assert effects is not None
        assert announcer is not None
        self._change()
        if isinstance(update, Transitioned):
            t = update.transition
            run.note = ""  # the log is being read: what the source said before is over
            log.info("transition", launch=name, state=t.state.value, line=t.line, reason=t.reason)
            store = self._store
            if store is not None:
                # the store's write-behind task takes the incarnation's snapshot when it writes it
                # (`StateStore.write_behind`), once for a burst of its transitions (a relaunch's startup read in
                # one write: five), not at each; while it does not run (the daemon stopping), written in the queue
                snapshot = partial(_snapshot, run.plan, follower, t.incarnation)
                if not store.record_transition_behind(name, t.incarnation, snapshot):
                    effects.send_nowait(partial(store.record_transition, name, t.incarnation, snapshot))
            effects.send_nowait(
                partial(announcer.transitioned, run, follower, t.incarnation, t.state, t.reason)
            )
        elif isinstance(update, SourceNoted):
            run.note = update.detail
            log.info("source", launch=name, kind=update.kind, detail=update.detail)
            # a node's note is about its host
            node_host = next((n.host for n in run.plan.nodes if n.name == update.node), run.plan.host)
            host = self._outages.get(node_host if update.node else run.plan.host)
            if update.kind == "disconnected" and host is not None:
                host.down(update.detail, since=update.since)
            elif update.kind == "connected":
                effects.send_nowait(partial(self._answers, run))
        elif isinstance(update, Concluded):
            if self._store is not None and isinstance(follower, LaunchFollower):
                # the verdict came after the transitions whose snapshot waits: it stands for it, not
                # built again (a multi-node launch's snapshot is the launch's, not this verdict)
                inc = update.verdict.incarnation
                self._store.stands_for(
                    name, inc, partial(_verdict_snapshot, run.plan, follower, update.verdict)
                )
            effects.send_nowait(partial(announcer.conclude, run, update))
            control = run.plan.control
            if control is not None and control.kill_on_crash and update.state is State.CRASHED:
                assert self._tg is not None  # in a task of its own: its grace holds up no update
                self._tg.start_soon(self._kill_on_crash, run)

    async def _effects(self, run: Running, queue: Effects) -> None:
        # the launch's slow work, one at a time in the order of its updates; a failure is logged, not fatal
        async with queue:
            async for effect in queue:
                try:
                    await effect()
                except sqlite3.Error as exc:
                    log.error(
                        "state file problem",
                        launch=run.plan.spec.name,
                        error=reason_of(exc),
                        state_file=self._state_file(),
                    )
                except Exception as exc:  # a bug: said as one, and the launch goes on being followed
                    log.error("internal error", launch=run.plan.spec.name, error=reason_of(exc), exc_info=exc)
                self._change()

    async def _answers(self, run: Running) -> None:
        host = self._outages.get(run.plan.host)
        if host is not None:
            assert self._announcer is not None
            await self._announcer.host_answers(host)

    # -- launch mode ----------------------------------------------------------------------------------------

    async def control(self, name: str, action: str, *, replace: bool = False) -> ControlAnswer:
        """Start (`action` "start"; `replace`: end a run still going first) or stop ("stop") launch `name`'s
        command on its host: what `POST /launches/NAME/start|stop` asks (see `watchdog.daemon.control`)."""
        from watchdog.daemon.control import ControlAnswer, start_run, stop_run  # noqa: PLC0415

        run = self._running.get(name)
        if run is None:
            return ControlAnswer.refused(404, name, f"no launch {name!r}")
        runner = self._runner(run.plan)
        answer = await (
            start_run(run, runner, replace=replace) if action == "start" else stop_run(run, runner)
        )
        self._change()
        return answer

    async def _kill_on_crash(self, run: Running) -> None:
        from watchdog.daemon.control import kill_on_crash  # noqa: PLC0415

        await kill_on_crash(run, self._runner(run.plan))
        self._change()

    async def _start_on_boot(self, name: str) -> None:
        answer = await self.control(name, "start")
        if answer.status != 200:
            log.info("not started on boot", launch=name, reason=answer.body.get("error"))

    def _runner(self, plan: LaunchPlan) -> Runner:
        target = plan.spec.target
        if target.host is None:
            return LocalRunner()
        pool = self._pool(plan)
        assert pool is not None  # a launch with a host has one
        return SSHRunner(pool, target.host, port=target.port, user=target.user)

    def _plans_on(self, host: str) -> list[LaunchPlan]:
        return [
            run.plan
            for run in self._running.values()
            if run.plan.host == host or any(node.host == host for node in run.plan.nodes)
        ]

    def _link(self, name: str) -> str:
        base = self._public_url or (f"http://{self._listen_host}:{self.port}" if self.port else "")
        return f"{base}/#{quote(name)}" if base else ""

    def _pool(self, plan: LaunchPlan) -> SSHPool | None:
        return self._pool_of(plan.host, plan.ssh)

    def _pool_of(self, host: str, ssh: SSHOptions | None) -> SSHPool | None:
        # the host's one pool, shared by its launches and nodes
        if not host:
            return None
        pool = self._pools.get(host)
        if pool is None or (ssh is not None and pool.options != ssh):
            if pool is not None:  # a reload changed how to reach the host (a new key): connect anew
                assert self._tg is not None
                self._tg.start_soon(pool.aclose)
            from watchdog.follow.sources import SSHPool  # noqa: PLC0415 - asyncssh only for an SSH host

            pool = self._pools[host] = SSHPool(ssh)
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

    async def _sweeps(self) -> None:
        wait = SWEEP_MIN
        while True:
            await self._clock.sleep(wait)
            _freed, cost = sweep()  # what became a cycle's garbage while frozen
            wait = next_sweep_in(cost)

    async def _trims(self) -> None:
        # the C heap's free pages given back while the launches churn (`trim_heap`): the peak RSS is what they
        # leave free between trims
        wait = TRIM_MIN
        while True:
            await self._clock.sleep(wait)
            cost = trim_heap()
            if cost is None:
                return
            wait = next_trim_in(cost)

    async def _keepalive(self, interval: float) -> None:
        while True:
            self._systemd.notify("WATCHDOG=1", f"STATUS={self.summary()}")
            await self._clock.sleep(interval)

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
                    flush_log()  # os._exit runs no exit handler: the log's held lines go out first
                    os._exit(EXIT_INTERRUPTED)  # the second SIGTERM/SIGINT: no more waiting on anything
                else:
                    log.info("stopping", signal=signal.Signals(signum).name)
                    await self.stop()


def _user_profiles(plans: Mapping[str, LaunchPlan]) -> list[tuple[Profile, ...]]:
    # the user profiles of each launch and of each of its nodes (most: none)
    return [plan.spec.profiles for plan in plans.values()] + [
        node.spec.profiles for plan in plans.values() for node in plan.nodes
    ]


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


def _snapshot(plan: LaunchPlan, follower: Follower, incarnation: int) -> Status:
    """What the store keeps of a transition: the status of its incarnation (a multi-node launch's: the launch's
    now), with the launch's host and labels."""
    if isinstance(follower, LaunchFollower):  # the store keeps no `changes`: not made
        status = follower.status(incarnation, changes=False)
    else:
        status = follower.status()
    return dataclasses.replace(status, host=plan.host, labels=tuple(plan.labels.items()))


def _verdict_snapshot(plan: LaunchPlan, follower: LaunchFollower, verdict: Verdict) -> Status | None:
    """What the store keeps of a verdict's incarnation (`_snapshot`), made of the verdict; None once the
    follower reports another incarnation."""
    timing = follower.timing(verdict.incarnation)
    if timing is None:
        return None
    return Status(
        verdict,
        name=plan.spec.name,
        target=str(follower.spec.target),
        elapsed=timing[0],
        last_line=timing[1],
        host=plan.host,
        labels=tuple(plan.labels.items()),
    )


def _command_words(control: LaunchControl | None) -> tuple[str, ...]:
    # the words launch mode starts a launch with (a container's: its run options, image and command)
    if control is None:
        return ()
    command = control.command
    return command.argv if isinstance(command, LaunchCommand) else command.args
