"""Write a served vLLM log of request lines: ids in hex (each line differs) or in decimal (issue 31's pair)."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import TextIO

HEADER = (
    "INFO 12-02 02:00:00 [api_server.py:1000] vLLM API server version 0.9.2\n"
    "INFO 12-02 02:00:01 [api_server.py:1001] args: Namespace(model='x')\n"
    "INFO 12-02 02:00:30 [launcher.py:28] Available routes are:\n"
    "INFO:     Application startup complete.\n"
)


def write_log(out: TextIO, requests: int, ids: str, seed: int = 0) -> int:
    """Write the header and `requests` request lines; `ids`: "hex" (32 random hex digits, as vLLM's
    chatcmpl-<uuid4 hex>) or "decimal" (the line's number, zero-padded to the same width). Returns the lines."""
    rng = random.Random(seed)
    out.write(HEADER)
    for i in range(requests):
        rid = f"{rng.getrandbits(128):032x}" if ids == "hex" else f"{i:032d}"
        out.write(
            f"INFO 12-02 02:{1 + i // 60000 % 50:02d}:{i % 60:02d} [logger.py:43] Received request "
            f"chatcmpl-{rid}: prompt: '<|im_start|>user\\nHello, how are you?<|im_end|>', params: "
            "SamplingParams(n=1, temperature=0.7, top_p=1.0, max_tokens=512), prompt_token_ids: None, "
            "lora_request: None.\n"
        )
    return HEADER.count("\n") + requests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200_000, help="request lines (default 200,000)")
    parser.add_argument("--ids", choices=("hex", "decimal"), default="hex")
    parser.add_argument("--out", type=Path, required=True, help="output file")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with args.out.open("w", encoding="utf-8", newline="\n") as out:
        count = write_log(out, args.requests, args.ids, args.seed)
    print(f"wrote {count} lines to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
