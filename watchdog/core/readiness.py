"""A launch's readiness answer: the HTTP status and body of /launches/NAME/ready, and `watchdog probe`'s exit.

One typed value (`Readiness`, made from a `Status` by `readiness_of`) crosses the seam: the daemon's endpoint
renders it (`http_status`, `to_json`), and the probe reads the body's `state` back into an exit code through
`verdict.exit_code`, the one mapping of states to codes (docs/readiness.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watchdog.core.verdict import Progress, Status, exit_code
from watchdog.vocabulary import DEADLINE_STATES, PROBLEM_STATES, State

__all__ = ["HTTP_FAILED", "HTTP_READY", "HTTP_STARTING", "Readiness", "readiness_of"]

HTTP_READY = 200  # the launch can serve
HTTP_STARTING = 503  # not ready (yet): pending, a startup phase, or stopped
HTTP_FAILED = 500  # crashed or stalled: waiting longer will not make it ready by itself


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether one launch can serve now, and where it stands if it cannot."""

    name: str
    state: State
    phase: State  # the furthest startup phase reached; for a crash or a stall, the phase it came in
    incarnation: int
    progress: tuple[Progress, ...] = ()
    elapsed: float | None = None  # seconds since this incarnation began (until its outcome), None: unknown
    eta: float | None = None  # seconds to ready from the launch's history, None: unknown or not starting
    category: str | None = None  # a crash's category
    summary: str | None = None  # a crash's root cause, one line
    reason: str = ""  # why it stalled

    @property
    def ready(self) -> bool:
        """Whether the launch can serve."""
        return self.state is State.READY

    @property
    def http_status(self) -> int:
        """200 ready, 500 crashed or stalled, 503 otherwise (pending, starting, or stopped: not serving, but
        nothing failed, and a new start may follow)."""
        if self.ready:
            return HTTP_READY
        return HTTP_FAILED if self.state in PROBLEM_STATES else HTTP_STARTING

    @property
    def exit_code(self) -> int:
        """`watchdog probe`'s exit: 0 ready, 1 crashed, 2 stalled, 3 anything else (not ready yet, stopped)."""
        return exit_code(self.state)

    def to_json(self) -> dict[str, Any]:
        """The body of /launches/NAME/ready (docs/contracts.md): always `name`, `ready`, `state`, `phase`,
        `progress`, `elapsed_seconds`, `eta_seconds` and `incarnation`; `category` and `summary` when crashed,
        `reason` when stalled."""
        out: dict[str, Any] = {
            "name": self.name,
            "ready": self.ready,
            "state": self.state.value,
            "phase": self.phase.value,
            "progress": {p.name: {"done": p.done, "total": p.total} for p in self.progress},
            "elapsed_seconds": round(self.elapsed, 1) if self.elapsed is not None else None,
            "eta_seconds": round(self.eta, 1) if self.eta is not None else None,
            "incarnation": self.incarnation,
        }
        if self.state is State.CRASHED:
            out.update(category=self.category, summary=self.summary)
        elif self.state is State.STALLED:
            out["reason"] = self.reason
        return out


def readiness_of(status: Status) -> Readiness:
    """The readiness of the launch `status` describes (its name is the launch's)."""
    v = status.verdict
    error = v.error
    return Readiness(
        name=status.name,
        state=v.state,
        phase=v.phase,
        incarnation=v.incarnation,
        progress=v.progress,
        elapsed=status.time_since_start(),
        eta=status.eta if v.state in DEADLINE_STATES else None,  # only while it is on its way
        category=str(error.category) if error is not None else None,
        summary=error.summary if error is not None else None,
        reason=v.reason if v.state is State.STALLED else "",
    )
