"""The follower's `_reschedule` (after every chunk) wakes its clock task exactly when the rule it shortens would:
when what is due (the analyzer's next tick, a checkpoint's save) comes before the tick the task sleeps for. The
shortened rule reckons nothing while the task is not asleep or already woken, and asks when a save is due only
where the save could come first; here it is held to the whole rule over random states of real logs' analyzers."""

from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path

from watchdog.follow.checkpoint import Checkpointer
from watchdog.follow.follower import CHECKPOINT_QUIET, CHECKPOINT_SLACK, LaunchFollower
from watchdog.follow.sources import parse_target
from watchdog.follow.spec import LaunchSpec
from watchdog.follow.testing import ManualClock

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
LOGS = sorted(CORPUS.rglob("*.log"))


class _Store:
    async def load_checkpoint(self, launch: str) -> bytes | None:
        return None

    async def save_checkpoint(self, launch: str, offset: int, blob: bytes) -> None:
        return None


def _wakes_by_the_whole_rule(f: LaunchFollower, *, transitioned: bool) -> bool:
    # `_reschedule` as it was: every term reckoned, then compared with the tick the clock task sleeps for
    due = f._due()
    cp = f._checkpoints
    if cp is not None and (transitioned or cp.dirty):
        save = (
            max(f.now() + CHECKPOINT_QUIET, f._look_again)
            if transitioned
            else f._last_data + CHECKPOINT_SLACK
        )
        save = max(save, f._save_at())
        due = save if due is None else min(due, save)
    return due is not None and due < f._wake_at and f._tick_wake is not None


def test_reschedule_wakes_the_clock_task_as_the_whole_rule_does() -> None:
    rng = random.Random(31)
    loop = asyncio.new_event_loop()
    woken = asleep = 0
    try:
        for log in rng.sample(LOGS, 40):
            data = log.read_bytes()
            clock = ManualClock(start=rng.uniform(0.0, 1000.0))
            spec = LaunchSpec(name="t", target=parse_target("/x.log"))
            f = LaunchFollower(spec, clock=clock)
            f._checkpoints = Checkpointer(_Store(), spec, clock.now)
            # the analyzer part way into the log, or at its end (a crash, a verdict: no tick due)
            cut = rng.choice([len(data), rng.randrange(len(data) + 1)])
            now = rng.uniform(0.0, 100.0)
            f.analyzer.feed(data[:cut], now)
            if rng.random() < 0.7:
                f.analyzer.caught_up(now)
            for _ in range(50):
                clock._now = f._start + now + rng.uniform(0.0, 60.0)
                f._last_data = now + rng.uniform(-20.0, 20.0)
                # a tick found the log still growing a while ago, or none did
                f._look_again = rng.choice([-math.inf, f.now() + rng.uniform(-7.0, 7.0)])
                cp = f._checkpoints
                cp._saved_at = clock.now() - rng.uniform(0.0, 90.0)
                cp._transitioned = rng.random() < 0.3
                cp._changes = cp._saved_changes + (rng.random() < 0.7)
                f._wake_at = rng.choice(
                    [
                        math.inf,
                        -math.inf,
                        f.now() + rng.uniform(-5.0, 70.0),
                        f._last_data + rng.uniform(0, 12),
                    ]
                )
                f._tick_wake = loop.create_future() if rng.random() < 0.85 else None
                transitioned = rng.random() < 0.2
                expected = _wakes_by_the_whole_rule(f, transitioned=transitioned)
                wake, wake_at = f._tick_wake, f._wake_at
                f._reschedule(transitioned=transitioned)
                assert (wake is not None and wake.done()) == expected, (log.name, transitioned)
                assert f._wake_at == (-math.inf if expected else wake_at)
                woken += expected
                asleep += wake is not None and wake_at != -math.inf
            f._send.close()  # the updates' stream, never read here
            f.updates.close()
    finally:
        loop.close()
    # both answers were asked for, many times
    assert woken > 100
    assert asleep - woken > 100
