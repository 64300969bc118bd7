"""What holds the daemon's event loop: each callback's CPU time and the garbage collector's pauses, recorded.

Run by `daemon_bench.py --trace DIR` (or by hand: `python benchmarks/loop_trace.py -m watchdog.cli run ...`
with LOOP_TRACE=DIR in the environment) before the daemon's own code, it times every asyncio callback (the
thread's CPU time, `time.thread_time`, so that a loaded machine's waits for a CPU do not count) and every
collection (`gc.callbacks`: its generation, CPU time and how many objects it freed, and for a full collection
how many objects generation 2 held). A callback that used more than LOOP_TRACE_SLOW_MS (default 10) is kept with
its callback's repr and the stacks a sampling thread saw in it (every 3 ms once it has run 5 ms). Written to
DIR/trace.json at exit; `python benchmarks/loop_trace.py --show DIR` prints the summary.

It also times each turn of the loop (`BaseEventLoop._run_once`: the select and every callback that was ready, CPU
time): a task woken in a turn runs in the next, so what it waits is the rest of that turn; and it counts each
socket read (a selector transport's `_read_ready`) and its bytes. Turns and reads over 1 ms of CPU are kept.

What it adds (a Python wrapper around each callback, a sampling thread) costs CPU: read its durations beside
each other, not as the daemon's own figures.
"""

from __future__ import annotations

import atexit
import collections
import gc
import json
import os
import runpy
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _stack(frame: Any) -> str:
    out = []
    while frame is not None and len(out) < 14:
        code = frame.f_code
        out.append(f"{os.path.basename(code.co_filename)}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(out)


def install(out: Path) -> None:
    """Record into `out` (a folder) what holds this thread's event loop, from now until the process exits."""
    import asyncio.events  # noqa: PLC0415

    out.mkdir(parents=True, exist_ok=True)
    slow_after = float(os.environ.get("LOOP_TRACE_SLOW_MS", "10")) / 1000
    pauses: list[tuple[float, int, float, int, int]] = []  # time, generation, CPU ms, freed, gen 2 objects
    slow: list[tuple[float, float, float, str, list[tuple[str, int]]]] = []  # time, CPU ms, GC ms in it, ...
    durations: list[float] = []  # the CPU seconds of every callback over 1 ms
    started = {"cpu": 0.0, "objects": 0, "callback": None}
    stacks: collections.Counter[str] = collections.Counter()
    main = threading.get_ident()
    clock = time.pthread_getcpuclockid(main)

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            if info["generation"] == 2:
                started["objects"] = len(gc.get_objects(2))
            started["cpu"] = time.thread_time()
        else:
            cpu = (time.thread_time() - started["cpu"]) * 1000  # type: ignore[operator]
            n2 = started["objects"] if info["generation"] == 2 else 0
            pauses.append((time.time(), info["generation"], cpu, info["collected"], n2))  # type: ignore[arg-type]

    gc.callbacks.append(collected)
    run = asyncio.events.Handle._run

    def timed(handle: asyncio.events.Handle) -> None:
        before, cpu = len(pauses), time.thread_time()
        started["callback"] = cpu
        try:
            run(handle)
        finally:
            started["callback"] = None
            used = time.thread_time() - cpu
            if used > 0.001:
                durations.append(used)
                if used > slow_after:
                    in_gc = sum(p[2] for p in pauses[before:])
                    slow.append(
                        (time.time(), used * 1000, in_gc, repr(handle._callback)[:200], stacks.most_common(3))
                    )
            stacks.clear()

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]

    import asyncio.base_events  # noqa: PLC0415
    import asyncio.selector_events  # noqa: PLC0415

    turns: list[tuple[float, float]] = []  # (time, CPU seconds) of every turn over 1 ms
    turn = asyncio.base_events.BaseEventLoop._run_once

    def timed_turn(loop: asyncio.base_events.BaseEventLoop) -> None:
        cpu = time.thread_time()
        try:
            turn(loop)
        finally:
            used = time.thread_time() - cpu
            if used > 0.001:
                turns.append((time.time(), used))

    asyncio.base_events.BaseEventLoop._run_once = timed_turn  # type: ignore[method-assign]
    reads: list[tuple[float, float, int]] = []  # (time, CPU seconds, bytes) of every socket read over 1 ms
    count = {"reads": 0}
    transport = asyncio.selector_events._SelectorSocketTransport
    read = transport._read_ready__data_received

    def timed_read(self: Any) -> None:
        cpu = time.thread_time()
        protocol = self._protocol
        own = "data_received" in getattr(protocol, "__dict__", {})  # set on the object (`read_in_slices`)
        receive = protocol.data_received
        got = [0]

        def counted(data: bytes, *args: Any) -> Any:
            got[0] = len(data)
            return receive(data, *args)

        try:
            protocol.data_received = counted
        except AttributeError:  # a protocol with slots: not counted
            protocol = None
        try:
            read(self)
        finally:
            if protocol is not None:
                if own:
                    protocol.data_received = receive
                else:
                    del protocol.data_received
            count["reads"] += 1
            used = time.thread_time() - cpu
            if used > 0.001:
                reads.append((time.time(), used, got[0]))

    transport._read_ready__data_received = timed_read  # type: ignore[method-assign]

    def sample() -> None:
        while True:
            time.sleep(0.003)
            began = started["callback"]
            if began is not None and time.clock_gettime(clock) - began > 0.005:  # type: ignore[operator]
                frame = sys._current_frames().get(main)
                if frame is not None and started["callback"] is began:
                    stacks[_stack(frame)] += 1

    threading.Thread(target=sample, daemon=True).start()

    def dump() -> None:
        data = {
            "pauses": pauses,
            "slow": slow,
            "durations": durations,
            "frozen": gc.get_freeze_count(),
            "turns": turns,
            "reads": reads,
            "all_reads": count["reads"],
        }
        (out / "trace.json").write_text(json.dumps(data))

    atexit.register(dump)


def show(folder: Path, top: int = 15, window: tuple[float, float] | None = None) -> None:
    """Print what `install` recorded in `folder` (with `window`, Unix times: the collections, slow callbacks,
    turns and reads within it)."""
    data = json.loads((folder / "trace.json").read_text())
    if window is not None:
        data["pauses"] = [p for p in data["pauses"] if window[0] <= p[0] <= window[1]]
        data["slow"] = [s for s in data["slow"] if window[0] <= s[0] <= window[1]]
    pauses = data["pauses"]
    print(f"collections: {len(pauses)}; frozen at the end: {data['frozen']}")
    for generation in (0, 1, 2):
        cpu = sorted(p[2] for p in pauses if p[1] == generation)
        if cpu:
            print(
                f"  generation {generation}: {len(cpu)}, CPU ms p50 {cpu[len(cpu) // 2]:.2f}, max {cpu[-1]:.2f}, "
                f"sum {sum(cpu):.1f}"
            )
    print("  full collections (CPU ms, objects freed, objects in generation 2):")
    print("   ", [(round(p[2], 1), p[3], p[4]) for p in pauses if p[1] == 2])
    durations = sorted(data["durations"])
    over = sum(1 for d in durations if d > 0.01)
    print(
        f"callbacks over 1 ms of CPU: {len(durations)} ({1000 * sum(durations):.0f} ms in all), over 10 ms: {over}"
    )
    since, until = window if window is not None else (-1.0, float("inf"))
    # (an older trace's turns have no time)
    timed = [t if isinstance(t, list) else [0.0, t] for t in data.get("turns", [])]
    turns = sorted(t[1] for t in timed if since <= t[0] <= until)
    if turns:
        over = [sum(1 for t in turns if t > bound) for bound in (0.01, 0.05, 0.1, 0.25)]
        print(
            f"turns of the loop over 1 ms of CPU: {len(turns)}, p50 {1000 * turns[len(turns) // 2]:.1f} ms, p99 "
            f"{1000 * turns[int(len(turns) * 0.99)]:.1f} ms, max {1000 * turns[-1]:.1f} ms; over 10/50/100/250 ms: "
            + "/".join(str(n) for n in over)
        )
    reads = sorted(r[-2:] for r in data.get("reads", []) if since <= (r[0] if len(r) == 3 else 0.0) <= until)
    if reads:
        print(
            f"socket reads: {data['all_reads']} in all; {len(reads)} over 1 ms of CPU: p50 "
            f"{1000 * reads[len(reads) // 2][0]:.1f} ms, max {1000 * reads[-1][0]:.1f} ms; the most bytes in one: "
            f"{max(r[1] for r in reads):,}"
        )
    for when, cpu, in_gc, callback, sampled in sorted(data["slow"], key=lambda s: -s[1])[:top]:
        print(
            f"  {cpu:.1f} ms CPU ({in_gc:.1f} in collections) at {time.strftime('%H:%M:%S', time.localtime(when))}: {callback[:90]}"
        )
        for stack, n in sampled:
            print(f"      {n}x {stack[:400]}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--show"]:
        # --show DIR [SINCE UNTIL]: only what happened between those Unix times (a bench's load window)
        bounds = (float(sys.argv[3]), float(sys.argv[4])) if len(sys.argv) == 5 else None
        show(Path(sys.argv[2]), window=bounds)
        sys.exit(0)
    if os.environ.get("LOOP_TRACE"):
        install(Path(os.environ["LOOP_TRACE"]))
    if sys.argv[1:2] == ["-m"]:
        sys.argv = sys.argv[2:]
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = sys.argv[1:]
        runpy.run_path(sys.argv[0], run_name="__main__")
