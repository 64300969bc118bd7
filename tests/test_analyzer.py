"""The analyzer's own behaviour: the template prefilter, rule switching once settled, activity and stalls."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from watchdog.analyzer import Analyzer
from watchdog.lifecycle import State
from watchdog.verdict import to_json

READY = b"[2025-01-23 19:35:33] The server is fired up and ready to roll!\n"
DECODE = b"[2025-01-23 19:36:%02d TP0] Decode batch. #running-req: %d, #token: %d, token usage: 0.01\n"


def test_lines_differing_only_in_digits_share_a_decision() -> None:
    """A phase marker is found whatever its numbers, after a line of the same shape was classified."""
    a = Analyzer("sglang")
    a.feed(b"[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n", 0.0)
    a.feed(b"Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:02,  1.08it/s]\n", 0.0)
    a.feed(b"Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.75it/s]\n", 0.0)
    assert a.lifecycle.current.progress["weights"] == (2, 4)


def test_errors_are_still_found_after_ready() -> None:
    """Once ready, serving lines are skipped, but a traceback after them is still read and is a crash."""
    a = Analyzer("sglang")
    a.feed(READY, 0.0)
    a.feed(b"".join(DECODE % (i % 60, i, i * 10) for i in range(5000)), 1.0)
    a.feed(
        b"[2025-01-23 19:37:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        b'  File "/sgl/scheduler.py", line 1, in event_loop_overlap\n'
        b"    self.run_batch()\n"
        b"ValueError: Failed to allocate token prealloc indices\n\n",
        2.0,
    )
    a.finish(3.0)
    v = a.lifecycle.current
    assert (v.state, v.crash_phase) == (State.CRASHED, State.READY)
    assert v.error is not None
    assert v.error.summary == "ValueError: Failed to allocate token prealloc indices"
    assert a.lines_read == 5006


def test_log_activity_holds_off_a_stall_but_idle_chatter_does_not() -> None:
    """Non-benign lines count as activity against a stall; vLLM's shm-broadcast warnings do not."""
    for line, stalled in (
        (b"INFO 08-19 07:51:03 worker.py:1] still busy with something\n", False),
        (
            b"INFO 08-19 07:51:03 shm_broadcast.py:1] No available shared memory broadcast block found in 60 second.\n",
            True,
        ),
    ):
        a = Analyzer("vllm", stall_after=60.0)
        a.feed(b"INFO 08-19 07:50:00 model_runner.py:1] Starting to load model x...\n", 0.0)
        a.feed(line, 59.0)
        a.tick(100.0)
        assert (a.state == State.STALLED) is stalled


REQUEST_ERROR = (
    b"ERROR 07-22 08:51:06 [serving_completion.py:131] Error in preprocessing prompt inputs\n"
    b"ERROR 07-22 08:51:06 [serving_completion.py:131] Traceback (most recent call last):\n"
    b'ERROR 07-22 08:51:06 [serving_completion.py:131]   File "/usr/local/lib/python3.12/dist-packages/vllm/'
    b'entrypoints/openai/serving_completion.py", line 123, in create_completion\n'
    b"ERROR 07-22 08:51:06 [serving_completion.py:131]     request_prompts, engine_prompts = await self._preprocess()\n"
    b"ERROR 07-22 08:51:06 [serving_completion.py:131] ValueError: This model's maximum context length is 4096 tokens.\n"
)
METRICS = (
    b"INFO 07-22 08:51:%02d [loggers.py:118] Engine 000: Avg prompt throughput: 12.0 tokens/s, "
    b"Avg generation throughput: %d.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%%\n"
)


def test_post_ready_request_error_survived_by_a_serving_server() -> None:
    """vLLM logs a failed request with its traceback and goes on serving: 50+ healthy lines keep it ready."""
    a = Analyzer("vllm")
    a.feed(b"INFO 07-22 08:50:00 [launcher.py:1] Available routes are:\n", 0.0)
    a.feed(REQUEST_ERROR + b"".join(METRICS % (i % 60, i) for i in range(60)), 1.0)
    a.finish(2.0)
    assert a.state == State.READY


def test_post_ready_error_at_the_end_of_the_log_is_a_crash() -> None:
    """The same error with only a few lines after it, at the end of the log, is a crash after ready."""
    a = Analyzer("vllm")
    a.feed(b"INFO 07-22 08:50:00 [launcher.py:1] Available routes are:\n", 0.0)
    a.feed(REQUEST_ERROR + b"".join(METRICS % (i, i) for i in range(5)), 1.0)
    a.tick(100.0)
    assert a.state == State.READY  # the clock alone does not confirm an error after ready
    a.finish(101.0)
    v = a.lifecycle.current
    assert (v.state, v.crash_phase) == (State.CRASHED, State.READY)


CORPUS = Path(__file__).parent / "fixtures" / "corpus"
SAMPLE = [
    "sglang/ready-llama31-8b-single-gpu-docs-v041.log",
    "sglang/multirank-same-traceback-other-rank-failed-loading-ktransformers1666.log",
    "vllm/vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log",
    "vllm/vllm-v1-ready-ansi-caret-prefix-pr33756.log",
    "tgi/tgi-ready-v3-router-python-tokenizer-error-noise-zephyr-delavande.log",
    "trtllm/trtllm-serve-ready-1.1.0rc3-pytorch-gptoss120b-dgx-spark-jeansblog.log",
    "ollama/ollama-runner-cudamalloc-oom-panic-journald-issue8597.log",
]


def _verdict(chunks: list[bytes]) -> dict[str, object]:
    a = Analyzer()
    for chunk in chunks:
        a.feed(chunk, 0.0)
    a.finish(0.0)
    return to_json(a.lifecycle.current, engine=a.engine, lines_read=a.lines_read, bytes_read=a.bytes_read)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(SAMPLE), cuts=st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=12))
def test_any_chunking_gives_the_same_verdict(name: str, cuts: list[int]) -> None:
    """A log fed in any pieces (the way SSH delivers it) gives the verdict of the whole file at once."""
    data = (CORPUS / name).read_bytes()
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert _verdict(chunks) == _verdict([data])
