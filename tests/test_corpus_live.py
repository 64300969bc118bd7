"""Corpus crashes whose log makes the death certain are called by a live follower within a second of the
decisive line, not after the grace that an error with nothing fatal about it waits for progress."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from watchdog.core.tracebacks import TRACEBACK_HEADER
from watchdog.follow.replay import replay_path
from watchdog.follow.spec import DEFAULT_SETTLE
from watchdog.follow.testing import follow_at_pace
from watchdog.vocabulary import DEFAULT_CRASH_GRACE

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


def _said(verdict: dict[str, Any] | None) -> tuple[object, ...]:
    # what a verdict says: state, phase and its error's category, summary and ranks
    assert verdict is not None
    error = verdict["error"] or {}
    return (
        verdict["state"],
        verdict["phase"],
        error.get("category"),
        error.get("summary"),
        error.get("ranks"),
    )


# Real logs that end inside a traceback, before its exception line: the frames that came are printed outermost
# first, and say that the exception is ending the process (its outermost frame is a process's main) or escaped a
# startup step no engine survives. The exception line still to come would name the error, not save the process.
CUT_FATAL = {
    "sglang-2026-golden-image-ipfs-lines-deprecation-warnings-server-args-traceback-cut-pr119": "runpy main",
    "tgi-3.x-2025-compose-prefix-error-when-initializing-model-traceback-cut-3133": "the CLI's <module>",
    "trtllm-2025-pytorch-worker-main-worker-cls-traceback-cut-issue6513": "TRT-LLM's worker_main",
    "trtllm-dynamo-0.5.1-k8s-disagg-worker-main-traceback-cut-issue4299": "runpy main",
    "vllm-0.9-post-ready-500-then-engine-core-process-traceback-cut-19018": "multiprocessing's bootstrap",
    "vllm-ascend-2025-compose-cann-eh9999-sdma-copy-error-empty-cache-issue3017": "the vllm CLI's <module>",
    "vllm-v1-apiserver-dies-mid-shard-loading-163-shards-timeout-issue35547": "multiprocessing's bootstrap",
    "tgi-3.1-k8s-deepseek-r1-awq-serve-inner-get-model-deepseek-v3-init-traceback-cut-issue2989": "get_model step",
    "trtllm-2026-modelopt-qwen3-next-load-weights-traceback-cut-issue1933": "the weights' loading step",
    "vllm-0.9-docker-desktop-timestamps-v1-initialize-kv-caches-check-enough-memory-traceback-cut-issue20726": (
        "vLLM's KV-cache step"
    ),
    "vllm-2026-xpu-determine-available-memory-profile-cudagraph-memory-traceback-cut-pr39977": (
        "determine_available_memory step"
    ),
    "sglang-0.3-tp8-exception-in-run-tp-server-capture-traceback-cut-before-exception-issue1479": (
        "SGLang's CudaGraphRunner constructor"
    ),
    "sglang-0.4.9-torch-compile-cuda-graph-op-not-permitted-capturing-7918": "SGLang's CudaGraphRunner constructor",
    "vllm-2026-rocm-compose-prefix-full-decode-capture-0pct-workerproc-traceback-cut-pr31614": (
        "vLLM's compile_or_warm_up_model step"
    ),
    "vllm-v1-dp-ep-autotune-ends-then-warmup-exception-cut-flashinfer-pr2800": "vLLM's compile_or_warm_up_model step",
}


# Real logs whose last words are a line after which the process cannot go on: the engine's own fatal path, or an
# error the CUDA runtime documents as sticky (the process must be terminated and relaunched to use the GPU again).
FATAL_LINES = {
    "sglang-0.5-uvicorn-up-then-warmup-error-two-minutes-later-issue11949": "SGLang's warm-up error: kill_process_tree",
    "sglang-warmup-502-assert-after-prefill-killed-issue16855": "SGLang's warm-up error: kill_process_tree",
    "sglang-dsv32-specv1-alloc-for-extend-device-assert-tail-only-issue19712": "CUDA error: device-side assert",
    "sglang-llama4-fa3-indexkernel-assertion-interleaved-threads-post-ready-issue5170": "a CUDA device-side assert",
    "vllm-v1-worker-failed-then-terminate-c10-error-free-pointer-art206": "std::terminate, then abort()",
    "vllm-trl-dp-nccl-duplicate-gpu-hidden-before-eoferror-trl3310": "Uvicorn's 'Application startup failed'",
    "vllm-v0-journald-systemd-wrapper-only-engine-process-failed-issue12474": "systemd: main process exited 1",
    "trtllm-serve-executor-worker-returned-error-whisper-issue7706": "TRT-LLM's proxy: MPI session aborted",
    "llamacpp-2026-lmstudio-dflash-draft-model-needs-ctx-other-tab-indented-24343": "llama-server's load_model gave up",
    "vllm-v0-ray-nccl-init-device-repeated-across-cluster-issue16707": "a Ray worker's init_device raised",
}


@pytest.mark.parametrize("name", sorted(CUT_FATAL | FATAL_LINES), ids=str)
def test_a_certain_end_is_called_at_once_and_as_replay_calls_it(name: str) -> None:
    """Followed live (the whole excerpt written at once), a log that ends in what makes its death certain is a
    crash under 1 s after its error line, not after the crash grace; and the verdict is replay's, word for word."""
    (log,) = CORPUS.glob(f"*/{name}.log")
    run = anyio.run(follow_at_pace, log.read_bytes(), None)
    assert run.verdict_after is not None
    assert run.verdict_after < 1.0, (CUT_FATAL | FATAL_LINES)[name]
    replayed = replay_path(log)[1].to_json()
    assert _said(run.verdict) == _said(replayed) == _said(run.last)
    assert replayed["state"] == "crashed"


def test_a_log_quiet_inside_a_fatal_traceback_is_a_crash_once_the_quiet_says_the_writer_died() -> None:
    """Followed as it is written, a traceback out of a process's main that stops before its exception line is
    taken as cut after the crash grace of quiet inside it, and that is the crash then (its frames say the process
    is ending), not a second grace later; the verdict is replay's."""
    (log,) = CORPUS.glob(
        "*/sglang-2026-golden-image-ipfs-lines-deprecation-warnings-server-args-traceback-cut-pr119.log"
    )
    data = log.read_bytes()
    lines = data.split(b"\n")
    opened = next(i for i, line in enumerate(lines) if TRACEBACK_HEADER.encode() in line)
    # the lines before the traceback at once (the follower catches up with them), the traceback 1 s later
    times = [0.0 if i < opened else 1.0 for i in range(len(lines))]
    run = anyio.run(follow_at_pace, data, times)
    assert run.verdict_after is not None
    assert run.verdict_after <= DEFAULT_CRASH_GRACE + DEFAULT_SETTLE + 0.1
    assert _said(run.verdict) == _said(replay_path(log)[1].to_json())
