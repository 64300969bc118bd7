"""What the twenty-fourth round's public logs of SGLang and vLLM showed (issue 30, helper i30-cases24a), read from
the engines' source and pinned on the real log that showed it (tests/fixtures/corpus/sglang and vllm)."""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import replay_text as _replay_text
from publiccases import verdict as _verdict

# vllm-omni#352 (2025-12): a stage's batch lines and the orchestrator's per-request error, as posted
_STAGE = "[Stage-0] Max batch size: 1\n\n[Stage-0] Received batch size=1, request_ids=['0_3846ea5f']\n\n"
_STAGE_ERROR = "ERROR:vllm_omni.entrypoints.omni_llm:Stage 0 error on request 0_3846ea5f: {}\n"


def test_sglang_get_model_worker_batch_frame_is_serving() -> None:
    """ScheduleBatch.get_model_worker_batch (srt/managers/schedule_batch.py) is called by Scheduler.run_batch and the
    speculative workers on a batch of requests only: a traceback through it is the serving scheduler's. veRL#1611
    (2025-05, SGLang as veRL's rollout engine under Ray): an illegal memory access raised there, the sigquit notice,
    then Ray's deduplicated capture bars of other workers - read as a crash while starting before."""
    out = _verdict(
        "sglang",
        "sglang-2025-verl-rollout-illegal-memory-access-sigquit-then-ray-dedup-capturing-bar-verl1611",
    )
    assert (out["engine"], out["state"], out["phase"]) == ("sglang", "crashed", "ready")
    found = _error(out)
    assert found["category"] == "cuda"
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in str(found["summary"])


def test_vllm_omni_stage_batches_are_serving_and_a_stage_request_error_is_not_a_crash(tmp_path: Path) -> None:
    """vLLM-Omni's stage worker (vllm_omni/entrypoints/omni_stage.py _stage_worker) prints '[Stage-N] Max batch
    size' and '[Stage-N] Received batch size=..., request_ids=' only for tasks taken after its engine is built;
    OmniLLM logs a stage's per-request failure ('Stage N error on request X: ...') and goes on. vllm-omni#352
    (2025-12): read as a launch still starting before."""
    out = _verdict("vllm", "vllm-omni-2025-stage0-error-on-request-list-index-out-of-range-logged-issue352")
    assert (out["engine"], out["state"], out["phase"], out["error"]) == ("vllm", "ready", "ready", None)
    # a request's out-of-memory in a stage is that request's error, counted, not the pipeline's death
    oom = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 1.2 GiB is free."
    out = _replay_text(tmp_path, _STAGE + _STAGE_ERROR.format(oom))
    assert (out["state"], out["phase"], out["error"]) == ("ready", "ready", None)
    assert out["facts"]["request_errors"] == 1
