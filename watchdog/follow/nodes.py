"""The follower of a multi-node launch: one `LaunchFollower` per node, one lifecycle and one verdict for the launch.

It has the surface of a `LaunchFollower` (`run()`, the `updates` stream of `Transitioned`, `SourceNoted` and
`Concluded` or the function `listen` was given, `status()`, `now()`), so `watch` and the daemon run it as they run one. Each node's follower reads
its own log (and probes its own process) unchanged; their updates come here, and the launch's state is what
`watchdog.core.nodes.launch_state` makes of the nodes' verdicts:

- a node's crash is the launch's at once (`Transitioned`); the report (`Concluded`) waits until the node that
  failed first has reported its crash (its own settle window) and `settle` seconds since the first crash, so
  that another node's error written in that window is weighed (a node whose error came first but is only a
  consequence never wins over one with a cause); when all there is is a consequence and another node has not
  crashed, `CAUSE_WAIT` seconds more, for that node's report of the cause;
- ready when the serving node's ready verdict comes; stalled and stopped as the nodes' states say.

The source notes of the nodes go out with the node's name (`SourceNoted.node`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import anyio
from anyio.abc import TaskStatus

from watchdog.clock import Clock, MonotonicClock
from watchdog.core.lifecycle import Transition
from watchdog.core.nodes import NodeReport, combine, first_failure, launch_state, serving
from watchdog.core.verdict import Entry, Status, Verdict
from watchdog.follow.follower import (
    DEFAULT_SETTLE,
    TRACEBACK_WAIT,
    UPDATE_BUFFER,
    Concluded,
    LaunchFollower,
    Listener,
    SourceNoted,
    Transitioned,
    Update,
)
from watchdog.vocabulary import SUCCESS_STATES, State

__all__ = ["CAUSE_WAIT", "Follower", "Node", "NodesFollower"]

_POLL = 0.02  # seconds between two looks of a crash report waiting for its first failing node's report
# seconds more a crash's report waits when all it has is a consequence and another node has not crashed: the
# node with the cause (whose death the consequence reports) may say so a moment later on its own connection
CAUSE_WAIT = 1.0


@dataclass(frozen=True)
class Node:
    """One node of a multi-node launch: its name, its configured host, whether it serves, and its follower."""

    name: str
    follower: LaunchFollower
    host: str = ""  # the configured host's name ("" for a log on this machine)
    serve: bool = False


class NodesFollower:
    """Follows the nodes of one launch as one launch; see the module docstring.

    Args:
        name: the launch's name (its updates carry it).
        nodes: its nodes, each with its own follower (made by the caller: its pool, source and checkpoints);
            the serving node is the one marked `serve`, else the first.
        clock: the time (the nodes' followers should share it); by default the monotonic clock.
        settle: seconds a crash's report waits after the first crash for the other nodes' errors.
        timeout: `watch --timeout`: seconds after which the launch's verdict is what it is, timed out.
    """

    def __init__(
        self,
        name: str,
        nodes: Sequence[Node],
        *,
        clock: Clock | None = None,
        settle: float = DEFAULT_SETTLE,
        timeout: float | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("a multi-node launch needs at least one node")
        self.name = name
        self.nodes = tuple(nodes)
        self._clock = clock or MonotonicClock()
        self._start = self._clock.now()
        self._settle = settle
        self._timeout = timeout
        self._send, self.updates = anyio.create_memory_object_stream[Update](UPDATE_BUFFER)
        self._listener: Listener | None = None  # takes the updates instead of `updates` (see `listen`)
        self._failed_at: dict[
            str, tuple[int, float]
        ] = {}  # node -> (its incarnation, when its crash was known)
        self._timeline: list[Entry] = []
        self._state: tuple[State, int] | None = None  # the launch's state and incarnation, as last published
        self._settling = False
        self._said: set[tuple[State, int, int]] = set()  # verdicts sent: (state, incarnation, its Nth entry)
        self.concluded: Concluded | None = None
        self.timed_out = False
        self.failed_node: Node | None = None  # the node whose follower failed (its host is the outage's)

    @property
    def last_activity(self) -> float | None:
        """Unix time bytes of any node's log last arrived (None: none yet)."""
        times = [n.follower.last_activity for n in self.nodes if n.follower.last_activity is not None]
        return max(times) if times else None

    def now(self) -> float:
        """Seconds since the follower was made, on its clock."""
        return self._clock.now() - self._start

    def listen(self, listener: Listener) -> None:
        """Hand each update to `listener` as it is published, instead of `updates` (`LaunchFollower.listen`)."""
        self._listener = listener
        self.updates.close()  # never read

    async def _out(self, update: Update) -> None:
        if self._listener is not None:
            self._listener(update)
        else:
            await self._send.send(update)

    def reports(self) -> list[NodeReport]:
        """Each node's verdict as the launch reads it (the snapshot `status()` is made of)."""
        out = []
        for node in self.nodes:
            status = node.follower.status()
            failed = self._failed_at.get(node.name)
            at = failed[1] if failed is not None and failed[0] == status.verdict.incarnation else None
            out.append(
                NodeReport(node.name, node.host, status.target, node.serve, status.verdict, failed_at=at)
            )
        return out

    def verdict(self) -> Verdict:
        """The launch's verdict now: its nodes' combined (`watchdog.core.nodes.combine`) with its own timeline."""
        reports = self.reports()
        timeline = tuple(self._timeline) or None
        return replace(combine(reports, timeline), timed_out=self.timed_out)

    def status(self) -> Status:
        """A snapshot: the launch's verdict (with every node's), its targets, the clock, the last line a rule
        matched on the node that decides (the first failing node of a crash, else the serving node)."""
        reports = self.reports()
        decides = first_failure(reports) or serving(reports)
        follower = next(n.follower for n in self.nodes if n.name == decides.name)
        return Status(
            self.verdict(),
            name=self.name,
            target=" ".join(r.target for r in reports),
            elapsed=self.now(),
            last_line=follower.status().last_line,
        )

    def state(self) -> State:
        """The state `status()` says (the nodes' combined verdict's)."""
        return self.verdict().state

    def timing(self, incarnation: int) -> tuple[float, str] | None:
        """`status()`'s clock and last line, while it reports `incarnation` (None once it reports another)."""
        now = self.status()
        if now.verdict.incarnation != incarnation:
            return None
        return now.elapsed if now.elapsed is not None else self.now(), now.last_line

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow every node until cancelled (or every node's source ends); ready once each node's follower is
        (it has read its log as it was)."""
        async with self._send, anyio.create_task_group() as tg:
            self._tg = tg
            if self._timeout is not None:
                tg.start_soon(self._time_out, self._timeout)
            async with anyio.create_task_group() as pumps:
                for node in self.nodes:
                    pumps.start_soon(self._pump, node)
                async with anyio.create_task_group() as starting:
                    for node in self.nodes:
                        starting.start_soon(tg.start, self._run_node, node)
                await self._publish()
                if self.concluded is None:
                    await self._judge_whole()
                task_status.started()
            # every node's source ended (standard input at its end, a replay): what they gave is the verdict
            state, _ = launch_state(self.reports())
            await self._conclude(state)
            tg.cancel_scope.cancel()

    async def _run_node(self, node: Node, *, task_status: TaskStatus[None]) -> None:
        try:
            await node.follower.run(task_status=task_status)
        except Exception:
            if self.failed_node is None:  # the first to fail: the others are cancelled by it
                self.failed_node = node
            raise

    async def _pump(self, node: Node) -> None:
        # a node's updates: its transitions move the launch's state, its notes go out with its name
        follower = node.follower
        with follower.updates:
            async for update in follower.updates:
                if isinstance(update, Transitioned):
                    t = update.transition
                    if t.state is State.CRASHED:
                        self._failed_at.setdefault(node.name, (t.incarnation, self.now()))
                        if self._failed_at[node.name][0] != t.incarnation:
                            self._failed_at[node.name] = (t.incarnation, self.now())
                    await self._publish(t, node.name)
                elif isinstance(update, SourceNoted):
                    await self._out(
                        replace(
                            update, launch=self.name, detail=f"{node.name}: {update.detail}", node=node.name
                        )
                    )
                elif isinstance(update, Concluded):
                    await self._publish()
                    await self._judged(node, update)

    async def _publish(self, cause: Transition | None = None, node: str = "") -> None:
        # the launch's state from its nodes'; a change is published at once, as a transition of the launch
        reports = self.reports()
        state, _phase = launch_state(reports)
        incarnation = max(r.verdict.incarnation for r in reports)
        if self._state is not None and self._state == (state, incarnation):
            return
        if self._state is None and state is State.PENDING:
            self._state = (state, incarnation)  # no log yet: nothing happened (as one source says nothing)
            return
        previous = self._state[0] if self._state is not None else State.PENDING
        now = self.now()
        if self._state is not None and self._state[1] != incarnation:
            self._timeline.clear()  # a new start of the launch: its own timeline
            self._settling = False
            self.concluded = None
        if self._timeline:
            last = self._timeline[-1]
            self._timeline[-1] = replace(last, duration=max(0.0, now - last.entered))
        reason = f"{node}: {cause.reason}" if cause is not None and node else ""
        line = cause.line if cause is not None else None
        at = cause.at if cause is not None else None
        self._timeline.append(Entry(state, line, at, reason, now))
        self._state = (state, incarnation)
        transition = Transition(state, previous, line, at, now, reason, incarnation)
        await self._out(Transitioned(self.name, transition))
        if state is State.CRASHED:
            if not self._settling:
                self._settling = True
                self._tg.start_soon(self._settle_crash)
        elif state is State.STALLED:
            await self._conclude(state)

    async def _judge_whole(self) -> None:
        # the logs as they were when each node caught up: a verdict already in them is the launch's
        state, _ = launch_state(self.reports())
        nodes = {n.name: n for n in self.nodes}
        serve = nodes[serving(self.reports()).name]
        if state in SUCCESS_STATES and serve.follower.concluded is not None:
            await self._conclude(state)

    async def _judged(self, node: Node, update: Concluded) -> None:
        # a node's verdict: the serving node's ready or stop is the launch's (a crash waits in `_settle_crash`)
        state, _ = launch_state(self.reports())
        serves = node.name == serving(self.reports()).name
        if update.state in SUCCESS_STATES and serves and state is update.state:
            await self._conclude(state)

    async def _settle_crash(self) -> None:
        # the report of a crash waits for the first failing node's own report (the ranks it names) and for
        # the settle window since the first crash; at most TRACEBACK_WAIT past that window
        first = self.now()
        while True:
            waited = self.now() - first
            reports = self.reports()
            failed = first_failure(reports)
            if failed is None:  # a new start of every crashed node: no crash to report
                self._settling = False
                return
            follower = next(n.follower for n in self.nodes if n.name == failed.name)
            said = follower.concluded
            reported = (
                said is not None
                and said.state is State.CRASHED
                and said.verdict.incarnation == failed.verdict.incarnation
            )
            # a consequence (a collective's timeout, a closed connection) while another node has not crashed
            # yet: that node's own report of the cause may come a moment later over its own connection
            error = failed.verdict.error
            cause_awaited = (error is None or error.consequence) and any(
                r.state is not State.CRASHED for r in reports
            )
            window = self._settle + (CAUSE_WAIT if cause_awaited else 0.0)
            if (reported and waited >= window) or waited >= window + TRACEBACK_WAIT:
                break
            left = window - waited
            await self._clock.sleep(max(0.001, min(_POLL, left) if left > 0 else _POLL))
        await self._conclude(State.CRASHED)

    async def _conclude(self, state: State) -> None:
        verdict = self.verdict()
        # said once an incarnation (a stall again after progress is said again)
        key = (state, verdict.incarnation, sum(1 for e in self._timeline if e.state is state))
        if key in self._said and not self.timed_out:
            return
        self._said.add(key)
        self.concluded = Concluded(self.name, state, verdict, self.timed_out)
        await self._out(self.concluded)

    async def _time_out(self, seconds: float) -> None:
        await self._clock.sleep(max(0.0, seconds - self.now()))
        self.timed_out = True
        state, _ = launch_state(self.reports())
        await self._conclude(state)


Follower = LaunchFollower | NodesFollower  # a launch of one source, or of several nodes: the same surface
