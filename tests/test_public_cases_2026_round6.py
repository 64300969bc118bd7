"""Rules read from the engines' sources for what the sixth crop of public 2025-2026 logs showed (issue 30, ninth
round), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_sglang_capture_failed_exception_alone_names_the_capture() -> None:
    """Ray's job summary keeps an SGLang engine's last lines only: 'Exception: Capture cuda graph failed: Ninja
    build failed.' without its frames, after the earlier 'Received sigquit from a child process'. CudaGraphRunner
    raises that wording around its capture, so the lone exception line places the crash in the capture."""
    out = _verdict(
        "sglang",
        "sglang-2026-slime-ray-job-repeated-across-cluster-capture-cuda-graph-failed-ninja-issue1314",
    )
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    assert _error(out)["category"] == "import"


def test_vllm_multi_thread_loading_shards_bar_is_the_weight_load() -> None:
    """vLLM's multi-thread weight iterator draws 'Multi-thread loading shards: 0% Completed | 0/32' (vLLM-Omni's
    diffusers loader on Ascend here, then the API server waiting for its engine): the weights are loading."""
    out = _verdict("vllm", "vllm-omni-2026-npu-diffusers-loader-waiting-for-core-engine-stall-issue5122")
    assert out["state"] == "loading_weights"
    assert out["phase"] == "loading_weights"


def test_trtllm_mpi_pool_session_line_names_the_engine() -> None:
    """TensorRT-LLM's executor proxy prints the bare 'rank 0 using MpiPoolSession to spawn MPI processes' (Dynamo's
    TensorRT-LLM worker here, among Dynamo's own processor lines): the engine is TensorRT-LLM."""
    out = _verdict("trtllm", "trtllm-dynamo-0.2-processor-lines-mpipoolsession-spawn-cut-issue1299")
    assert out["engine"] == "trtllm"


def test_cann_runtime_call_failed_for_a_device_reason_is_cuda() -> None:
    """CANN's 'EH9999: Inner Error!' report with its reason line 'rtDeviceSynchronizeWithTimeout execute failed,
    reason=[sdma copy error]', then the API server's traceback cut: the NPU's own fault is the cause (cuda), not
    the cut traceback (other)."""
    out = _verdict("vllm", "vllm-ascend-2025-compose-cann-eh9999-sdma-copy-error-empty-cache-issue3017")
    assert out["state"] == "crashed"
    error = _error(out)
    assert error["category"] == "cuda"
    assert "rtDeviceSynchronizeWithTimeout execute failed, reason=[sdma copy error]" in str(error["summary"])


def test_vllm_engine_core_rpc_of_the_warm_up_places_the_crash_in_capture() -> None:
    """The engine core's traceback runs _initialize_kv_caches -> initialize_from_config ->
    collective_rpc("compile_or_warm_up_model") -> get_response (the workers' own frames are elsewhere): the call
    names the workers' compile/warm-up step, after the KV cache was set up."""
    out = _verdict("vllm", "vllm-0.10.2-gfx906-py313-unindented-compile-or-warm-up-traceback-cut-issue1")
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")


def test_triton_tensorrt_llm_model_loaded_is_the_end_of_the_warm_up() -> None:
    """TensorRT-LLM's PyTorch backend through Triton: the final KV cache, the attention workspace growing in the
    warm-up's forwards, then Triton's 'successfully loaded 'tensorrt_llm'' and its tables: the executor is built
    and warmed up, the endpoints are not started yet."""
    out = _verdict(
        "trtllm",
        "trtllm-pytorch-2025-triton-kv-cache-allocated-workspace-grows-successfully-loaded-tables-cut-pr150",
    )
    assert (out["state"], out["phase"]) == ("capturing_graphs", "capturing_graphs")


def test_trtllm_worker_request_submission_traceback_is_a_death_while_serving() -> None:
    """A client's first streamed chunk, then rank 0's '[TRT-LLM] [RANK 0] [E] Traceback' through worker_main ->
    GenerationExecutorWorker.submit -> _enqueue_request (srun's ' 0: ' prefix on every line): a request's
    submission killed the worker after ready."""
    out = _verdict(
        "trtllm",
        "trtllm-dynamo-wideep-2025-srun-curl-first-chunk-then-worker-main-submit-traceback-cut-pr1690",
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
