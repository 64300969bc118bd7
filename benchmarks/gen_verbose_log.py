"""Write a realistic, deterministic verbose SGLang log: an 8-rank startup, a long decode phase, a crash."""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

RANKS = 8
CRASHED_RANKS = (1, 3, 5, 6)
SHARDS = 64
GRAPH_BATCH_SIZES = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256)
START = dt.datetime(2025, 7, 2, 7, 31, 2)
# One rank logs a decode line every 40 decode steps: about 8 lines per second per rank at this load.
DECODE_LINES_PER_SECOND = RANKS * 8
CHUNK_LINES = 20_000
PKG = "/usr/local/lib/python3.10/dist-packages"

SERVER_ARGS = (
    "server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3-0324', "
    "tokenizer_path='deepseek-ai/DeepSeek-V3-0324', "
    "tokenizer_mode='auto', skip_tokenizer_init=False, load_format='auto', trust_remote_code=True, "
    "dtype='auto', kv_cache_dtype='auto', quantization=None, context_length=None, device='cuda', "
    "served_model_name='deepseek-ai/DeepSeek-V3-0324', chat_template=None, is_embedding=False, "
    "revision=None, host='0.0.0.0', port=30000, mem_fraction_static=0.87, max_running_requests=None, "
    "max_total_tokens=None, chunked_prefill_size=8192, max_prefill_tokens=16384, schedule_policy='fcfs', "
    "schedule_conservativeness=1.0, cpu_offload_gb=0, tp_size=8, pp_size=1, stream_interval=1, "
    "stream_output=False, random_seed=1016742542, log_level='info', log_requests=False, "
    "show_time_cost=False, enable_metrics=True, dp_size=1, ep_size=8, load_balance_method='round_robin', "
    "dist_init_addr=None, nnodes=1, node_rank=0, attention_backend='flashinfer', "
    "sampling_backend='flashinfer', enable_dp_attention=False, enable_ep_moe=True, "
    "disable_cuda_graph=False, cuda_graph_max_bs=256, enable_torch_compile=False, "
    "enable_mixed_chunk=False, watchdog_timeout=300)"
)

TRACEBACK_FRAMES = (
    ("sglang/srt/managers/scheduler.py", 2712, "run_scheduler_process", "scheduler.event_loop_overlap()"),
    ("torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
    ("sglang/srt/managers/scheduler.py", 784, "event_loop_overlap", "batch = self.get_next_batch_to_run()"),
    (
        "sglang/srt/managers/scheduler.py",
        1455,
        "get_next_batch_to_run",
        "self.running_batch = self.update_running_batch(self.running_batch)",
    ),
    ("sglang/srt/managers/scheduler.py", 1712, "update_running_batch", "batch.prepare_for_decode()"),
    (
        "sglang/srt/managers/schedule_batch.py",
        1510,
        "prepare_for_decode",
        "self.out_cache_loc = self.alloc_token_slots(bs)",
    ),
    (
        "sglang/srt/managers/schedule_batch.py",
        1032,
        "alloc_token_slots",
        "out_cache_loc = self.token_to_kv_pool_allocator.alloc(num_tokens)",
    ),
    ("sglang/srt/mem_cache/allocator.py", 180, "alloc", "return self._alloc_from_free_pages(need_size)"),
    ("sglang/srt/mem_cache/allocator.py", 142, "_alloc_from_free_pages", "self.merge_and_sort_free()"),
    (
        "sglang/srt/mem_cache/allocator.py",
        97,
        "merge_and_sort_free",
        "self._check_capacity(len(self.free_pages))",
    ),
    ("sglang/srt/mem_cache/allocator.py", 88, "_check_capacity", "raise RuntimeError("),
)
FINAL_ERROR = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


class Clock:
    """Log timestamps, formatted once per second."""

    def __init__(self) -> None:
        self.seconds = 0
        self.text = START.strftime("%Y-%m-%d %H:%M:%S")

    def advance(self, seconds: int = 1) -> None:
        self.seconds += seconds
        self.text = (START + dt.timedelta(seconds=self.seconds)).strftime("%Y-%m-%d %H:%M:%S")


def rank_prefix(clock: Clock, rank: int) -> str:
    return f"[{clock.text} DP0 TP{rank} EP{rank}] "


def startup(clock: Clock, rng: random.Random) -> Iterator[str]:
    """The launch up to the ready marker, as SGLang 0.4 prints it for DeepSeek-V3 on 8 H200s."""
    yield "INFO 07-02 07:31:00 [__init__.py:244] Automatically detected platform cuda.\n"
    yield f"[{clock.text}] {SERVER_ARGS}\n"
    clock.advance(3)
    for rank in range(RANKS):
        yield rank_prefix(clock, rank) + "Attention backend not set. Use flashinfer backend by default.\n"
        yield rank_prefix(clock, rank) + "Init torch distributed begin.\n"
    clock.advance(6)
    for rank in range(RANKS):
        yield rank_prefix(clock, rank) + "Init torch distributed ends. mem usage=0.75 GB\n"
        yield rank_prefix(clock, rank) + "Load weight begin. avail mem=138.06 GB\n"
    clock.advance(2)
    yield "Loading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]\n"
    for done in range(1, SHARDS + 1):
        clock.advance(2)
        elapsed = done * 1.95
        left = (SHARDS - done) * 1.95
        yield (
            f"Loading safetensors checkpoint shards: {done * 100 // SHARDS:3d}% Completed | {done}/{SHARDS} "
            f"[{_mmss(elapsed)}<{_mmss(left)},  1.95s/it]\n"
        )
    yield "\n"
    for rank in range(RANKS):
        avail = 16.30 - rank * 0.01
        yield (
            rank_prefix(clock, rank) + "Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
            f"avail mem={avail:.2f} GB, mem usage=120.5 GB.\n"
        )
    clock.advance(1)
    for rank in range(RANKS):
        yield (
            rank_prefix(clock, rank)
            + "KV Cache is allocated. #tokens: 812345, K size: 20.1 GB, V size: 20.1 GB\n"
        )
        yield rank_prefix(clock, rank) + "Memory pool end. avail mem=15.35 GB\n"
    clock.advance(1)
    for rank in range(RANKS):
        yield (
            rank_prefix(clock, rank)
            + "Capture cuda graph begin. This can take up to several minutes. avail mem=15.2 GB\n"
        )
    graphs = len(GRAPH_BATCH_SIZES)
    for step, bs in enumerate(reversed(GRAPH_BATCH_SIZES), start=1):
        clock.advance(2)
        yield (
            f"Capturing batches (bs={bs} avail_mem=15.{20 - step:02d} GB): "
            f"{step * 100 // graphs:3d}%|{'█' * (step // 2):<10}| "
            f"{step}/{graphs} [{_mmss(step * 2.2)}<{_mmss((graphs - step) * 2.2)}, "
            f" {rng.uniform(0.40, 0.50):.2f}it/s]\n"
        )
    for rank in range(RANKS):
        yield (
            rank_prefix(clock, rank) + "Capture cuda graph end. Time elapsed: 42.31 s. mem usage=1.2 GB. "
            "avail mem=14.0 GB.\n"
        )
    yield (
        rank_prefix(clock, 0)
        + "max_total_num_tokens=812345, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=4096, context_len=163840, available_gpu_mem=14.0 GB\n"
    )
    clock.advance(1)
    yield "INFO:     Started server process [48213]\n"
    yield "INFO:     Waiting for application startup.\n"
    yield "INFO:     Application startup complete.\n"
    yield "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)\n"
    clock.advance(1)
    yield f'[{clock.text}] INFO:     127.0.0.1:51234 - "GET /get_model_info HTTP/1.1" 200 OK\n'
    yield (
        rank_prefix(clock, 0)
        + "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, \n"
    )
    clock.advance(2)
    yield f'[{clock.text}] INFO:     127.0.0.1:51240 - "POST /generate HTTP/1.1" 200 OK\n'
    yield f"[{clock.text}] The server is fired up and ready to roll!\n"


def serving(clock: Clock, rng: random.Random, decode_lines: int | None) -> Iterator[str]:
    """Decode progress from all ranks, with a prefill line and an access-log line now and then.

    Yields `decode_lines` decode lines, or without end when it is None (the caller stops by size).
    """
    running = 12
    tokens = 40512
    count = 0
    uniform = rng.random  # randint() is several times slower, and a 1 GB log takes millions of lines
    while decode_lines is None or count < decode_lines:
        count += 1
        rank = count % RANKS
        if count % DECODE_LINES_PER_SECOND == 0:
            clock.advance()
        running = min(4096, max(1, running + int(uniform() * 7) - 3))
        tokens = min(812345, max(64, tokens + int(uniform() * 1901) - 900))
        usage = tokens / 812345
        throughput = running * (55.0 + 15.0 * uniform())
        queue = 0 if running < 512 else int(uniform() * 41)
        yield (
            f"[{clock.text} DP0 TP{rank} EP{rank}] Decode batch. #running-req: {running}, #token: {tokens}, "
            f"token usage: {usage:.2f}, cuda graph: {running <= 256}, gen throughput (token/s): "
            f"{throughput:.2f}, #queue-req: {queue}, \n"
        )
        if count % 97 == 0:
            new_tokens = rng.randint(20, 4000)
            yield (
                rank_prefix(clock, rank) + f"Prefill batch. #new-seq: 1, #new-token: {new_tokens}, "
                f"#cached-token: {rng.randint(0, 512)}, token usage: {usage:.2f}, #running-req: {running}, "
                f"#queue-req: {queue}, \n"
            )
        if count % 101 == 0:
            client = f"10.1.0.{rng.randint(2, 250)}:{rng.randint(30000, 60000)}"
            yield f'[{clock.text}] INFO:     {client} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'


def crash(clock: Clock) -> Iterator[str]:
    """The same scheduler OOM on 4 ranks, the logging-error noise it causes, and the parent's reaction."""
    clock.advance()
    for rank in CRASHED_RANKS:
        yield rank_prefix(clock, rank) + "Scheduler hit an exception: Traceback (most recent call last):\n"
        yield from _frames()
        yield FINAL_ERROR + "\n"
        yield "\n"
    yield "--- Logging error ---\n"
    yield "Traceback (most recent call last):\n"
    yield '  File "/usr/lib/python3.10/logging/__init__.py", line 1104, in emit\n'
    yield "    self.flush()\n"
    yield '  File "/usr/lib/python3.10/logging/__init__.py", line 1084, in flush\n'
    yield "    self.stream.flush()\n"
    yield "BrokenPipeError: [Errno 32] Broken pipe\n"
    yield "Call stack:\n"
    yield f'  File "{PKG}/sglang/srt/managers/scheduler.py", line 2716, in run_scheduler_process\n'
    yield '    logger.error(f"Scheduler hit an exception: {traceback}")\n'
    yield (
        "Message: 'Scheduler hit an exception: Traceback (most recent call last):\\n ... "
        + FINAL_ERROR
        + "\\n'\n"
    )
    yield "Arguments: ()\n"
    yield f"[{clock.text}] Received sigquit from a child process. It usually means the child failed.\n"
    yield "Killed\n"


def _frames() -> Iterator[str]:
    for path, line, function, code in TRACEBACK_FRAMES:
        yield f'  File "{PKG}/{path}", line {line}, in {function}\n'
        yield f"    {code}\n"


def _mmss(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60:02d}:{whole % 60:02d}"


def write_log(out: TextIO, *, decode_lines: int, size_bytes: int | None = None, seed: int = 0) -> int:
    """Write the whole log to `out` and return the number of lines written.

    With `size_bytes`, `decode_lines` is ignored: decode lines go on until the log reaches that size.
    """
    rng = random.Random(seed)
    clock = Clock()
    lines = 0
    written = 0
    for line in startup(clock, rng):
        out.write(line)
        lines += 1
        written += len(line.encode())
    chunk: list[str] = []
    source = serving(clock, rng, None if size_bytes is not None else decode_lines)
    for line in source:
        chunk.append(line)
        if len(chunk) >= CHUNK_LINES:
            text = "".join(chunk)
            out.write(text)
            lines += len(chunk)
            written += len(text.encode())
            chunk.clear()
            if size_bytes is not None and written >= size_bytes:
                break
    text = "".join(chunk)
    out.write(text)
    lines += len(chunk)
    for line in crash(clock):
        out.write(line)
        lines += 1
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--lines", type=int, default=1_000_000, help="decode-progress lines (default 1,000,000)"
    )
    parser.add_argument(
        "--size-gb", type=float, default=None, help="instead, go on until the log is this big"
    )
    parser.add_argument("--out", type=Path, default=None, help="output file (default: standard output)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    size = None if args.size_gb is None else int(args.size_gb * 1024**3)
    if args.out is None:
        count = write_log(sys.stdout, decode_lines=args.lines, size_bytes=size, seed=args.seed)
    else:
        with args.out.open("w", encoding="utf-8", newline="\n") as out:
            count = write_log(out, decode_lines=args.lines, size_bytes=size, seed=args.seed)
        print(f"wrote {count} lines to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
