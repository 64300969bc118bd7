"""What round 32A's public logs of vLLM and SGLang on their platforms showed (issue 30, helper i30-cases32a), read
from the engines' and Ray's own source and pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict

# intel/llm-scaler#248 (2026-01, vLLM 0.10.3 for XPU): the engine core's fatal traceback cut below step_with_batch_queue
_BATCH_QUEUE = "vllm-xpu-2026-llm-scaler-b60-enginecore-fatal-busy-loop-step-future-result-cut-llmscaler248"
# ray-project/ray#56905 (2025-09, ray.data.llm's vLLM 0.10.2 stage): every line behind the map worker actor's prefix
_RAY_DATA = "vllm-2025-ray-data-runai-s3-workerproc-failed-to-start-cut-ray56905"


def test_the_batch_queues_future_result_lambda_is_the_engine_cores_serving_step() -> None:
    """step_with_batch_queue waits on a scheduled batch through 'lambda _: future.result(), scheduler_output' (vLLM
    0.9-0.11 v1/engine/core.py), called only from the busy loop: a traceback that starts at that lambda and goes on
    into concurrent.futures crashed while serving. llm-scaler#248 was a crash while starting."""
    out = _verdict("vllm", _BATCH_QUEUE)
    assert (out["state"], out["phase"]) == ("crashed", "ready")


def test_ray_datas_map_worker_prefix_is_peeled_off_vllms_own_lines() -> None:
    """Ray names an actor's lines by its class's __repr__, and Ray Data's actor-pool map worker's is
    'MapWorker({op_name})', the operator's name in parentheses of its own: '(MapWorker(MapBatches(vLLMEngineStageUDF))
    pid=162837) '. Peeled as Ray's prefix, what follows is vLLM's worker line, whose message is the decisive line, not
    the whole relayed line."""
    out = _verdict("vllm", _RAY_DATA)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["summary"] == "WorkerProc failed to start."
    assert found["ranks"] == ["Worker pid=186718"]
