"""Tests for watchdog.core.lifecycle: the launch state machine driven by events and ticks (time is an argument)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchdog.core.findings import (
    ErrorSeen,
    Event,
    FactFound,
    HealthChecked,
    LaunchStarted,
    LinesRead,
    PhaseReached,
    ProcessExited,
    ProgressMade,
    ReadyReached,
    StopSeen,
)
from watchdog.core.lifecycle import Lifecycle, State
from watchdog.core.rootcause import Candidate
from watchdog.vocabulary import PAST_INCARNATIONS_HELD

_ERR = Candidate("ValueError: something broke", 7, "TP0", "ValueError")


def _started(**kwargs: float) -> Lifecycle:
    lc = Lifecycle("sglang", **kwargs)
    lc.feed(LaunchStarted(1, None, 100.0), now=0.0)
    return lc


def test_phases_move_forward_only() -> None:
    """A phase marker for an earlier phase than the current one causes no transition."""
    lc = _started()
    seen = []
    for no, phase in enumerate(
        ["loading_weights", "starting", "capturing_graphs", "allocating_kv_cache", "loading_weights"], 2
    ):
        seen += [t.state for t in lc.feed(PhaseReached(phase, no, None, None), now=float(no))]
    assert seen == [State.LOADING_WEIGHTS, State.CAPTURING_GRAPHS]
    assert lc.state == State.CAPTURING_GRAPHS
    assert lc.current.phase == State.CAPTURING_GRAPHS


def test_ready_marker_reaches_ready() -> None:
    """ReadyReached enters READY and records log seconds from start to ready."""
    lc = _started()
    out = lc.feed(ReadyReached(9, "07:31:42", 142.0), now=1.0)
    assert [(t.state, t.previous, t.line, t.at) for t in out] == [
        (State.READY, State.STARTING, 9, "07:31:42")
    ]
    assert lc.current.ready_seconds == 42.0


def test_error_followed_by_progress_is_cleared() -> None:
    """A non-fatal error followed by a phase marker was survivable: the launch does not crash, even at EOF."""
    lc = _started()
    lc.feed(PhaseReached("loading_weights", 2, None, None), now=1.0)
    assert lc.feed(ErrorSeen(_ERR), now=2.0) == []
    out = lc.feed(PhaseReached("allocating_kv_cache", 8, None, None, source="TP0"), now=3.0)
    assert [t.state for t in out] == [State.ALLOCATING_KV_CACHE]
    assert lc.current.pending_since is None
    assert lc.finish(now=4.0) == []
    assert lc.tick(now=100.0) == []
    assert lc.state == State.ALLOCATING_KV_CACHE


@pytest.mark.parametrize(
    ("error_source", "progress", "cleared"),
    [
        pytest.param("TP0", ProgressMade("weights", 1, 4, 9, source="TP0"), True, id="same-rank-progress"),
        pytest.param("TP0", ProgressMade("weights", 1, 4, 9, source="TP1"), False, id="other-rank-progress"),
        pytest.param(
            "TP0", PhaseReached("capturing_graphs", 9, None, None, "TP1"), False, id="other-rank-phase"
        ),
        pytest.param("", ProgressMade("weights", 1, 4, 9, source="TP1"), True, id="untagged-error-any-rank"),
        pytest.param("TP0", ReadyReached(9, None, None, source="TP1"), True, id="ready-speaks-for-all"),
    ],
)
def test_progress_clears_only_the_failing_rank(error_source: str, progress: Event, cleared: bool) -> None:
    """Only progress of the rank that failed (or the ready marker) makes its pending error survivable."""
    lc = _started()
    lc.feed(ErrorSeen(Candidate("ValueError: x", 7, error_source, "ValueError")), now=1.0)
    lc.feed(progress, now=2.0)
    assert (lc.current.pending_since is None) is cleared
    lc.finish(now=3.0)
    assert (lc.state == State.CRASHED) is not cleared


def test_error_at_end_of_log_crashes_in_its_phase() -> None:
    """A non-fatal error with nothing after it is final at finish(), in the phase where it happened."""
    lc = _started()
    lc.feed(PhaseReached("loading_weights", 2, None, None), now=1.0)
    lc.feed(ErrorSeen(_ERR), now=2.0)
    assert lc.state == State.LOADING_WEIGHTS
    out = lc.finish(now=3.0)
    assert [(t.state, t.previous) for t in out] == [(State.CRASHED, State.LOADING_WEIGHTS)]
    assert lc.current.crash_phase == State.LOADING_WEIGHTS
    assert lc.current.error is not None
    assert lc.current.error.summary == "ValueError: something broke"


def test_fatal_candidate_crashes_at_once() -> None:
    """A fatal candidate crashes the launch on the spot, at its line."""
    lc = _started()
    cand = Candidate("Received sigquit from a child process", 12, kind="rule", fatal=True, role="wrapper")
    out = lc.feed(ErrorSeen(cand), now=1.0)
    assert [(t.state, t.line) for t in out] == [(State.CRASHED, 12)]
    assert lc.current.crash_phase == State.STARTING


def test_tick_confirms_pending_error_after_grace() -> None:
    """A pending error becomes a crash once crash_grace seconds pass without progress, not before."""
    lc = _started(crash_grace=5.0)
    lc.feed(ErrorSeen(_ERR), now=10.0)
    assert lc.tick(now=14.9) == []
    assert lc.state == State.STARTING
    out = lc.tick(now=15.0)
    assert [(t.state, t.now) for t in out] == [(State.CRASHED, 15.0)]


def test_stall_and_resume() -> None:
    """No progress for stall_after seconds is STALLED; progress returns the launch to its phase."""
    lc = _started(stall_after=60.0)
    lc.feed(PhaseReached("loading_weights", 2, None, None), now=0.0)
    assert lc.tick(now=59.0) == []
    out = lc.tick(now=61.0)
    assert [(t.state, t.previous) for t in out] == [(State.STALLED, State.LOADING_WEIGHTS)]
    assert lc.tick(now=200.0) == []
    out = lc.feed(ProgressMade("weights", 1, 4, 3), now=201.0)
    assert [(t.state, t.previous) for t in out] == [(State.LOADING_WEIGHTS, State.STALLED)]
    assert lc.current.phase == State.LOADING_WEIGHTS


def test_repeated_progress_value_is_not_progress() -> None:
    """A progress bar redrawn at the same value does not count as progress."""
    lc = _started(stall_after=60.0)
    lc.feed(ProgressMade("weights", 1, 4, 3), now=0.0)
    lc.feed(ProgressMade("weights", 1, 4, 4), now=50.0)
    assert [t.state for t in lc.tick(now=61.0)] == [State.STALLED]


def test_memory_growing_prevents_stall() -> None:
    """While the GPU probe reports memory growing, a quiet phase is not stalled."""
    lc = _started(stall_after=60.0)
    lc.memory_growing = True
    assert lc.tick(now=61.0) == []
    assert lc.tick(now=130.0) == []
    assert lc.state == State.STARTING
    lc.memory_growing = False
    assert [t.state for t in lc.tick(now=200.0)] == [State.STALLED]


def test_second_launch_starts_new_incarnation() -> None:
    """A start marker after the launch got going begins incarnation 2 and keeps incarnation 1 in history."""
    lc = _started()
    lc.feed(PhaseReached("loading_weights", 2, None, None), now=1.0)
    out = lc.feed(LaunchStarted(50, None, None), now=2.0)
    assert [(t.state, t.previous) for t in out] == [(State.STARTING, State.PENDING)]
    assert lc.current.number == 2
    assert [(inc.number, inc.state) for inc in lc.history] == [(1, State.LOADING_WEIGHTS)]


def test_restart_after_pending_error_crashes_first_run() -> None:
    """A restart while an error is pending makes that error fatal to the previous incarnation."""
    lc = _started()
    lc.feed(ErrorSeen(_ERR), now=1.0)
    lc.feed(LaunchStarted(50, None, None), now=2.0)
    assert [(inc.number, inc.state) for inc in lc.history] == [(1, State.CRASHED)]
    assert (lc.current.number, lc.state) == (2, State.STARTING)
    assert lc.verdict_incarnation() is lc.history[0]


def test_process_exit_is_a_kill() -> None:
    """The process vanishing crashes the launch with category "killed"."""
    lc = _started()
    out = lc.feed(ProcessExited("pid 42 gone"), now=1.0)
    assert [t.state for t in out] == [State.CRASHED]
    assert lc.current.error is not None
    assert lc.current.error.category == "killed"
    assert lc.current.error.summary == "process exited: pid 42 gone"


@pytest.mark.parametrize(
    ("phase", "status", "state"),
    [
        pytest.param("allocating_kv_cache", 200, State.READY, id="kv-cache-200"),
        pytest.param("capturing_graphs", 200, State.READY, id="graphs-200"),
        pytest.param("loading_weights", 200, State.LOADING_WEIGHTS, id="weights-200-too-early"),
        pytest.param(None, 200, State.READY, id="silent-log-200"),
        pytest.param("allocating_kv_cache", 503, State.ALLOCATING_KV_CACHE, id="kv-cache-503"),
        pytest.param("allocating_kv_cache", None, State.ALLOCATING_KV_CACHE, id="kv-cache-no-answer"),
    ],
)
def test_health_check(phase: str | None, status: int | None, state: State) -> None:
    """A 200 means READY from ALLOCATING_KV_CACHE onwards, or in a log with no phase marker at all."""
    lc = _started()
    if phase is not None:
        lc.feed(PhaseReached(phase, 2, None, None), now=1.0)
    lc.feed(HealthChecked(status), now=2.0)
    assert lc.state == state


def test_early_health_engine_needs_weights_loaded() -> None:
    """For an engine whose health answers early (SGLang), a 200 in a silent log is not ready."""
    lc = _started()
    lc.trust_silent_health = False
    lc.feed(HealthChecked(200), now=2.0)
    assert lc.state == State.STARTING
    lc.feed(PhaseReached("allocating_kv_cache", 3, None, None), now=3.0)
    lc.feed(HealthChecked(200), now=4.0)
    assert lc.state == State.READY


def test_health_never_hides_an_error() -> None:
    """A 200 while an error is pending does not make the launch ready."""
    lc = _started()
    lc.feed(PhaseReached("allocating_kv_cache", 2, None, None), now=1.0)
    lc.feed(ErrorSeen(Candidate("RuntimeError: boom", 3)), now=1.5)
    lc.feed(HealthChecked(200), now=2.0)
    assert lc.state == State.ALLOCATING_KV_CACHE
    lc.finish(3.0)
    assert lc.state == State.CRASHED


def test_stop_is_final() -> None:
    """A clean stop is STOPPED and later phase markers do not revive it."""
    lc = _started()
    lc.feed(StopSeen(5, None), now=1.0)
    assert lc.state == State.STOPPED
    assert lc.feed(PhaseReached("loading_weights", 6, None, None), now=2.0) == []
    assert lc.state == State.STOPPED


_PHASE_NAMES = st.sampled_from(
    ["starting", "loading_weights", "allocating_kv_cache", "capturing_graphs", "ready"]
)
_SMALL = st.integers(0, 5)
_SOURCES = st.sampled_from(["", "TP0", "TP1"])
_EVENTS: st.SearchStrategy[Event] = st.one_of(
    st.builds(LaunchStarted, _SMALL, st.none(), st.none() | st.floats(0, 1000)),
    st.builds(PhaseReached, _PHASE_NAMES, _SMALL, st.none(), st.none(), _SOURCES),
    st.builds(ProgressMade, st.sampled_from(["weights", "graphs"]), _SMALL, _SMALL, _SMALL, _SOURCES),
    st.builds(FactFound, st.just("avail_mem_after_weights_gb"), st.floats(0, 80), _SMALL),
    st.builds(ReadyReached, _SMALL, st.none(), st.none() | st.floats(0, 1000), _SOURCES),
    st.builds(
        ErrorSeen,
        st.builds(
            Candidate,
            st.sampled_from(["ValueError: x", "RuntimeError: CUDA error: out of memory", "Killed"]),
            _SMALL,
            source=_SOURCES,
            fatal=st.booleans(),
            noise=st.booleans(),
            role=st.sampled_from(["cause", "wrapper"]),
            phase_hint=st.none() | _PHASE_NAMES,
        ),
    ),
    st.builds(StopSeen, _SMALL, st.none()),
    st.builds(LinesRead, _SMALL, _SMALL),
    st.builds(ProcessExited, st.just("gone")),
    st.builds(HealthChecked, st.sampled_from([200, 503, None])),
)
_STEPS = st.lists(st.tuples(st.none() | _EVENTS, st.floats(0, 30)), max_size=40)


@settings(max_examples=300)
@given(steps=_STEPS, stall_after=st.none() | st.floats(1, 60), memory_growing=st.booleans())
def test_any_event_sequence_is_safe(
    steps: list[tuple[Event | None, float]], stall_after: float | None, memory_growing: bool
) -> None:
    """Any events and ticks never raise, keep a State, and a final state changes only by a new launch."""
    lc = Lifecycle("sglang", stall_after=stall_after)
    lc.memory_growing = memory_growing
    now = 0.0
    for event, dt in steps:
        now += dt
        before_number, before_state = lc.current.number, lc.state
        out = lc.tick(now) if event is None else lc.feed(event, now)
        assert isinstance(lc.state, State)
        assert all(isinstance(t.state, State) for t in out)
        if before_state in (State.CRASHED, State.STOPPED):
            if isinstance(event, LaunchStarted):
                assert lc.current.number == before_number + 1
                assert lc.history[-1].state == before_state
            else:
                assert (lc.current.number, lc.state) == (before_number, before_state)
        else:
            assert lc.current.number in (before_number, before_number + 1)
    lc.finish(now + 1)
    assert isinstance(lc.state, State)
    held = list(range(1, lc.current.number))[-PAST_INCARNATIONS_HELD:]
    assert [inc.number for inc in lc.history] == held


def test_a_phase_past_its_deadline_is_stalled_once() -> None:
    """A phase that runs past its deadline is stalled (even while it progresses); when progress resumes
    it is left, and the same phase does not stall again for its deadline."""
    lc = Lifecycle("sglang", deadlines={"loading_weights": 60.0})
    lc.feed(LaunchStarted(1, None, 100.0), now=0.0)
    lc.feed(PhaseReached("loading_weights", 2, None, None), now=10.0)
    assert lc.tick(now=69.0) == []
    [stalled] = lc.tick(now=70.0)
    assert stalled.state == State.STALLED
    assert stalled.reason == "loading_weights past its deadline (1m00s)"
    [back] = lc.feed(ProgressMade("weights", 5, 64, 3, None), now=71.0)
    assert back.state == State.LOADING_WEIGHTS
    assert lc.tick(now=200.0) == []


@settings(max_examples=300)
@given(
    steps=_STEPS,
    stall_after=st.none() | st.floats(1, 60),
    memory_growing=st.booleans(),
    early=st.floats(0, 0.999),
)
def test_no_tick_before_next_due_changes_the_state(
    steps: list[tuple[Event | None, float]], stall_after: float | None, memory_growing: bool, early: float
) -> None:
    """A tick before `next_due` (at any time when it is None) causes no transition, so a follower may skip
    the ticks before it."""
    lc = Lifecycle("sglang", stall_after=stall_after, deadlines={"loading_weights": 20.0})
    lc.memory_growing = memory_growing
    now = 0.0
    for event, dt in steps:
        now += dt
        due = lc.next_due()
        if due is None or due > now:
            probe = copy.deepcopy(lc)
            at = now + 3600.0 if due is None else now + early * (due - now)
            assert probe.tick(at) == []
            assert probe.state == lc.state
        if event is None:
            lc.tick(now)
        else:
            lc.feed(event, now)


def test_next_due_names_the_grace_the_stall_and_the_deadline() -> None:
    """`next_due` is the earliest of a pending error's grace, the stall and the phase deadline; None once
    there is nothing the clock can decide."""
    lc = Lifecycle("sglang", stall_after=600.0, deadlines={"loading_weights": 60.0}, crash_grace=5.0)
    assert lc.next_due() is None  # nothing seen yet
    lc.feed(LaunchStarted(1, None, None), now=0.0)
    assert lc.next_due() == 600.0
    lc.feed(PhaseReached("loading_weights", 2, None, None), now=10.0)
    assert lc.next_due() == 70.0
    lc.feed(ErrorSeen(_ERR), now=12.0)
    assert lc.next_due() == 17.0
    [crashed] = lc.tick(17.0)
    assert crashed.state == State.CRASHED
    assert lc.next_due() is None


def test_a_health_200_is_ready_in_any_phase_where_health_means_ready() -> None:
    """For an engine whose health endpoint answers only once it can serve (vLLM), a 200 is ready even while
    the log (at warning level) showed only the weights loading; for others it waits for the weights."""
    lc = _started()
    lc.health_means_ready = True
    lc.feed(PhaseReached("loading_weights", 2, None, None), now=1.0)
    lc.feed(HealthChecked(200), now=2.0)
    assert lc.state == State.READY
    other = _started()
    other.feed(PhaseReached("loading_weights", 2, None, None), now=1.0)
    other.feed(HealthChecked(200), now=2.0)
    assert other.state == State.LOADING_WEIGHTS


def test_a_crash_is_not_chosen_again_from_what_it_was_chosen_from() -> None:
    """A traceback reported at its exception line and again, unchanged, when the next line closes it (a crash
    loop's next start: the root cause was ~a third of that line's cost) keeps the root cause chosen the first
    time, the same object; a fact its hint names, read in between, makes it chosen again."""
    lc = _started()
    tb = Candidate(
        "ValueError: pool too small",
        7,
        "TP0",
        "ValueError",
        traceback=("Traceback (most recent call last):", "ValueError: pool too small"),
        fatal=True,
        hint="only {free_gb} GB free",
    )
    lc.feed(ErrorSeen(tb), now=1.0)
    assert lc.state == State.CRASHED
    first = lc.current.error
    assert first is not None
    assert first.hint == "only {free_gb} GB free"
    lc.feed(ErrorSeen(copy.copy(tb)), now=1.1)  # the same report, a new object: closed, nothing added
    assert lc.current.error is first
    lc.feed(FactFound("free_gb", 3.5, 8), now=1.2)
    lc.feed(ErrorSeen(copy.copy(tb)), now=1.3)
    assert lc.current.error is not None
    assert lc.current.error.hint == "only 3.5 GB free"
    assert lc.current.crash_phase == State.STARTING
