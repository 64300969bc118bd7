"""A crash-looping launch: memory and checkpoint size over N restarts (issue 19).

A server restarted by its supervisor into the same log crashes each time: the bundled vLLM capture crash
(`tests/fixtures/corpus/vllm/...-qbraid.log`, 337 lines) appended N times is fed to one analyzer, as a daemon's
follower feeds it. At each mark the checkpoint a follower would save is encoded (no size cap, so that the
figure shows even past the store's 1 MiB), and the table gives the incarnations kept in memory, the blob's
size, the time its encoding (pickling, on the event loop) takes, and the process's resident memory.

    python benchmarks/crashloop_bench.py [--restarts 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import build_verdict
from watchdog.follow.checkpoint import Checkpoint, encode
from watchdog.follow.sources.identity import FileIdentity
from watchdog.profiles.loader import load_engine

CRASH = (
    Path(__file__).parents[1]
    / "tests/fixtures/corpus/vllm/vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
)
MARKS = (1, 10, 50, 100, 130, 200, 300, 400)


def rss_kib() -> int:
    """The process's resident memory now (Linux), KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    """Print the table (or JSON lines)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    one = CRASH.read_bytes()
    analyzer = Analyzer(load_engine(None))
    identity = FileIdentity(1, 2, 0, 0, b"", b"")
    rows = []
    for n in range(1, args.restarts + 1):
        analyzer.feed(one, float(n))
        if n in MARKS or n == args.restarts:
            start = time.perf_counter()
            blob = encode(Checkpoint(identity, float(n), analyzer), settings="s", max_bytes=1 << 40)
            took = time.perf_counter() - start
            assert blob is not None
            verdict = build_verdict(analyzer)
            rows.append(
                {
                    "restarts": n,
                    "history": len(analyzer.lifecycle.history),
                    "incarnation": verdict["incarnation"],
                    "checkpoint_bytes": len(blob),
                    "encode_ms": round(took * 1000, 1),
                    "rss_kib": rss_kib(),
                }
            )
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"{'restarts':>8} {'history':>7} {'incarnation':>11} {'checkpoint':>12} {'encode':>9} {'RSS':>9}")
    for r in rows:
        print(
            f"{r['restarts']:>8} {r['history']:>7} {r['incarnation']:>11} {r['checkpoint_bytes'] / 1024:>8.1f} KiB"
            f" {r['encode_ms']:>6.1f} ms {r['rss_kib'] / 1024:>5.1f} MiB"
        )


if __name__ == "__main__":
    main()
