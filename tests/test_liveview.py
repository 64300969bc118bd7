"""The live view and the plain progress line, rendered from status snapshots (the verdict object plus clock)."""

from __future__ import annotations

import io
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.live import Live
from snapshots import status_from_json

from watchdog.cli.liveview import LiveView, ProgressLines, memory_facts, where
from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import Status, Verdict, build_verdict
from watchdog.profiles.loader import load_engine

TARGET = "gpu1:/logs/server.log"
LINES = [
    "[2025-01-23 19:35:14 TP0] Init torch distributed begin.",
    "[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB",
    "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:02,  1.08it/s]",
]
SHARD_2 = "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.75it/s]"


def _status(
    state: str = "loading_weights",
    *,
    timeline: list[str] | None = None,
    entered: list[float] | None = None,
    progress: dict[str, tuple[int, int]] | None = None,
    facts: dict[str, Any] | None = None,
    elapsed: float | None = 100.0,
    **extra: Any,
) -> Status:
    """A snapshot, given in the shape of its JSON."""
    states = timeline if timeline is not None else ["starting", "loading_weights"]
    out: dict[str, Any] = {
        "engine": "sglang",
        "state": state,
        "phase": state,
        "error": None,
        "timeline": [{"state": s, "line": i + 1, "at": None} for i, s in enumerate(states)],
        "entered": entered if entered is not None else [float(10 * i) for i in range(len(states))],
        "progress": {k: {"done": d, "total": t} for k, (d, t) in (progress or {}).items()},
        "facts": facts or {},
        "lines_read": 10,
        "bytes_read": 1000,
        "incarnation": 1,
        "incarnations": 1,
        "last_line": "",
    }
    if elapsed is not None:
        out["elapsed_seconds"] = elapsed
    # each closed entry lasted until the next one (what the core says of entries the follower saw come)
    for item, start, end in zip(out["timeline"], out["entered"], out["entered"][1:], strict=False):
        item["duration_seconds"] = end - start
    out.update(extra)
    return status_from_json(out)


def _text(view: LiveView, status: Status, now: float, width: int = 120) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(view.render(status, now))
    return console.export_text()


def _from_analyzer(analyzer: Analyzer, elapsed: float) -> Status:
    """The snapshot a follower would build from an analyzer."""
    inc = analyzer.lifecycle.current
    return Status(build_verdict(analyzer, inc), elapsed=elapsed, last_line=analyzer.last_relevant)


def test_render_from_an_analyzer_snapshot() -> None:
    """After two shard steps 10 s apart, the view shows target, engine, phase times, 2/4 with ETA, memory, last line."""
    analyzer = Analyzer(load_engine("sglang"))
    view = LiveView(TARGET, lambda: Status(Verdict.pending()), lambda: 0.0)
    analyzer.feed(("\n".join(LINES) + "\n").encode(), 1.0)
    _text(view, _from_analyzer(analyzer, 1.0), 1.0)
    analyzer.feed((SHARD_2 + "\n").encode(), 11.0)
    status = _from_analyzer(analyzer, 11.0)
    status = replace(status, verdict=status.verdict.with_facts({"gpu_mem_used_bytes": {"0": 40 * 2**30}}))
    text = _text(view, status, 11.0)
    assert f"{TARGET}  sglang  loading_weights  11s elapsed" in text
    assert "▸  loading_weights   10s  2025-01-23T19:35:15" in text
    assert "2/4  ETA 20s" in text
    assert "free before weights 78.81 GB" in text
    assert "gpu0 40.0 GiB" in text
    assert SHARD_2 in text


@pytest.mark.parametrize(
    ("status", "shown", "absent"),
    [
        pytest.param(_status(engine=None), ["detecting engine"], [], id="engine-unknown"),
        pytest.param(_status(elapsed=None), ["loading_weights"], ["elapsed"], id="no-elapsed-yet"),
        pytest.param(
            _status(incarnation=2, incarnations=2), ["(launch #2 of 2)"], [], id="second-incarnation"
        ),
        pytest.param(
            _status(progress={"weights": (4, 4)}), ["4/4  done"], ["ETA"], id="finished-progress-says-done"
        ),
        pytest.param(
            _status(facts={"kv_cache_tokens": 444500.0, "graph_mem_gb": 1.5, "weights_mem_gb": "n/a"}),
            ["KV tokens 444,500  graphs 1.5 GB"],
            ["weights n/a"],
            id="facts-numbers-only",
        ),
        pytest.param(
            _status("ready", timeline=["starting", "ready"], entered=[0.0, 30.0]),
            ["starting  30s", "ready"],
            ["20s"],
            id="outcome-does-not-tick",
        ),
        pytest.param(_status(timeline=[], entered=[], state="pending"), ["pending"], [], id="pending"),
    ],
)
def test_render_cases(status: Status, shown: list[str], absent: list[str]) -> None:
    """Each snapshot renders with the expected phrases and without the unexpected ones."""
    text = _text(LiveView(TARGET, lambda: status, lambda: 50.0), status, 50.0)
    for phrase in shown:
        assert phrase in text
    for phrase in absent:
        assert phrase not in text


def test_nothing_yet_is_one_line() -> None:
    """Before any log line the view is its one head line, with no blank lines for empty tables."""
    status = _status("pending", timeline=[], entered=[], engine=None, elapsed=1.0)
    text = _text(LiveView(TARGET, lambda: status, lambda: 1.0), status, 1.0)
    assert text.splitlines() == [f"{TARGET}  detecting engine  pending  1.0s elapsed"]


def test_last_line_is_cut_to_the_width() -> None:
    """A long last log line takes one screen line, cut with an ellipsis, not several wrapped ones."""
    status = _status(last_line="x" * 300)
    text = _text(LiveView(TARGET, lambda: status, lambda: 0.0), status, 15.0, width=60)
    (line,) = [ln for ln in text.splitlines() if "x" in ln and "server" not in ln]
    assert line.rstrip() == "x" * 59 + "…"


@pytest.mark.parametrize(
    ("steps", "now", "eta"),
    [
        pytest.param([(0.0, 1)], 0.0, None, id="one-sighting-no-rate"),
        pytest.param([(0.0, 1), (10.0, 2)], 10.0, "ETA 20s", id="rate-from-two-steps"),
        pytest.param([(0.0, 1), (10.0, 2)], 15.0, "ETA 15s", id="counts-down-between-steps"),
        pytest.param([(0.0, 1), (10.0, 2)], 40.0, None, id="overdue-no-estimate"),
        pytest.param([(0.0, 1), (10.0, 3), (12.0, 2)], 12.0, None, id="counter-went-back-starts-over"),
        pytest.param(
            [(0.0, 1), (10.0, 3), (12.0, 0), (22.0, 1)], 22.0, "ETA 30s", id="rate-after-going-back"
        ),
        pytest.param([(0.0, 0), (2.0, 1), (4.0, 1)], 4.0, "ETA 4.0s", id="rate-uses-first-and-latest-step"),
    ],
)
def test_eta(steps: list[tuple[float, int]], now: float, eta: str | None) -> None:
    """The ETA comes from the rate the view observed between its first sighting and the latest step."""
    view = LiveView(TARGET, lambda: Status(Verdict.pending()), lambda: 0.0)
    for at, done in steps:
        _text(view, _status(progress={"weights": (done, 4)}), at)
    text = _text(view, _status(progress={"weights": (steps[-1][1], 4)}), now)
    if eta is None:
        assert "ETA" not in text
    else:
        assert eta in text


def test_new_incarnation_forgets_rates() -> None:
    """A restart of the server in the same log starts the rate memory over."""
    view = LiveView(TARGET, lambda: Status(Verdict.pending()), lambda: 0.0)
    _text(view, _status(progress={"weights": (1, 4)}), 0.0)
    _text(view, _status(progress={"weights": (2, 4)}), 10.0)
    text = _text(view, _status(progress={"weights": (3, 4)}, incarnation=2), 12.0)
    assert "ETA" not in text


def test_rich_calls_status_and_clock_on_every_render() -> None:
    """Printing the view twice asks for a fresh snapshot and time each time, so the current phase ticks."""
    times = iter([12.0, 14.5])
    view = LiveView(TARGET, _status, lambda: next(times))
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(view)
    console.print(view)
    text = console.export_text()
    assert "▸  loading_weights  2.0s" in text
    assert "▸  loading_weights  4.5s" in text


def test_snapshot_taken_mid_change_keeps_the_last_one() -> None:
    """A status() that fails with RuntimeError (a dict changed during the snapshot) shows the last snapshot."""
    snapshots: list[Any] = [_status(), RuntimeError("dictionary changed size during iteration")]

    def status() -> Status:
        item = snapshots.pop(0)
        if isinstance(item, Exception):
            raise item
        return item  # type: ignore[no-any-return]

    times = iter([12.0, 14.5])
    view = LiveView(TARGET, status, lambda: next(times))
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(view)
    console.print(view)
    assert "▸  loading_weights  4.5s" in console.export_text()


def test_live_redraws_by_itself() -> None:
    """rich's Live with auto_refresh redraws the view on its own, with no update() call, several times."""
    calls = 0
    enough = threading.Event()

    def status() -> Status:
        nonlocal calls
        calls += 1
        if calls >= 5:
            enough.set()
        return _status()

    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    view = LiveView(TARGET, status, lambda: 15.0)
    with Live(view, console=console, auto_refresh=True, refresh_per_second=20, transient=True):
        assert enough.wait(timeout=5.0), f"only {calls} redraws in 5 s"


@pytest.mark.parametrize(
    ("status", "now", "durations"),
    [
        pytest.param(_status(entered=[0.0, 10.0]), 25.0, [10.0, 15.0], id="last-runs-to-now"),
        pytest.param(
            _status("stalled", timeline=["starting", "stalled"], entered=[0.0, 600.0]),
            700.0,
            [600.0, 100.0],
            id="stalled-ticks",
        ),
        pytest.param(
            _status("crashed", timeline=["starting", "crashed"], entered=[0.0, 4.0]),
            700.0,
            [4.0, None],
            id="outcome-has-none",
        ),
        pytest.param(
            status_from_json(
                {
                    "state": "ready",
                    "timeline": [{"state": "starting", "duration_seconds": 3.5}, {"state": "ready"}],
                }
            ),
            9.0,
            [3.5, None],
            id="the-core-durations",
        ),
    ],
)
def test_phase_durations(status: Status, now: float, durations: list[float | None]) -> None:
    """Time per phase is the core's duration of each entry (`watchdog.core.durations`: one rule for every
    sink); the current one of a starting or stalled launch runs to now."""
    assert status.verdict.durations(now) == durations


@pytest.mark.parametrize(
    ("facts", "phrases"),
    [
        pytest.param({}, [], id="none"),
        pytest.param(
            {"avail_mem_after_weights_gb": 63.72, "kv_cache_memory_gb": 20.0},
            ["free after weights 63.72 GB", "KV cache 20 GB"],
            id="floats",
        ),
        pytest.param({"kv_cache_tokens": True, "model": "llama"}, [], id="not-numbers-ignored"),
        pytest.param(
            {"gpu_mem_used_bytes": {"10": 2**30, "2": 3 * 2**29}},
            ["gpu2 1.5 GiB", "gpu10 1.0 GiB"],
            id="gpus-in-numeric-order",
        ),
        pytest.param({"gpu_mem_used_bytes": {0: 2**31}}, ["gpu0 2.0 GiB"], id="int-gpu-keys"),
    ],
)
def test_memory_facts(facts: dict[str, Any], phrases: list[str]) -> None:
    """The memory facts and per-GPU memory read as short phrases in a fixed order."""
    assert memory_facts(facts) == phrases


@pytest.mark.parametrize(
    ("status", "now", "line"),
    [
        pytest.param(
            _status(entered=[0.0, 207.0], progress={"weights": (12, 64)}, elapsed=340.0),
            340.0,
            "loading_weights for 2m13s, weights 12/64, 5m40s since start",
            id="loading-with-progress",
        ),
        pytest.param(
            _status(progress={"weights": (64, 64), "graphs": (3, 23)}, elapsed=None),
            15.0,
            "loading_weights for 5.0s, graphs 3/23",
            id="finished-progress-left-out",
        ),
        pytest.param(
            _status("pending", timeline=[], entered=[], elapsed=4.0),
            4.0,
            "pending (no launch in the log yet), 4.0s since start",
            id="pending",
        ),
        pytest.param(
            _status(
                "stalled", timeline=["starting", "stalled"], entered=[0.0, 600.0], phase="loading_weights"
            ),
            660.0,
            "stalled in loading_weights for 1m00s, 1m40s since start",
            id="stalled",
        ),
        pytest.param(
            _status("crashed", timeline=["starting", "crashed"], phase="starting"),
            99.0,
            "crashed during starting, 1m40s since start",
            id="crashed",
        ),
    ],
)
def test_where(status: dict[str, Any], now: float, line: str) -> None:
    """`where` says in one line the state, time in it, unfinished progress and the time since start."""
    assert where(status, now) == line


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        pytest.param(
            [
                ("line", 0.0, "loading_weights"),
                ("line", 29.0, "loading_weights"),
                ("line", 30.0, "loading_weights"),
            ],
            [None, None, "loading_weights"],
            id="once-after-interval",
        ),
        pytest.param(
            [
                ("line", 0.0, "loading_weights"),
                ("line", 30.0, "loading_weights"),
                ("line", 45.0, "loading_weights"),
                ("line", 60.0, "loading_weights"),
            ],
            [None, "loading_weights", None, "loading_weights"],
            id="at-most-once-per-interval",
        ),
        pytest.param(
            [
                ("line", 0.0, "starting"),
                ("touch", 20.0, ""),
                ("line", 30.0, "starting"),
                ("line", 50.0, "starting"),
            ],
            [None, None, None, "starting"],
            id="printed-transition-restarts-silence",
        ),
        pytest.param(
            [("line", 0.0, "ready"), ("line", 100.0, "ready"), ("line", 100.0, "crashed")],
            [None, None, None],
            id="not-after-a-verdict",
        ),
        pytest.param(
            [("line", 0.0, "pending"), ("line", 100.0, "pending"), ("line", 101.0, "capturing_graphs")],
            [None, None, "capturing_graphs"],
            id="only-in-startup-phases",
        ),
    ],
)
def test_progress_lines(calls: list[tuple[str, float, str]], expected: list[str | None]) -> None:
    """A plain progress line comes at most every 30 s of silence, only while a startup phase runs."""
    lines = ProgressLines(interval=30.0)
    got: list[str | None] = []
    for kind, now, state in calls:
        if kind == "touch":
            lines.touch(now)
            got.append(None)
        else:
            line = lines.line(_status(state), now)
            got.append(line.split(" ")[0].rstrip(",") if line else None)
    assert got == expected


def test_a_multi_node_launch_shows_each_node() -> None:
    """The live view of a multi-node launch has a line per node: its state, phase, progress, error."""
    from watchdog.follow.replay import replay_nodes  # noqa: PLC0415

    pair = Path(__file__).parent / "fixtures" / "nodes" / "sglang-2node"
    status = Status(replay_nodes([pair / "node0.log", pair / "node1.log"]), elapsed=5.0)
    lines = _text(LiveView(TARGET, lambda: status, lambda: 5.0), status, 5.0, width=200).splitlines()
    node0 = next(line for line in lines if line.startswith("  node0"))
    node1 = next(line for line in lines if line.startswith("  node1"))
    assert "node0 (serves) crashed in allocating_kv_cache  weights 163/163  [Rank 6] Watchdog caught" in node0
    assert "node1 crashed in starting    RuntimeError: Unexpected error" in node1
