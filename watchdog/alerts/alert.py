"""The alert: what the watchdog has to say about one launch, built from a daemon status snapshot."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from watchdog.core.facts import number
from watchdog.core.framing import without_controls
from watchdog.core.verdict import NodeFailure, Status, rfc3339
from watchdog.vocabulary import Category, State, format_duration

__all__ = [
    "DEFAULT_ON",
    "HOST_LAUNCH_PREFIX",
    "PROBLEMS",
    "SEVERITIES",
    "SEVERITY",
    "Alert",
    "AlertKind",
    "FactValue",
    "rfc3339",
]

HOST_LAUNCH_PREFIX = "host:"  # a host's own alert (its outage) is about the launch `host:NAME`

# A fact as the verdict gives it (`facts` of the JSON verdict): a number most often, sometimes text.
FactValue = str | int | float | bool | None


class AlertKind(enum.StrEnum):
    """Why an alert is sent."""

    CRASHED = "crashed"  # the launch died: root cause, category, hint, traceback end
    STALLED = "stalled"  # no progress for too long in a startup phase
    READY = "ready"  # the launch can serve (opt-in): time to ready against the usual
    RESOLVED = "resolved"  # an earlier crashed/stalled/unreachable alert no longer holds
    UNREACHABLE = "unreachable"  # the host cannot be reached or refused authentication (after a grace)
    REPLACED = "replaced"  # the log was truncated or replaced, or a new start began: a new incarnation


PROBLEMS = (AlertKind.CRASHED, AlertKind.STALLED, AlertKind.UNREACHABLE)
"""The alert kinds that stay active until resolved."""
DEFAULT_ON = (*PROBLEMS, AlertKind.RESOLVED, AlertKind.REPLACED)
"""The kinds a notifier says when its `on` is not given: all but ready (opt-in)."""
SEVERITIES = ("info", "warning", "error", "critical")
"""The severities, lowest first: PagerDuty's and Alertmanager's common vocabulary."""

# The default severity of each kind.
SEVERITY: Mapping[AlertKind, str] = {
    AlertKind.CRASHED: "critical",
    AlertKind.STALLED: "warning",
    AlertKind.UNREACHABLE: "error",
    AlertKind.READY: "info",
    AlertKind.RESOLVED: "info",
    AlertKind.REPLACED: "info",
}


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert about one launch, independent of where it goes.

    Texts are kept whole here: each service cuts them to its own limits. Times are seconds; `None` when the
    snapshot did not tell.
    """

    kind: AlertKind
    launch: str
    host: str  # host name from config, "" for a local file
    engine: str
    phase: str  # the phase it happened in (for a crash: the phase the crash interrupted)
    incarnation: int
    severity: str
    started_at: datetime  # UTC: when the problem (or the event) began; startsAt in Alertmanager
    category: Category | None = None  # error category of a crash (oom, cuda, nccl, ...)
    summary: str = ""  # the root-cause line, or what happened in one line
    hint: str = ""  # what to do about it
    ranks: tuple[str, ...] = ()
    traceback: tuple[str, ...] = ()  # the decisive traceback (its end is what gets shown)
    facts: tuple[tuple[str, FactValue], ...] = ()  # (name, value as the verdict has it), in its order
    progress: tuple[tuple[str, int | None, int | None], ...] = ()  # (name, done, total): weights, graphs
    labels: tuple[tuple[str, str], ...] = ()  # extra labels from config
    time_in_phase: float | None = None
    time_since_start: float | None = None
    usual_seconds: float | None = None  # ready: the usual time to ready, from history
    last_line: str = ""  # the last line a rule matched (stalled: where it stopped)
    detail: str = ""  # one more line: the stall reason, the connection error, what replaced the log
    link: str = ""  # the status page URL
    ended_at: datetime | None = None  # resolved: when the problem ended
    resolves: AlertKind | None = None  # resolved: the kind of the alert it ends
    # the how-manieth problem of its kind in the incarnation: a launch that stalls again after progress
    # resumed stalls anew (2, 3, ...), as the daemon keeps it (`stalled#2`)
    occurrence: int = 1
    # stalled in `pending` because the log does not exist (a typo in its path, a launch never started): its
    # path; not a launch that hung, and said as such. Empty otherwise (a log that exists but says nothing).
    missing_log: str = ""
    # what changed since the launch before, in a line (`Changes.summary`): "changed since #3:
    # --mem-fraction-static 0.78 -> 0.92; time to ready 11m02s -> 9m40s"; its values are the log's text
    changed: str = ""
    # a multi-node launch's crash: the node that failed first (`host` is its host); "" for a launch of one source
    node: str = ""

    def __post_init__(self) -> None:
        # Text that reaches people through every notifier: no control character (BEL, backspace, a C1 CSI)
        # from a log or a remote host's error, whatever path it took here (framing strips a log's already)
        for name in ("summary", "hint", "detail", "last_line", "changed"):
            text = getattr(self, name)
            if text:
                object.__setattr__(self, name, without_controls(text))
        if self.traceback:
            object.__setattr__(self, "traceback", tuple(without_controls(line) for line in self.traceback))
        if self.facts:
            facts = tuple((k, without_controls(v) if isinstance(v, str) else v) for k, v in self.facts)
            object.__setattr__(self, "facts", facts)

    @property
    def dedup_key(self) -> str:
        """Stable across retries and restarts, and one per alert: `launch/incarnation/kind`, with `#N` for
        the Nth stall of an incarnation and `@<unix time it began>` for an outage (each is its own alert); a
        host's outage (`host_unreachable`) is `host:NAME/unreachable@<unix time it began>`; a resolution's is
        the incident key of what it ends plus `/resolved`."""
        if self.kind is AlertKind.RESOLVED:
            return f"{self.incident_key}/resolved"
        return self._key(self.kind)

    @property
    def problem(self) -> AlertKind:
        """The kind of the problem: itself, or for a resolution the kind it resolves."""
        return self.resolves if self.resolves is not None else self.kind

    @property
    def incident_key(self) -> str:
        """Shared by a problem and its resolution (PagerDuty's dedup_key, a message's thread): the problem's
        dedup key."""
        return self._key(self.problem)

    def _key(self, kind: AlertKind) -> str:
        if self.launch == f"{HOST_LAUNCH_PREFIX}{self.host}":  # a host's own alert: no launch's incarnation
            return f"{self.launch}/{kind.value}@{int(self.started_at.timestamp())}"
        key = f"{self.launch}/{self.incarnation}/{kind.value}"
        if self.occurrence > 1:
            key += f"#{self.occurrence}"
        if kind is AlertKind.UNREACHABLE:
            key += f"@{int(self.started_at.timestamp())}"
        return key

    @property
    def serving_hang(self) -> bool:
        """A stall of a ready server (or its resolution): requests waiting and no token generated (a serving hang),
        not a startup's."""
        stalled = AlertKind.STALLED in (self.kind, self.resolves)
        return stalled and self.phase == State.READY.value

    @property
    def where(self) -> str:
        """`launch on host`, or the launch alone for a local file (or a host's own alert, `host:NAME`); of a
        multi-node launch's crash, `launch on node NODE (host)`."""
        if self.node:
            return f"{self.launch} on node {self.node}" + (
                f" ({self.host})" if self.host and self.host != self.node else ""
            )
        return (
            f"{self.launch} on {self.host}"
            if self.host and self.launch != f"{HOST_LAUNCH_PREFIX}{self.host}"
            else self.launch
        )

    @property
    def title(self) -> str:
        """One line that says what happened, where: `demo on gpu1 crashed in capturing_graphs (oom)`."""
        if self.kind is AlertKind.CRASHED:
            cat = f" ({self.category})" if self.category else ""
            return f"{self.where} crashed in {self.phase}{cat}"
        if self.kind is AlertKind.STALLED:
            if self.missing_log:
                after = (
                    f" after {format_duration(self.time_in_phase)}" if self.time_in_phase is not None else ""
                )
                return f"{self.where}: log {self.missing_log} does not exist{after}"
            if self.serving_hang:
                return f"{self.where} hangs while serving (stalled in ready)"
            return f"{self.where} stalled in {self.phase}"
        if self.kind is AlertKind.READY:
            return f"{self.where} is ready"
        if self.kind is AlertKind.UNREACHABLE:
            return f"{self.where}: host unreachable"
        if self.kind is AlertKind.REPLACED:
            return f"{self.where}: launch replaced (#{self.incarnation})"
        if self.missing_log:
            return f"{self.where}: missing log resolved"
        return f"{self.where}: {self.problem.value} resolved"

    @classmethod
    def host_unreachable(
        cls, host: str, launches: Sequence[str], *, since: datetime, error: str, link: str = ""
    ) -> Alert:
        """One host's outage, for all its launches at once: launch `host:NAME`, the launches named."""
        names = ", ".join(launches)
        return cls(
            kind=AlertKind.UNREACHABLE,
            launch=f"{HOST_LAUNCH_PREFIX}{host}",
            host=host,
            engine="",
            phase="",
            incarnation=1,
            severity=SEVERITY[AlertKind.UNREACHABLE],
            started_at=since,
            summary=f"{len(launches)} launch{'es' if len(launches) != 1 else ''} not followed: {names}",
            # values like any alert's facts (a receiver reads them without parsing the detail's words)
            facts=(
                ("launches", len(launches)),
                ("not_followed", names),
                ("since", rfc3339(since)),
                *((("error", error),) if error else ()),
            ),
            detail=f"{error}; not followed: {names}" if error else f"not followed: {names}",
            link=link,
        )

    def resolution(self, at: datetime, detail: str = "") -> Alert:
        """The alert that ends this one: same launch, incarnation, labels and category, kind `resolved`."""
        return dataclasses.replace(
            self,
            kind=AlertKind.RESOLVED,
            resolves=self.problem,
            severity=self.severity,
            ended_at=at,
            detail=detail or self.detail,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of every field plus `title`, `dedup_key` and `incident_key` (the generic
        webhook's body; docs/notifiers.md has the table)."""
        return {
            "kind": self.kind.value,
            "title": self.title,
            "launch": self.launch,
            "host": self.host,
            "engine": self.engine,
            "phase": self.phase,
            "incarnation": self.incarnation,
            "severity": self.severity,
            "category": self.category or "",
            "summary": self.summary,
            "hint": self.hint,
            "ranks": list(self.ranks),
            "traceback": list(self.traceback),
            "facts": dict(self.facts),
            "progress": {name: {"done": done, "total": total} for name, done, total in self.progress},
            "labels": dict(self.labels),
            "time_in_phase_seconds": self.time_in_phase,
            "time_since_start_seconds": self.time_since_start,
            "usual_seconds": self.usual_seconds,
            "last_line": self.last_line,
            "detail": self.detail,
            "link": self.link,
            "started_at": rfc3339(self.started_at),
            "ended_at": rfc3339(self.ended_at) if self.ended_at else None,
            "resolves": self.resolves.value if self.resolves else None,
            "occurrence": self.occurrence,
            "missing_log": self.missing_log,
            "changed": self.changed,
            "node": self.node,
            "serving_hang": self.serving_hang,
            "dedup_key": self.dedup_key,
            "incident_key": self.incident_key,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Alert:
        """The alert `to_dict` gave (as kept in the outbox).

        Raises:
            KeyError, ValueError: not a mapping `to_dict` makes.
        """

        def when(value: object) -> datetime | None:
            return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None

        started_at = when(data["started_at"])
        if started_at is None:
            raise ValueError("started_at is empty")
        return cls(
            kind=AlertKind(data["kind"]),
            launch=str(data["launch"]),
            host=str(data.get("host") or ""),
            engine=str(data.get("engine") or ""),
            phase=str(data.get("phase") or ""),
            incarnation=int(data.get("incarnation") or 1),
            severity=str(data.get("severity") or SEVERITY[AlertKind(data["kind"])]),
            started_at=started_at,
            category=Category(data["category"]) if data.get("category") else None,
            summary=str(data.get("summary") or ""),
            hint=str(data.get("hint") or ""),
            ranks=tuple(str(r) for r in data.get("ranks") or ()),
            traceback=tuple(str(line) for line in data.get("traceback") or ()),
            facts=tuple((str(k), _fact(v)) for k, v in (data.get("facts") or {}).items()),
            progress=_progress(data.get("progress")),
            labels=tuple((str(k), str(v)) for k, v in (data.get("labels") or {}).items()),
            time_in_phase=number(data.get("time_in_phase_seconds")),
            time_since_start=number(data.get("time_since_start_seconds")),
            usual_seconds=number(data.get("usual_seconds")),
            last_line=str(data.get("last_line") or ""),
            detail=str(data.get("detail") or ""),
            link=str(data.get("link") or ""),
            ended_at=when(data.get("ended_at")),
            resolves=AlertKind(data["resolves"]) if data.get("resolves") else None,
            occurrence=int(data.get("occurrence") or 1),
            missing_log=str(data.get("missing_log") or ""),
            changed=str(data.get("changed") or ""),
            node=str(data.get("node") or ""),
        )

    @classmethod
    def from_status(
        cls,
        kind: AlertKind | str,
        status: Status,
        *,
        link: str = "",
        now: datetime | None = None,
        detail: str = "",
        usual_seconds: float | None = None,
    ) -> Alert:
        """Build an alert from where a launch stands (the follower's status, with the daemon's host and labels).

        Args:
            kind: why the alert is sent.
            status: the snapshot.
            link: the status page URL of this launch.
            now: the time the alert is made (UTC; default: the current time). It is `startsAt` and, for
                `resolved`, `ended_at`; the start of the problem is dated back from it by the snapshot's
                clock when the snapshot tells when the problem began.
            detail: one more line (the connection error of `unreachable`, what replaced the log).
            usual_seconds: `ready`: the launch's usual time to ready, from its history.
        """
        kind = AlertKind(kind)
        now = now or datetime.now(UTC)
        v = status.verdict
        err = v.error
        time_in_phase, time_since_start = status.time_in_phase(), status.time_since_start()
        if kind is AlertKind.READY and v.time_to_ready is not None:
            time_since_start = v.time_to_ready
        elif kind is AlertKind.READY and v.timeline:  # until it was ready, by the follower's clock
            began = v.entered(v.phase)
            time_since_start = None if began is None else max(0.0, began - v.timeline[0].entered)
        started_at = now
        if kind in {AlertKind.CRASHED, AlertKind.STALLED}:
            # the problem began when its state was entered, not when the alert is made (a settle window later)
            started_at = datetime.fromtimestamp(status.problem_began(now.timestamp()), UTC)
        reason = v.reason
        missing_log = ""
        if v.missing_log is not None and v.missing_log.path:
            # not a launch that hung: a log that never came (a typo in the path, a launch never started); the
            # time in `pending` is how long it has been missing, and there is no start to count from
            missing_log, waited = v.missing_log.path, v.missing_log.seconds
            after = f" after {format_duration(waited)}" if waited is not None else ""
            reason = f"{missing_log} does not exist{after}"
            detail = detail or "a typo in the log's path, or a launch that never started"
            time_in_phase, time_since_start = waited, None
        summary = err.summary if err is not None else ""
        if not summary and kind is AlertKind.STALLED:
            summary = reason or f"no progress in {v.phase.value}"
        if not detail and kind is AlertKind.STALLED and reason and reason != summary:
            detail = reason
        host, node = status.host, ""
        failed = v.failed_node
        if failed is not None and kind is AlertKind.CRASHED:
            # a multi-node launch: the node that failed first, on its host; the others' part in one line
            host, node = failed.host, failed.node
            detail = detail or "; ".join(_node_said(other) for other in v.consequences)
        return cls(
            kind=kind,
            launch=status.name,
            host=host,
            engine=v.engine or "",
            phase=v.phase.value,
            incarnation=v.incarnation or 1,
            severity=SEVERITY[kind],
            started_at=started_at,
            category=err.category if err is not None else None,
            summary=summary,
            hint=err.hint if err is not None else "",
            ranks=err.ranks if err is not None else (),
            traceback=(err.traceback or v.context) if err is not None else (),
            facts=tuple((k, _fact(value)) for k, value in v.facts),
            progress=tuple((p.name, p.done, p.total) for p in v.progress),
            labels=status.labels,
            time_in_phase=time_in_phase,
            time_since_start=time_since_start,
            usual_seconds=usual_seconds,
            last_line=status.last_line,
            detail=detail,
            link=link,
            ended_at=now if kind is AlertKind.RESOLVED else None,
            # the Nth stall of an incarnation (progress resumed in between) is its own alert
            occurrence=max(1, v.stalls) if kind is AlertKind.STALLED else 1,
            missing_log=missing_log,
            changed=v.changes.summary() if v.changes is not None else "",
            node=node,
        )


def _node_said(other: NodeFailure) -> str:
    # another node's part in a multi-node crash: its error, a consequence; or nothing of its own
    if other.summary is None:
        state = other.state.value if other.state is not None else "unknown"
        return f"node {other.node}: no error of its own ({state}), went quiet"
    return f"node {other.node}: {other.summary} (a consequence)"


def _fact(value: object) -> FactValue:
    """A fact's value as JSON has it: a number stays a number; anything else becomes its text."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def _count(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _progress(progress: object) -> tuple[tuple[str, int | None, int | None], ...]:
    """`{"weights": {"done": 64, "total": 64}}` (the verdict's `progress`) as (name, done, total)."""
    if not isinstance(progress, Mapping):
        return ()
    return tuple(
        (str(name), _count(p.get("done")), _count(p.get("total")))
        for name, p in progress.items()
        if isinstance(p, Mapping)
    )
