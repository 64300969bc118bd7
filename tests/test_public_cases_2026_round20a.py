"""Rules read from the sources of vLLM and TensorRT-LLM for what the twentieth round's public logs of SGLang,
TensorRT-LLM and vLLM's platforms showed (issue 30, helper i30-cases20a), each pinned on the real log that showed
it (tests/fixtures/corpus/trtllm, vllm)."""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.replay import replay_path


def _crash(engine: str, name: str, category: str, says: str, phase: str) -> dict[str, object]:
    """A corpus case's replayed verdict, checked: crashed in `phase`, its error of `category` with `says` in its
    summary."""
    out = _verdict(engine, name)
    assert out["state"] == "crashed"
    assert out["phase"] == phase
    found = _error(out)
    assert found["category"] == category
    assert says in str(found["summary"])
    return out


def test_vllm_cudagraph_wrapper_debug_line_is_the_capture() -> None:
    """vllm/compilation/cuda_graph.py CUDAGraphWrapper.__call__ logs 'Capturing a cudagraph on (MODE,descriptor)'
    at DEBUG for each graph it captures, and captures only while capture_model runs. On ROCm the runtime's
    'Memory access fault by GPU node-N ...' aborts a worker after such lines, before the capture bar's first
    line: the death was placed at starting; it is in capturing_graphs (vllm#35169, 2026)."""
    _crash(
        "vllm",
        "vllm-rocm-2026-step3.5-flash-full-decode-capture-memory-access-fault-write-read-only-page-workers-go-on-issue35169",
        "cuda",
        "Memory access fault by GPU node-5",
        "capturing_graphs",
    )


def test_vllm_v0_lack_of_cpu_swap_space_carried_by_engine_dead_is_oom() -> None:
    """vLLM V0's scheduler (vllm/core/scheduler.py _swap_out) raises RuntimeError('Aborted due to the lack of CPU
    swap space. Please increase the swap space to avoid this error.') and the engine loop dies; Dynamo's processor
    reports it carried by MQEngineDeadError inside a ValueError. The wrapper's line is the summary; the message it
    carries is the category: oom, not other (ai-dynamo/dynamo#1471, 2025)."""
    _crash(
        "vllm",
        "vllm-dynamo-2025-kv-router-processor-stream-error-mq-engine-dead-lack-of-cpu-swap-space-issue1471",
        "oom",
        "Aborted due to the lack of CPU swap space",
        "ready",
    )


def test_trtllm_serve_access_line_means_the_model_was_built(tmp_path: Path) -> None:
    """tensorrt_llm/commands/serve.py launch_server builds the LLM (executor, warm-up, KV cache) before it starts
    OpenAIServer's Uvicorn, so trtllm-serve's access line of a request answered is printed by a ready server: a
    CUDA kernel's assertion after one is a crash after ready, not at starting (NVIDIA/TensorRT-LLM#10417, 2026,
    a quoted log). The same access line in an SGLang log is no such proof (SGLang answers its warm-up request
    before it is ready): only the TensorRT-LLM profile reads it so."""
    _crash(
        "trtllm",
        "trtllm-2026-nano-v3-serve-concurrency-40-quoted-log-assert-async-cuda-kernel-forward-step-after-200-issue10417",
        "cuda",
        "Assertion `` failed.",
        "ready",
    )
    sglang = tmp_path / "sglang.log"
    sglang.write_text(
        "[2026-01-10 13:23:20] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)\n"
        '[2026-01-10 13:23:21] INFO:     127.0.0.1:40412 - "POST /generate HTTP/1.1" 200 OK\n'
        "[2026-01-10 13:23:21 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2942, in run_scheduler_process\n'
        "    scheduler.event_loop_overlap()\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n",
        encoding="utf-8",
    )
    out = replay_path(sglang)[1].to_json()
    assert out["engine"] == "sglang"
    assert out["state"] == "crashed"
    assert out["phase"] != "ready"


def test_vllm_bookkeeping_of_a_real_step_is_serving() -> None:
    """vllm/v1/worker/gpu_model_runner.py GPUModelRunner._bookkeeping_sync copies a real step's sampled tokens
    back; only execute_model / sample_tokens call it, never the dummy runs of startup (profile_run, capture). Two
    XPU workers' tracebacks through it, cut before the exception and with each path wrapped in the paste, were a
    death at starting; they are a death while serving (intel/llm-scaler#235, vLLM 0.10.3 XPU, 2026-01)."""
    out = _verdict(
        "vllm",
        "vllm-xpu-2026-llm-scaler-0.10.3-tp-workers-bookkeeping-sync-to-list-wrapped-paths-traceback-cut-issue235",
    )
    assert out["state"] == "crashed"
    assert out["phase"] == "ready"
    assert "_bookkeeping_sync" in str(_error(out)["summary"])


def test_sglang_legacy_completions_answered_is_serving(tmp_path: Path) -> None:
    """SGLang's warm-up (http_server.py _execute_server_warmup) posts to /generate, /encode or, for a VLM,
    /v1/chat/completions, never to /v1/completions: a '"POST /v1/completions HTTP/1.1" 200' access line is a
    client's request served. After ten of them, 'Received sigquit from a child process' is a death after ready,
    not at starting (sglang#7783, 2025-08). A /generate answered 200 before the warm-up's end stays no proof."""
    out = _crash(
        "sglang",
        "sglang-2025-completions-200s-then-received-sigquit-from-child-asgi-exception-cut-issue7783",
        "killed",
        "Received sigquit from a child process",
        "ready",
    )
    assert out["engine"] == "sglang"
    warmup = tmp_path / "warmup.log"
    warmup.write_text(
        "[2025-08-02 06:05:01] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)\n"
        '[2025-08-02 06:05:02] INFO:     127.0.0.1:40412 - "POST /generate HTTP/1.1" 200 OK\n'
        "[2025-08-02 06:05:03] Received sigquit from a child process. It usually means the child failed.\n",
        encoding="utf-8",
    )
    assert replay_path(warmup)[1].to_json()["phase"] != "ready"
