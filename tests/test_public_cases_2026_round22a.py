"""What the twenty-second round's public logs of SGLang, vLLM and TensorRT-LLM showed (issue 30, helper i30-cases22a),
read from the engines' source and pinned on the real log that showed it (tests/fixtures/corpus/sglang, vllm,
trtllm)."""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import replay_text as _replay_text
from publiccases import verdict as _verdict


def _crash(out: dict[str, object]) -> tuple[object, object, object, str]:
    """A crash verdict's engine, phase, category and summary (asserting it is a crash)."""
    assert out["state"] == "crashed"
    found = _error(out)
    return out["engine"], out["phase"], found["category"], str(found["summary"])


_PREFILL = (
    "[2026-04-14 04:46:04 DP{rank} TP{rank}] Prefill batch, #new-seq: 1, #new-token: 1280, #cached-token: 0, "
    "token usage: 0.01, #running-req: 0, #queue-req: 1, #pending-token: 13898, cuda graph: False, "
    "input throughput (token/s): 556.48\n"
)


def test_sglang_prefill_line_of_2026_names_the_engine(tmp_path: Path) -> None:
    """SGLang 0.5.9+ logs its prefill statistics as 'Prefill batch, #new-seq: ...' (scheduler_metrics_mixin.py
    log_prefill_stats; 'Prefill batch. #new-seq' before, as the decode line's '.' became ','). A crop of those lines
    and a native death was read by the generic profile; it is SGLang's. sglang#22757 (2026-04, DeepSeek V3.2 on H20,
    DP attention): two ranks' prefill lines, then faulthandler's 'Fatal Python error: Segmentation fault'."""
    out = _verdict(
        "sglang",
        "sglang-2026-04-h20-deepseek-v3.2-dp-attention-prefill-then-fatal-python-error-segfault-watchdog-thread-issue22757",
    )
    engine, _, category, summary = _crash(out)
    assert (engine, category) == ("sglang", "killed")
    assert summary.startswith("Fatal Python error: Segmentation fault")
    crop = _PREFILL.format(rank=5) + _PREFILL.format(rank=4) + "Fatal Python error: Segmentation fault\n"
    engine, _, category, _ = _crash(_replay_text(tmp_path, crop))
    assert (engine, category) == ("sglang", "killed")


_LOOP = (
    "Exception in thread Thread-3 (_event_loop_wrapper):\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/pyexecutor/py_executor.py", line 1689, '
    "in _executor_loop_overlap\n"
    "    scheduled_batch, iter_stats = self._prepare_and_schedule_batch()\n"
)


def test_trtllm_disaggregated_generation_init_frame_is_serving(tmp_path: Path) -> None:
    """TensorRT-LLM's PyExecutor hands the fitting generation-only requests of disaggregated serving to
    _prepare_disagg_gen_init and asks the cache transceiver for their KV cache in _recv_disagg_gen_cache
    (_torch/pyexecutor/py_executor.py): only a client's request with disaggregated params makes one, never the
    warm-up or the KV-cache estimation. Dynamo 0.9.0's decode worker (ai-dynamo/dynamo#6734, 2026-02): its executor
    thread died under _prepare_disagg_gen_init - a death while serving, read as one at starting before."""
    out = _verdict(
        "trtllm",
        "trtllm-dynamo-2026-0.9.0-qwen3-32b-fp8-disagg-decode-event-loop-thread-exception-prepare-disagg-gen-init-"
        "traceback-cut-dynamo6734",
    )
    assert _crash(out)[:2] == ("trtllm", "ready")
    recv = (
        '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/pyexecutor/py_executor.py", line 1460, '
        "in _recv_disagg_gen_cache\n"
        "    self.kv_cache_transceiver.request_and_receive_async(req)\n"
    )
    assert _crash(_replay_text(tmp_path, _LOOP + recv))[:2] == ("trtllm", "ready")
    # the loop's own frames are also the warm-up's and the estimation's: no phase of their own
    assert _crash(_replay_text(tmp_path, _LOOP))[1] != "ready"


def test_vllm_add_request_frame_is_serving(tmp_path: Path) -> None:
    """vLLM adds a request to a built engine only when a caller submits one (v1/engine/llm_engine.py
    LLMEngine.add_request, v1/engine/async_llm.py AsyncLLM.add_request -> _add_request, core_client.py
    add_request_async); startup's dummy runs add none. ms-swift#7933 (2026-01): the GRPO rollout engine core died
    ('Engine core proc EngineCore_DP1 died unexpectedly') under swift's vllm_engine._add_request - a death while
    serving, read as one at starting before."""
    out = _verdict(
        "vllm",
        "vllm-2026-01-ms-swift-grpo-rollout-enginecore-dp1-died-unexpectedly-then-swift-infer-traceback-cut-"
        "msswift7933",
    )
    engine, phase, category, summary = _crash(out)
    assert (engine, phase, category) == ("vllm", "ready", "killed")
    assert summary.startswith("Engine core proc EngineCore_DP1 died unexpectedly")
    died = "ERROR 01-29 08:37:48 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.\n"
    frames = (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 303, in add_request\n'
        "    await self._add_request(request, prompt_str, None, 0, queue)\n"
    )
    assert _crash(_replay_text(tmp_path, died + frames))[:3] == ("vllm", "ready", "killed")
    assert _crash(_replay_text(tmp_path, died))[1] != "ready"


def test_vllm_v1_executor_execute_model_frame_is_serving(tmp_path: Path) -> None:
    """vLLM V1's engine core calls model_executor.execute_model(scheduler_output) only from step /
    step_with_batch_queue when its scheduler has requests (v1/engine/core.py; v1/executor/*.py execute_model);
    startup's steps go through collective_rpc by name and the DP dummy batch through execute_dummy_batch. vllm#25032
    (2025-09, Qwen3-Next): the engine core's traceback through multiproc_executor.execute_model -> collective_rpc ->
    get_response, cut - a death while serving, read as one at starting before. V0's worker execute_model, which
    profile_run also calls, is not taken for serving."""
    out = _verdict(
        "vllm",
        "vllm-2025-09-qwen3-next-enginecore-executor-execute-model-collective-rpc-dequeue-traceback-crop-issue25032",
    )
    assert _crash(out)[:2] == ("vllm", "ready")
    # the traceback alone: 'EngineCore encountered a fatal error.' before it says ready by itself (round 22C)
    head = "ERROR 09-17 04:06:37 [core.py:720] Traceback (most recent call last):\n"
    site = "/usr/local/lib/python3.12/dist-packages/vllm"
    v1 = f'  File "{site}/v1/executor/uniproc_executor.py", line 131, in execute_model\n    output.result()\n'
    assert _crash(_replay_text(tmp_path, head + v1))[:2] == ("vllm", "ready")
    v0 = f'  File "{site}/worker/model_runner.py", line 1700, in execute_model\n    output = model_executable(\n'
    assert _crash(_replay_text(tmp_path, head + v0))[1] != "ready"
