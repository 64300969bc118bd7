"""What /status costs at thousands of launches: the statuses as JSON objects, then the body written by json and
by orjson (the `fast` extra), median of `--runs`.

Each launch's status is a real verdict (a corpus SGLang launch that is ready, or one that crashed after ready
with its traceback), as `watchdog.daemon.http.status_payload` makes them for the page and /status.

    python benchmarks/status_encoding.py [--launches 2000] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from watchdog.core.analyzer import Analyzer  # noqa: E402 - after the path
from watchdog.core.verdict import Status, Verdict, build_verdict  # noqa: E402
from watchdog.daemon.http import status_payload  # noqa: E402
from watchdog.profiles.loader import catalogue  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "sglang"
LOGS = ("ready-llama31-8b-single-gpu-docs-v041.log", "postready-scheduler-valueerror-lmcache-tp2-pr869.log")


def _verdict(name: str) -> Verdict:
    analyzer = Analyzer(catalogue())
    analyzer.feed((CORPUS / name).read_bytes(), 1.0)
    analyzer.finish(2.0)
    return build_verdict(analyzer, analyzer.lifecycle.verdict_incarnation()).redacted()


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    verdicts = [_verdict(name) for name in LOGS]
    statuses = [
        Status(
            verdicts[i % 2], name=f"l{i:04d}", target=f"/var/log/l{i:04d}.log", elapsed=30.0, last_line="x"
        )
        for i in range(args.launches)
    ]
    payload = status_payload(statuses)
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str).encode()
    print(f"/status of {args.launches} launches ({len(body) / 1e6:.2f} MB), median of {args.runs}:")
    print(
        f"  status_payload (to_json, redact): {_median_ms(lambda: status_payload(statuses), args.runs):.1f} ms"
    )
    json_ms = _median_ms(
        lambda: json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str).encode(), args.runs
    )
    print(f"  json:   {json_ms:.1f} ms")
    try:
        import orjson  # noqa: PLC0415 - optional (the `fast` extra)
    except ImportError:
        print("  orjson: not installed (pip install 'llm-launch-watchdog[fast]')")
        return 0
    options = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    orjson_ms = _median_ms(lambda: orjson.dumps(payload, default=str, option=options), args.runs)
    print(f"  orjson: {orjson_ms:.1f} ms ({json_ms / orjson_ms:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
