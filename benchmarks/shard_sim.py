"""Simulate sharding: launches per shard for n = 1..8 shards, and launches moved when n grows to n+1.

Uses `watchdog.config.shard.owner` (rendezvous hashing) on synthetic launch names, and for comparison a modulo hash
(`blake2b(name) % n`), which is what a naive sharding would do. Prints a Markdown table (docs/scaling.md
quotes it). Run: `python benchmarks/shard_sim.py [--launches 2000] [--max-shards 8]`, or for chosen shard counts
`python benchmarks/shard_sim.py --launches 10000 --shards 50`.
"""

from __future__ import annotations

import argparse
import hashlib
from collections import Counter
from collections.abc import Callable, Sequence

from watchdog.config.shard import owner

Assign = Callable[[str, int], int]


def modulo(name: str, shards: int) -> int:
    """The naive alternative: a stable hash modulo the shard count."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big") % shards


def names(count: int) -> list[str]:
    """Launch names shaped like real ones: a model, an engine, a cluster and a number."""
    models = ("llama-70b", "qwen3-235b", "deepseek-v3", "kimi-k2", "glm-4.6", "mistral-large")
    engines = ("sglang", "vllm", "trtllm", "tgi")
    return [f"{models[i % 6]}-{engines[i // 6 % 4]}-c{i // 24 % 10}-{i:05d}" for i in range(count)]


def spread(launches: Sequence[str], shards: int, assign: Assign) -> tuple[int, int]:
    """(fewest, most) launches on one shard."""
    counts = Counter(assign(name, shards) for name in launches)
    per_shard = [counts.get(i, 0) for i in range(shards)]
    return min(per_shard), max(per_shard)


def moved(launches: Sequence[str], shards: int, assign: Assign) -> int:
    """Launches whose owner changes when the shard count goes from `shards` to `shards + 1`."""
    return sum(assign(name, shards) != assign(name, shards + 1) for name in launches)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--max-shards", type=int, default=8, help="rows for n = 1 .. this")
    parser.add_argument("--shards", type=int, nargs="+", help="rows for these n instead")
    args = parser.parse_args(argv)
    launches = names(args.launches)
    total = len(launches)
    print(f"{total} launches; rendezvous = watchdog.config.shard.owner, modulo = blake2b(name) % n\n")
    print("| n | fair share | min / max per shard | max over fair | moved n -> n+1 | ideal | modulo: moved |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.shards or range(1, args.max_shards + 1):
        low, high = spread(launches, n, owner)
        fair = total / n
        hrw = moved(launches, n, owner)
        naive = moved(launches, n, modulo)
        print(
            f"| {n} | {fair:.0f} | {low} / {high} | {high / fair - 1:+.1%} "
            f"| {hrw} ({hrw / total:.1%}) | {total / (n + 1):.0f} ({1 / (n + 1):.1%}) "
            f"| {naive} ({naive / total:.1%}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
