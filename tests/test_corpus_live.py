"""Corpus crashes whose log makes the death certain are called by a live follower within a second of the
decisive line, not after the grace that an error with nothing fatal about it waits for progress."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from watchdog.follow.testing import follow_at_pace

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
# Real logs of issue 30 (labelled before the tool ran on them), each ending in what makes its crash certain.
CERTAIN = {
    "sglang-sgl-kernel-listtype-undefined-symbol-one-line-deepresearch83": "an ImportError while starting",
    "trtllm-bindings-libpython-missing-6102": "an ImportError while starting",
    "llamacpp-illegal-memory-access-after-53-minutes-27749": "CUDA's sticky illegal memory access",
    "tgi-router-illegal-memory-access-prefill-after-ready-2593": "the router relaying an illegal memory access",
    "vllm-metal-enginedead-first-chat-112": "EngineDeadError after a request answered",
    "trtllm-triton-whisper-encoder-decoder-paths-empty-one-line-tb835": "Triton: a model instance not created",
    "trtllm-triton-backend-library-not-found-tritonserver7950": "Triton: a model that failed to load",
    "vllm-tritonserver-backend-stat-loggers-typeerror-8578": "Triton: the Python stub not initialized",
    "vllm-engine-core-died-unexpectedly-one-line-dsocr110": "vLLM's engine core died",
    "vllm-ilab-wrapper-failed-to-start-two-lines-ilab3466": "a launcher's 'vLLM failed to start'",
    "llamacpp-lemonade-wrapper-server-failed-to-start-1462": "a manager's 'llama-server failed to start'",
    "ollama-load-failed-eof-after-register-dump-13250": "Ollama's runner exited with a status",
}


@pytest.mark.parametrize("name", sorted(CERTAIN), ids=str)
def test_certain_crash_is_called_within_a_second(name: str) -> None:
    """Followed live (the whole excerpt written at once), the crash is said under 1 s after its line."""
    (log,) = CORPUS.glob(f"*/{name}.log")
    run = anyio.run(follow_at_pace, log.read_bytes(), None)
    assert (run.last or {}).get("state") == "crashed", CERTAIN[name]
    assert run.verdict_after is not None
    assert run.verdict_after < 1.0, CERTAIN[name]
