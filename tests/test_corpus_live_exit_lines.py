"""Lines an engine prints only on its way out, and frames of steps it never survives while starting (issue 30: crash
verdicts under a second): read from each engine's source, each pinned on the real tuning logs that end in them,
followed live (the excerpt written at once), and each kept to the words that say so (a sibling line printed by a
process that goes on still waits the crash grace)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from publiccases import CORPUS

from watchdog.follow.replay import replay_path
from watchdog.follow.testing import PacedRun, follow_at_pace
from watchdog.vocabulary import DEFAULT_CRASH_GRACE

_OMNI_STAGES = (
    "vllm/vllm-omni-2026-ci-sd3-async-omni-engine-stage-initialization-failed-traceback-cut-issue3432"
)
_TGI_WARMUP = (
    "tgi/tgi-3.0.0-2024-qwen2vl-method-warmup-error-after-cuda-graphs-enabled-traceback-cut-issue2823"
)
# each log's last words, and why the process cannot go on after them
EXIT_LINES = {
    "vllm/vllm-0.10.1-gpt-oss-worker-failed-no-kernel-image-output-handler-failed-cut-issue22414": (
        "AsyncLLM output_handler failed: the output task ends, never restarted"
    ),
    "vllm/vllm-ascend-2025-compose-dsv32-exp-parent-process-exited-output-handler-failed-engine-dead-cut-issue4406": (
        "AsyncLLM output_handler failed: the output task ends, never restarted"
    ),
    "vllm/vllm-0.11.1-sleep-mode-during-decode-then-dump-input-error-cut-issue28714": (
        "Dumping input data for V1 LLM engine: the engine core's except branch re-raises"
    ),
    "vllm/vllm-2026-spark-wrapped-dump-scheduler-output-and-stats-while-serving-cut-sparkvllmdocker255": (
        "Dumping scheduler output: the same dump, its caller re-raises"
    ),
    "vllm/vllm-2026-v100-flash-attn-backend-worker-failed-illegal-memory-access-after-ready-issue29": (
        "Dumping scheduler stats: the same dump, its caller re-raises"
    ),
    _OMNI_STAGES: (
        "AsyncOmniEngine's 'Stage initialization failed; shutting down': re-raised out of the constructor"
    ),
    _TGI_WARMUP: (
        "the shard's 'Method Warmup encountered an error.': the router exits on the warm-up's error"
    ),
}

# Real logs cut inside a traceback, above its process's main and before its exception, whose frames still show an
# object vLLM builds once, while starting, with no handler that goes on (a startup step: the crash is certain).
STEP_FRAMES = {
    "vllm/vllm-2026-github-actions-timestamps-enginecore-traceback-cut-ppc64le8270": (
        "EngineCore.__init__ -> Executor.__init__ -> _init_executor"
    ),
    "vllm/vllm-2026-python-logging-container-tag-apiserver-traceback-cut-vllm43410": "AsyncLLM.__init__",
    "vllm/vllm-xpu-2026-llm-scaler-tp4-workers-interleaved-initialize-kv-cache-frames-traceback-cut-issue578": (
        "the workers' initialize_from_config (the KV cache's allocation)"
    ),
}
EXIT_LINES.update(STEP_FRAMES)

_AFTER_READY = "vllm/vllm-backport-2026-served-200s-then-workerproc-busy-loop-traceback-cut-issue18"
# Real logs whose last words end the launch only because it is starting (`fatal = "starting"`): said by a process
# that goes on, to a caller that raises it with no handler while the engine is being built.
WHILE_STARTING = {
    "vllm/vllm-ascend-2025-glm45v-capturing-acl-graphs-0pct-workerproc-hit-exception-cut-vllmascend2516": (
        "'WorkerProc hit an exception.' in the graph capture: the engine core's constructor raises it"
    ),
    "vllm/vllm-ascend-2026-fullandpiecewise-rfc-old-driver-npugraph-nccl-wait-capture-7-of-8-workerproc-cut-vllmascend9691": (
        "'WorkerProc hit an exception.' in the graph capture: the engine core's constructor raises it"
    ),
    "trtllm/trtllm-cuda-graph-warmup-traceback-cut-before-exception-exaone-issue8802": (
        "PyTorchModelEngine.warmup's CUDA graph warm-up: PyExecutor.__init__ runs it with no handler"
    ),
}
EXIT_LINES.update(WHILE_STARTING)


def _follow(data: bytes) -> PacedRun:
    return anyio.run(follow_at_pace, data, None)


def _said(verdict: dict[str, Any] | None) -> tuple[object, ...]:
    assert verdict is not None
    error = verdict["error"] or {}
    return (verdict["state"], verdict["phase"], error.get("category"), error.get("summary"))


@pytest.mark.parametrize("name", sorted(EXIT_LINES), ids=lambda n: n.split("/")[1])
def test_a_line_printed_on_the_way_out_is_a_crash_at_once(name: str) -> None:
    """Followed live, the crash is said under 1 s after its line, not after the crash grace of quiet; and it is
    what replay says of the whole log, word for word."""
    log = CORPUS / f"{name}.log"
    run = _follow(log.read_bytes())
    assert (run.last or {}).get("state") == "crashed", EXIT_LINES[name]
    assert run.verdict_after is not None
    assert run.verdict_after < 1.0, EXIT_LINES[name]
    replayed = replay_path(log)[1].to_json()
    assert _said(run.verdict) == _said(replayed)


def _waits_the_grace(log: Path, old: str, new: str) -> None:
    # the same log with its exit line's words changed to a sibling's: still a crash at its end, after the grace
    text = log.read_text(encoding="utf-8")
    assert old in text
    run = _follow(text.replace(old, new).encode())
    assert (run.last or {}).get("state") == "crashed"
    assert run.verdict_after is not None
    assert run.verdict_after >= DEFAULT_CRASH_GRACE


def test_a_tgi_request_call_error_is_not_the_warm_up_error() -> None:
    """TGI's interceptor words every failing gRPC call alike; only the Warmup call's error ends the router (a Prefill
    call's fails its batch and the server serves on), so the same lines with Prefill wait the crash grace."""
    log = CORPUS / f"{_TGI_WARMUP}.log"
    _waits_the_grace(log, "Method Warmup encountered an error.", "Method Prefill encountered an error.")


def test_the_2025_orchestrators_stage_timeout_warning_is_not_fatal() -> None:
    """vLLM-Omni's 2025 orchestrator said 'Stage initialization failed, shutting down. Suggestions' after a stage
    timeout and returned (no raise); only the 2026 engines' ';' form re-raises."""
    log = CORPUS / f"{_OMNI_STAGES}.log"
    _waits_the_grace(
        log,
        "[AsyncOmniEngine] Stage initialization failed; shutting down 0 initialized client(s)",
        "[Orchestrator] Stage initialization failed, shutting down. Suggestions:",
    )


def test_a_workers_rpc_failure_after_ready_still_waits_the_grace() -> None:
    """vLLM's worker logs 'WorkerProc hit an exception.' and goes on; after ready the engine core may survive what
    failed (a utility call's failure is logged, 'Invocation of add_lora method failed', and answered; vLLM 2026's
    fault tolerance resumes a failed busy loop): the real log that ends in it after two requests answered is a
    crash only after the crash grace, where the same line while starting is one at once."""
    run = _follow((CORPUS / f"{_AFTER_READY}.log").read_bytes())
    assert (run.last or {}).get("state") == "crashed"
    assert run.verdict_after is not None
    assert run.verdict_after >= DEFAULT_CRASH_GRACE
