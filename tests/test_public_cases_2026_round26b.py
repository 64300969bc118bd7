"""What the twenty-sixth round's public logs of the llama.cpp family and of Python servers the profiles do not know
showed (issue 30, helper i30-cases26b), read from the engines', libraries' and kernel's own source and pinned on the
real log that showed it (tests/fixtures/corpus/llamacpp and other)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_kernel_segfault_line_is_a_death_of_its_own() -> None:
    """The kernel reports a process killed by SIGSEGV as 'comm[PID]: segfault at ADDR ip IP sp SP error N in LIB'
    (arch/x86/mm/fault.c show_signal_msg); KoboldCpp dying while serving printed nothing, and the operator's grep of
    kern.log (koboldcpp#1362, 2025) was read as no verdict before."""
    out = _verdict(
        "llamacpp",
        "llamacpp-2025-koboldcpp-syslog-grep-segfault-in-libcuda-during-inference-no-log-koboldcpp1362",
    )
    assert out["state"] == "crashed"
    found = _error(out)
    assert found["category"] == "killed"
    assert "koboldcpp[96830]: segfault at 215003fcc" in str(found["summary"])


def test_lm_studio_load_channel_error_is_decided_by_its_caused_by_line() -> None:
    """LM Studio logs a rejected load channel as 'Error in channel handler:' (lmstudio-js ServerPort.ts), and the
    worker's own error after '- Caused By: ' (lmstudio-js Error.ts fromSerializedError): the llm worker's
    LLMEngineWrapper.load 'Failed to load model'. lmstudio-bug-tracker#1492 (0.4.2, 2026) was read as no verdict."""
    out = _verdict(
        "llamacpp",
        "llamacpp-2026-lmstudio-0.4.2-linux-appimage-load-error-caused-by-failed-to-load-model-engine-wrapper-lmstudio1492",
    )
    assert (out["engine"], out["state"], out["phase"]) == ("llamacpp", "crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "model_load"
    assert "Caused By: Error: Failed to load model" in str(found["summary"])


def test_gpustack_serving_on_is_its_api_server_ready_line() -> None:
    """GPUStack runs its FastAPI app under Uvicorn at log_level 'error', so Uvicorn prints nothing; its own 'Serving
    on HOST:PORT.' (gpustack/server/server.py, before uvicorn.Server.serve) is the ready line. gpustack#2447 (2025)
    was read as still starting."""
    out = _verdict(
        "other",
        "other-2025-gpustack-macos-server-serving-on-worker-registered-watching-instances-cut-gpustack2447",
    )
    assert (out["engine"], out["state"], out["phase"], out["error"]) == ("generic", "ready", "ready", None)


def test_lmdeploy_turbomind_weight_frames_are_loading_weights() -> None:
    """LMDeploy's TurboMind._create_weight allocates the weights on each GPU (lmdeploy/turbomind/turbomind.py), while
    the engine is built: a traceback through it, even cut before its exception (lmdeploy#3154, 2025), fails in
    loading_weights, read as starting before."""
    out = _verdict(
        "other",
        "other-2025-lmdeploy-api-server-turbomind-create-weight-traceback-cut-before-exception-issue3154",
    )
    assert (out["engine"], out["state"], out["phase"]) == ("generic", "crashed", "loading_weights")
    assert "_create_weight (turbomind/turbomind.py:152)" in str(_error(out)["summary"])
