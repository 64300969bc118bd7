"""Rules read from vLLM's, vLLM-Omni's, CANN's and AscendC's sources for what the twenty-second crop of public 2025-2026
logs of vLLM's and SGLang's platforms and serving stacks showed (issue 30, part C), each pinned on the real log that
showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

import anyio
from publiccases import CORPUS, replay_text
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.testing import follow_at_pace

_OMNI_FATAL = "vllm-omni-2026-realtime-ws-abort-stage-engine-core-proc-fatal-error-cut-issue4271"
_LLMD_FATAL = "vllm-llmd-2025-stern-pod-prefix-decode-enginecore-fatal-error-busy-loop-cut-llmd394"
_CANN_DEVICE_COUNT = (
    "vllm-ascend-2026-v0.23-310p3-cann-rtgetdevicecount-driver-internal-error-lines-only-vllmascend13399"
)
_ASCENDC_ASSERT = (
    "sglang-ascend-2026-glm5-stress-ascendc-gather-v3-assert-out-of-range-scheduler-event-loop-ascendsglang74"
)
_EXECUTE_MODEL = (
    "vllm-ascend-2026-eagle3-full-decode-only-workerproc-execute-model-traceback-cut-vllmascend7290"
)


def _text(engine: str, name: str) -> str:
    return (CORPUS / engine / f"{name}.log").read_text(encoding="utf-8")


def test_an_engine_core_that_encountered_a_fatal_error_had_been_ready(tmp_path: Path) -> None:
    """run_engine_core (vllm/v1/engine/core.py) and vLLM-Omni's run_stage_core (stage_engine_core_proc.py) log
    'EngineCore encountered a fatal error.' / 'StageEngineCoreProc encountered a fatal error.' only once the engine
    core exists, its startup handshake done and the busy loop running; before that they say '... failed to start.'.
    vllm-omni#4271 (a stage dying as a realtime request is aborted) and llm-d#394 (a decode pod, each line behind
    the log tailer's pod and container names) are crashes after ready. Both handlers re-raise after the line (the
    engine core process ends): fatal, so a follower says so at once, without the crash grace."""
    for name in (_OMNI_FATAL, _LLMD_FATAL):
        out = _verdict("vllm", name)
        assert (out["state"], out["phase"]) == ("crashed", "ready"), name
        run = anyio.run(follow_at_pace, (CORPUS / "vllm" / f"{name}.log").read_bytes())
        assert run.verdict is not None, name
        assert run.verdict["state"] == "crashed", name
        assert run.verdict_after is not None, name
        assert run.verdict_after < 1.0, name
    text = _text("vllm", _OMNI_FATAL)
    fatal = "StageEngineCoreProc encountered a fatal error."
    assert fatal in text
    failed = replay_text(tmp_path, text.replace(fatal, "StageEngineCoreProc failed to start."))
    assert failed["state"] == "crashed"
    assert failed["phase"] != "ready"


def test_cann_driver_error_in_a_runtime_call_is_the_accelerator_failing() -> None:
    """CANN's FuncErrorReason words a runtime call the driver refused as '<rt API> execution failed,
    reason=driver error:<what>[FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:65]' (the older
    'execute failed, reason=[...]' for a device fault). vllm-ascend v0.23 on a 310P3 (vllm-ascend#13399, 2026)
    cannot count the NPUs: its EngineCore's error stack holds only CANN's lines, the first one the cause (cuda, as
    PyTorch's 'Unexpected error from cudaGetDeviceCount()' is)."""
    out = _verdict("vllm", _CANN_DEVICE_COUNT)
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = _error(out)
    assert found["category"] == "cuda"
    assert str(found["summary"]).startswith(
        "rtGetDeviceCount execution failed, reason=driver error:internal error"
    )


def test_an_ascendc_kernel_assert_is_an_assertion_and_the_cause(tmp_path: Path) -> None:
    """AscendC kernels assert on the AI core: asc-devkit's __assert_fail prints '[ASSERT] %s:%u:%s Assertion '%s' '
    then trap(); CANN 8.x's kernel ASSERT with a message '[ASSERT] <file>:<line>: Assertion `<expr>' <message>'.
    Ascend's SGLang serving GLM5 (Ascend/sglang#74, 2026-03) dies on gather_v3's index check: assertion, that line
    the cause over the scheduler's 'Scheduler hit an exception'."""
    out = _verdict("sglang", _ASCENDC_ASSERT)
    assert out["state"] == "crashed"
    found = _error(out)
    assert found["category"] == "assertion"
    assert (
        "Assertion `(0 <= val && val < this->gxSize_)' Index 4455804570913351284 out of range[0 203136)!"
        in str(found["summary"])
    )
    text = _text("sglang", _ASCENDC_ASSERT)
    old = text.splitlines()[0]
    devkit = "[ASSERT] /opp/ascendc/gather_v3/gather_v3_base.h:137:GatherV3 Assertion '(0 <= val && val < gxSize_)' "
    out = replay_text(tmp_path, text.replace(old, devkit))
    assert out["state"] == "crashed"
    assert _error(out)["category"] == "assertion"
    assert "gather_v3_base.h:137:GatherV3 Assertion" in str(_error(out)["summary"])


def test_a_worker_failing_under_its_execute_model_was_serving(tmp_path: Path) -> None:
    """The executor calls the workers' execute_model(scheduler_output) (vllm/v1/worker/worker_base.py, V0's
    worker_base too) only from the engine core's step; startup's forwards run under profile_run, _dummy_run and
    capture_model. vLLM-Ascend's eagle3 crash in FULL_DECODE_ONLY (PR 7290, 2026-03), a traceback cut under that
    frame, is a crash after ready; the same traceback under the KV-cache sizing is not."""
    out = _verdict("vllm", _EXECUTE_MODEL)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    text = _text("vllm", _EXECUTE_MODEL)
    frame = 'vllm/v1/worker/worker_base.py", line 365, in execute_model'
    assert frame in text
    profile = replay_text(
        tmp_path,
        text.replace(
            frame, 'vllm/v1/worker/worker_base.py", line 365, in determine_available_memory'
        ).replace(
            "return self.worker.execute_model(scheduler_output)",
            "return self.worker.determine_available_memory()",
        ),
    )
    assert (profile["state"], profile["phase"]) == ("crashed", "allocating_kv_cache")
