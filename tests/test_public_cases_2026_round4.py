"""Rules read from the engines' sources for classes the fourth crop of public 2025-2026 logs showed (issue 30),
each pinned on the real log of that class (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.core.analyzer import Analyzer
from watchdog.core.lifecycle import State
from watchdog.follow.replay import replay_path
from watchdog.profiles.loader import load_engine


def test_go_runtime_fatal_error_is_the_runners_death_while_loading() -> None:
    """Ollama's runner killed by the Go runtime itself ('unexpected fault address', 'fatal error: fault',
    '[signal SIGSEGV ...]', runtime.throw) while it loads: a death told by its dying words, not an unfinished
    load."""
    out = _verdict(
        "ollama", "ollama-0.11.3-unexpected-fault-address-fatal-error-fault-while-loading-issue11713"
    )
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    error = _error(out)
    assert error["category"] == "killed"
    assert error["summary"] == "fatal error: fault"


def test_ggml_abort_backtrace_frames_after_a_request_are_a_death_after_ready() -> None:
    """llama-server serving a request, then ggml_abort's glibc backtrace ('libggml-base.so(ggml_abort+0x152)[..]')
    with no message before it: the server died (exit 139), it is not still ready."""
    out = _verdict(
        "llamacpp",
        "llamacpp-2025-docker-gpt-oss-slot-processing-then-ggml-abort-backtrace-no-message-issue17060",
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    assert _error(out)["category"] == "killed"


def test_llamacpp_unused_tensor_warning_is_the_weights_load() -> None:
    """'model has unused tensor ... -- ignoring' is printed by llama_model::load_tensors: an assert right after it
    is a crash while loading the weights, not at the start."""
    out = _verdict(
        "llamacpp", "llamacpp-2026-router-pid-prefix-sm-tensor-ggml-assert-tensor-axis-gdb-lwp-issue24309"
    )
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    assert "GGML_ASSERT(tensor_axis_0 != nullptr) failed" in str(_error(out)["summary"])


def test_vllm_v1_capture_bar_alone_names_vllm_and_the_capture() -> None:
    """An excerpt of vLLM V1's capture bar alone ('Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)'):
    the engine is vLLM and the launch is capturing graphs."""
    out = _verdict("vllm", "vllm-v1-glm4.5v-tp-piecewise-capture-progress-cut-issue208")
    assert out["engine"] == "vllm"
    assert out["state"] == "capturing_graphs"


_TRT_DIR = CORPUS / "trtllm"
_TRT_READY_THEN_FORWARD_ERROR = (
    "trtllm-0.21-serve-ready-then-second-request-py-executor-traceback-not-fatal-issue5038"
)


def test_trtllm_forward_step_traceback_after_ready_is_a_requests_error() -> None:
    """trtllm-serve up (Uvicorn's lines, a request answered 200), then the traceback PyExecutor._forward_step
    prints in its except branch before it fails that batch's requests and goes on: the server is still ready,
    the error counted as a request's."""
    out = _verdict("trtllm", _TRT_READY_THEN_FORWARD_ERROR)
    assert (out["state"], out["phase"]) == ("ready", "ready")


def test_trtllm_forward_step_traceback_while_sizing_the_kv_cache_is_not_ready() -> None:
    """The same handler runs the KV-cache estimation's dry run before the server is up: its traceback there is
    an error of that phase, never a sign that the server was serving (no jump to ready)."""
    log = (_TRT_DIR / f"{_TRT_READY_THEN_FORWARD_ERROR}.log").read_text(encoding="utf-8").splitlines()
    sizing = "[TRT-LLM] [I] [batchmgr][RANK 0] Number of tokens per block: 32."  # trtllm#15022's KV sizing
    traceback_lines = log[log.index("Traceback (most recent call last):") :]
    a = Analyzer(load_engine("trtllm"), crash_grace=5.0)
    a.feed(("\n".join([sizing, *traceback_lines]) + "\n").encode(), now=0.0)
    a.finish(now=1.0)
    assert a.state == State.CRASHED
    assert a.lifecycle.current.crash_phase == State.ALLOCATING_KV_CACHE


def test_sglang_jit_tensor_matcher_refusal_is_unsupported() -> None:
    """SGLang's JIT kernel refusing the tensors it is handed (TensorMatcher::verify: 'Tensor match failed for
    Tensor<8>... - Root cause: Size mismatch ...'): a kernel refusing a shape is unsupported, not `other`."""
    out = _verdict(
        "sglang", "sglang-2026-nsa-piecewise-cuda-graph-tensor-match-failed-scheduler-event-loop-pr23351"
    )
    assert out["state"] == "crashed"
    error = _error(out)
    assert error["category"] == "unsupported"
    assert "Tensor match failed for Tensor<8>" in str(error["summary"])


def test_torch_npu_failed_to_apply_for_memory_at_graph_capture_is_oom() -> None:
    """vLLM-Ascend's EngineCore failure message, torch_npu's '[Error]: Failed to apply for memory.' and CANN's
    'rtStreamBeginCapture execution failed': the NPU ran out of memory while capturing graphs."""
    out = _verdict("vllm", "vllm-ascend-2026-graph-capture-npu-failed-to-apply-for-memory-ee9999-issue12113")
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    error = _error(out)
    assert error["category"] == "oom"
    assert str(error["summary"]).startswith("[Error]: Failed to apply for memory")


def test_a_log_ending_at_a_warning_records_traceback_header_is_no_crash(tmp_path: Path) -> None:
    """vLLM-Omni's worker logs a handled traceback at WARNING, every line a record of its own: a log that ends (or
    goes quiet) right after that record's "Traceback" line, before any body line, holds a survived traceback,
    as its body would show (the header's own level says it), not a cut crash."""
    log = (
        CORPUS
        / "vllm"
        / "vllm-omni-2026-npu-warning-traceback-cuda-graph-capture-fallback-voxtral-issue5150.log"
    )
    lines = log.read_bytes().splitlines(keepends=True)
    header = next(i for i, line in enumerate(lines) if b"Traceback (most recent call last)" in line)
    cut = tmp_path / "cut.log"
    cut.write_bytes(b"".join(lines[: header + 1]))
    out = replay_path(cut)[1].to_json()
    assert out["state"] not in ("crashed", "ready")
