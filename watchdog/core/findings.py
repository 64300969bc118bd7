"""Findings: what the log (or a probe) told, as frozen values the lifecycle consumes (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from watchdog.core.arguments import Argument
from watchdog.core.rootcause import Candidate

__all__ = [
    "ArgumentsFound",
    "DyingWords",
    "ErrorSeen",
    "Event",
    "FactFound",
    "GpuMemorySampled",
    "HealthChecked",
    "LaunchStarted",
    "LinesRead",
    "LogMissing",
    "PhaseReached",
    "ProcessExited",
    "ProgressMade",
    "ReadyReached",
    "RequestServed",
    "ServingSeen",
    "StopSeen",
]


@dataclass(frozen=True, slots=True)
class LaunchStarted:
    """A launch's first line (server arguments, version banner): a second one starts a new incarnation."""

    line: int
    at: str | None
    seconds: float | None
    marker: bool = False  # the engine's own start marker (a banner): the log shows the launch from its start


@dataclass(frozen=True, slots=True)
class PhaseReached:
    """A startup phase marker: `state` is one of the startup states of DESIGN.md."""

    state: str
    line: int
    at: str | None
    seconds: float | None
    source: str = ""  # rank or process tag of the line; "" when untagged
    progress: bool = True  # False on an error's own line: the phase it names was reached, nothing went on


@dataclass(frozen=True, slots=True)
class ProgressMade:
    """A progress bar advanced: weight shards, graph-capture batches."""

    name: str
    done: int
    total: int
    line: int
    source: str = ""  # rank or process tag of the line; "" when untagged


@dataclass(frozen=True, slots=True)
class FactFound:
    """A number or string the log told: free memory after weights, KV cache tokens, elapsed times."""

    name: str
    value: float | str
    line: int


@dataclass(frozen=True, slots=True)
class ArgumentsFound:
    """The engine's dump of the arguments it was started with (or some of them: one a line)."""

    arguments: tuple[Argument, ...]
    line: int


@dataclass(frozen=True, slots=True)
class ReadyReached:
    """The engine's ready marker."""

    line: int
    at: str | None
    seconds: float | None
    source: str = ""  # rank or process tag of the line; "" when untagged
    # printed a moment before the server accepts connections (vLLM's "Starting vLLM server on" comes before
    # Uvicorn listens): the state is ready at once, the verdict waits for a later ready line or a quiet log
    early: bool = False
    # the line that confirms an early ready line is due (the server's path prints it next: vLLM's API server
    # starts Uvicorn, which says "Application startup complete."): the verdict waits for it longer
    # (READY_CONFIRM_DUE). With `early`, an early ready line; without, no ready line itself: the HTTP server began
    # its own startup (Uvicorn's "Waiting for application startup.")
    confirm_due: bool = False


@dataclass(frozen=True, slots=True)
class ErrorSeen:
    """An error line or a completed traceback; `candidate.fatal` ends the launch at once."""

    candidate: Candidate


@dataclass(frozen=True, slots=True)
class RequestServed:
    """A line that shows the server serving: an HTTP request answered (`status`, on `path` where the line names
    it), or a batch run (None)."""

    line: int
    status: int | None = None
    path: str | None = None


@dataclass(frozen=True, slots=True)
class StopSeen:
    """A clean, intended shutdown marker (`after_ready`: one only once the server was ready, as the engine prints
    the same line on its way out of a failed start)."""

    line: int
    at: str | None
    after_ready: bool = False


@dataclass(frozen=True, slots=True)
class DyingWords:
    """A line only a dying process prints: the interpreter's shutdown warnings (`[[dying]]` rules)."""

    line: int
    at: str | None
    words: str  # the line, cleaned
    before: str = ""  # the last line of the launch a rule read before it (not exit noise), if any
    clean_exit: bool = False  # printed at every exit, a clean stop's too (exit noise), not only at a death


@dataclass(frozen=True, slots=True)
class LinesRead:
    """`count` more lines were read.

    `active` of them are healthy activity (neither idle chatter matched by benign rules nor part of an
    error), and `healthy_tail` of those came after the last error line among them.
    """

    count: int
    active: int
    healthy_tail: int = 0


@dataclass(frozen=True, slots=True)
class ServingSeen:
    """A serving line of the engine (a `[[serving]]` rule): its counts of requests and tokens, or one request
    that started or finished, or every one done (`request`: "started", "finished", "idle"; "" for counts)."""

    line: int
    at: str | None
    seconds: float | None
    request: str = ""
    key: str = ""  # the request's slot or id, when its lines name one
    running: int | None = None  # requests being generated
    waiting: int | None = None  # requests queued
    tokens: float | None = None  # tokens generated or prefilled since the last such line (a count or a rate)


@dataclass(frozen=True, slots=True)
class LogMissing:
    """The log file is not there (yet): the stall clock runs from now."""


@dataclass(frozen=True, slots=True)
class ProcessExited:
    """The watched process is gone (probe).

    `last_words`: the log's last line when it reads as the reason the process stopped (a usage error, one
    line and exit 1) and no error was read before it; `line` its number. None: the log does not say why.
    What a platform knows of the end (a container's or unit's state): `exit_code`, `oom_killed` (the kernel
    killed it at its memory limit) and `memory_limit` (bytes; None: none known).
    """

    detail: str
    last_words: str | None = None
    line: int | None = None
    exit_code: int | None = None
    oom_killed: bool = False
    memory_limit: int | None = None


@dataclass(frozen=True, slots=True)
class GpuMemorySampled:
    """The GPU probe sampled memory: `growing` when the launch's memory is still filling (that is progress)."""

    growing: bool


@dataclass(frozen=True, slots=True)
class HealthChecked:
    """The health endpoint answered `status` (None: no answer)."""

    status: int | None


Event = (
    LaunchStarted
    | PhaseReached
    | ProgressMade
    | FactFound
    | ArgumentsFound
    | ReadyReached
    | ServingSeen
    | ErrorSeen
    | RequestServed
    | StopSeen
    | DyingWords
    | LinesRead
    | ProcessExited
    | HealthChecked
    | GpuMemorySampled
    | LogMissing
)
