"""A host's outage as all its launches see it: it answers, cannot be reached, or refuses us and is waited out
on one backoff that its launches share; an outage past its grace is said once (`Outages.overdue`)."""

from __future__ import annotations

import asyncio
import enum
import math
from collections.abc import Callable

import structlog

from watchdog.backoff import NO_JITTER, backoff
from watchdog.clock import Clock, wake_up
from watchdog.vocabulary import format_duration

__all__ = ["REFUSED_PAUSE_MAX", "RESTART_PAUSE", "Host", "Outages", "Reach"]

log = structlog.get_logger("watchdog.daemon")

RESTART_PAUSE = 5.0  # seconds before a follower that failed is started again
REFUSED_PAUSE_MAX = 300.0  # a host that refuses us for good is tried again after 5 s, 10 s, ... at most this


class Reach(enum.Enum):
    """Where a host stands with the daemon."""

    ANSWERS = "answers"  # it answers (or no launch has tried it yet): no outage
    UNREACHABLE = "unreachable"  # it stopped answering: each of its launches tries again after its own pause
    REFUSED = "refused"  # it refuses us for good (auth, host key): its launches wait out its backoff
    TRYING = "trying"  # ... and one launch makes the attempt of this backoff; the others wait for its outcome


_REFUSING = frozenset({Reach.REFUSED, Reach.TRYING})


class Host:
    """One configured host as all its launches see it: one outage, one alert, one backoff."""

    def __init__(self, name: str, clock: Clock) -> None:
        """A host that answers, its timers on `clock`."""
        self.name = name
        self.reach = Reach.ANSWERS
        # unix time it stopped answering or refused us (None: it answers), and that moment on the monotonic
        # clock (its grace counts from it)
        self.down_since: float | None = None
        self.down_at: float | None = None
        self.error = ""  # what it said last
        self.said = False  # this outage was alerted
        self.refusals = 0  # refusals in a row: its backoff (`pause`)
        self.retry_at = 0.0  # monotonic time of the next attempt while it refuses us
        self._clock = clock
        self._waiters: set[asyncio.Future[object]] = set()  # launches waiting for their turn (`wait_turn`)

    @property
    def refusing(self) -> bool:
        """It refuses us for good: its launches wait for their turn (`wait_turn`)."""
        return self.reach in _REFUSING

    def retry_in(self) -> float:
        """Seconds until the next attempt while it refuses us (0 when it is due)."""
        return max(0.0, self.retry_at - self._clock.monotonic())

    def down(self, error: str, *, since: float | None = None) -> None:
        """It did not answer (or refused us): the outage counts from `since` (monotonic: when the failed
        attempt began; a black-holed host is said only at the end of its connect timeout), else from now."""
        # on the monotonic clock, so that a step of the wall clock neither fires it early nor holds it
        now = self._clock.monotonic()
        began = now if since is None else min(since, now)
        if self.down_at is None or began < self.down_at:
            self.down_at = began
            self.down_since = self._clock.now() - (now - began)
        self.error = error  # the latest reason, not the first one of a long outage
        if self.reach is Reach.ANSWERS:
            self.reach = Reach.UNREACHABLE

    def lost(self, error: str) -> None:
        """A launch lost (or could not make) its connection: an outage, and no longer a refusal to wait out
        (it answered, if not with a session)."""
        self.down(error)
        if self.refusing:
            self.reach = Reach.UNREACHABLE
            self._changed()

    def refused(self, error: str, *, tried: bool) -> None:
        """It refused a launch for good. The first refusal, or the failure of the one attempt of a backoff
        (`tried`), doubles the backoff (from `RESTART_PAUSE` up to `REFUSED_PAUSE_MAX`)."""
        self.down(error)
        if not self.refusing or tried:
            self.reach = Reach.REFUSED
            self.refusals += 1
            self.retry_at = self._clock.monotonic() + self.pause
            log.error("host refused us", host=self.name, error=error, next_try_in=self.pause)
            self._changed()

    @property
    def pause(self) -> float:
        """The current backoff: `RESTART_PAUSE` after the first refusal, doubled per refusal up to
        `REFUSED_PAUSE_MAX`; 0 while it does not refuse us."""
        if not self.refusals:
            return 0.0
        return backoff(self.refusals - 1, first=RESTART_PAUSE, cap=REFUSED_PAUSE_MAX, jitter=NO_JITTER)

    def up(self) -> bool:
        """It answered: the outage is over, and the launches that wait for their turn go now. Return whether
        this outage was said (its resolution is owed)."""
        if self.refusing:
            self.refusals = 0
            self._changed()
        self.reach = Reach.ANSWERS
        self.down_since = self.down_at = None
        said, self.said = self.said, False
        return said

    def retry_now(self) -> None:
        """Try again now (a reload: the operator's word that something was fixed), with the backoff reset."""
        self.retry_at = 0.0
        self.refusals = 0
        self._changed()

    def give_up_turn(self) -> None:
        """The launch making the attempt stopped before its outcome (cancelled): another one may try."""
        if self.reach is Reach.TRYING:
            self.reach = Reach.REFUSED
        self._changed()

    async def wait_turn(self, note: Callable[[str], None]) -> bool:
        """Wait while it refuses us: True when the caller is the launch to try again (its outcome is the
        host's: `refused(tried=True)`, `up` or `give_up_turn`), False when it answered another launch or
        stopped refusing. `note` is told, at each wait, what the launch waits for."""
        while self.refusing:
            if self.reach is Reach.REFUSED and self._clock.monotonic() >= self.retry_at:
                self.reach = Reach.TRYING
                return True
            note(f"refused: {self.error}; trying again in {format_duration(self.retry_in())}")
            wake = asyncio.get_running_loop().create_future()
            self._waiters.add(wake)
            try:
                if self.reach is Reach.TRYING:  # until the attempt's outcome, however long it takes
                    await wake
                else:
                    await self._clock.sleep(self.retry_at - self._clock.monotonic(), wake)
            finally:
                self._waiters.discard(wake)
        return False

    def _changed(self) -> None:
        # each waiter has its own future: a cancelled waiter cancels only its own
        for wake in self._waiters:
            wake_up(wake)
        self._waiters.clear()


class Outages(dict[str, Host]):
    """The configured hosts by name, each made at its first use; an outage is overdue past `grace` seconds."""

    def __init__(self, clock: Clock, grace: float = math.inf) -> None:
        """No host yet; their timers on `clock`."""
        super().__init__()
        self._clock = clock
        self._grace = grace

    def host(self, name: str) -> Host:
        """The host `name` (made, answering, if new)."""
        if name not in self:
            self[name] = Host(name, self._clock)
        return self[name]

    def overdue(self) -> list[Host]:
        """The hosts down for `grace` or longer whose outage was not said yet."""
        return [host for host in self.values() if self.is_overdue(host)]

    def is_overdue(self, host: Host) -> bool:
        """`host` is down for `grace` or longer, and its outage was not said yet."""
        began = host.down_at
        return began is not None and not host.said and self._clock.monotonic() - began >= self._grace
