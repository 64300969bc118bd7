"""TensorRT-LLM read from its source (issue 30): each rule of trtllm.toml added this round, pinned on a real line.

A line is a public log's (a corpus log, or an issue's paste, named) or is written from the source's own format string
and the exception's own form, with the file and function that print it named in the test's docstring. The lines of
the launch around it are those the same release prints (its version banner, the LLM API's backend line, Uvicorn's).
"""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.replay import replay_path

_BANNER = (
    "[TensorRT-LLM] TensorRT LLM version: 1.2.0\n"
    "[12/06/2025-09:52:20] [TRT-LLM] [I] Using LLM with PyTorch backend\n"
)
_SERVING = (
    "INFO:     Started server process [1234]\n"
    "INFO:     Waiting for application startup.\n"
    "INFO:     Application startup complete.\n"
    "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n"
)
_SITE = "/usr/local/lib/python3.12/dist-packages/tensorrt_llm"


def _replay(tmp_path: Path, text: str) -> dict[str, object]:
    log = tmp_path / "launch.log"
    log.write_text(text, encoding="utf-8")
    return replay_path(log)[1].to_json()


def _assert_crash(out: dict[str, object], phase: str, category: str, words: str) -> None:
    # a crash in `phase`, of `category`, whose summary holds `words`
    assert (out["state"], out["phase"]) == ("crashed", phase)
    found = _error(out)
    assert found["category"] == category
    assert words in str(found["summary"])


def _failed_init(message: str) -> str:
    # executor/worker.py worker_main: logger.error(f"Failed to initialize executor on rank {mpi_rank()}: {e}")
    return (
        f"[12/06/2025-09:53:21] [TRT-LLM] [RANK 0] [E] Failed to initialize executor on rank 0: {message}\n"
    )


def test_tllm_check_whose_info_says_only_supported_is_unsupported(tmp_path: Path) -> None:
    """cpp/include/tensorrt_llm/common/tllmException.h throwRuntimeError: TLLM_CHECK_WITH_INFO(cond, info) throws
    '[TensorRT-LLM][ERROR] Assertion failed: <info> (<file>:<line>)', its info and not its condition; an info that
    says a feature is only supported somewhere is the check of a capability (unsupported), not a broken invariant:
    kernels/contextFusedMultiHeadAttention/fmhaRunner.cpp FusedMHARunnerV2::setupLaunchParams's
    TLLM_CHECK_WITH_INFO(isSm90 || ..., "Chunked attention is only supported on Sm90.") (it was `assertion`)."""
    line = _failed_init(
        "[TensorRT-LLM][ERROR] Assertion failed: Chunked attention is only supported on Sm90. "
        "(/src/tensorrt_llm/cpp/tensorrt_llm/kernels/contextFusedMultiHeadAttention/fmhaRunner.cpp:301)"
    )
    out = _replay(tmp_path, _BANNER + line)
    assert out["state"] == "crashed"
    found = _error(out)
    assert found["category"] == "unsupported"
    assert "Chunked attention is only supported on Sm90." in str(found["summary"])
    # a check of a condition, no capability words (batch_manager/cacheTransBuffer.cpp's TLLM_CHECK(maxNumTokens.value()
    # % tokensPerBlock == 0), as aiconfigurator#307 shows it), is still an assertion
    other = _failed_init(
        "[TensorRT-LLM][ERROR] Assertion failed: maxNumTokens.value() % tokensPerBlock == 0 "
        "(../tensorrt_llm/batch_manager/cacheTransBuffer.cpp:206)"
    )
    assert _error(_replay(tmp_path, _BANNER + other))["category"] == "assertion"


def test_tllm_throw_refusing_a_type_is_unsupported(tmp_path: Path) -> None:
    """cpp/tensorrt_llm/common/tllmException.cpp TllmException::TllmException: TLLM_THROW(fmt) throws '<msg> (<file>:
    <line>)' with no '[TensorRT-LLM][ERROR] Assertion failed:' before it, and worker_main quotes it; common/
    attentionOp.cpp's TLLM_THROW("Unsupported data type for FlashMLA"). At a TensorRT-LLM C++ source, a message
    refusing a type is unsupported (it was `other`)."""
    line = _failed_init(
        "Unsupported data type for FlashMLA (/src/tensorrt_llm/cpp/tensorrt_llm/common/attentionOp.cpp:1712)"
    )
    out = _replay(tmp_path, _BANNER + line)
    found = _error(out)
    assert found["category"] == "unsupported"
    assert "Unsupported data type for FlashMLA" in str(found["summary"])


def test_cutlass_gemm_runner_without_a_kernel_for_this_arch_is_unsupported(tmp_path: Path) -> None:
    """The CUTLASS GEMM runners (cpp/tensorrt_llm/kernels/cutlass_kernels/fp4_gemm/fp4_gemm_template.h dispatch)
    throw std::runtime_error("[TensorRT-LLM Error][CutlassFp4GemmRunner][GEMM Dispatch] Arch unsupported for
    CUTLASS FP4 GEMM"); the line is the one TensorRT-LLM#2869 (0.18.0.dev, 2025-03) pasted."""
    text = (
        "[TensorRT-LLM] TensorRT-LLM version: 0.18.0.dev2025022500\n"
        "Model init total -- 27.48s\n"
        "[03/10/2025-10:49:53] [TRT-LLM] [E] Failed to initialize executor on rank 0: [TensorRT-LLM Error]"
        "[CutlassFp4GemmRunner][GEMM Dispatch] Arch unsupported for CUTLASS FP4 GEMM\n"
    )
    found = _error(_replay(tmp_path, text))
    assert found["category"] == "unsupported"
    assert "Arch unsupported for CUTLASS FP4 GEMM" in str(found["summary"])


def test_python_refusal_inside_tensorrt_llm_is_unsupported(tmp_path: Path) -> None:
    """tensorrt_llm/_torch/pyexecutor/py_executor_creator.py create_py_executor: raise ValueError(f"Guided decoding
    is not supported for speculative decoding mode: {spec_config.spec_dec_mode.name}.") when a guided decoder meets a
    speculative mode without one: a feature the backend refuses, raised in tensorrt_llm/ (it was `other`)."""
    text = _BANNER + (
        "[12/06/2025-09:53:21] [TRT-LLM] [RANK 0] [E] Traceback (most recent call last):\n"
        f'  File "{_SITE}/executor/worker.py", line 333, in worker_main\n'
        "    worker: GenerationExecutorWorker = worker_cls(\n"
        f'  File "{_SITE}/_torch/pyexecutor/py_executor_creator.py", line 455, in create_py_executor\n'
        "    raise ValueError(\n"
        "ValueError: Guided decoding is not supported for speculative decoding mode: MTP.\n"
    )
    found = _error(_replay(tmp_path, text))
    assert found["category"] == "unsupported"
    # the rule reads the place too: the same words raised by a user's script (no tensorrt_llm/ frame) are no
    # TensorRT-LLM capability check
    script = _BANNER + (
        "Traceback (most recent call last):\n"
        '  File "/work/run.py", line 12, in <module>\n'
        "    raise ValueError(mode)\n"
        "ValueError: Guided decoding is not supported for speculative decoding mode: MTP.\n"
    )
    assert _error(_replay(tmp_path, script))["category"] != "unsupported"


def test_nixl_status_check_is_the_kv_transfer_layers_failure(tmp_path: Path) -> None:
    """cpp/tensorrt_llm/executor/cache_transmission/nixl_utils/transferAgent.cpp: TLLM_CHECK(status == NIXL_SUCCESS)
    after a NIXL call. Alone (the corpus case's line, cut from its UCX line before it) it says the KV cache's
    transfer layer failed: nccl, not assertion."""
    name = "trtllm-2026-disagg-nixl-ucx-vram-detected-as-host-executor-init-pr18373"
    line = next(
        s
        for s in (Path(__file__).parent / "fixtures" / "corpus" / "trtllm" / f"{name}.log")
        .read_text(encoding="utf-8")
        .splitlines()
        if "status == NIXL_SUCCESS" in s
    )
    found = _error(_replay(tmp_path, _BANNER + line + "\n"))
    assert found["category"] == "nccl"
    # the whole case keeps UCX's own line as its cause
    whole = _error(_verdict("trtllm", name))
    assert "VRAM memory is detected as host by UCX." in str(whole["summary"])


def test_gemm_profiler_workspace_allocation_failure_is_oom(tmp_path: Path) -> None:
    """cpp/tensorrt_llm/plugins/common/gemmPluginProfiler.cpp GemmPluginProfiler::allocateTmpData: cudaMalloc, then
    TLLM_CHECK_WITH_INFO(status == cudaSuccess, "Can't allocate tmp workspace for GEMM tactics profiling."): memory."""
    line = _failed_init(
        "[TensorRT-LLM][ERROR] Assertion failed: Can't allocate tmp workspace for GEMM tactics profiling. "
        "(/src/tensorrt_llm/cpp/tensorrt_llm/plugins/common/gemmPluginProfiler.cpp:233)"
    )
    found = _error(_replay(tmp_path, _BANNER + line))
    assert found["category"] == "oom"


def test_cpp_executor_error_after_ready_is_the_servers_death(tmp_path: Path) -> None:
    """tensorrt_llm/serve/openai_server.py openai_chat (0.17-1.x): 'except CppExecutorError: logger.error(
    traceback.format_exc()); signal.raise_signal(signal.SIGINT)': the executor failed and the server stops itself, so
    Uvicorn's shutdown that follows is no operator's stop and the error no request's (it read `ready`). The exception
    prints as tensorrt_llm.executor.utils.CppExecutorError, its __str__ '<message>\\nStack trace:\\n<stack>'."""
    text = (
        _BANNER
        + _SERVING
        + (
            "[06/06/2025-09:55:20] [TRT-LLM] [E] Traceback (most recent call last):\n"
            f'  File "{_SITE}/serve/openai_server.py", line 330, in openai_chat\n'
            "    response = await create_chat_response(promise, postproc_params)\n"
            f'  File "{_SITE}/executor/result.py", line 480, in _handle_response\n'
            "    raise CppExecutorError(response.error_msg)\n"
            "tensorrt_llm.executor.utils.CppExecutorError: Encountered an error in forward function: "
            "CUDA error: an illegal memory access was encountered\n"
            "Stack trace:\n"
            "NoneType: None\n"
            "\n"
            "INFO:     Shutting down\n"
            "INFO:     Waiting for application shutdown.\n"
            "INFO:     Application shutdown complete.\n"
            "INFO:     Finished server process [1234]\n"
        )
    )
    _assert_crash(
        _replay(tmp_path, text), "ready", "cuda", "CppExecutorError: Encountered an error in forward function"
    )
    # any other exception of a request handler is the request's: openai_server.py answers it with
    # create_error_response(str(e)) (400) and serves on (here the executor's RequestError, executor/utils.py)
    request = (
        _BANNER
        + _SERVING
        + (
            "[12/06/2025-09:55:20] [TRT-LLM] [E] Traceback (most recent call last):\n"
            f'  File "{_SITE}/serve/openai_server.py", line 560, in openai_chat\n'
            "    response = await create_chat_response(promise, postproc_params)\n"
            f'  File "{_SITE}/executor/result.py", line 570, in _handle_response\n'
            "    handler(response.error_msg)\n"
            "tensorrt_llm.executor.utils.RequestError: The sum of prompt length (9000) and query length (0) "
            "should not exceed max_num_tokens (8192)\n"
            'INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n'
        )
    )
    assert _replay(tmp_path, request)["error"] is None


def test_autotuner_tactic_failures_are_survived(tmp_path: Path) -> None:
    """tensorrt_llm/_torch/autotuner.py AutoTuner profiling loop: a tactic that raises is logged
    (logger.warning(f"[Autotuner] Failed when profiling runner={runner}, tactic={tac}, shapes={shapes}. Error: {e}"),
    logger.debug(f"[Autotuner] Exception captured: {e}")) and skipped; the warm-up goes on. Neither line is a crash,
    whatever error it quotes (both crashed the launch before)."""
    text = _BANNER + (
        "[12/06/2025-09:53:20] [TRT-LLM] [I] [Autotuner] Autotuning process starts ...\n"
        "[12/06/2025-09:53:21] [TRT-LLM] [W] [Autotuner] Failed when profiling runner=<tensorrt_llm._torch.custom_ops."
        "torch_custom_ops.MoERunner object at 0x7f10>, tactic=3, shapes=[torch.Size([8192, 7168])]. Error: CUDA out "
        "of memory. Tried to allocate 2.00 GiB.\n"
        "[12/06/2025-09:53:21] [TRT-LLM] [D] [Autotuner] Exception captured: [TensorRT-LLM][ERROR] Assertion failed: "
        "Error occurred when running GEMM! "
        "(/src/tensorrt_llm/cpp/tensorrt_llm/kernels/trtllmGenKernels/batchedGemm/KernelRunner.cpp:180)\n"
    )
    out = _replay(tmp_path, text)
    assert (out["state"], out["error"]) == ("capturing_graphs", None)


def test_autodeploy_transform_stages_name_the_steps(tmp_path: Path) -> None:
    """tensorrt_llm/_torch/auto_deploy/transform/interface.py BaseTransform._log_info prefixes each transform's line
    with f'[stage={stage}, transform={name}]'; the stages are ordered (Stages: factory .. sharding, weight_load,
    post_load_fusion, visualize, cache_init, compile). Its logger's '[TRT-LLM AUTO-DEPLOY] [RANK 1] [E] ' is peeled,
    the rank kept as the line's source (the compile line is the corpus 1.2.0rc5 launch's)."""
    head = "[12/20/2025-03:35:50] [TRT-LLM] [I] Using LLM with AutoDeploy backend\n"
    weights = (
        "[12/20/2025-03:36:20] [TRT-LLM AUTO-DEPLOY] [RANK 1] [I] [stage=weight_load, transform=load_weights] "
        "enabled=True, num_matches=1, is_clean=True, has_valid_shapes=True\n"
    )
    oom = (
        "[12/20/2025-03:36:40] [TRT-LLM AUTO-DEPLOY] [RANK 1] [E] Failed to initialize executor on rank 1: "
        "CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    out = _replay(tmp_path, head + weights + oom)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["ranks"] == ["RANK 1"]
    assert str(found["summary"]).startswith("Failed to initialize executor on rank 1: CUDA out of memory")
    cache = (
        "[12/20/2025-03:40:40] [TRT-LLM AUTO-DEPLOY] [RANK 0] [I] [stage=cache_init, transform=resize_kv_cache] "
        "enabled=True, num_matches=1, is_clean=True, has_valid_shapes=True\n"
    )
    assert _replay(tmp_path, head + cache)["state"] == "allocating_kv_cache"
    compiled = (
        "[12/20/2025-03:40:47] [TRT-LLM AUTO-DEPLOY] [RANK 0] [I] [stage=compile, transform=compile_model] elapsed "
        "time: total=12.132s, pre_cleanup=0.000s, apply=12.132s, post_cleanup=0.000s\n"
    )
    assert _replay(tmp_path, head + cache + compiled)["state"] == "capturing_graphs"


def test_triton_backend_name_and_dynamo_worker_name_tensorrt_llm(tmp_path: Path) -> None:
    """Triton names the TensorRT-LLM backend 'tensorrtllm' (config.pbtxt backend: "tensorrtllm", its library
    /opt/tritonserver/backends/tensorrtllm/libtriton_tensorrtllm.so in the server's backend table), and Dynamo starts
    its TensorRT-LLM worker as `python3 -m dynamo.trtllm`: either names the engine."""
    table = (
        "I1206 09:52:20.123456 1 server.cc:631]\n"
        "| Backend     | Path                                                            | Config |\n"
        "| tensorrtllm | /opt/tritonserver/backends/tensorrtllm/libtriton_tensorrtllm.so | {}     |\n"
    )
    assert _replay(tmp_path, table)["engine"] == "trtllm"
    dynamo = "+ python3 -m dynamo.trtllm --model-path /models/qwen --served-model-name qwen\n"
    assert _replay(tmp_path, dynamo)["engine"] == "trtllm"


def test_trt_engine_build_is_the_weights_step(tmp_path: Path) -> None:
    """tensorrt_llm/builder.py Builder.build_engine logs 'Total time to initialize the weights in network <name>:
    HH:MM:SS', then 'Build TensorRT engine <name>' before TensorRT builds the engine from the weights; when TensorRT
    returns none it logs 'Engine building failed, please check the error log.' after TensorRT's own error (the
    TensorRT 10 builder's '[virtualMemoryBuffer.cpp::resizePhysical::151] Error Code 2: OutOfMemory', optimum-nvidia
    #146). A build that runs out of memory crashed while loading weights (it read `starting`), of TensorRT's line."""
    text = (
        "[TensorRT-LLM] TensorRT-LLM version: 0.16.0\n"
        "[01/10/2025-10:00:10] [TRT-LLM] [I] Total time to initialize the weights in network Unnamed Network 0: "
        "00:00:05\n"
        "[01/10/2025-10:00:10] [TRT-LLM] [I] Build TensorRT engine Unnamed Network 0\n"
        "[01/10/2025-10:00:40] [TRT] [E] [virtualMemoryBuffer.cpp::resizePhysical::151] Error Code 2: OutOfMemory "
        "(Requested size was 34359738368 bytes.)\n"
        "[01/10/2025-10:00:40] [TRT-LLM] [E] Engine building failed, please check the error log.\n"
    )
    _assert_crash(_replay(tmp_path, text), "loading_weights", "oom", "Error Code 2: OutOfMemory")


def test_trtllm_bench_is_ready_once_its_requests_are_served(tmp_path: Path) -> None:
    """tensorrt_llm/bench/benchmark/throughput.py throughput_command builds the LLM, then logs 'Setting up for
    warmup...' and 'Running warmup.' (requests through the serving path, async_benchmark in utils/asynchronous.py),
    'Warmup done.' once they came back, and 'Benchmark done. Reporting results...' after the benchmark: no server
    starts, so these say the engine served (it stayed `capturing_graphs`)."""
    text = (
        "[TensorRT-LLM] TensorRT-LLM version: 1.1.0\n"
        "[12/06/2025-09:52:20] [TRT-LLM] [I] Using LLM with PyTorch backend\n"
        "[12/06/2025-09:53:20] [TRT-LLM] [I] Setting up throughput benchmark.\n"
        "[12/06/2025-09:55:21] [TRT-LLM] [I] Setting up for warmup...\n"
        "[12/06/2025-09:55:21] [TRT-LLM] [I] Running warmup.\n"
        "[12/06/2025-09:55:21] [TRT-LLM] [I] Starting benchmarking async task.\n"
    )
    assert _replay(tmp_path, text)["state"] == "capturing_graphs"
    served = text + (
        "[12/06/2025-09:55:23] [TRT-LLM] [I] Benchmark complete.\n[12/06/2025-09:55:23] [TRT-LLM] [I] Warmup done.\n"
    )
    assert _replay(tmp_path, served)["state"] == "ready"


def test_extra_llm_api_options_yaml_that_does_not_parse_is_config(tmp_path: Path) -> None:
    """tensorrt_llm/llmapi/llm_args.py update_llm_args_with_extra_options reads trtllm-serve's --extra_llm_api_options
    with yaml.safe_load; PyYAML's scanner refuses a malformed file with 'yaml.scanner.ScannerError: mapping values
    are not allowed here' (yaml/scanner.py): the launch's configuration (common.toml; it was `other`)."""
    text = _BANNER + (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/llmapi/llm_args.py", line 2650, in update_llm_args_with_extra_options\n'
        "    llm_args_dict = yaml.safe_load(f)\n"
        "yaml.scanner.ScannerError: mapping values are not allowed here\n"
        '  in "/tmp/extra-llm-api-config.yml", line 3, column 12\n'
    )
    out = _replay(tmp_path, text)
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    assert _error(out)["category"] == "config"


def test_hang_detectors_kill_is_a_timeout_crash(tmp_path: Path) -> None:
    """tensorrt_llm/_torch/pyexecutor/hang_detector.py (2026 main): HangDetector._detect_hang logs 'Hang detected
    after {timeout} seconds.' and the threads' stacks, then propagate_hard_kill logs 'HangDetector: propagating
    hard-kill to all ranks via MPI_Abort.' and aborts (MPI_Abort(137)): the engine's own watchdog ended a hung
    executor, a `timeout` whose cause is the detector's line (it was `killed`, of Open MPI's MPI_ABORT banner)."""
    text = (
        _BANNER
        + _SERVING
        + (
            "[09/22/2026-10:52:20] [TRT-LLM] [E] Hang detected after 300 seconds.\n"
            "Thread 140000 (most recent call first):\n"
            f'  File "{_SITE}/_torch/pyexecutor/py_executor.py", line 1500 in _executor_loop\n'
            "[09/22/2026-10:52:21] [TRT-LLM] [E] HangDetector: propagating hard-kill to all ranks via MPI_Abort.\n"
            "--------------------------------------------------------------------------\n"
            "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\n"
            "with errorcode 137.\n"
        )
    )
    out = _replay(tmp_path, text)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "timeout"
    assert str(found["summary"]) == "Hang detected after 300 seconds."


def test_a_check_failing_while_a_plugin_is_deserialized_is_the_engines_load(tmp_path: Path) -> None:
    """TensorRT deserializes an engine's plugins through their creators (plugins/gptAttentionPlugin/
    gptAttentionPlugin.cpp GPTAttentionPluginCreator::deserializePlugin -> the GPTAttentionPlugin(void const*, size_t)
    constructor): a TLLM_CHECK failing under that frame failed the engine's load (loading_weights; it read
    `starting`). The lines are TensorRT-LLM#4241's (a Gemma 3 engine, 2025)."""
    text = (
        "[TensorRT-LLM][ERROR] tensorrt_llm::common::TllmException: [TensorRT-LLM][ERROR] Assertion failed: "
        "remaining_buffer_size == 0 (/workspace/tensorrt_llm/cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/"
        "decoderXQAImplJIT/cubinObjRegistry.h:62)\n"
        "1       0x795d6b642038 tensorrt_llm::common::throwRuntimeError(char const*, int, std::__cxx11::basic_string<char, "
        "std::char_traits<char>, std::allocator<char> > const&) + 95\n"
        "4       0x795d4c913505 tensorrt_llm::plugins::GPTAttentionPluginCommon::GPTAttentionPluginCommon(void const*, "
        "unsigned long) + 1413\n"
        "5       0x795d4c917f62 tensorrt_llm::plugins::GPTAttentionPlugin::GPTAttentionPlugin(void const*, unsigned long) "
        "+ 18\n"
        "6       0x795d4c917fe2 tensorrt_llm::plugins::GPTAttentionPluginCreator::deserializePlugin(char const*, void "
        "const*, unsigned long) + 50\n"
        "7       0x795ceb94dfe0 /usr/local/tensorrt/lib/libnvinfer.so.10(+0x18b1fe0) [0x795ceb94dfe0]\n"
    )
    _assert_crash(
        _replay(tmp_path, text),
        "loading_weights",
        "assertion",
        "Assertion failed: remaining_buffer_size == 0",
    )


def test_the_executor_loop_threads_death_is_certain_at_once() -> None:
    """_torch/pyexecutor/py_executor.py PyExecutor.start_worker runs the executor loop on one thread (0.2x:
    target=_executor_loop / _executor_loop_overlap; 1.x: _event_loop_wrapper, which logs 'Error in event loop' and
    re-raises): Python's 'Exception in thread Thread-4 (_executor_loop_overlap):' says that thread died and no batch
    is stepped again, so the crash is decided on that line (it waited for the end of the log: 5 s live). The log is
    TensorRT-LLM#5390's (0.21, a cuBLAS failure while serving)."""
    out = _verdict(
        "trtllm", "trtllm-2025-pytorch-executor-loop-overlap-cublas-execution-failed-thread-died-issue5390"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    timeline = out["timeline"]
    assert isinstance(timeline, list)
    assert timeline[-1]["line"] == 3
    assert _error(out)["category"] == "cuda"


def test_pythons_unsupported_operand_is_no_capability(tmp_path: Path) -> None:
    """CPython's own TypeError 'unsupported operand type(s) for +: 'NoneType' and 'int'' (Objects/abstract.c
    binop_type_error) raised in TensorRT-LLM's model engine is a program's error on a value: `other`, not the
    `unsupported` of a refused capability (common.toml's phrase 'Unsupported <word>' once took it; the TLLM_THROW rule
    reads 'Unsupported ...' only with its own '(<file>:<line>)' at a TensorRT-LLM C++ source)."""
    text = _BANNER + (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/_torch/pyexecutor/model_engine.py", line 300, in _load_model\n'
        "    n = self.max_seq_len + extra\n"
        "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'\n"
    )
    _assert_crash(_replay(tmp_path, text), "loading_weights", "other", "unsupported operand type(s)")


# -- issue 30, i30-trtllm2: the 1.1-1.3 executor's own lines and checks, read in the code index's versions ----------


def _state(tmp_path: Path, line: str) -> str:
    # the state a 1.2 launch reaches with `line` after its banner
    return str(_replay(tmp_path, _BANNER + line + "\n")["state"])


def test_kv_cache_managers_own_lines_are_the_kv_cache_step(tmp_path: Path) -> None:
    """_torch/pyexecutor/resource_manager.py KVCacheManager.__init__ (1.1-1.3): logger.info(f'[kv cache manager]
    Primary/secondary blocks for window sizes set to {blocks_per_window} for estimation dry run'), logger.info(
    f'[KVCacheManager] blocks_per_window: {blocks_per_window}'), and its window fitting's logger.warning(f'Attention
    window size {w} exceeds upper bound {b} for available blocks. Reducing to {b}.') / 'Adjusted window size {w} to
    {b} in blocks_per_window'; _util.py KvCacheCreator's 'Peak memory during memory usage profiling ...'; the C++
    kvCacheManager.cpp's 'Max KV cache blocks per sequence: ...'. Each is the KV cache's sizing (they read
    `starting`: the window lines were benign, the others unread); the lines are those of 1.1-1.2 logs in the corpus."""
    lines = [
        "[12/20/2025-04:21:10] [TRT-LLM] [I] [_torch] [kv cache manager] Primary/secondary blocks for window sizes "
        "set to {8194: (352, 0)} for estimation dry run",
        "[12/20/2025-04:21:10] [TRT-LLM] [I] [_torch] [KVCacheManager] blocks_per_window: {8194: (352, 0)}",
        "[12/20/2025-04:21:10] [TRT-LLM] [W] Attention window size 131072 exceeds upper bound 8224 for available "
        "blocks. Reducing to 8224.",
        "[12/20/2025-04:21:10] [TRT-LLM] [W] Adjusted window size 131072 to 8224 in blocks_per_window",
        "[12/20/2025-04:21:10] [TRT-LLM] [I] Peak memory during memory usage profiling (torch + non-torch): "
        "113.65 GiB, available KV cache memory when calculating max tokens: 5.95 GiB",
        "[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 256 [window size=16384], tokens per block=64, "
        "primary blocks=61848, secondary blocks=0, max sequence length=16384",
    ]
    assert [_state(tmp_path, line) for line in lines] == ["allocating_kv_cache"] * len(lines)


def test_torch_memory_fraction_set_after_the_warmup_is_the_last_executor_step(tmp_path: Path) -> None:
    """_torch/pyexecutor/py_executor_creator.py create_py_executor (main 000429d): the final
    create_py_executor_instance (its PyExecutor ran the warm-up), then _adjust_torch_mem_fraction(), whose
    logger.info(f'Setting PyTorch memory fraction to {fraction} ({gib} GiB)') is printed after the CUDA graphs: the
    warm-up's step is reached (it read `starting`); its debug form 'Setting PyTorch memory fraction to 1.0' (no GiB,
    printed first) is not read."""
    done = "[12/20/2025-04:21:57] [TRT-LLM] [I] Setting PyTorch memory fraction to 0.5983721838660735 (71.62 GiB)"
    assert _state(tmp_path, done) == "capturing_graphs"
    first = "[12/20/2025-04:20:57] [TRT-LLM] [D] Setting PyTorch memory fraction to 1.0"
    assert _state(tmp_path, first) == "starting"


def test_kv_cache_dtype_refused_against_the_checkpoint_is_config(tmp_path: Path) -> None:
    """_torch/pyexecutor/model_loader.py validate_and_set_kv_cache_quant (main 004b733): raise RuntimeError("Attempting
    to override KV cache quantization " f'"{kv_cache_quant}" with llm_args.KvCacheConfig.dtype="{dtype}". You cannot
    override a checkpoint with a pre-quantized KV cache that doesn't match.'), and its ValueError for a dtype it does
    not take: the option refused (it was `other`), quoted by worker_main."""
    line = _failed_init(
        'Attempting to override KV cache quantization "FP8" with llm_args.KvCacheConfig.dtype="nvfp4". '
        "You cannot override a checkpoint with a pre-quantized KV cache that doesn't match."
    )
    _assert_crash(_replay(tmp_path, _BANNER + line), "starting", "config", "Attempting to override KV cache")
    invalid = _failed_init(
        'Overriding KV cache quantization with an invalid type "llm_args.KvCacheConfig.dtype="int4" '
        "Accepted types are \"('fp8', 'nvfp4', 'auto')\"."
    )
    assert _error(_replay(tmp_path, _BANNER + invalid))["category"] == "config"


def test_worker_that_died_during_initialization_is_killed(tmp_path: Path) -> None:
    """executor/proxy.py GenerationExecutorProxy._start_executor_workers: when an MPI worker's future is done before it
    sent its status, logger.error("Executor worker died during initialization.") and raise RuntimeError("Executor
    worker died during initialization"): a death told without its cause (it was `other`); an error the worker printed
    before it stays the cause."""
    death = (
        "[12/06/2025-09:53:20] [TRT-LLM] [E] Executor worker died during initialization.\n"
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/executor/proxy.py", line 397, in _start_executor_workers\n'
        '    raise RuntimeError("Executor worker died during initialization")\n'
        "RuntimeError: Executor worker died during initialization\n"
    )
    _assert_crash(_replay(tmp_path, _BANNER + death), "starting", "killed", "Executor worker died")
    oom = "[12/06/2025-09:53:19] [TRT-LLM] [RANK 0] [E] torch.OutOfMemoryError: CUDA out of memory.\n"
    assert _error(_replay(tmp_path, _BANNER + oom + death))["category"] == "oom"


def test_llm_args_checks_are_config_and_an_sm_requirement_unsupported(tmp_path: Path) -> None:
    """llmapi/llm_args.py DeepSeekSparseAttentionConfig._validate_indexer_k_dtype (2026 main): raise ValueError(
    f"indexer_k_dtype='fp4' requires index_head_dim=128, got {n}. ...") is the launch's options (config, by the file it
    is raised in; it was `other`), while raise ValueError(f"indexer_k_dtype='fp4' requires SM>=100 (Blackwell);
    current device is SM{sm}. ...") asks for a capability this GPU lacks (unsupported), bare or wrapped by pydantic
    ('Value error, ...', which was config by its class alone)."""

    def raised(message: str) -> str:
        return _BANNER + (
            "Traceback (most recent call last):\n"
            f'  File "{_SITE}/llmapi/llm_args.py", line 1190, in _validate_indexer_k_dtype\n'
            "    raise ValueError(\n"
            f"ValueError: {message}\n"
        )

    head = "indexer_k_dtype='fp4' requires index_head_dim=128, got 64. Set indexer_k_dtype='fp8' for non-128 heads."
    assert _error(_replay(tmp_path, raised(head)))["category"] == "config"
    sm = "indexer_k_dtype='fp4' requires SM>=100 (Blackwell); current device is SM90. Set indexer_k_dtype='fp8'."
    assert _error(_replay(tmp_path, raised(sm)))["category"] == "unsupported"
    wrapped = _BANNER + (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/llmapi/llm_args.py", line 3001, in __init__\n'
        "    super().__init__(**kwargs)\n"
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for TorchLlmArgs\n"
        f"  Value error, {sm} [type=value_error, input_value={{}}, input_type=dict]\n"
    )
    assert _error(_replay(tmp_path, wrapped))["category"] == "unsupported"


def test_checkpoint_mappers_assert_is_model_load(tmp_path: Path) -> None:
    """_torch/models/checkpoints/base_weight_mapper.py BaseWeightMapper.handle_manual_copy: 'if not
    allow_partial_loading: assert n in module_weights' (the checkpoint lacks a tensor the module copies): model_load
    by the place it is raised in (it was `assertion`, common.toml's rule for an engine's bare assert)."""
    text = _BANNER + (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/_torch/models/modeling_utils.py", line 960, in load_single_module\n'
        "    weight_mapper.handle_manual_copy(module_name, module_weights, n, p)\n"
        f'  File "{_SITE}/_torch/models/checkpoints/base_weight_mapper.py", line 120, in handle_manual_copy\n'
        "    assert n in module_weights\n"
        "AssertionError\n"
    )
    assert _error(_replay(tmp_path, text))["category"] == "model_load"


def test_kv_cache_manager_v2_and_mamba_cache_constructors_are_the_kv_cache_step(tmp_path: Path) -> None:
    """_torch/pyexecutor/kv_cache/kv_cache_manager_v2.py KVCacheManagerV2.__init__ and kv_cache/mamba_cache_manager.py
    (2026 main; kv_cache_manager_v2.py beside resource_manager.py before): the cache's constructor, called by
    KvCacheCreator.build_managers; a traceback whose innermost known frame is it failed in the KV cache step (it read
    the frame of the worker, `starting`)."""
    for module in (
        "kv_cache/kv_cache_manager_v2.py",
        "kv_cache/mamba_cache_manager.py",
        "kv_cache_manager_v2.py",
    ):
        text = _BANNER + (
            "[12/06/2025-09:53:21] [TRT-LLM] [RANK 0] [E] Traceback (most recent call last):\n"
            f'  File "{_SITE}/executor/worker.py", line 333, in worker_main\n'
            "    worker: GenerationExecutorWorker = worker_cls(\n"
            f'  File "{_SITE}/_torch/pyexecutor/{module}", line 812, in __init__\n'
            "    self.impl = KVCacheManagerPy(config)\n"
            "RuntimeError: unexpected pool layout\n"
        )
        out = _replay(tmp_path, text)
        assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache"), module


def test_the_model_loaders_fallback_traceback_is_survived(tmp_path: Path) -> None:
    """_torch/pyexecutor/model_loader.py ModelLoader.load (main 004b733): the model built under MetaInitMode, and 'except
    Exception: logger.info(f"Fallback to regular model init: {traceback.format_exc(limit=10)}\\n"); model =
    AutoModelForCausalLM.from_config(config)': an INFO traceback the loader survived (a TensorRT-LLM CI log scanner
    took it for the failure, 6 minutes before the real OOM). Whole or cut by the log's end it is no crash (it was a
    crash `other`), and a later error stays the cause."""
    fallback = (
        "[12/06/2025-09:52:31] [TRT-LLM] [I] [_torch][RANK 2] Fallback to regular model init: Traceback (most recent "
        "call last):\n"
        f'  File "{_SITE}/_torch/pyexecutor/model_loader.py", line 237, in load\n'
        "    model = AutoModelForCausalLM.from_config(config_copy)\n"
        f'  File "{_SITE}/_torch/models/modeling_auto.py", line 39, in from_config\n'
        "    model = cls(config)\n"
        "RuntimeError: Tensor.item() cannot be called on meta tensors\n"
    )
    cut = "".join(fallback.splitlines(keepends=True)[:3])
    for text in (fallback, cut):
        out = _replay(tmp_path, _BANNER + text)
        assert (out["state"], out["error"]) == ("starting", None)
    oom = _failed_init(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of 79.11 GiB."
    )
    _assert_crash(_replay(tmp_path, _BANNER + fallback + oom), "loading_weights", "oom", "CUDA out of memory")
