"""Tests of a live two-node launch over two real sshd instances (one per node): one verdict naming the node and
rank that failed first, within 1 s of its error line."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from conftest import sshd_or_skip
from sshd_server import SSHDServer

from watchdog.follow.follower import Concluded, LaunchFollower, Transitioned
from watchdog.follow.nodes import Node, NodesFollower
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
from watchdog.follow.sources.target import parse_target
from watchdog.follow.spec import LaunchSpec
from watchdog.vocabulary import State

pytestmark = [pytest.mark.anyio, pytest.mark.sshd]

PAIR = Path(__file__).parent / "fixtures" / "nodes" / "sglang-2node"
PACE = 0.01  # seconds between two lines the stand-in servers write (their logs' pace, sped up)
WITHIN = 1.0  # seconds from the error line to the launch's verdict (issue 29's "done when")


@pytest.fixture(scope="module")
def sshd2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHDServer]:
    """A second throwaway sshd on 127.0.0.1: the second node's host."""
    yield from sshd_or_skip(tmp_path_factory.mktemp("sshd2"))


def options(server: SSHDServer) -> SSHOptions:
    """Options that reach `server` and nothing else."""
    return SSHOptions(
        known_hosts=str(server.known_hosts), identity=str(server.client_key), config=None, use_agent=False
    )


@pytest.fixture
async def pools(sshd: SSHDServer, sshd2: SSHDServer, anyio_backend: str) -> AsyncIterator[list[SSHPool]]:
    """One connection pool per node's host."""
    async with SSHPool(options(sshd)) as first, SSHPool(options(sshd2)) as second:
        yield [first, second]


def node_follower(name: str, server: SSHDServer, log: Path, pool: SSHPool) -> LaunchFollower:
    """The follower of one node's log on `server`."""
    target = parse_target(f"ssh://{server.user}@{server.host}:{server.port}{log}")
    return LaunchFollower(LaunchSpec(f"demo@{name}", target, engine="sglang"), pool=pool)


async def write_at_pace(path: Path, lines: list[str]) -> None:
    """Append `lines` one by one, as a server writes its log."""
    for line in lines:
        with path.open("a", encoding="utf-8") as f:
            f.write(line)
        await anyio.sleep(PACE)


async def test_node1_dies_first_node0_hangs(
    sshd: SSHDServer, sshd2: SSHDServer, pools: list[SSHPool], tmp_path: Path
) -> None:
    """Node 1's scheduler dies while node 0 hangs after loading: the launch crashes within 1 s of node 1's
    error line, its verdict naming node 1's host, rank TP3 and its root cause, node 0 listed as gone quiet."""
    logs = [tmp_path / "node0.log", tmp_path / "node1.log"]
    for log in logs:
        log.write_text("")
    group = NodesFollower(
        "demo",
        [
            Node("node0", node_follower("node0", sshd, logs[0], pools[0]), host="gpu0", serve=True),
            Node("node1", node_follower("node1", sshd2, logs[1], pools[1]), host="gpu1"),
        ],
    )
    node0 = (PAIR / "node0.log").read_text().splitlines(keepends=True)
    hang = next(i for i, line in enumerate(node0) if "Watchdog caught" in line)  # node 0 never gets there
    node1 = (PAIR / "node1.log").read_text().splitlines(keepends=True)
    crashed_at: float | None = None
    verdict: Concluded | None = None
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(20):
            await tg.start(group.run)  # both nodes follow their (empty) logs
        await write_at_pace(logs[0], node0[:hang])
        await write_at_pace(logs[1], node1[:-1])
        with logs[1].open("a", encoding="utf-8") as f:
            f.write(node1[-1])  # the error line
        written = group.now()
        with anyio.fail_after(10), group.updates:
            async for update in group.updates:
                if isinstance(update, Transitioned) and update.transition.state is State.CRASHED:
                    crashed_at = group.now()
                if isinstance(update, Concluded):
                    verdict = update
                    break
        concluded_at = group.now()
        tg.cancel_scope.cancel()
    assert crashed_at is not None
    assert verdict is not None
    assert crashed_at - written < WITHIN
    assert concluded_at - written < WITHIN, f"{concluded_at - written:.3f}s from the error line"
    out = verdict.verdict.to_json()
    error = out["error"]
    assert (verdict.state, error["node"], error["host"], error["ranks"]) == (
        State.CRASHED,
        "node1",
        "gpu1",
        ["TP3"],
    )
    assert "Error 802: system not yet initialized" in error["summary"]
    assert error["consequences"] == [
        {"node": "node0", "host": "gpu0", "summary": None, "quiet": True, "state": "allocating_kv_cache"}
    ]
    nodes = {n["name"]: n for n in out["nodes"]}
    assert nodes["node0"]["progress"]["weights"] == {"done": 163, "total": 163}
    assert (nodes["node1"]["state"], nodes["node0"]["serve"]) == ("crashed", True)


def daemon_config(tmp_path: Path, servers: list[SSHDServer], logs: list[Path]) -> Path:
    """A daemon config with one two-node launch `ds`: node gpu0 (serving) and gpu1, one host each."""
    hosts = "".join(
        f"""
[hosts.gpu{i}]
address = "127.0.0.1"
port = {server.port}
user = "{server.user}"
identity = "{server.client_key}"
known_hosts = "{server.known_hosts}"
"""
        for i, server in enumerate(servers)
    )
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f"""
[daemon]
listen = "127.0.0.1:0"
state_dir = "{tmp_path / "state"}"
log_format = "json"
{hosts}
[notifiers.console]
kind = "console"

[launches.ds]
engine = "sglang"
notify = ["console"]
nodes = [{{ host = "gpu0", log = "{logs[0]}" }}, {{ host = "gpu1", log = "{logs[1]}" }}]
"""
    )
    return config


def test_daemon_status_names_the_node_and_resumes_each_node(
    sshd: SSHDServer, sshd2: SSHDServer, tmp_path: Path
) -> None:
    """`watchdog run` with a two-node launch: /status has one entry for the launch, its verdict naming gpu1's
    rank TP3, with per-node entries; the alert names the node and host; the metrics are the launch's; each node's checkpoint is kept under
    its own key, and a restarted daemon does not announce the crash again."""
    import signal  # noqa: PLC0415
    import sqlite3  # noqa: PLC0415

    from daemon_process import DaemonProcess  # noqa: PLC0415
    from http_client import get  # noqa: PLC0415

    logs = [tmp_path / "node0.log", tmp_path / "node1.log"]
    node0 = (PAIR / "node0.log").read_text().splitlines(keepends=True)
    hang = next(i for i, line in enumerate(node0) if "Watchdog caught" in line)
    logs[0].write_text("".join(node0[:hang]))
    logs[1].write_text("")
    config = daemon_config(tmp_path, [sshd, sshd2], logs)
    first = DaemonProcess(config, deadline=30.0)
    try:
        url = first.wait(event="http_listening")["url"]
        first.wait(event="transition", launch="ds", state="allocating_kv_cache")
        logs[1].write_text((PAIR / "node1.log").read_text())
        first.wait(event="transition", launch="ds", state="crashed")
        first.wait(event="announced", launch="ds", state="crashed")
        [entry] = get(url + "status").json()
        metrics = get(url + "metrics").text
        ready = get(url + "launches/ds/ready")
        first.proc.send_signal(signal.SIGTERM)
        assert first.proc.wait(timeout=30) == 0
        assert first.proc.stdout is not None
        said = first.proc.stdout.read()
    finally:
        first.close()
    assert (entry["name"], entry["state"], entry["host"]) == ("ds", "crashed", "gpu0")
    error = entry["error"]
    assert (error["node"], error["host"], error["ranks"]) == ("gpu1", "gpu1", ["TP3"])
    assert "Error 802" in error["summary"]
    assert [(n["name"], n["host"], n["serve"], n["state"]) for n in entry["nodes"]] == [
        ("gpu0", "gpu0", True, "allocating_kv_cache"),
        ("gpu1", "gpu1", False, "crashed"),
    ]
    assert entry["nodes"][0]["progress"]["weights"] == {"done": 163, "total": 163}
    assert "ds on node gpu1: crashed during starting on ranks TP3" in said
    # the readiness answer is the launch's: crashed (500), naming the first failing node's cause
    assert ready.status_code == 500
    assert "Error 802" in ready.json()["summary"]
    # metrics stay per launch (no node label), its host the serving node's
    assert 'watchdog_launch_state{engine="sglang",host="gpu0",launch="ds",state="crashed"} 1.0' in metrics
    assert 'watchdog_crashes_total{category="cuda",host="gpu0",launch="ds"} 1.0' in metrics
    with sqlite3.connect(tmp_path / "state" / "watchdog.sqlite3") as db:
        keys = {row[0] for row in db.execute("SELECT launch FROM checkpoints")}
    assert keys == {"ds@gpu0", "ds@gpu1"}
    second = DaemonProcess(config, deadline=30.0)
    try:
        second.wait(event="already announced", launch="ds", state="crashed")
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(timeout=30) == 0
        assert second.proc.stdout is not None
        assert "ds on node" not in second.proc.stdout.read()
    finally:
        second.close()
