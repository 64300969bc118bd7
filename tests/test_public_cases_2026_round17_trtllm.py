"""Rules read from TensorRT-LLM's and NIXL's sources for what the TensorRT-LLM crop of public 2025-2026 logs showed
(issue 30), each pinned on the real log that showed it (tests/fixtures/corpus/trtllm)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_trtllm_llm_api_refusing_a_backends_argument_is_config() -> None:
    """tensorrt_llm/llmapi/llm.py: _TorchLLM._validate_args_for_torch_backend raises ValueError('The following
    arguments are specific to TensorRT backend and cannot be used with PyTorch backend: [...]') and BaseLLM.__init__
    raises ValueError('<Class> got invalid argument: <key>'): the LLM's arguments refused before anything is built
    (Dynamo 0.7.1 passing build_config to 1.2.0rc5's PyTorch backend)."""
    out = _verdict(
        "trtllm", "trtllm-2025-dynamo-1.2.0rc5-build-config-pytorch-backend-valueerror-three-lines-dynamo5099"
    )
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = _error(out)
    assert found["category"] == "config"
    assert "ValueError: The following arguments are specific to TensorRT backend" in str(found["summary"])


def test_nixl_vram_seen_as_host_by_ucx_is_the_kv_transfer_layers_failure() -> None:
    """NIXL's UCX backend (src/plugins/ucx/ucx_utils.cpp) logs 'VRAM memory is detected as host by UCX' when UCX has
    no CUDA transport; nixl_agent.cpp's registerMem then fails and TensorRT-LLM's cache transceiver asserts on the
    status. The cause is UCX's line (the KV transfer layer: nccl), the step the KV cache's (the transceiver's agent,
    'BindingsNixlTransferAgent init:' in disaggregation/nixl/_agent_cpp.py, is made with the KV cache managers), and
    worker.py's 'Failed to initialize executor on rank' / proxy.py's 'Executor worker returned error' say TensorRT-LLM
    where the paste dropped the '[TRT-LLM]' tags."""
    out = _verdict("trtllm", "trtllm-2026-disagg-nixl-ucx-vram-detected-as-host-executor-init-pr18373")
    assert out["engine"] == "trtllm"
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")
    found = _error(out)
    assert found["category"] == "nccl"
    assert "VRAM memory is detected as host by UCX." in str(found["summary"])


def test_cpp_executor_forwardasync_error_is_a_request_error_while_serving() -> None:
    """cpp/tensorrt_llm/executor/executorImpl.cpp Executor::Impl::forwardAsync catches a step's exception, logs
    'Encountered an error in forwardAsync function: <what>' and terminates that batch's requests; the executor goes
    on. It steps only batches of requests, so the line says the server was serving (trtllm-serve 0.16, a Qwen2-VL
    engine whose request path lacks an input tensor)."""
    out = _verdict(
        "trtllm", "trtllm-2025-serve-0.16-qwen2vl-forwardasync-input-tensor-not-found-request-error-issue2714"
    )
    assert (out["state"], out["phase"]) == ("ready", "ready")
    assert out["error"] is None
