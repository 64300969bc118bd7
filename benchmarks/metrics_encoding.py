"""CPU to render /metrics for N launches in each format the daemon negotiates, and gzip's cost.

    python benchmarks/metrics_encoding.py [--launches 2000] [--rounds 15]

The snapshots are tests/test_http.py's three (ready, crashed, capturing graphs), repeated under new names;
the figures are the best of `--rounds` (process CPU time), formats interleaved so that a busy machine
weighs on both alike: the daemon's writer (`metrics.exposition`) and prometheus_client's encoder of the same
registry, which wrote all of it before. docs/scaling.md quotes them.
"""

from __future__ import annotations

import argparse
import copy
import functools
import gzip
import sys
import time
from pathlib import Path

from prometheus_client.exposition import choose_encoder

from watchdog.daemon.http import GZIP_LEVEL
from watchdog.daemon.metrics import DaemonStats, exposition, registry_for

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from snapshots import status_from_json
from test_http import three_launches

ACCEPTS = {"text 0.0.4": "", "openmetrics 1.0.0": "application/openmetrics-text;version=1.0.0"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    base = three_launches()
    statuses = []
    for i in range(args.launches):
        status = copy.deepcopy(base[i % len(base)])
        status["name"] = f"launch-{i}"
        statuses.append(status_from_json(status))
    stats = DaemonStats()
    registry = registry_for(lambda: statuses, lambda: stats)
    renders = {}
    for name, accept in ACCEPTS.items():
        encode = choose_encoder(accept)[0]
        renders[f"{name}, watchdog"] = functools.partial(exposition, encode, statuses, stats)
        renders[f"{name}, prometheus_client"] = functools.partial(encode, registry)
    best = dict.fromkeys(renders, float("inf"))
    body = b""
    for _ in range(args.rounds):
        for name, render in renders.items():
            start = time.process_time()
            body = render()
            best[name] = min(best[name], time.process_time() - start)
    for name in renders:
        print(
            f"{name:36} {best[name] * 1000:7.1f} ms CPU  {len(body) / 1e6:5.2f} MB  ({args.launches} launches)"
        )
    for level in sorted({GZIP_LEVEL, 9}):
        took = float("inf")
        for _ in range(args.rounds):
            start = time.process_time()
            zipped = gzip.compress(body, compresslevel=level)
            took = min(took, time.process_time() - start)
        print(f"gzip level {level}:{'':24}{took * 1000:7.1f} ms CPU  {len(zipped) / 1e3:5.0f} KB")


if __name__ == "__main__":
    main()
