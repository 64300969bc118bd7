"""systemd's notify protocol, as a running daemon speaks it: READY=1 once every launch has read its log as it
was, WATCHDOG=1 pings at half of $WATCHDOG_USEC with STATUS= counting the launches by state, STOPPING=1 at the
end; and the count is made from the followers' states, the same as /status says, without building verdicts."""

from __future__ import annotations

import io
import socket
from collections import Counter
from pathlib import Path

import anyio
import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import build_verdict, verdict_state
from watchdog.daemon.supervisor import ConsoleAlerts, Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import parse_target
from watchdog.profiles.loader import load_engine

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
DEADLINE = 30.0


def _messages(sock: socket.socket) -> list[dict[str, str]]:
    """Every datagram waiting on `sock`, each as its KEY=value lines."""
    out = []
    while True:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return out
        out.append(dict(line.split("=", 1) for line in data.decode().splitlines()))


@pytest.mark.anyio
async def test_a_daemon_says_ready_pings_with_its_launches_counted_and_says_stopping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under systemd (Type=notify, WatchdogSec=): READY=1 with the count, then WATCHDOG=1 pings whose STATUS=
    counts a crashed, a ready and a pending launch (its log not there yet), then STOPPING=1."""
    address = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", address)
    monkeypatch.setenv("WATCHDOG_USEC", "100000")  # a ping every 50 ms
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    paths = {
        "crash": tmp_path / "crash.log",
        "ready": tmp_path / "ready.log",
        "later": tmp_path / "later.log",
    }
    out = io.StringIO()
    alerts = ConsoleAlerts(out=out)
    plans = {
        n: LaunchPlan(LaunchSpec(name=n, target=parse_target(str(p))), alerts=(alerts,))
        for n, p in paths.items()
    }
    daemon = Daemon(plans, handle_signals=False)
    received: list[dict[str, str]] = []
    want = "3 launches: 1 crashed, 1 pending, 1 ready"
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            paths["crash"].write_bytes(CRASH.read_bytes())
            paths["ready"].write_bytes(READY.read_bytes())
            await daemon.wait_until(
                lambda s: (
                    {x["name"]: x["state"] for x in s}
                    == {"crash": "crashed", "ready": "ready", "later": "pending"}
                )
            )
            assert daemon.summary() == want
            while not any(m.get("WATCHDOG") == "1" and m.get("STATUS") == want for m in received):
                await anyio.wait_readable(sock)
                received += _messages(sock)
            tg.cancel_scope.cancel()
    received += _messages(sock)
    sock.close()
    assert received[0]["READY"] == "1"
    assert received[0]["STATUS"].startswith("3 launches: ")
    assert received[-1] == {"STOPPING": "1"}


def test_a_followers_state_is_the_state_of_the_verdict_it_would_build() -> None:
    """`verdict_state(inc)` is `build_verdict(...).state` for every incarnation of every corpus log, and for
    each of them marked as waiting for its log (what a follower of a missing file does): what systemd's STATUS=
    counts is what /status says."""
    checked = Counter[bool]()
    for path in sorted(CORPUS.glob("*/*.log"))[::3]:
        analyzer = Analyzer(load_engine(None))
        analyzer.feed(path.read_bytes(), 0.0)
        analyzer.finish(1.0)
        for inc in (*analyzer.lifecycle.history, analyzer.lifecycle.current):
            for missing in (False, True):
                inc.log_missing = missing
                assert verdict_state(inc) == build_verdict(analyzer, inc, changes=False).state, path.name
                checked[missing] += 1
    assert checked[True] > 150
