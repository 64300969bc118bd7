"""What the Kubernetes API says about a pod, read from its JSON: which container instance runs (the stream), how
it ended, its memory limit, and the timestamped lines and resume cursors of its log."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = [
    "ContainerEnd",
    "LogCursor",
    "PodView",
    "choose_pod",
    "floor_rfc3339",
    "parse_quantity",
    "parse_timestamp",
    "split_log_line",
    "stream_number",
]

Json = Mapping[str, Any]

# RFC 3339 as the API writes it: `2026-01-02T03:04:05.123456789Z` (log lines), `2026-01-02T03:04:05Z` (status)
_RFC3339 = re.compile(
    rb"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$"
)
_DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)

# The suffixes of a resource quantity (k8s.io/apimachinery resource.Quantity): binary, decimal, and exponents.
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal(10**3),
            "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
            "E": Decimal(10**18)}  # fmt: skip
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)$")


def _days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to the date (proleptic Gregorian), without datetime's microsecond rounding."""
    leap = month > 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    y = year - 1
    before = (
        365 * y + y // 4 - y // 100 + y // 400 - 719162
    )  # days from 0001-01-01 to year-01-01, less 1970's
    return before + _DAYS_BEFORE_MONTH[month - 1] + leap + day - 1


def parse_timestamp(text: bytes) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 time (a log line's nanosecond one), None if it is not one.

    Integers, not datetimes: a log's times have nanoseconds, which a datetime would round to microseconds (two
    lines 300 ns apart would look simultaneous).
    """
    m = _RFC3339.match(text)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    seconds = _days(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    if m.group(8) is not None:
        offset = int(m.group(9)) * 3600 + int(m.group(10)) * 60
        seconds -= offset if m.group(8) == b"+" else -offset
    nanos = int((m.group(7) or b"").ljust(9, b"0"))
    return seconds * 1_000_000_000 + nanos


def floor_rfc3339(nanos: int) -> str:
    """The RFC 3339 UTC time (whole seconds, rounded down) of `nanos`: what `sinceTime` takes. The API keeps
    only whole seconds of it, so a resume asks from the second of its cursor and drops what it has seen."""
    seconds = nanos // 1_000_000_000
    days, rest = divmod(seconds, 86400)
    # civil-from-days (Howard Hinnant's algorithm): the inverse of _days, exact for any year
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    return f"{year:04d}-{month:02d}-{day:02d}T{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}Z"


def split_log_line(line: bytes) -> tuple[int | None, bytes]:
    """(time in ns, the line without it) of a line of a log read with `timestamps=true` (`TIME SP text`);
    (None, the line) for a line without one."""
    head, sep, rest = line.partition(b" ")
    stamp = parse_timestamp(head.rstrip(b"\n")) if len(head) <= 40 else None
    if stamp is None:
        return None, line
    return stamp, (rest if sep else b"\n" if line.endswith(b"\n") else b"")


@dataclass(frozen=True)
class LogCursor:
    """Where a container's log was read to: the time of its last line and how many lines at that time were
    delivered (lines may share a time), in the stream `stream` (`stream_number`). Written `STREAM:NANOS:COUNT`."""

    stream: int
    nanos: int
    count: int

    def __str__(self) -> str:
        """The cursor's text, as a checkpoint keeps it."""
        return f"{self.stream:x}:{self.nanos}:{self.count}"

    @classmethod
    def parse(cls, text: str) -> LogCursor | None:
        """The cursor `text` writes; None for a text that is not one (another source's cursor)."""
        parts = text.split(":")
        if len(parts) != 3:
            return None
        try:
            return cls(int(parts[0], 16), int(parts[1]), int(parts[2]))
        except ValueError:
            return None


def stream_number(pod_uid: str, container_id: str) -> int:
    """The number that names one container instance of a pod: the first 15 hex digits of sha256 of the pod's
    uid and the container's id (a restart gives the container a new id, a new pod a new uid)."""
    return int(hashlib.sha256(f"{pod_uid}/{container_id}".encode()).hexdigest()[:15], 16)


def parse_quantity(text: str) -> int | None:
    """Bytes of a resource quantity (`512Mi`, `1G`, `1e9`, `129e6`, `0.5Gi`); None if it is not one."""
    m = _QUANTITY.match(text.strip())
    if m is None:
        return None
    number, suffix = m.groups()
    try:
        value = Decimal(number)
        if suffix in _BINARY:
            value *= _BINARY[suffix]
        elif suffix[:1] in ("e", "E"):
            value *= Decimal(10) ** int(suffix[1:])
        else:
            value *= _DECIMAL[suffix]
    except (InvalidOperation, KeyError):
        return None
    return int(value.to_integral_value(rounding="ROUND_CEILING"))


@dataclass(frozen=True)
class ContainerEnd:
    """How a container instance ended (`state.terminated` or `lastState.terminated`)."""

    container_id: str
    reason: str  # "OOMKilled", "Error", "Completed", ... ("" when the API gives none)
    exit_code: int | None
    message: str = ""

    @property
    def oom_killed(self) -> bool:
        """Whether the kernel killed it for its memory limit."""
        return self.reason == "OOMKilled"

    def describe(self, container: str) -> str:
        """What a person reads: `container vllm terminated: OOMKilled (exit code 137)`."""
        code = f" (exit code {self.exit_code})" if self.exit_code is not None else ""
        message = f": {self.message.strip()}" if self.message.strip() else ""
        return f"container {container} terminated: {self.reason or 'no reason given'}{code}{message}"


def _end(terminated: object) -> ContainerEnd | None:
    if not isinstance(terminated, Mapping):
        return None
    code = terminated.get("exitCode")
    return ContainerEnd(
        container_id=str(terminated.get("containerID") or ""),
        reason=str(terminated.get("reason") or ""),
        exit_code=code if isinstance(code, int) else None,
        message=str(terminated.get("message") or ""),
    )


@dataclass(frozen=True)
class PodView:
    """One pod's container as the API describes it: the pod, which container, its current instance and how
    the current and the previous instance ended."""

    name: str
    uid: str
    created: str  # metadata.creationTimestamp (RFC 3339, sorts as text)
    deleting: bool  # metadata.deletionTimestamp is set
    phase: str
    restart_policy: str
    container: str  # the container followed: the one named, else the pod's first
    container_id: str  # the current instance's id; "" before it was created
    restart_count: int
    running: bool
    ended: ContainerEnd | None  # state.terminated: the current instance has ended
    last_ended: ContainerEnd | None  # lastState.terminated: the previous instance
    memory_limit: int | None  # resources.limits.memory of the container, in bytes

    @property
    def started(self) -> bool:
        """Whether the container has an instance with a log (running or ended)."""
        return bool(self.container_id) and (self.running or self.ended is not None)

    @property
    def stream(self) -> int | None:
        """The number of the current instance's stream (`stream_number`); None before there is one."""
        return stream_number(self.uid, self.container_id) if self.started else None

    def restarting(self, end: ContainerEnd) -> bool:
        """Whether the kubelet starts the container again after `end` (its pod's restart policy)."""
        if self.deleting:
            return False
        return self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and end.exit_code != 0)

    @classmethod
    def parse(cls, pod: Json, container: str | None = None) -> PodView:
        """The view of `pod` (a Pod object of the API) for `container` (None: the pod's first container).

        Raises:
            ValueError: the pod has no such container (the message names those it has).
        """
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        specs = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
        names = [str(c.get("name")) for c in specs]
        if container is None:
            if not names:
                raise ValueError(f"pod {meta.get('name')} has no containers")
            container = names[0]
        elif container not in names:
            raise ValueError(
                f"pod {meta.get('name')} has no container {container!r}; it has {', '.join(names)}"
            )
        limits = ((specs[names.index(container)].get("resources") or {}).get("limits")) or {}
        memory = limits.get("memory")
        cstatus: Json = next(
            (s for s in status.get("containerStatuses") or [] if s.get("name") == container), {}
        )
        state = cstatus.get("state") or {}
        restart = cstatus.get("restartCount")
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            created=str(meta.get("creationTimestamp") or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            phase=str(status.get("phase") or ""),
            restart_policy=str(spec.get("restartPolicy") or "Always"),
            container=container,
            container_id=str(cstatus.get("containerID") or ""),
            restart_count=restart if isinstance(restart, int) else 0,
            running="running" in state,
            ended=_end(state.get("terminated")),
            last_ended=_end((cstatus.get("lastState") or {}).get("terminated")),
            memory_limit=parse_quantity(str(memory)) if memory is not None else None,
        )


def choose_pod(pods: Iterable[Json], container: str | None) -> PodView | None:
    """The pod of a selector to follow: the newest (by creation) that is not being deleted and whose container
    has started; else the newest not being deleted (to wait for); None when there is none."""
    views = []
    for pod in pods:
        try:
            views.append(PodView.parse(pod, container))
        except ValueError:
            continue  # a pod of the selector without the container: not one of the launch's
    live = [v for v in views if not v.deleting]
    started = [v for v in live if v.started]
    pool = started or live
    return max(pool, key=lambda v: (v.created, v.name)) if pool else None
