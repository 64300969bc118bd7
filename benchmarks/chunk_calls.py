"""Function calls per chunk in `chunk_bench.py`'s callbacks, counted: a figure that does not move with the load.

`chunk_bench.py`'s CPU figures need a quiet machine to tell a few percent apart; the number of Python calls a chunk
costs (each ~50-100 ns in CPython 3.11, most of what the per-chunk path spends outside C) is the same on any. Here
`sys.setprofile` counts the Python and C calls made inside `end_read` (an SSH connection read handed on: the
source, the follower and the analyzer, every layer) over chunk_bench's rounds (its untimed first round, one
timed round and the round timed by layer, whose timers add 2 Python and 4 C calls a chunk in one round of three).

    PYTHONPATH=. python benchmarks/chunk_calls.py [--by-function N]   # PYTHONPATH picks the tree
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chunk_bench


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--by-function", type=int, default=0, help="also the N functions called most, a chunk"
    )
    args = parser.parse_args()
    counts = {"call": 0, "c_call": 0}
    by: collections.Counter[tuple[str, str]] = collections.Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event in counts:
            counts[event] += 1
            if event == "call" and args.by_function:
                by[(Path(frame.f_code.co_filename).name, frame.f_code.co_name)] += 1

    inner = chunk_bench.end_read

    def counted() -> None:
        sys.setprofile(profile)
        try:
            inner()
        finally:
            sys.setprofile(None)

    chunk_bench.end_read = counted  # type: ignore[assignment]
    chunk_bench.main(["--rounds", "1"])
    # chunk_bench's defaults: 200 launches, 20 hosts, 30 s, seed 1, a line a chunk
    ticks = chunk_bench.plan(chunk_bench.writes(200, 30.0, 1)[1], 20, True)
    chunks = 3 * sum(len(packets) for reads in ticks for read in reads for packets in read)
    print(
        f"calls in the callbacks, 3 rounds: {counts['call']:,} Python, {counts['c_call']:,} C; "
        f"a chunk: {counts['call'] / chunks:.2f} Python, {counts['c_call'] / chunks:.2f} C ({chunks:,} chunks)"
    )
    for (name, function), n in by.most_common(args.by_function):
        print(f"{n / chunks:6.2f}  {name}:{function}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
