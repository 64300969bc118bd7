"""What a crash loop's incarnation costs the state store: the CPU of its writes, as the daemon makes them.

Each round, every one of `--launches` launches begins a new incarnation that reaches ready, then crashes (a
corpus SGLang startup, then a post-ready scheduler crash with its traceback: `daemon_bench.py`'s load). As the
daemon does with the store's `write_behind` running: the startup's transitions as a snapshot function, its ready
verdict standing for it (`stands_for`) and recorded (said to no notifier: noted announced with it), one batch;
then the crash's snapshot, its verdict and announcement, another batch. Each incarnation's arguments are a tuple
of its own (a relaunch's dump), as in the daemon. The figure: the process's CPU time (the event loop and the
store's worker thread) per incarnation, median of `--runs`.

Run it with another tree's package to compare (the script uses only the store's public calls):

    python benchmarks/store_churn.py [--launches 200] [--rounds 5] [--runs 5]
    PYTHONPATH=../other-tree python benchmarks/store_churn.py
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):  # else the tree it names
    sys.path.insert(0, str(ROOT))

from watchdog.core.analyzer import Analyzer  # noqa: E402 - after the path
from watchdog.core.verdict import Status, Verdict, build_verdict  # noqa: E402
from watchdog.profiles.loader import catalogue  # noqa: E402
from watchdog.store import StateStore, open_store  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "sglang"


def _verdicts() -> tuple[Verdict, Verdict]:
    """A ready verdict and the crash after it, of one incarnation (the daemon_bench load's logs)."""
    startup = (CORPUS / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes()
    crash = b"".join(
        (CORPUS / "postready-scheduler-valueerror-lmcache-tp2-pr869.log").read_bytes().splitlines(True)[1:]
    )
    analyzer = Analyzer(catalogue())
    analyzer.feed(startup, 1.0)
    analyzer.caught_up(1.0)
    ready = build_verdict(analyzer, analyzer.lifecycle.current).redacted()
    analyzer.feed(crash, 2.0)
    analyzer.finish(3.0)
    crashed = build_verdict(analyzer, analyzer.lifecycle.verdict_incarnation()).redacted()
    return ready, crashed


def _of(verdict: Verdict, number: int, arguments: tuple[object, ...]) -> Verdict:
    return dataclasses.replace(verdict, incarnation=number, arguments=arguments)  # type: ignore[arg-type]


async def _batch(
    store: StateStore, number: int, verdicts: dict[str, Verdict], key: str, elapsed: float
) -> None:
    # each launch's transitions, its verdict standing for their snapshot, the verdict noted announced; written
    for name, v in verdicts.items():
        snapshot = partial(Status, v, name=name, elapsed=elapsed)
        await store.record_transition(name, number, snapshot)
        store.stands_for(name, number, snapshot)
        await store.record_verdict(name, number, v, key, announce=True)
    await store.flush()


async def _run(launches: int, rounds: int, ready: Verdict, crashed: Verdict) -> float:
    with tempfile.TemporaryDirectory() as state:
        async with open_store(state) as store, anyio.create_task_group() as tg:
            await tg.start(store.write_behind)
            await store.last_incarnations()
            names = [f"l{k:04d}" for k in range(launches)]
            cpu = 0.0
            for number in range(1, rounds + 1):
                arguments = {name: tuple(ready.arguments) for name in names}  # a tuple of its own each
                begin = time.process_time()
                await _batch(
                    store, number, {n: _of(ready, number, a) for n, a in arguments.items()}, "ready", 9.0
                )
                await _batch(
                    store, number, {n: _of(crashed, number, a) for n, a in arguments.items()}, "crashed", 19.0
                )
                cpu += time.process_time() - begin
            tg.cancel_scope.cancel()
    return cpu / (launches * rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in (("launches", 200), ("rounds", 5), ("runs", 5)):
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()
    ready, crashed = _verdicts()
    per = [anyio.run(_run, args.launches, args.rounds, ready, crashed) for _ in range(args.runs)]
    print(
        f"{Path(sys.modules[Analyzer.__module__].__file__ or '').parents[2].name}: {statistics.median(per) * 1e6:.0f} us of CPU per incarnation"
        f" (median of {args.runs}; runs {', '.join(f'{p * 1e6:.0f}' for p in per)})"
    )


if __name__ == "__main__":
    main()
