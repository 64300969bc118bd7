"""How long a checkpoint takes to encode (on the event loop, at every save): an analyzer fed a whole corpus log.

    python benchmarks/checkpoint_encode.py

Prints, per log, the best of 5 rounds of 200 `encode` calls and the blob's size.
"""

from __future__ import annotations

import time
from pathlib import Path

from watchdog.core.analyzer import Analyzer
from watchdog.follow.checkpoint import Checkpoint, encode
from watchdog.follow.sources.identity import local_identity
from watchdog.profiles.loader import load_engine

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "corpus"
LOGS = (
    "vllm/vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log",
    "sglang/ready-llama31-8b-single-gpu-docs-v041.log",
)


def main() -> None:
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
