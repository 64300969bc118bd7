"""What the twenty-fourth round's public logs (part D: TensorRT-LLM under Triton, TGI, vLLM, KServe) showed (issue
30, helper i30-cases24d), read from the libraries' and servers' source and pinned on the real log that showed it."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_open_mpi_orte_init_failure_is_fatal_and_an_environment_problem() -> None:
    """Open MPI's ORTE help text (help-orte-runtime.txt [orte_init:startup:internal-failure], printed by the ess
    modules' error paths: '  <step> failed' then '  --> Returned value <name> (<code>) instead of ORTE_SUCCESS') is
    followed by MPI_Init failing (ompi_mpi_init.c 'ompi_rte_init failed') and MPI_Init_thread's default handler
    aborting the process; the text names its own class, configuration or environment. tensorrtllm_backend#712
    (Triton 25.01, 2025-02): two Python stubs that import tensorrt_llm print the banner while Triton loads its
    models - read as an incomplete start before."""
    out = _verdict(
        "trtllm",
        "trtllm-2025-triton-llava-multimodal-stub-orte-init-failed-getting-local-rank-no-permission-issue712",
    )
    assert (out["engine"], out["state"], out["phase"]) == ("trtllm", "crashed", "starting")
    found = _error(out)
    assert found["category"] == "config"
    assert "No permission (-17) instead of ORTE_SUCCESS" in str(found["summary"])


def test_cutlass_status_string_as_runtime_error_is_the_kernel_librarys_failure() -> None:
    """CUTLASS words each cutlass::Status (cutlass.h cutlassGetStatusString: kErrorInternal 'Error Internal'), and
    vLLM's CUTLASS kernels raise it alone through CUTLASS_CHECK (csrc/cutlass_extensions/common.hpp: TORCH_CHECK(...,
    cutlassGetStatusString(error))): 'RuntimeError: Error Internal' is a GEMM kernel that failed on the device, cuda.
    vllm#28707 (0.11.0 on B300, 2025-11) - called other before."""
    out = _verdict(
        "vllm", "vllm-0.11-b300-runtimeerror-error-internal-from-op-then-enginecore-traceback-cut-issue28707"
    )
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = _error(out)
    assert (found["category"], found["summary"]) == ("cuda", "RuntimeError: Error Internal")


def test_vllm_no_valid_attention_backend_is_raised_while_the_model_is_built() -> None:
    """vLLM's platform refuses every attention backend (platforms/cuda.py get_attn_backend_cls: 'No valid attention
    backend found for cuda with ...'), reached only through attention/selector.py get_attn_backend, which the model's
    attention layers call as it is built: a worker's one-line ERROR with no frame is still loading. vllm#31936 (0.13,
    RTX PRO 6000, 2025-12: the line in Markdown bold) - placed at starting before."""
    out = _verdict(
        "vllm",
        "vllm-0.13-rtx-pro-6000-dsv32-no-valid-attention-backend-bold-markdown-parent-exited-issue31936",
    )
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "unsupported"
    assert str(found["summary"]).startswith("ValueError: No valid attention backend found for cuda")


def test_kserve_huggingfaceserver_model_loaded_line_is_loading_weights() -> None:
    """KServe's Hugging Face runtime logs 'Successfully loaded huggingface model from path X' once from_pretrained
    returned (huggingfaceserver/encoder_model.py, generative_model.py), before it registers the model and starts
    Uvicorn: an engine the profiles do not know, read as generic, has its weights loaded. kserve#4514 (2025-06: a CPU
    encoder, vLLM imported but not the engine, cut at Uvicorn's 'Started server process') - incomplete at starting
    before."""
    out = _verdict(
        "vllm",
        "other-2025-kserve-huggingfaceserver-encoder-vllm-unspecified-platform-started-server-process-cut-pr4514",
    )
    assert (out["engine"], out["state"], out["phase"]) == ("generic", "loading_weights", "loading_weights")
    assert out["error"] is None
