"""Rules read from the engines' sources for what the thirteenth crop of public 2025-2026 logs showed (issue 30),
each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_vllm_scheduler_stats_dump_says_a_batch_failed_while_serving() -> None:
    """vllm/logging_utils/dump_input.py's _dump_engine_exception runs only when a scheduled batch's execution
    fails: it logs 'Dumping input data for V1 LLM engine ...', then 'Dumping scheduler output for model execution:
    %s' and 'Dumping scheduler stats: %s'. An excerpt that begins after the first line still shows requests being
    served, so the EngineCore's error under it is a crash after ready."""
    out = _verdict(
        "vllm", "vllm-2026-v100-flash-attn-backend-worker-failed-illegal-memory-access-after-ready-issue29"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "cuda"
    assert "Worker failed with error 'CUDA error: an illegal memory access was encountered" in str(
        found["summary"]
    )
    cut = _verdict(
        "vllm", "vllm-2025-glm45v-enginecore-fatal-error-collective-rpc-while-serving-cut-issue172"
    )
    assert (cut["state"], cut["phase"]) == ("crashed", "ready")


def test_llamacpp_backtrace_through_the_servers_task_loop_is_a_crash_while_serving() -> None:
    """llama-server logs 'server is listening on ...' and only then runs ctx_server.queue_tasks.start_loop(), the
    task loop that calls update_slots for every request (tools/server/server.cpp; libllama-server-impl's
    llama_server() of 2026). A gdb backtrace through server_queue::start_loop is a crash while serving: the
    llama_decode frame inside it (common_speculative_draft's) is a request's decode, not the warm-up run's."""
    out = _verdict("llamacpp", "llamacpp-2026-gemma4-mtp-draft-abort-in-server-loop-gdb-backtrace-issue25522")
    assert (out["state"], out["phase"]) == ("crashed", "ready")


def test_ollama_model_request_answered_200_says_the_runner_was_serving() -> None:
    """Ollama's GenerateHandler, ChatHandler, EmbedHandler and its /v1 routes call scheduleRunner, which waits for
    the model's runner to load and run, before they answer (a failed load is answered 500). Gin's '[GIN] ... |
    200 | ... | POST "/api/chat"' is a request a running model served: the runner that terminates a second later
    died after ready."""
    out = _verdict(
        "ollama", "ollama-0.6.1-gemma3-27b-chat-200-then-runner-terminated-exit-status-2-issue9799"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    assert _error(out)["category"] == "killed"


def test_trtllm_harmony_streaming_decode_error_is_a_request_served_not_a_crash() -> None:
    """tensorrt_llm/serve/harmony_adapter.py logs 'Streaming: Failed to process token batch of N tokens for request
    R' at error level when a streamed request's token batch does not decode into Harmony messages, and returns
    empty deltas to continue: only a request being streamed goes through it. A run of them says the server is
    serving, and no crash."""
    out = _verdict(
        "trtllm", "trtllm-2026-harmony-streaming-failed-to-process-token-batch-while-serving-issue10824"
    )
    assert (out["state"], out["phase"]) == ("ready", "ready")
    assert out.get("error") is None
