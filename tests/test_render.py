"""Human output: the verdict as text, durations, and a reader that leaves early."""

from __future__ import annotations

import os
import signal

import pytest
from snapshots import verdict_from_json

from watchdog.cli.render import render_verdict, write_out
from watchdog.vocabulary import format_duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(4.2, "4.2s", id="short"),
        pytest.param(59.6, "1m00s", id="rounds-up"),
        pytest.param(432, "7m12s", id="minutes"),
        pytest.param(3780, "1h03m", id="hours"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    """Durations read like 7m12s."""
    assert format_duration(seconds) == text


def test_ready_headline_and_progress() -> None:
    """A ready verdict says how long it took, and lists progress and facts."""
    v = {
        "engine": "vllm",
        "state": "ready",
        "phase": "ready",
        "time_to_ready_seconds": 432.0,
        "timeline": [{"state": "starting", "line": 1, "at": "09-28T15:40:00", "duration_seconds": 12.0}],
        "progress": {"weights": {"done": 64, "total": 64}},
        "facts": {"kv_cache_tokens": 812345.0},
        "error": None,
        "lines_read": 10,
        "bytes_read": 100,
    }
    text = render_verdict(verdict_from_json(v), source="gpu1:/logs/v.log")
    assert text.splitlines()[0] == "gpu1:/logs/v.log: vllm ready after 7m12s"
    assert "weights 64/64" in text
    assert "kv_cache_tokens=812345" in text


def test_write_out_survives_a_reader_that_left() -> None:
    """A pipe whose reader closed is swapped for /dev/null, so later writes (and the final flush) pass."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    old = signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as in Python: EPIPE, not a signal
    try:
        with os.fdopen(write_end, "w") as f:
            write_out("verdict", f)
            assert os.readlink(f"/proc/self/fd/{f.fileno()}") == os.devnull
            write_out("more", f)
    finally:
        signal.signal(signal.SIGPIPE, old)
