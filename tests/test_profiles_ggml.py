"""llama.cpp vs Ollama: engine detection when one embeds the other's output, and ggml's abort lines."""

from __future__ import annotations

from pathlib import Path

from watchdog.core.detection import detect_engine
from watchdog.follow.replay import replay_path
from watchdog.profiles.loader import catalogue, load_profile

_LOADER = [
    "llama_model_loader: loaded meta data with 29 key-value pairs and 291 tensors from /m.gguf (version GGUF V3)",
    "llm_load_print_meta: n_ctx_train      = 8192",
    "llm_load_tensors: offloaded 33/33 layers to GPU",
    "llama_new_context_with_model: n_ctx      = 8192",
    "llama_kv_cache_init:      CUDA0 KV buffer size =  1024.00 MiB",
] * 20


def test_ollama_log_full_of_runner_loader_lines_is_ollama() -> None:
    """Ollama's runner prints llama.cpp's loader lines; a few of Ollama's own lines decide."""
    head = [
        'time=2024-08-26T09:53:20.000Z level=INFO source=server.go:393 msg="starting llama server"',
        *_LOADER,
        'time=2024-08-26T09:53:44.082Z level=INFO source=server.go:627 msg="waiting for server to become available"',
    ]
    assert detect_engine(head, catalogue()) == "ollama"


def test_llama_server_loading_an_ollama_blob_is_llamacpp() -> None:
    """A path under ~/.ollama in llama-server's own log does not make it Ollama's: main()'s lines decide."""
    head = [
        "main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 11",
        "main: loading model",
        "srv    load_model: loading model '/home/u/.ollama/models/blobs/sha256-abc'",
        *_LOADER,
        "main: model loaded",
        "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
    ]
    assert detect_engine(head, catalogue()) == "llamacpp"


def test_ggml_abort_line_is_fatal_and_the_message_is_the_cause() -> None:
    """ggml_abort's 'file:line: CUDA error' ends the process; the 'CUDA error: ...' line names the cause."""
    prof = load_profile("llamacpp")
    errors = prof.rules_of("error")
    abort = "/app/ggml/src/ggml-cuda/ggml-cuda.cu:98: CUDA error"
    message = "CUDA error: an internal operation failed"
    hit_abort = [r for r in errors if r.apply(abort) is not None]
    hit_message = [r for r in errors if r.apply(message) is not None]
    assert any(r.fatal and r.role == "wrapper" for r in hit_abort)
    assert all(r.role == "wrapper" for r in hit_abort if r.category)
    assert [r.category for r in hit_message if r.role == "cause"] == ["cuda"]


_COMPUTE_OOM = (
    "0.00.130.988 I srv    load_model: loading model '/models/big.gguf'\n"
    "1.06.520.077 E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 51748.72 MiB on device 1: cudaMalloc "
    "failed: out of memory\n"
    "1.06.520.084 E ggml_gallocr_reserve_n_impl: failed to allocate CUDA1 buffer of size 54262464512\n"
    "1.06.520.086 E graph_reserve: failed to allocate compute buffers\n"
)


def test_a_retried_compute_buffer_is_no_crash(tmp_path: Path) -> None:
    """llama.cpp's compute-buffer cudaMalloc failure followed by its retry without pipeline parallelism is survived."""
    log = tmp_path / "retried.log"
    log.write_text(
        _COMPUTE_OOM
        + "1.06.520.107 W sched_reserve: compute buffer allocation failed, retrying without pipeline "
        "parallelism\n"
    )
    _, verdict = replay_path(log)
    assert (verdict.state.value, verdict.phase.value, verdict.error) == (
        "allocating_kv_cache",
        "allocating_kv_cache",
        None,
    )


def test_an_allocation_failure_the_loader_gives_up_on_is_an_oom_crash(tmp_path: Path) -> None:
    """The same cudaMalloc failure is an OOM crash once the loader gives up on it (its fatal 'unable to allocate')."""
    log = tmp_path / "weights.log"
    log.write_text(
        "srv    load_model: loading model '/models/big.gguf'\n"
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 81656.95 MiB on device 0: cudaMalloc failed: out of "
        "memory\nllama_model_load: error loading model: unable to allocate CUDA0 buffer\n"
    )
    _, verdict = replay_path(log)
    assert verdict.state.value == "crashed"
    assert verdict.error is not None
    assert verdict.error.category.value == "oom"
    assert "cudaMalloc failed: out of memory" in verdict.error.summary


def test_a_shells_report_of_a_sigkill_is_a_kill(tmp_path: Path) -> None:
    """zsh's 'killed' report of the foreground llama-server (the OOM killer's SIGKILL) ends the launch as killed."""
    log = tmp_path / "killed.log"
    log.write_text(
        "srv    load_model: loading model '/models/big.gguf'\n"
        "load_tensors: loading model tensors, this can take a while... (mmap = true)\n"
        "zsh: killed     ./llama-server -m /models/big.gguf\n"
    )
    _, verdict = replay_path(log)
    assert (verdict.state.value, verdict.phase.value) == ("crashed", "loading_weights")
    assert verdict.error is not None
    assert verdict.error.category.value == "killed"
