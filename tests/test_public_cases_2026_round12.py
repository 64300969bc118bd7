"""Rules read from the engines' and libraries' sources for what the twelfth crop of public 2025-2026 logs showed
(issue 30), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.core.envelope import parse
from watchdog.core.framing import clean


def test_vllm_line_pasted_from_its_source_location_is_the_workers_error() -> None:
    """vLLM's log format is 'LEVEL MM-DD HH:MM:SS [file.py:N] message' (vllm/logger.py). An excerpt pasted from
    the middle of a worker's line keeps only '[multiproc_executor.py:492] ValueError: Free memory on device ...':
    the source location is peeled as the rest of that header, so the worker's ValueError (gpu_worker.init_device,
    raised before the weights) is read as the error, not the EngineCore's 'EngineCore failed to start.' after it."""
    rec = parse("[multiproc_executor.py:492] ValueError: Free memory on device (31.44/47.38 GiB) on startup")
    assert rec.content.startswith("ValueError: Free memory on device")
    out = _verdict(
        "vllm", "vllm-0.9.1-multiproc-free-memory-valueerror-then-enginecore-failed-cut-issue20305"
    )
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = _error(out)
    assert found["category"] == "oom"
    assert str(found["summary"]).startswith("ValueError: Free memory on device (31.44/47.38 GiB)")


def test_sglang_torch_npu_out_of_memory_line_is_the_cause_of_the_schedulers_death() -> None:
    """torch_npu's caching allocator words its failure as torch's CUDA one does ('NPU out of memory. Tried to
    allocate 72.00 MiB (NPU 0; 61.27 GiB total capacity; ...)') and its 'torch_npu.memory' logger prints it on a
    line of its own. On Ascend, SGLang's scheduler then dies in its event loop with a traceback cut before its
    message: the out-of-memory line is the cause (oom), after ready."""
    out = _verdict(
        "sglang", "sglang-2026-npu-glm52-oom-during-request-scheduler-exception-after-ready-issue29838"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "oom"
    assert "NPU out of memory. Tried to allocate 72.00 MiB" in str(found["summary"])


def test_vllm_ascend_kernels_built_for_another_soc_are_unsupported() -> None:
    """The AscendC compiler makes a kernel library register its device binaries from an ELF constructor that calls
    CANN's AscendCheckSoCVersion; on another chip it returns with 'the socversion Ascend910B1 of bin package does
    not match the current device socverison Ascend310P3 ...' and registers nothing. vllm-ascend built for 910B on a
    310P prints it after the weights and the launch ends: a crash, the hardware not supported by the build."""
    out = _verdict("vllm", "vllm-ascend-0.10-310p3-socversion-bin-package-mismatch-after-weights-issue2725")
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")
    found = _error(out)
    assert found["category"] == "unsupported"
    assert "of bin package does not match the current device socverison Ascend310P3" in str(found["summary"])


def test_vllm_0_10_worker_named_by_its_parallel_rank_is_a_process_tag() -> None:
    """vLLM 0.10.1-0.10.2 names a multiproc worker by its parallel ranks ('VllmWorker' + ' TP<r>', ' PP<r>', ...)
    and prefixes its lines '(VllmWorker TP3 pid=433) ERROR ...': the tag is peeled as the worker's source, so the
    line under it is read (its level, its time, its message), as '(VllmWorker rank=0 pid=N)' of 0.9 is."""
    rec = parse(
        "(VllmWorker TP3 pid=433) ERROR 08-29 19:59:50 [multiproc_executor.py:596] WorkerProc hit an exception."
    )
    assert (rec.content, rec.source, rec.level) == ("WorkerProc hit an exception.", "VllmWorker TP3", "ERROR")
    assert parse("(VllmWorker TP3) hello").content == "(VllmWorker TP3) hello"  # no pid: no process tag


def test_vllm_lmcache_storing_a_requests_kv_cache_is_serving() -> None:
    """LMCache's vLLM connector (lmcache/integration/vllm/vllm_v1_adapter.py wait_for_save) logs 'Storing KV cache
    for N out of M tokens (skip_leading_tokens=K) for request ID' for each request the scheduler hands it; the
    engine's profiling and warm-up runs hand it none. A worker's exception after such lines (the excerpt cut
    before its message) is a crash of a server that was serving: ready."""
    out = _verdict("vllm", "vllm-0.10-lmcache-deepseek-r1-workerproc-hit-exception-after-store-cut-issue1471")
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    assert str(_error(out)["summary"]) == "WorkerProc hit an exception."


def test_sglang_dsv4_memory_calculation_is_the_kv_pool_sizing() -> None:
    """SGLang's DeepSeek-V4 pool configurator (srt/model_executor/pool_configurator.py calculate_pool_sizes) logs
    'DSv4 memory calculation: bytes_per_full_token=..., available_bytes=... GB, full_token=N' once it has measured
    the memory the weights left: the KV pools are being sized, after the weights (allocating_kv_cache)."""
    out = _verdict("sglang", "sglang-2026-ktransformers-dsv4-memory-calculation-pool-sizes-cut-issue1978")
    assert (out["state"], out["phase"]) == ("allocating_kv_cache", "allocating_kv_cache")
    assert out["error"] is None


def test_sglang_generate_route_answered_names_sglang() -> None:
    """SGLang's own warm-up request posts to its native /generate route (srt/entrypoints/http_server.py
    _wait_and_warmup), so Uvicorn's '"POST /generate HTTP/1.1" 200' access line is in every SGLang launch; vLLM's
    OpenAI server has no such route. An excerpt of SGLang answering it and then one request's ASGI exception is
    SGLang, ready and serving."""
    out = _verdict(
        "sglang", "sglang-2025-xinference-compose-generate-200-then-asgi-exception-request-cut-issue3553"
    )
    assert out["engine"] == "sglang"
    assert (out["state"], out["phase"]) == ("ready", "ready")


def test_vllm_tpu_precompilation_of_input_shapes_is_the_warm_up() -> None:
    """vLLM's TPU model runner compiles every padded shape once the KV cache is allocated (capture_model /
    _precompile_backbone: 'Compiling the model with different input shapes.', 'Compiling sampling with different
    input shapes.'): the TPU's graph capture. An engine core's exception cut after them failed in the warm-up."""
    out = _verdict("vllm", "vllm-v1-tpu-2025-compiling-sampling-shapes-then-enginecore-exception-cut-pr15727")
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")


def test_ansi_colour_shown_as_the_word_esc_is_stripped() -> None:
    """`less` without -R (and some web log viewers) prints an ESC byte as the word 'ESC': vLLM's coloured process
    tag then reads 'ESC[1;36m(APIServer pid=1)ESC[0;0m INFO ...'. The escape is stripped as the caret form '^[[' is,
    so the tag and the vLLM header under it are peeled; a word that merely ends in 'ESC' is left alone."""
    line = (
        b"ESC[1;36m(APIServer pid=1)ESC[0;0m INFO 08-12 14:37:10 [config.py:1759] Using max model len 131072"
    )
    assert clean(line) == "(APIServer pid=1) INFO 08-12 14:37:10 [config.py:1759] Using max model len 131072"
    assert clean(b"DESC[1] is fine") == "DESC[1] is fine"
    rec = parse(clean(line))
    assert (rec.source, rec.level, rec.content) == ("APIServer pid=1", "INFO", "Using max model len 131072")


def test_vllm_engine_dead_error_is_a_crash_after_ready() -> None:
    """vLLM's EngineDeadError (v1/engine/exceptions.py) is raised by the engine client and AsyncLLM's output handler
    and generate(), which exist only once every engine core reported READY; an engine core dying while starting is
    'Engine core initialization failed' instead. An excerpt that opens on the output handler's EngineDeadError and a
    chat stream's error after it is a crash after ready."""
    out = _verdict("vllm", "vllm-2026-spark-gptoss-engine-dead-then-chat-stream-generator-error-cut-issue31")
    assert (out["state"], out["phase"]) == ("crashed", "ready")
