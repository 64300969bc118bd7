"""The one backoff: a pause that doubles per failure in a row up to a cap, times a random factor (jitter) so
that what failed together does not come back together."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = ["AT_LEAST", "FULL_JITTER", "HALF_JITTER", "NO_JITTER", "Jitter", "backoff", "wait_backoff"]

Jitter = tuple[float, float]  # the lowest and highest factor of the doubled delay
NO_JITTER: Jitter = (1.0, 1.0)  # exactly the doubled delay (a pause a person reads: 5 s, 10 s, ...)
HALF_JITTER: Jitter = (0.5, 1.0)
# none to all of it (AWS's "full jitter", tenacity's wait_random_exponential)
FULL_JITTER: Jitter = (0.0, 1.0)
AT_LEAST: Jitter = (1.0, 1.25)  # up to a quarter more: a retry never comes before its backoff


def backoff(doublings: int, *, first: float, cap: float, jitter: Jitter = HALF_JITTER) -> float:
    """`first` doubled `doublings` times (0 after the first failure), at most `cap`, times a factor in `jitter`."""
    delay = min(cap, first * 2.0 ** min(max(doublings, 0), 64))  # 2.0 ** a very long streak overflows
    return delay * random.uniform(*jitter)  # noqa: S311 - jitter, not a secret


def wait_backoff(*, first: float, cap: float, jitter: Jitter) -> Callable[[RetryCallState], float]:
    """`backoff` as the `wait` of a tenacity retry loop: its first retry waits `first` (and its jitter)."""
    return lambda state: backoff(state.attempt_number - 1, first=first, cap=cap, jitter=jitter)
