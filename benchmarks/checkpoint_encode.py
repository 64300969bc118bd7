"""How long a checkpoint takes to encode (on the event loop, at every save): an analyzer fed a whole corpus log.

    python benchmarks/checkpoint_encode.py [--crash-loop CYCLES]

Prints, per log, the best of 5 rounds of 200 `encode` calls and the blob's size (each a first save: nothing
kept from one before). `--crash-loop`: instead, save after save of one launch of the daemon bench's (an SGLang
startup, 120 serving lines and a crash, CYCLES times, then 40 serving lines), one serving line fed between two
saves, with the launch's `RecordText` where this build has one: the CPU time of a save, median of 5 rounds of
300. Run it with PYTHONPATH at another tree to time that tree's (a build before `RecordText` encodes without).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from watchdog.core.analyzer import Analyzer
from watchdog.follow.checkpoint import Checkpoint, encode
from watchdog.follow.sources.identity import FileIdentity, local_identity
from watchdog.profiles.loader import load_engine

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "corpus"
LOGS = (
    "vllm/vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log",
    "sglang/ready-llama31-8b-single-gpu-docs-v041.log",
)


def crash_loop(cycles: int) -> None:
    """Print the CPU time of a save of a crash-looping launch, save after save (see the module's docstring)."""
    sglang = CORPUS / "sglang"
    startup = (sglang / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes().splitlines(keepends=True)
    serving = [
        line
        for line in (sglang / "ready-qwen25-vl-multimodal-then-traffic-notebook-docs.log")
        .read_bytes()
        .splitlines(True)
        if b"Decode batch" in line or b"Prefill batch" in line or b'"POST ' in line
    ]
    crash = b"".join(
        (sglang / "postready-scheduler-valueerror-lmcache-tp2-pr869.log").read_bytes().splitlines(True)[1:]
    )
    analyzer, now = Analyzer(load_engine(None)), 0.0
    analyzer.feed(b"".join(startup), now)
    analyzer.caught_up(now)
    for cycle in range(cycles):
        for i in range(120):
            now += 0.1
            analyzer.feed(serving[(cycle * 120 + i) % len(serving)], now)
            analyzer.tick(now)
        now += 0.1
        analyzer.feed(crash, now)
        for line in startup:
            now += 0.1
            analyzer.feed(line, now)
    for i in range(40):
        now += 0.1
        analyzer.feed(serving[i % len(serving)], now)
    options: dict[str, Any] = {}
    try:
        from watchdog.core.recordtext import RecordText  # noqa: PLC0415 - not in every build timed

        options["writer"] = RecordText()
    except ImportError:
        pass
    identity = FileIdentity(1, 2, 1000, 1000, b"x" * 4096, b"y" * 4096)
    rounds = []
    for _ in range(5):
        start = time.process_time()
        for i in range(300):
            now += 0.1
            analyzer.feed(serving[i % len(serving)], now)
            encode(Checkpoint(identity, now, analyzer), settings="s", **options)
        rounds.append((time.process_time() - start) / 300)
    start = time.process_time()
    for i in range(300):
        now += 0.1
        analyzer.feed(serving[i % len(serving)], now)
    fed = (time.process_time() - start) / 300
    kept = "kept between saves" if options else "no RecordText in this build"
    print(
        f"crash loop x{cycles} ({analyzer.lifecycle.current.number} incarnations; {kept}): "
        f"a save {(statistics.median(rounds) - fed) * 1e3:.3f} ms of CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--crash-loop", type=int, metavar="CYCLES", help="save after save of a crash loop")
    args = parser.parse_args()
    if args.crash_loop is not None:
        crash_loop(args.crash_loop)
        return
    for name in LOGS:
        path = CORPUS / name
        data = path.read_bytes()
        analyzer = Analyzer(load_engine(None))
        analyzer.feed(data, 0.0)
        identity = local_identity(str(path), len(data))
        assert identity is not None
        checkpoint = Checkpoint(identity, 1.0, analyzer)
        best, blob = float("inf"), None
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(200):
                blob = encode(checkpoint, settings="s")
            best = min(best, (time.perf_counter() - start) / 200)
        assert blob is not None
        print(f"{path.name}: encode {best * 1e3:.3f} ms, {len(blob)} bytes")


if __name__ == "__main__":
    main()
