"""What the twenty-fourth round's public logs of the llama.cpp family and Ollama showed (issue 30, part B), read from
the runtimes' source and pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS, replay_text
from publiccases import error as _error
from publiccases import verdict as _verdict

_ROCR = "llamacpp-2025-hip-no-mmap-moe-rocr-memory-critical-error-memory-in-use-no-traceback-issue14999"
_ROCR_LINE = "Memory critical error by agent node-0 (Agent handle: 0x4694bee0) on address 0x47934000. Reason: Memory in use. \n"


def test_rocrs_memory_critical_error_is_the_native_fatal_line(tmp_path: Path) -> None:
    """ROCr's Runtime::FreeMemory (ROCR-Runtime runtime/hsa-runtime/core/runtime/runtime.cpp): when the driver does
    not release a GPU allocation and no system event handler takes the memory-error event, it prints 'Memory critical
    error by agent node-N (Agent handle: ...) on address ... Reason: Memory in use.' and calls std::abort(): no
    traceback, nothing after it. llama.cpp#14999 (HIP, --no-mmap, an MoE model) ends on it while loading the
    weights: a crash of the accelerator runtime (cuda), not an incomplete load, and not oom ('Memory in use' is the
    runtime's reason, not an allocation that ran out)."""
    out = _verdict("llamacpp", _ROCR)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "cuda"
    assert str(found["summary"]).startswith("Memory critical error by agent node-0")
    text = (CORPUS / "llamacpp" / f"{_ROCR}.log").read_text(encoding="utf-8")
    assert text.endswith(_ROCR_LINE)
    # without the runtime's line the same log is a load still under way
    assert replay_text(tmp_path, text.replace(_ROCR_LINE, ""))["state"] == "loading_weights"
