"""The one backoff: doubled per failure up to its cap, spread by its jitter, in and out of tenacity's loops."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tenacity import RetryCallState, Retrying

from watchdog.backoff import AT_LEAST, FULL_JITTER, HALF_JITTER, NO_JITTER, Jitter, backoff, wait_backoff


def test_the_pause_doubles_up_to_its_cap() -> None:
    """Without jitter the pauses are first, twice it, four times ... and then the cap, even after a long streak."""
    pauses = [backoff(n, first=5.0, cap=300.0, jitter=NO_JITTER) for n in (0, 1, 2, 3, 4, 5, 6, 7, 10_000)]
    assert pauses == [5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0]


@given(
    doublings=st.integers(0, 60),
    first=st.floats(0.0, 10.0),
    cap=st.floats(0.0, 1000.0),
    jitter=st.sampled_from([NO_JITTER, HALF_JITTER, FULL_JITTER, AT_LEAST]),
)
def test_the_jitter_stays_within_its_factors(
    doublings: int, first: float, cap: float, jitter: Jitter
) -> None:
    """A jittered pause lies between the doubled delay (capped) times the jitter's low and high factors."""
    delay = min(cap, first * 2.0**doublings)
    pause = backoff(doublings, first=first, cap=cap, jitter=jitter)
    assert jitter[0] * delay <= pause <= jitter[1] * delay


def test_a_retry_loop_waits_the_same_backoff() -> None:
    """As tenacity's `wait`, the first retry waits `first`, and each later one twice the one before, up to the cap."""
    wait = wait_backoff(first=1.0, cap=4.0, jitter=NO_JITTER)
    state = RetryCallState(Retrying(), None, (), {})
    pauses = []
    for attempt in range(1, 5):
        state.attempt_number = attempt
        pauses.append(wait(state))
    assert pauses == [1.0, 2.0, 4.0, 4.0]
