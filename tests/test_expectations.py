"""Learned expectations: deadlines from a launch's own history, and the ETA to ready."""

from __future__ import annotations

from typing import Any

from snapshots import verdict_from_json

from watchdog.core.expectations import eta_to_ready, learned_deadlines, typical_durations


def _run(state: str, **durations: float) -> dict[str, Any]:
    return {"state": state, "phase_durations": durations}


HISTORY = [_run("ready", loading_weights=w, capturing_graphs=60.0) for w in (200.0, 240.0, 220.0, 260.0)]


def test_deadline_is_the_larger_of_configured_and_one_and_a_half_p95() -> None:
    """max(configured, 1.5 x p95): 1.5 x 260 s beats a 5-minute deadline, a 20-minute one stays."""
    assert learned_deadlines(HISTORY, {"loading_weights": 300.0})["loading_weights"] == 390.0
    assert learned_deadlines(HISTORY, {"loading_weights": 1200.0})["loading_weights"] == 1200.0
    assert learned_deadlines(HISTORY, {})["capturing_graphs"] == 90.0


def test_too_little_or_failed_history_teaches_nothing() -> None:
    """Two successful runs are not enough, and crashed runs' phases do not count."""
    few = HISTORY[:2] + [_run("crashed", loading_weights=5.0)] * 5
    assert learned_deadlines(few, {"loading_weights": 300.0}) == {"loading_weights": 300.0}
    assert typical_durations(few) == {}


def test_eta_from_the_progress_rate_plus_the_usual_later_phases() -> None:
    """16 of 64 shards in 60 s: 180 s more, then the usual 60 s of graph capture (and 0 s of KV cache
    when the history has it)."""
    typical = typical_durations([*HISTORY, *HISTORY])
    typical["allocating_kv_cache"] = 10.0
    status = {"state": "loading_weights", "progress": {"weights": {"done": 16, "total": 64}}}
    assert eta_to_ready(verdict_from_json(status), typical, in_phase=60.0) == 180.0 + 10.0 + 60.0
    assert eta_to_ready(verdict_from_json(status), {}, in_phase=60.0) is None
    assert (
        eta_to_ready(verdict_from_json({"state": "capturing_graphs", "progress": {}}), typical, in_phase=20.0)
        == 40.0
    )
