"""A running daemon with a launch in every state, for the tests that read its real /metrics.

Launches (all followed live, their logs written after the daemon started):

- `ready`: an SGLang log to ready (time to ready, progress, memory facts);
- `crash`: a vLLM crash in graph capture (a crash by category); its webhook refuses (an alert failed);
- `stall`: an SGLang log cut while loading the weights, with a 1 s `stall_after` (stalled);
- `loading`: the same cut log, with the default `stall_after` (still loading the weights);
- `pending`: a log that does not exist (yet);
- `remote`: an SGLang log to ready over the test sshd, host `gpu1`, whose connection is cut once the launch is
  ready (an SSH reconnect);
- `far`: a log on host `far`, an SSH target on a closed port (never connected).

Three launches carry labels of their own (`team`, `zone`), for `watchdog_launch_info`.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus
from http_receiver import Answer, Receiver, running_receiver
from sshd_server import SSHDServer

from watchdog.alerts.senders import ConsoleAlerts, ServiceNotifier
from watchdog.daemon.http import serve_http
from watchdog.daemon.supervisor import Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import SSHOptions, parse_target

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
LOADING_LINES = 7  # READY's first lines: loading the weights, 2 of 4 shards
SCENE_DEADLINE = 120.0  # every launch in its state, the remote one reconnected (a loaded 2-core machine)
POLL = 0.1  # seconds between two looks at sshd's sessions
REFUSALS = 1000  # the refusing webhook answers 400 to this many requests (all of the test's)

EXPECTED_STATES = {
    "ready": "ready",
    "crash": "crashed",
    "stall": "stalled",
    "loading": "loading_weights",
    "pending": "pending",
    "remote": "ready",
}
LABELS = {
    "crash": {"team": "inference"},
    "loading": {"team": "infra"},
    "remote": {"team": "serving", "zone": "a"},
}


@dataclass
class Scene:
    """The running daemon, and what the launches were given."""

    daemon: Daemon
    port: int
    hook: Receiver
    paths: dict[str, Path]


async def _serve(daemon: Daemon, *, task_status: TaskStatus[int]) -> None:
    await serve_http(("127.0.0.1", 0), daemon.statuses, daemon.stats, task_status=task_status)


def _states(statuses: list[dict[str, Any]]) -> dict[str, str]:
    return {s["name"]: s["state"] for s in statuses}


def scene_plans(
    tmp_path: Path, sshd: SSHDServer, hook: Receiver, *, refusing: bool = True
) -> tuple[dict[str, LaunchPlan], dict[str, Path]]:
    """The launches of the module docstring, and the local paths of their logs; without `refusing`, the crash
    is told to the console only (no alert fails)."""
    console = ConsoleAlerts(out=io.StringIO())
    hook_notifier = ServiceNotifier(name="hook", kind="webhook", urls=(hook.url(),), timeout=5.0)
    paths = {
        name: tmp_path / f"{name}.log" for name in ("ready", "crash", "stall", "loading", "pending", "remote")
    }
    local = {
        name: LaunchSpec(name=name, target=parse_target(str(paths[name])))
        for name in ("ready", "crash", "loading", "pending")
    }
    local["stall"] = LaunchSpec(name="stall", target=parse_target(str(paths["stall"])), stall_after=1.0)
    plans = {
        name: LaunchPlan(
            spec,
            labels=LABELS.get(name, {}),
            alerts=(console, hook_notifier) if name == "crash" and refusing else (console,),
        )
        for name, spec in local.items()
    }
    options = SSHOptions(
        known_hosts=str(sshd.known_hosts),
        identity=str(sshd.client_key),
        config=None,
        use_agent=False,
        connect_timeout=10.0,
    )
    remote = parse_target(f"ssh://{sshd.user}@127.0.0.1:{sshd.port}{paths['remote']}")
    plans["remote"] = LaunchPlan(
        LaunchSpec(name="remote", target=remote),
        host="gpu1",
        ssh=options,
        labels=LABELS["remote"],
        alerts=(console,),
    )
    far = parse_target("ssh://nobody@127.0.0.1:1/srv/server.log")
    plans["far"] = LaunchPlan(LaunchSpec(name="far", target=far), host="far", ssh=options, alerts=(console,))
    return plans, paths


@asynccontextmanager
async def running_scene(tmp_path: Path, sshd: SSHDServer, *, refusing: bool = True) -> AsyncIterator[Scene]:
    """The daemon of the module docstring, every launch in its state and the remote one reconnected once
    (`refusing`: see `scene_plans`)."""
    async with running_receiver() as hook, anyio.create_task_group() as tg:
        hook.script.extend(Answer(400, body="no such channel") for _ in range(REFUSALS))
        plans, paths = scene_plans(tmp_path, sshd, hook, refusing=refusing)
        daemon = Daemon(plans, serve=_serve, handle_signals=False, unreachable_after=0.5)
        with anyio.fail_after(SCENE_DEADLINE):
            await tg.start(daemon.run)
            assert daemon.port is not None
            cut = b"".join(READY.read_bytes().splitlines(keepends=True)[:LOADING_LINES])
            paths["ready"].write_bytes(READY.read_bytes())
            paths["crash"].write_bytes(CRASH.read_bytes())
            paths["stall"].write_bytes(cut)
            paths["loading"].write_bytes(cut)
            paths["remote"].write_bytes(READY.read_bytes())
            await daemon.wait_until(
                lambda s: (
                    all(_states(s).get(k) == v for k, v in EXPECTED_STATES.items())
                    and (daemon.alerts_failed["hook"] >= 1 or not refusing)
                )
            )
            # the remote launch's connection is cut: the pool connects again (sshd, another process, has
            # nothing to wait on but its sessions: asked every POLL)
            killed = set(sshd.kill_sessions())
            assert killed, "an SSH session to cut"
            while True:
                if set(sshd.session_pids()) - killed:
                    break
                await anyio.sleep(POLL)
        try:
            yield Scene(daemon, daemon.port, hook, paths)
        finally:
            tg.cancel_scope.cancel()
