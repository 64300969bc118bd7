"""Durations: the one sane value from a log's times and the follower's clock (`watchdog.core.durations`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.core.durations import MAX_LOG_GAP, Seen, duration, plausible
from watchdog.core.verdict import build_verdict
from watchdog.profiles.loader import load_engine

READY = Path(__file__).parent / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
YEARS = 946_684_800.0  # 1970 to 2000: what a log dated decades back made of a phase
DAY = 1_737_590_400.0  # 2025-01-23 on the log's scale (a dated log: no midnight crossing of a time-only one)


@pytest.mark.parametrize(
    ("log_start", "log_end", "clock_start", "clock_end", "seen", "expected"),
    [
        pytest.param(100.0, 160.0, None, None, Seen.NONE, 60.0, id="replay-sane"),
        pytest.param(DAY + 7300, DAY + 160, None, None, Seen.NONE, None, id="replay-negative-unknown"),
        pytest.param(0.0, YEARS, None, None, Seen.NONE, None, id="replay-decades-unknown"),
        pytest.param(0.0, MAX_LOG_GAP + 1, None, None, Seen.NONE, None, id="replay-past-the-bound-unknown"),
        pytest.param(100.0, 160.0, 5.0, 64.0, Seen.LIVE, 60.0, id="live-agrees-log-kept"),
        # longer than the clock saw: lines buffered and written in a burst, or replayed fast: believed
        pytest.param(100.0, 7300.0, 5.0, 7.0, Seen.LIVE, 7200.0, id="live-longer-than-the-clock-believed"),
        pytest.param(7300.0, 7400.0, 5.0, 7205.0, Seen.LIVE, 7200.0, id="live-shorter-than-the-clock-clock"),
        pytest.param(DAY + 7300, DAY + 100, 5.0, 7.0, Seen.LIVE, 2.0, id="live-negative-clock"),
        pytest.param(0.0, YEARS, 5.0, 12.5, Seen.LIVE, 7.5, id="live-decades-clock"),
        pytest.param(None, 100.0, 5.0, 12.5, Seen.LIVE, 7.5, id="live-undated-clock"),
        pytest.param(100.0, 700.0, 50.0, 60.0, Seen.END_LIVE, 600.0, id="backlog-start-log-above-clock-kept"),
        pytest.param(
            100.0, 110.0, 0.0, 600.0, Seen.END_LIVE, None, id="backlog-start-log-below-clock-unknown"
        ),
        pytest.param(
            DAY + 7300, DAY + 100, 0.0, 5.0, Seen.END_LIVE, None, id="backlog-start-negative-unknown"
        ),
    ],
)
def test_duration(
    log_start: float | None,
    log_end: float | None,
    clock_start: float | None,
    clock_end: float | None,
    seen: Seen,
    expected: float | None,
) -> None:
    """A log's duration is used when sane and (seen live) near the clock's; else the clock's when both ends
    were seen live, else unknown."""
    assert duration(log_start, log_end, clock_start, clock_end, seen) == expected


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        pytest.param(12.5, 12.5, id="sane"),
        pytest.param(-7200.0, None, id="negative"),
        pytest.param(YEARS, None, id="decades"),
        pytest.param(None, None, id="none"),
    ],
)
def test_plausible(stored: float | None, shown: float | None) -> None:
    """A stored duration outside 0 to the bound is unknown."""
    assert plausible(stored) == shown


def _lines(first_hour: str, rest_hour: str) -> tuple[bytes, bytes]:
    """The SGLang ready log (its lines at 2025-01-23 19:mm:ss) with its first two lines at the date and hour
    `first_hour` ("2025-01-23 19") and the rest at `rest_hour`."""
    lines = READY.read_text(encoding="utf-8").splitlines(keepends=True)
    head = "".join(line.replace("[2025-01-23 19:", f"[{first_hour}:") for line in lines[:2])
    rest = "".join(line.replace("[2025-01-23 19:", f"[{rest_hour}:") for line in lines[2:])
    return head.encode(), rest.encode()


@pytest.mark.parametrize(
    ("first_hour", "rest_hour"),
    [
        pytest.param("2025-01-23 19", "2025-01-23 17", id="two-hours-back"),
        pytest.param("1995-01-23 19", "2025-01-23 19", id="decades-apart"),
    ],
)
def test_a_log_clock_that_jumps_while_followed_live_is_measured_on_the_followers_clock(
    first_hour: str, rest_hour: str
) -> None:
    """A log followed live whose times jump between its start and its next phase: the start lasts what the
    follower's clock saw (4 s), not what the log's times say, and time to ready is the clock's too."""
    head, rest = _lines(first_hour, rest_hour)
    analyzer = Analyzer(load_engine("sglang"))
    analyzer.caught_up(0.0)  # an empty log when the follow began: everything after is seen as it comes
    analyzer.feed(head, 1.0)
    analyzer.feed(rest, 5.0)
    v = build_verdict(analyzer).to_json()
    assert v["state"] == "ready"
    assert [(e["state"], e.get("duration_seconds")) for e in v["timeline"]] == [
        ("starting", 4.0),
        ("loading_weights", 5.0),
        ("allocating_kv_cache", 0.0),
        ("capturing_graphs", 13.0),
        ("ready", None),
    ]
    assert v["time_to_ready_seconds"] == 4.0


@pytest.mark.parametrize(
    ("rest_hour", "starting"),
    [
        pytest.param("2025-01-23 21", 7220.0, id="two-hours-ahead"),
        pytest.param("2025-01-24 19", 86420.0, id="a-day-ahead"),
    ],
)
def test_a_log_that_says_more_than_the_clock_saw_is_believed(rest_hour: str, starting: float) -> None:
    """A log followed live whose next lines say hours later than the follower saw them come: believed (within
    the month's bound), since a server's stdout redirected to a file is block-buffered and its lines come in
    bursts, minutes after they were written (and the demo replays logs fast): a forward jump of the log's clock
    looks the same and cannot be told from them."""
    head, rest = _lines("2025-01-23 19", rest_hour)
    analyzer = Analyzer(load_engine("sglang"))
    analyzer.caught_up(0.0)
    analyzer.feed(head, 1.0)
    analyzer.feed(rest, 5.0)
    v = build_verdict(analyzer).to_json()
    assert v["timeline"][0]["state"] == "starting"
    assert v["timeline"][0]["duration_seconds"] == starting
