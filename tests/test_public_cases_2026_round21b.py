"""Rules read from the engines' sources for what the twenty-first crop of public 2025-2026 llama.cpp-family, Ollama
and vLLM logs showed (issue 30, part B), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.replay import replay_path

_KOBOLD = (
    "llamacpp-2025-koboldcpp-context-shift-illegal-memory-access-glued-to-processing-prompt-koboldcpp1469"
)
_VLLM_GET_OUTPUT = "vllm-2026-nightly-qwen36-nvfp4-mtp-device-side-assert-get-output-issue44734"


def test_koboldcpp_generation_lines_place_a_cuda_error_after_ready() -> None:
    """KoboldCpp prints '[Context Shifting: Erased N tokens at position M]' (gpttype_adapter.cpp PurgeMissingTokens)
    and '\\rProcessing Prompt [BLAS] (N / M tokens)' (gpttype_generate) only while it generates for a request, once
    its model is loaded: koboldcpp#1469 (1.87.4, 2025) dies of a CUDA error glued to that progress line, a crash of
    a serving server, not of its warm-up."""
    out = _verdict("llamacpp", _KOBOLD)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "cuda"
    assert "CUDA error: an illegal memory access was encountered" in str(found["summary"])


def test_koboldcpp_batch_and_generating_progress_lines_are_serving(tmp_path: Path) -> None:
    """The same progress printf reads '[BATCH]' in 2026 builds (1.108.2, koboldcpp#2005) and the generation's own
    '\\rGenerating (N / M tokens)'; either one alone before the error places it after ready."""
    lines = (CORPUS / "llamacpp" / f"{_KOBOLD}.log").read_text(encoding="utf-8").splitlines(keepends=True)
    body = "".join(lines[2:])  # the CUDA error's own lines, without KoboldCpp's two
    for name, first in (
        ("batch", "Processing Prompt [BATCH] (512 / 1049 tokens)"),
        ("generating", "Generating (17 / 512 tokens)"),
    ):
        log = tmp_path / f"{name}.log"
        log.write_text(f"{first}\n{lines[1].split(')', 1)[1]}{body}", encoding="utf-8")
        out = replay_path(log)[1].to_json()
        assert (out["state"], out["phase"]) == ("crashed", "ready"), name
        assert _error(out)["category"] == "cuda", name


def test_vllm_async_output_get_output_frame_is_a_serving_step() -> None:
    """vLLM's async model-runner output is built only by GPUModelRunner.execute_model for a scheduler's output, and
    its get_output() waits on the step's copy event (gpu_model_runner.py AsyncGPUModelRunnerOutput, 0.11.0 wheel):
    vllm#44734 (2026 nightly, MTP) dies of a device-side assert under it, a crash while serving."""
    out = _verdict("vllm", _VLLM_GET_OUTPUT)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "cuda"
    assert found["summary"] == "torch.AcceleratorError: CUDA error: device-side assert triggered"


def test_vllm_get_output_of_the_gpu_async_utils_module_is_serving_too(tmp_path: Path) -> None:
    """0.34 moved it to vllm/v1/worker/gpu/async_utils.py (AsyncOutput.get_output, as vllm#52816 prints it); a
    get_output of another module (the engine-core client's, a model's) tells nothing."""
    text = (CORPUS / "vllm" / f"{_VLLM_GET_OUTPUT}.log").read_text(encoding="utf-8")
    old = "/vllm/v1/worker/gpu_model_runner.py"
    assert old in text
    for name, path, phase in (
        ("async-utils", "/vllm/v1/worker/gpu/async_utils.py", "ready"),
        ("other-module", "/vllm/model_executor/models/qwen3_next.py", "starting"),
    ):
        log = tmp_path / f"{name}.log"
        log.write_text(text.replace(old, path), encoding="utf-8")
        out = replay_path(log)[1].to_json()
        assert (out["state"], out["phase"]) == ("crashed", phase), name
