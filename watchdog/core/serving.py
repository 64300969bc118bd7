"""Serving: what a ready server's own serving lines say of its requests and tokens, and whether it hangs (pure).

A serving hang is requests running or waiting while no token comes for `hang_after`. The evidence is the
engine's serving lines (`[[serving]]` rules, `ServingSeen`): counts of requests and tokens (SGLang's decode
batch line, vLLM's periodic stats), or single requests that start, progress and finish (llama.cpp's slots,
TGI's router; these tell a request's tokens when it ends, so one generation longer than `hang_after` reads as a
hang). A server with no request is idle, never hung. A hang's clock starts at a line that shows requests and no
tokens and ends at one that shows tokens again or no request; counts are a snapshot, so a hang by counts is
said by a later line that still shows them, while a request told open is open until its end line comes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from watchdog.core.findings import ServingSeen
from watchdog.vocabulary import format_duration

__all__ = ["NO_REQUESTS", "RESUMED", "TOKENS_AGAIN", "Serving"]

TOKENS_AGAIN = "tokens flow again"
NO_REQUESTS = "no request waiting any more"
RESUMED = frozenset({TOKENS_AGAIN, NO_REQUESTS})
"""The reasons a serving hang ends with (a transition back to ready)."""


@dataclass(slots=True)
class Serving:
    """A ready incarnation's requests as its serving lines last told, and since when none got a token."""

    running: int = 0
    waiting: int = 0
    # requests started and not finished, by slot (`request` rules)
    open: set[str] = field(default_factory=set)
    # the caller's clock since which requests wait with no token (None: no hang clock), the log's seconds then
    # (a replay times the hang by them), and the log's time then as the log wrote it
    since: float | None = None
    since_seconds: float | None = None
    since_at: str | None = None
    hung: bool = False  # the incarnation is stalled by a serving hang (left when tokens flow again)

    @property
    def load(self) -> int:
        """Requests running or waiting."""
        return self.running + self.waiting

    def observe(self, seen: ServingSeen, now: float) -> str | None:
        """Take one serving line at clock time `now`; return why a hang is over (`RESUMED`) when the line shows
        tokens flowing or no request, else None (the hang clock starts with the first line that shows requests
        and no tokens, and runs on)."""
        flowing = False
        if seen.request == "started":
            self.open.add(seen.key)
            self.running, self.waiting = len(self.open), 0
        elif seen.request == "tokens":
            flowing = True
        elif seen.request == "finished":
            # a request finished: its tokens came (an engine that prints a request's tokens only at its end)
            self.open.discard(seen.key)
            self.running, self.waiting, flowing = len(self.open), 0, True
        elif seen.request == "idle":
            self.open.clear()
            self.running = self.waiting = 0
        else:
            if seen.running is not None:
                self.running = seen.running
            if seen.waiting is not None:
                self.waiting = seen.waiting
            flowing = seen.tokens is not None and seen.tokens > 0
        if self.load == 0:
            self.since = self.since_seconds = self.since_at = None
            return TOKENS_AGAIN if flowing else NO_REQUESTS
        if flowing or self.since is None:
            # tokens came now (or requests wait from now on): no token since this line, if none comes after it
            self.since, self.since_seconds, self.since_at = now, seen.seconds, seen.at
        return TOKENS_AGAIN if flowing else None

    def overdue(self, now: float, seconds: float | None, hang_after: float) -> bool:
        """Whether requests have waited with no token for `hang_after`: by the log's seconds of the line just
        read (`seconds`, a replay's only clock), or by the caller's clock."""
        if self.since is None:
            return False
        if (
            seconds is not None
            and self.since_seconds is not None
            and seconds - self.since_seconds >= hang_after
        ):
            return True
        return now - self.since >= hang_after

    def reason(self, hang_after: float) -> str:
        """What a serving hang's stall says: the requests, and since when no token came."""
        what = f"{self.running} running, {self.waiting} waiting"
        since = f" since {self.since_at}" if self.since_at else ""
        return f"serving hang: {what}, 0 tokens/s{since} (over {format_duration(hang_after)})"
