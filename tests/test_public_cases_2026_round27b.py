"""What the twenty-seventh round's public logs of Ollama and of Python servers the profiles do not know showed (issue
30, helper i30-cases27b), read from the engines' own source and pinned on the real log that showed it
(tests/fixtures/corpus/ollama and other)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_runner_no_longer_running_with_only_its_exit_code_is_killed() -> None:
    """Ollama's llm/server.go returns 'llama runner process no longer running: %d %s' with the runner's exit code and
    its last error line, "" when it printed none (-1: a signal ended it). IPEX-LLM's Ollama under docker compose
    (ipex-llm#12963, 2025) logged it with no error after the code: a death told only by how the process ended, read
    as `other` before."""
    out = _verdict(
        "ollama",
        "ollama-2025-ipex-compose-docker-timestamps-sycl-weights-runner-no-longer-running-ipexllm12963",
    )
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "killed"
    assert "llama runner process no longer running: -1" in str(found["summary"])


def test_turbomind_cuda_out_of_memory_line_is_a_fatal_oom() -> None:
    """TurboMind's check() logs '[TM][ERROR] CUDA runtime error: <cudaGetErrorString> <file>:<line>' and aborts
    (lmdeploy src/turbomind/utils/cuda_utils.h); its allocator's out of memory ends the engine. 'lmdeploy chat' on a
    Jetson Orin (lmdeploy#3971, 2025) was read as no verdict before."""
    out = _verdict(
        "other", "other-2025-lmdeploy-chat-jetson-turbomind-awq-tm-error-cuda-oom-aborted-issue3971"
    )
    assert out["state"] == "crashed"
    found = _error(out)
    assert found["category"] == "oom"
    assert "[TM][ERROR] CUDA runtime error: out of memory" in str(found["summary"])
