"""What the twenty-fifth round's public logs of the llama.cpp family showed (issue 30, helper i30-cases25b), read from
the engines' and libraries' source and pinned on the real log that showed it (tests/fixtures/corpus/llamacpp)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_cublas_not_supported_status_is_unsupported() -> None:
    """ggml-cuda's CUBLAS_CHECK prints cublas_get_error_str(status) (ggml/src/ggml-cuda/common.cuh): on CUDA 12+
    cuBLAS's own text, 'the requested functionality is not supported' for CUBLAS_STATUS_NOT_SUPPORTED - the library
    refusing the GEMM, not a device fault. llama.cpp#28251 (2026, 'llama serve' with an MTP draft, the warm-up's
    cublasGemmEx): read as cuda before."""
    out = _verdict(
        "llamacpp",
        "llamacpp-2026-llama-serve-mtp-warmup-cublas-requested-functionality-not-supported-cut-issue28251",
    )
    assert (out["engine"], out["state"], out["phase"]) == ("llamacpp", "crashed", "capturing_graphs")
    found = _error(out)
    assert found["category"] == "unsupported"
    assert "CUDA error: the requested functionality is not supported" in str(found["summary"])


def test_unknown_architecture_cut_by_a_console_wrap_is_unsupported() -> None:
    """llama_model::load_arch throws only 'unknown model architecture: ...' for an unknown name, which llama_model_load
    wraps as 'error loading model architecture: ...': a line ending in '...architecture: unknown' is that error, its
    name wrapped onto the next line. KoboldCpp 1.100.1 in an 80-column Windows console (koboldcpp#1819, 2025): read as
    model_load before."""
    out = _verdict(
        "llamacpp",
        "llamacpp-2025-koboldcpp-1.100.1-console-wrapped-80-cols-unknown-architecture-qwen3next-koboldcpp1819",
    )
    assert (out["engine"], out["state"], out["phase"]) == ("llamacpp", "crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "unsupported"
    assert "error loading model architecture: unknown" in str(found["summary"])


def test_radv_context_lost_is_the_cause_of_a_backtrace_only_death() -> None:
    """Mesa RADV's amdgpu winsys prints 'The CS has been cancelled because the context is lost' when the kernel
    cancels a submit (radv_amdgpu_cs.c); the device is lost and llama.cpp's Vulkan backend dies on the uncaught
    vk::DeviceLostError. llama.cpp#21724 (2026, a journal with nothing after it but ggml's backtrace): a backtrace
    frame was the decisive line and the category killed before."""
    out = _verdict(
        "llamacpp", "llamacpp-2026-nix-llm-router-journal-radv-context-lost-then-ggml-backtrace-issue21724"
    )
    assert (out["engine"], out["state"]) == ("llamacpp", "crashed")
    found = _error(out)
    assert found["category"] == "cuda"
    assert "The CS has been cancelled because the context is lost. This context is innocent." in str(
        found["summary"]
    )
