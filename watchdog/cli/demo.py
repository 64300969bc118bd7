"""`watchdog demo`: three real launch logs replayed into files at a sped-up pace, watched by the full daemon.

The logs ship in `watchdog/examples/demo/`, each from a public source: sglang-ready.log (SGLang 0.4, Llama 3.1
8B, docs.sglang.ai), vllm-crash.log (vLLM 0.19 dying in CUDA graph capture, qBraid/evolving-quantum-compilers)
and vllm-stall.log (vLLM-Ascend stopping at shard 14 of 99, vllm-project/vllm-ascend#6734).
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import anyio
from anyio.abc import TaskStatus

from watchdog.core.lifecycle import State
from watchdog.daemon.supervisor import ConsoleAlerts, Daemon, LaunchPlan
from watchdog.exceptions import UsageError
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import parse_target
from watchdog.vocabulary import DEFAULT_STALL_AFTER, split_listen

WRITE_SECONDS = 4.0  # how long writing one whole log takes
DEMO_STALL_AFTER = 3.0  # the stalled launch's stall clock (a real one would be minutes)
_SECOND = re.compile(rb"\d\d:\d\d:\d\d")


@dataclass(frozen=True)
class DemoLaunch:
    """One simulated launch: its name, bundled log, engine and expected verdict."""

    name: str
    log: str
    expect: State
    stall_after: float = DEFAULT_STALL_AFTER


DEMO_LAUNCHES = (
    DemoLaunch("llama-8b-sglang", "sglang-ready.log", State.READY),
    DemoLaunch("qwen-vllm-capture", "vllm-crash.log", State.CRASHED),
    DemoLaunch("glm5-ascend-tp16", "vllm-stall.log", State.STALLED, stall_after=DEMO_STALL_AFTER),
)


def run_demo(*, forever: bool = False, listen: str = "127.0.0.1:0") -> int:
    """Run the demo; 0 once every launch reached its verdict."""
    try:
        address = split_listen(listen)
    except ValueError as exc:
        raise UsageError(f"--listen: {exc}") from None
    from watchdog.daemon.logs import configure_logging  # noqa: PLC0415

    configure_logging("console")
    return anyio.run(_demo, forever, address)


async def _demo(forever: bool, listen: tuple[str, int]) -> int:
    from watchdog.daemon.http import serve_http  # noqa: PLC0415 - aiohttp only when serving

    with tempfile.TemporaryDirectory(prefix="watchdog-demo-") as tmp:
        paths = {d.name: Path(tmp) / f"{d.name}.log" for d in DEMO_LAUNCHES}
        alerts = ConsoleAlerts()
        plans = {
            d.name: LaunchPlan(
                LaunchSpec(name=d.name, target=parse_target(str(paths[d.name])), stall_after=d.stall_after),
                alerts=(alerts,),
            )
            for d in DEMO_LAUNCHES
        }

        async def serve(daemon: Daemon, *, task_status: TaskStatus[int]) -> None:
            await serve_http(listen, daemon.statuses, daemon.stats, task_status=task_status)

        daemon = Daemon(plans, serve=serve, handle_signals=False)
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            url = f"http://{listen[0]}:{daemon.port}"
            print(f"watchdog demo: status page {url}/  metrics {url}/metrics")
            print(f"watchdog demo: writing {len(DEMO_LAUNCHES)} real launch logs into {tmp}")
            sys.stdout.flush()
            for d in DEMO_LAUNCHES:
                tg.start_soon(_write, d, paths[d.name])
            await _until_verdicts(daemon)
            print(f"watchdog demo: {daemon.summary()}")
            if forever:
                print("watchdog demo: serving until Ctrl-C")
                sys.stdout.flush()
                await anyio.sleep_forever()
            tg.cancel_scope.cancel()
    return 0


async def _write(demo: DemoLaunch, path: Path) -> None:
    text = (resources.files("watchdog") / "examples" / "demo" / demo.log).read_bytes()
    bursts = _bursts(text.splitlines(keepends=True))
    pause = WRITE_SECONDS / max(1, len(bursts))
    async with await anyio.open_file(path, "wb", buffering=0) as f:
        for burst in bursts:
            await f.write(b"".join(burst))
            await anyio.sleep(pause)


def _bursts(lines: list[bytes]) -> list[list[bytes]]:
    """The lines a program writes at once: those stamped with the same second (a traceback, a rank's lines)
    go together; a line with no time (a progress bar) is a write of its own."""
    out: list[list[bytes]] = []
    last: bytes | None = None
    for line in lines:
        m = _SECOND.search(line)
        stamp = m.group(0) if m else None
        if stamp is not None and stamp == last and out:
            out[-1].append(line)
        else:
            out.append([line])
        last = stamp
    return out


async def _until_verdicts(daemon: Daemon) -> None:
    want = {d.name: d.expect.value for d in DEMO_LAUNCHES}
    # every launch at its verdict, and every verdict said on the console
    await daemon.wait_until(
        lambda statuses: (
            {s["name"]: s["state"] for s in statuses} == want
            and sum(daemon.alerts_sent.values()) >= len(want)
        )
    )
