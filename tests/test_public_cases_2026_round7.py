"""Rules read from the engines' sources for what the seventh crop of public 2025-2026 logs showed (issue 30, tenth
round), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_sglang_decode_retraction_is_a_serving_scheduler() -> None:
    """Sixteen ranks' 'Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: a -> b' and nothing
    else: SGLang's scheduler sends decoding requests back to the queue when the KV pool is full and goes on
    decoding (scheduler.py update_running_batch). The words 'out of memory' are back-pressure of a server that
    serves, not a crash; the line names SGLang."""
    out = _verdict("sglang", "sglang-2025-tp16-decode-out-of-memory-retractions-serving-issue4184")
    assert out["engine"] == "sglang"
    assert (out["state"], out["phase"]) == ("ready", "ready")
    assert out["error"] is None


def test_llamacpp_2024_text_format_timings_name_a_serving_llama_server() -> None:
    """ik_llama.cpp keeps llama-server's 2024 text format, 'INFO [%24s] msg | k=v' with the function's name:
    update_slots' 'kv cache rm' and print_timings' prompt and generation times of a finished request. The main
    loop's own functions name llama.cpp's server, and a timed request says it serves."""
    out = _verdict("llamacpp", "ik-llamacpp-2025-sycl-server-kv-cache-rm-print-timings-serving-issue257")
    assert out["engine"] == "llamacpp"
    assert (out["state"], out["phase"]) == ("ready", "ready")


def test_triton_cannot_create_its_server_is_a_crash() -> None:
    """Triton's model table, its shutdown and 'error: creating server: Internal - failed to load all models':
    tritonserver's FAIL_IF_ERR around TRITONSERVER_ServerNew prints the error and exits 1 (src/main.cc). The
    server died starting; which model failed, and why, is above the crop."""
    out = _verdict("trtllm", "trtllm-2026-triton-backend-shutdown-failed-to-load-all-models-tail-issue10450")
    assert out["state"] == "crashed"
    assert "error: creating server: Internal - failed to load all models" in str(_error(out)["summary"])


def test_vllm_ray_worker_prefix_names_vllm() -> None:
    """A Ray worker's Abseil 'SIGSEGV received' report under Ray's '(RayWorkerWrapper pid=N, ip=X) ' prefix, the
    actor class of vLLM's Ray executor (executor/ray_utils.py), and nothing else: the engine is vLLM."""
    out = _verdict(
        "vllm", "vllm-0.8.4-ray-tp16-worker-abseil-sigsegv-nccl-proxy-fatal-python-error-issue17242"
    )
    assert out["engine"] == "vllm"
    assert out["state"] == "crashed"
