"""Durations: the one sane value of a phase's length, from a log's times checked against the follower's clock.

A log's times are used when sane: not negative, at most `MAX_LOG_GAP`, and, both ends seen live, not shorter
than the follower's clock by more than `tolerance` (a log's clock that went back); a longer log is believed
(buffered lines come in bursts). A replay has only the log's times: an insane value is unknown, never wrong.
"""

from __future__ import annotations

import enum

from watchdog.core.envelope import MAX_LOG_GAP, seconds_between

__all__ = ["CLOCK_SLACK", "CLOCK_SLACK_RATIO", "MAX_LOG_GAP", "Seen", "duration", "plausible", "tolerance"]

# How far a log's duration may differ from the follower's clock and still be believed: a line is read some
# time after it is written (a poll, an SSH round trip, a busy daemon), and the log prints whole seconds.
CLOCK_SLACK = 30.0  # seconds
CLOCK_SLACK_RATIO = 0.1  # of the clock's duration, for long phases read in large batches


class Seen(enum.Enum):
    """How the follower saw the two ends of a duration."""

    NONE = "none"  # neither as it came (a replay, the log as it was when the follow began): log times only
    LIVE = "live"  # both as they came, on one continuous clock: the clock measures the duration too
    END_LIVE = "end_live"  # only the end (the start was in the backlog, or before a restart): the clock's
    # duration is a lower bound (the start was read after it was written, or the clock did not run while down)


def tolerance(clock: float) -> float:
    """How far a log's duration may be from the clock's `clock` seconds and still be believed."""
    return CLOCK_SLACK + CLOCK_SLACK_RATIO * clock


def plausible(seconds: float | None) -> float | None:
    """`seconds` if it can be a duration (0 to `MAX_LOG_GAP`), else None: a value stored or sent by an
    older build that had no bound is shown as unknown rather than as "-7200s"."""
    return seconds if seconds is not None and 0 <= seconds <= MAX_LOG_GAP else None


def duration(
    log_start: float | None,
    log_end: float | None,
    clock_start: float | None,
    clock_end: float | None,
    seen: Seen,
) -> float | None:
    """The seconds from one transition to a later one, or None when nothing can tell: `log_*` are the log's
    times of the two (`Record.seconds`, None: none), `clock_*` the follower's clock when it saw them."""
    log = seconds_between(log_start, log_end)
    if seen == Seen.NONE or clock_start is None or clock_end is None:
        return log
    clock = max(0.0, clock_end - clock_start)
    # A log may say more than the clock saw: its lines were buffered and came in a burst (a server's stdout
    # redirected to a file is block-buffered), or it is replayed faster than it was written (the demo).
    # It cannot say less: its clock went back.
    if log is not None and log >= clock - tolerance(clock):
        return log
    # LIVE: the clock measured it; END_LIVE: the clock's duration is a lower bound, the true value unknown
    return clock if seen == Seen.LIVE else None
