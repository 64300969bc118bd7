"""Tests for multi-node launches: the pure combiner (watchdog.core.nodes) and `replay` of a node pair."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from watchdog.core.arguments import Argument
from watchdog.core.compare import ArgumentChange, Changes
from watchdog.core.nodes import NodeReport, combine, first_failure, launch_state
from watchdog.core.rootcause import Error
from watchdog.core.verdict import Entry, MissingLog, Progress, Verdict
from watchdog.follow.follower import Concluded, LaunchFollower
from watchdog.follow.nodes import CAUSE_WAIT, Node, NodesFollower
from watchdog.follow.sources import parse_target
from watchdog.follow.spec import LaunchSpec
from watchdog.follow.testing import ManualClock, ScriptedSource
from watchdog.vocabulary import Category, State

PAIR = Path(__file__).parent / "fixtures" / "nodes" / "sglang-2node"
READY = Path(__file__).parent / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"


def _error(summary: str, *, consequence: bool = False, ranks: tuple[str, ...] = ("TP0",)) -> Error:
    category = Category.NCCL if consequence else Category.CUDA
    return Error(category, summary, None, "", ranks, 10, (), consequence=consequence)


def _node(
    name: str,
    state: State,
    phase: State | None = None,
    *,
    error: Error | None = None,
    at: str | None = None,
    failed_at: float | None = None,
    serve: bool = False,
    progress: tuple[Progress, ...] = (),
    missing: MissingLog | None = None,
) -> NodeReport:
    timeline = (Entry(State.STARTING, 1, None, "", 0.0),)
    if state is State.CRASHED:
        timeline += (Entry(State.CRASHED, 10, at, "", 1.0),)
    verdict = Verdict(
        "sglang",
        state,
        phase or state,
        error=error,
        timeline=timeline,
        progress=progress,
        lines_read=10,
        bytes_read=100,
        missing_log=missing,
    )
    return NodeReport(name, f"host-{name}", f"ssh://host-{name}/log", serve, verdict, failed_at=failed_at)


def test_first_failure_by_the_logs_own_time() -> None:
    """The node whose crash line is earliest by the logs' own times failed first, whatever arrived first."""
    late = _node(
        "a", State.CRASHED, State.LOADING_WEIGHTS, error=_error("x"), at="2025-02-07T01:19:50", failed_at=1.0
    )
    early = _node(
        "b", State.CRASHED, State.LOADING_WEIGHTS, error=_error("y"), at="2025-02-07T01:19:40", failed_at=2.0
    )
    assert first_failure([late, early]) is early


def test_first_failure_by_arrival_without_comparable_times() -> None:
    """Without comparable log times (one log has none), the crash known first is the first failure."""
    a = _node("a", State.CRASHED, State.STARTING, error=_error("x"), at="2025-02-07T01:19:40", failed_at=2.0)
    b = _node("b", State.CRASHED, State.STARTING, error=_error("y"), at=None, failed_at=1.0)
    assert first_failure([a, b]) is b


def test_a_consequence_never_wins_over_a_cause() -> None:
    """A node whose error is a consequence (an NCCL timeout) loses to a node with a cause, though earlier."""
    hung = _node(
        "n0",
        State.CRASHED,
        State.ALLOCATING_KV_CACHE,
        error=_error("Watchdog caught collective operation timeout", consequence=True, ranks=("rank6",)),
        at="2025-02-07T01:19:40",
        failed_at=0.5,
        serve=True,
    )
    cause = _node(
        "n1",
        State.CRASHED,
        State.STARTING,
        error=_error("Error 802", ranks=("TP3",)),
        at="2025-02-07T01:29:40",
        failed_at=3.0,
    )
    v = combine([hung, cause])
    assert (v.state, v.phase) == (State.CRASHED, State.STARTING)
    assert v.error is not None
    assert v.error.summary == "Error 802"
    out = v.to_json()
    assert (out["error"]["node"], out["error"]["host"], out["error"]["ranks"]) == ("n1", "host-n1", ["TP3"])
    assert out["error"]["consequences"] == [
        {
            "node": "n0",
            "host": "host-n0",
            "summary": "Watchdog caught collective operation timeout",
            "category": "nccl",
            "ranks": ["rank6"],
            "line": 10,
        }
    ]


def test_a_node_that_went_quiet_is_listed_as_such() -> None:
    """A node with no error of its own when another crashed is listed as quiet, with where it stood."""
    quiet = _node("n0", State.ALLOCATING_KV_CACHE, serve=True)
    dead = _node("n1", State.CRASHED, State.STARTING, error=_error("boom"), failed_at=1.0)
    out = combine([quiet, dead]).to_json()
    assert out["state"] == "crashed"
    assert out["error"]["consequences"] == [
        {"node": "n0", "host": "host-n0", "summary": None, "quiet": True, "state": "allocating_kv_cache"}
    ]


@pytest.mark.parametrize(
    ("states", "want"),
    [
        pytest.param(
            [State.STALLED, State.STALLED], (State.STALLED, State.LOADING_WEIGHTS), id="all-stalled"
        ),
        pytest.param(
            [State.LOADING_WEIGHTS, State.STALLED],
            (State.LOADING_WEIGHTS, State.LOADING_WEIGHTS),
            id="one-still-moves",
        ),
        pytest.param(
            [State.STALLED, State.LOADING_WEIGHTS],
            (State.LOADING_WEIGHTS, State.LOADING_WEIGHTS),
            id="serving-stalled-worker-moves",
        ),
    ],
)
def test_stalled_only_when_every_node_is(states: list[State], want: tuple[State, State]) -> None:
    """The launch is stalled only when every node that has not settled is stalled."""
    nodes = [_node(f"n{i}", s, State.LOADING_WEIGHTS, serve=i == 0) for i, s in enumerate(states)]
    assert launch_state(nodes) == want


def test_ready_from_the_serving_node_alone() -> None:
    """The launch is ready when its serving node is, while a worker that never says ready has gone quiet."""
    bars = (Progress("graphs", 35, 35),)
    worker = _node("w", State.STALLED, State.CAPTURING_GRAPHS)
    serve = _node("s", State.READY, progress=bars, serve=True)
    v = combine([worker, serve])
    assert (v.state, v.phase, v.progress) == (State.READY, State.READY, bars)
    assert [n["name"] for n in v.to_json()["nodes"]] == ["w", "s"]
    assert v.to_json()["nodes"][1]["serve"] is True
    assert v.lines_read == 20
    # a worker ready before the serving node is not the launch's ready
    assert launch_state([_node("s", State.LOADING_WEIGHTS, serve=True), _node("w", State.READY)]) == (
        State.LOADING_WEIGHTS,
        State.LOADING_WEIGHTS,
    )


def test_phase_is_the_furthest_every_begun_node_reached() -> None:
    """While starting, the launch is in the furthest phase every node that has begun has reached."""
    overdue = MissingLog(overdue=False)
    nodes = [
        _node("a", State.CAPTURING_GRAPHS, serve=True),
        _node("b", State.LOADING_WEIGHTS),
        _node("c", State.PENDING, missing=overdue),
    ]
    assert launch_state(nodes) == (State.LOADING_WEIGHTS, State.LOADING_WEIGHTS)


def test_serving_hang_after_ready_is_a_stall() -> None:
    """A stall of the serving node after ready is the launch's stall; a worker's is not."""
    assert launch_state(
        [_node("s", State.STALLED, State.READY, serve=True), _node("w", State.CAPTURING_GRAPHS)]
    ) == (State.STALLED, State.READY)


def test_single_source_json_has_no_nodes() -> None:
    """A verdict of one source renders no `nodes` key and no node in its error (the contract unchanged)."""
    v = Verdict("sglang", State.CRASHED, State.STARTING, error=_error("boom"))
    out = v.to_json()
    assert "nodes" not in out
    assert "node" not in out["error"]
    assert "consequences" not in out["error"]


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "watchdog.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=cwd,
    )


def _replay(*args: str) -> subprocess.CompletedProcess[str]:
    return _cli("replay", *args)


def test_replay_of_a_node_pair_names_the_first_failing_node() -> None:
    """`replay NODE0.log NODE1.log` gives one verdict naming node1's rank and cause, node0's timeout its
    consequence."""
    done = _replay(str(PAIR / "node0.log"), str(PAIR / "node1.log"), "--json")
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    error = out["error"]
    assert (out["state"], error["node"], error["ranks"]) == ("crashed", "node1", ["TP3"])
    assert "Error 802: system not yet initialized" in error["summary"]
    assert [c["node"] for c in error["consequences"]] == ["node0"]
    assert "Watchdog caught collective operation timeout" in error["consequences"][0]["summary"]
    assert [(n["name"], n["serve"]) for n in out["nodes"]] == [("node0", True), ("node1", False)]
    text = _replay(str(PAIR / "node0.log"), str(PAIR / "node1.log"))
    assert "on node node1 on ranks TP3" in text.stdout
    assert "node node0 on ranks rank6, a consequence" in text.stdout


def test_replay_of_one_file_is_unchanged() -> None:
    """`replay FILE` of one log has no `nodes` in its JSON."""
    done = _replay(str(PAIR / "node1.log"), "--json")
    assert done.returncode == 1
    assert "nodes" not in json.loads(done.stdout)


def test_a_crash_alert_names_the_node_its_host_and_the_others_part() -> None:
    """The alert of a multi-node crash is about the first failing node on its host, and says what the other
    nodes did (a consequence, or went quiet)."""
    from watchdog.alerts.alert import Alert  # noqa: PLC0415
    from watchdog.alerts.compose import fields  # noqa: PLC0415
    from watchdog.core.verdict import Status  # noqa: PLC0415

    quiet = _node("rank0", State.ALLOCATING_KV_CACHE, serve=True)
    timeout = _node(
        "rank2",
        State.CRASHED,
        State.ALLOCATING_KV_CACHE,
        error=_error("Watchdog caught collective operation timeout", consequence=True),
        failed_at=0.5,
    )
    dead = _node(
        "rank1", State.CRASHED, State.STARTING, error=_error("Error 802", ranks=("TP3",)), failed_at=1.0
    )
    status = Status(combine([quiet, dead, timeout]), name="ds", host="host-rank0")
    alert = Alert.from_status("crashed", status)
    assert (alert.host, alert.node, alert.ranks) == ("host-rank1", "rank1", ("TP3",))
    assert alert.title == "ds on node rank1 (host-rank1) crashed in starting (cuda)"
    assert alert.detail == (
        "node rank0: no error of its own (allocating_kv_cache), went quiet; "
        "node rank2: Watchdog caught collective operation timeout (a consequence)"
    )
    assert ("Node", "rank1") in fields(alert)
    assert Alert.from_dict(alert.to_dict()).node == "rank1"


def test_watch_of_several_targets_is_one_launch(tmp_path: Path) -> None:
    """`watch A B --serve B` follows the two logs as the nodes of one launch: one verdict, B serving."""
    for name in ("node0", "node1"):
        (tmp_path / f"{name}.log").write_bytes((PAIR / f"{name}.log").read_bytes())
    done = _cli(
        "watch", str(tmp_path / "node0.log"), str(tmp_path / "node1.log"), "--serve", "node1", "--json"
    )
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert (out["error"]["node"], out["error"]["ranks"]) == ("node1", ["TP3"])
    assert [(n["name"], n["serve"]) for n in out["nodes"]] == [("node0", False), ("node1", True)]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        pytest.param(["a.log", "b.log", "--serve", "c"], "--serve 'c' is not a node", id="serve-unknown"),
        pytest.param(["a.log", "--serve", "a"], "give more than one TARGET", id="serve-one-target"),
        pytest.param(["a.log", "-"], "standard input", id="stdin-node"),
        pytest.param(["a.log", "b.log", "--pid", "1"], "--pid is one host's process", id="pid"),
    ],
)
def test_watch_of_several_targets_refuses_what_does_not_fit(
    tmp_path: Path, args: list[str], said: str
) -> None:
    """Options that do not fit several targets are usage errors (exit 64) that say why."""
    done = _cli("watch", *args, cwd=tmp_path)
    assert done.returncode == 64
    assert said in done.stderr


async def _follow_group(
    clock: ManualClock, logs: list[list[bytes]], *, serve: int = 0
) -> tuple[NodesFollower, list[ScriptedSource]]:
    """A group follower of scripted nodes n0, n1 (on `clock`) that have read `logs` and caught up."""
    sources = [ScriptedSource() for _ in logs]
    nodes = []
    for index, (source, lines) in enumerate(zip(sources, logs, strict=True)):
        for line in lines:
            await source.append(line)
        await source.catch_up()
        spec = LaunchSpec(f"g@n{index}", parse_target(f"/n{index}.log"), engine="sglang", stall_after=60)
        follower = LaunchFollower(spec, source=source, clock=clock)
        nodes.append(Node(f"n{index}", follower, serve=index == serve))
    return NodesFollower("g", nodes, clock=clock), sources


@pytest.mark.anyio
async def test_the_group_stalls_only_when_every_node_has() -> None:
    """A worker node that stalls while the serving node still loads is no stall of the launch; once the
    serving node stalls too, the launch's stalled verdict goes out."""
    clock = ManualClock()
    node0 = (PAIR / "node0.log").read_bytes().splitlines(keepends=True)
    group, sources = await _follow_group(clock, [node0[:2], node0[:2]])
    said: list[Concluded] = []
    async with anyio.create_task_group() as tg:
        await tg.start(group.run)

        async def consume() -> None:
            # each verdict as it comes (the test looks at `said` while the follow goes on)
            with group.updates:
                async for update in group.updates:
                    if isinstance(update, Concluded):
                        said.append(update)  # noqa: PERF401 - one at a time, not at the stream's end

        tg.start_soon(consume)
        await clock.advance(40)
        await sources[0].append(node0[2])  # the serving node loads on
        await sources[0].catch_up()
        await clock.advance(30)  # n1: 70 s without progress; n0: 30 s
        states = [n.verdict.state for n in group.reports()]
        assert states == [State.LOADING_WEIGHTS, State.STALLED]
        assert group.verdict().state is State.LOADING_WEIGHTS
        assert said == []
        await clock.advance(40)  # n0 too
        assert [c.state for c in said] == [State.STALLED]
        assert said[0].verdict.phase is State.LOADING_WEIGHTS
        tg.cancel_scope.cancel()


async def _drain(group: NodesFollower) -> None:
    with group.updates:
        async for _update in group.updates:
            pass


@pytest.mark.anyio
async def test_the_group_is_ready_when_the_serving_node_is() -> None:
    """The serving node's ready is the launch's, though the worker node never says ready."""
    clock = ManualClock()
    ready = READY.read_bytes().splitlines(keepends=True)
    worker = (PAIR / "node0.log").read_bytes().splitlines(keepends=True)[:2]
    group, _sources = await _follow_group(clock, [worker, ready], serve=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_drain, group)
        await tg.start(group.run)
        await clock.advance(5)  # past a ready line's confirmation wait
        said = group.concluded
        assert said is not None
        assert said.state is State.READY
        assert [n["state"] for n in said.verdict.to_json()["nodes"]] == ["loading_weights", "ready"]
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_cause_a_moment_after_a_consequence_is_the_first_failure() -> None:
    """Node 0's NCCL timeout comes first, node 1's own error half a second later (past the settle window):
    the report waits for it and names node 1; with no cause coming, node 0's timeout is reported after
    `CAUSE_WAIT`."""
    clock = ManualClock()
    node0 = (PAIR / "node0.log").read_bytes().splitlines(keepends=True)
    node1 = (PAIR / "node1.log").read_bytes()
    timeout = next(i for i, line in enumerate(node0) if b"Watchdog caught" in line)
    for cause in (True, False):
        group, sources = await _follow_group(clock, [node0[:timeout], []])
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, group)
            await tg.start(group.run)
            for line in node0[timeout:]:
                await sources[0].append(line)
            await sources[0].catch_up()
            await clock.advance(0.5)
            assert group.concluded is None  # past the settle window: a cause may still come
            if cause:
                await sources[1].append(node1)
                await sources[1].catch_up()
            await clock.advance(CAUSE_WAIT)
            said = group.concluded
            assert said is not None
            assert said.state is State.CRASHED
            error = said.verdict.to_json()["error"]
            assert (error["node"], error["ranks"]) == (("n1", ["TP3"]) if cause else ("n0", ["rank6"]))
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_an_unreachable_node_is_its_own_hosts_outage(tmp_path: Path) -> None:
    """A node whose host cannot be reached is that host's outage (alerted as such, naming the launch), not
    the serving node's host's."""
    import io  # noqa: PLC0415

    from watchdog.daemon.launches import LaunchPlan, NodePlan  # noqa: PLC0415
    from watchdog.daemon.supervisor import ConsoleAlerts, Daemon  # noqa: PLC0415
    from watchdog.follow.sources import SSHOptions  # noqa: PLC0415

    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    near = LaunchSpec("ds@near", parse_target(str(tmp_path / "near.log")))
    far = LaunchSpec("ds@far", parse_target("ssh://nobody@127.0.0.1:1/srv/server.log"))
    ssh = SSHOptions(known_hosts=str(known_hosts), config=None, use_agent=False, connect_timeout=2.0)
    out = io.StringIO()
    plan = LaunchPlan(
        LaunchSpec("ds", near.target),
        alerts=(ConsoleAlerts(out=out),),
        nodes=(NodePlan("near", near, serve=True), NodePlan("far", far, host="far", ssh=ssh)),
    )
    daemon = Daemon({"ds": plan}, handle_signals=False, unreachable_after=0.5)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            await daemon.wait_until(lambda _: daemon.alerts_sent["console"] == 1)
            tg.cancel_scope.cancel()
    [said] = out.getvalue().splitlines()
    assert said.startswith("host:far: host unreachable: cannot connect to nobody@127.0.0.1 port 1")
    assert said.endswith("; not followed: ds")


def test_a_multi_node_launch_says_what_its_serving_node_changed() -> None:
    """A multi-node launch's verdict carries its serving node's arguments and what changed since the launch
    before (the other nodes' are not the launch's): the report and the JSON say it."""
    changes = Changes(
        2, arguments=(ArgumentChange("mem_fraction_static", "--mem-fraction-static", "0.78", "0.92"),)
    )
    head = _node("a", State.READY, serve=True)
    head = replace(
        head,
        verdict=replace(
            head.verdict,
            arguments=(Argument("mem_fraction_static", "--mem-fraction-static", "0.92"),),
            changes=changes,
        ),
    )
    worker = _node("b", State.CAPTURING_GRAPHS)
    launch = combine([worker, head])
    assert launch.changes is changes
    assert launch.arguments == head.verdict.arguments
    assert launch.to_json()["changes"]["arguments"] == [
        {"name": "mem_fraction_static", "flag": "--mem-fraction-static", "before": "0.78", "after": "0.92"}
    ]
