"""Multi-node launches: one lifecycle and one verdict from the verdicts of the launch's nodes (pure).

A launch of several nodes (SGLang `--nnodes`, vLLM over Ray, TensorRT-LLM over MPI) writes one log per node;
each node is followed on its own (one analyzer each) and this module reads their verdicts as one launch
(docs/nodes.md):

- crashed as soon as any node crashed; the node that failed first is the one whose error is a cause, not a
  consequence (the profile's `[[consequence]]`: a collective's timeout, a peer's closed connection), earliest
  by the log's own time of its crash when every crashed node's log carries times of one form, else by when the
  crash became known (`NodeReport.failed_at`), else by the nodes' order;
- ready when the serving node is ready (worker nodes never say so); stalled after ready when it stalls;
- stalled when the launch as a whole makes no progress: every node that has not settled is stalled;
- otherwise in the furthest phase every node that has begun has reached.

No I/O and no clock: the times are arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from watchdog.core.verdict import Entry, NodeFailure, NodeVerdict, Verdict
from watchdog.vocabulary import PROGRESS_STATES, SETTLED_STATES, State

__all__ = ["NodeReport", "combine", "first_failure", "launch_state", "serving"]

# the startup order of the phases a launch-level state may be in (pending first, ready last)
_ORDER = {State.PENDING: 0} | {state: i + 1 for i, state in enumerate(PROGRESS_STATES)}


@dataclass(frozen=True, slots=True)
class NodeReport:
    """One node's verdict as the launch reads it."""

    name: str
    host: str  # the node's configured host ("" for a file on this machine)
    target: str  # its log's source, as written
    serve: bool  # its engine serves the launch (the launch is ready when it is)
    verdict: Verdict
    failed_at: float | None = None  # when its crash became known, on the launch's clock (None: not crashed)

    @property
    def state(self) -> State:
        """The node's state."""
        return self.verdict.state

    def stalled(self) -> bool:
        """Whether it makes no progress: stalled, or a log that has not come past its stall time."""
        missing = self.verdict.missing_log
        return self.state is State.STALLED or (missing is not None and missing.overdue)


def serving(nodes: Sequence[NodeReport]) -> NodeReport:
    """The node whose engine serves: the one marked `serve`, else the first."""
    return next((n for n in nodes if n.serve), nodes[0])


def _crash_at(node: NodeReport) -> str | None:
    # the log's own time of the line its crash was known at
    return next((e.at for e in reversed(node.verdict.timeline) if e.state is State.CRASHED), None)


def first_failure(nodes: Sequence[NodeReport]) -> NodeReport | None:
    """The node that failed first among the crashed ones (see the module docstring); None when none crashed."""
    crashed = [n for n in nodes if n.state is State.CRASHED]
    if not crashed:
        return None
    times = [_crash_at(n) for n in crashed]
    # ISO 8601 times of one form (all with a year, or all without) compare as text
    by_log = all(t is not None for t in times) and len({len(str(t).partition("T")[0]) for t in times}) == 1

    def key(item: tuple[int, NodeReport]) -> tuple[bool, str, float, int]:
        index, node = item
        error = node.verdict.error
        consequence = error is None or error.consequence
        at = str(times[crashed.index(node)]) if by_log else ""
        arrived = node.failed_at if node.failed_at is not None else float("inf")
        return consequence, at, arrived, index

    return min(enumerate(crashed), key=key)[1]


def launch_state(nodes: Sequence[NodeReport]) -> tuple[State, State]:
    """The launch's state and phase from its nodes' (see the module docstring).

    The phase of a launch still starting is the furthest phase every node that has begun has reached; of a
    crash, the phase the first failing node crashed in; of a ready or stopped launch, the serving node's.
    """
    failed = first_failure(nodes)
    if failed is not None:
        return State.CRASHED, failed.verdict.phase
    serve = serving(nodes)
    if serve.state in SETTLED_STATES:  # ready, stopped (a crash is above)
        return serve.state, serve.verdict.phase
    if serve.state is State.STALLED and serve.verdict.phase is State.READY:
        return serve.state, serve.verdict.phase  # a serving hang after ready: the launch's
    begun = [n for n in nodes if n.verdict.phase is not State.PENDING]
    phase = min((n.verdict.phase for n in begun), key=lambda s: _ORDER.get(s, 0), default=State.PENDING)
    running = [n for n in nodes if n.state not in SETTLED_STATES]
    if running and all(n.stalled() for n in running):
        return State.STALLED, phase
    return phase, phase


def combine(nodes: Sequence[NodeReport], timeline: tuple[Entry, ...] | None = None) -> Verdict:
    """The launch's verdict from its nodes' verdicts.

    Args:
        nodes: the launch's nodes, in their configured order (at least one).
        timeline: the launch's own timeline (its state changes, kept by the follower of its nodes); None: the
            timeline of the node that decides (the first failing node of a crash, else the serving node).

    Returns:
        A verdict whose `error` is the first failing node's (`failed_node` says which, `consequences` what the
        other nodes said or that they went quiet), whose progress, facts and time to ready are the serving
        node's (and its arguments, and what changed since the launch before), whose counts of lines and bytes are the nodes' sums, and whose `nodes` lists every node.
    """
    if not nodes:
        raise ValueError("a launch has at least one node")
    state, phase = launch_state(nodes)
    serve = serving(nodes)
    failed = first_failure(nodes)
    decides = failed or serve
    failed_node = None
    consequences: tuple[NodeFailure, ...] = ()
    if failed is not None and failed.verdict.error is not None:
        failed_node = _failure(failed)
        consequences = tuple(_failure(n) for n in nodes if n is not failed)
    return Verdict(
        engine=serve.verdict.engine or next((n.verdict.engine for n in nodes if n.verdict.engine), None),
        state=state,
        phase=phase,
        error=failed.verdict.error if failed is not None else None,
        context=failed.verdict.context if failed is not None else (),
        timeline=decides.verdict.timeline if timeline is None else timeline,
        progress=serve.verdict.progress,
        facts=serve.verdict.facts,
        lines_read=sum(n.verdict.lines_read for n in nodes),
        bytes_read=sum(n.verdict.bytes_read for n in nodes),
        incarnation=max(n.verdict.incarnation for n in nodes),
        incarnations=max(n.verdict.incarnations for n in nodes),
        time_to_ready=serve.verdict.time_to_ready,
        missing_log=serve.verdict.missing_log if state is State.PENDING else None,
        timed_out=any(n.verdict.timed_out for n in nodes),
        arguments=serve.verdict.arguments,
        changes=serve.verdict.changes,
        nodes=tuple(NodeVerdict(n.name, n.host, n.target, n.serve, n.verdict) for n in nodes),
        failed_node=failed_node,
        consequences=consequences,
    )


def _failure(node: NodeReport) -> NodeFailure:
    # what a node said of the crash: its error, or nothing of its own (it hung, or waits for the failed node)
    error = node.verdict.error
    if error is None or node.state is not State.CRASHED:
        return NodeFailure(node.name, node.host, None, state=node.state)
    return NodeFailure(
        node.name, node.host, error.summary, str(error.category), error.ranks, error.line, node.state
    )
