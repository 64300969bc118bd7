"""Rules read from TensorRT-LLM's, TensorRT's and TGI's sources for what the eighteenth round's public logs of
TensorRT-LLM and TGI showed (issue 30, helper i30-cases18a), each pinned on the real log that showed it
(tests/fixtures/corpus/trtllm, tests/fixtures/corpus/tgi)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def _crash(engine: str, name: str, phase: str) -> tuple[object, str]:
    """A corpus case's replayed crash in `phase`: its error's category and summary."""
    out = _verdict(engine, name)
    assert (out["state"], out["phase"]) == ("crashed", phase)
    found = _error(out)
    return found["category"], str(found["summary"])


def test_kv_cache_too_small_for_one_sequence_is_oom_while_allocating_it() -> None:
    """cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: KVCacheManager's constructor checks
    TLLM_CHECK_WITH_INFO(maxNumTokens >= mMaxBeamWidth * mMaxBlocksPerSeq * tokensPerBlock, "maxTokensInPagedKvCache
    (%d) must be large enough to process at least 1 sequence to completion ..."): the paged KV cache sized from the
    free memory cannot hold one sequence. Triton's TensorRT-LLM backend quotes it bare in its 'Failed to create
    instance' line (tensorrtllm_backend#366), so the generic TLLM_CHECK rule never saw it: it was `other`."""
    name = "trtllm-triton-backend-2024-max-tokens-paged-kv-cache-too-small-failed-to-create-instance-tensorrtllmbackend366"
    category, summary = _crash("trtllm", name, "allocating_kv_cache")
    assert category == "oom"
    assert "maxTokensInPagedKvCache (29184) must be large enough to process at least 1 sequence" in summary


def test_kv_cache_check_in_its_2023_wording_without_counts_is_oom_too() -> None:
    """The same KVCacheManager check as worded by the 2023 batch manager (shipped as a binary library, 0.5-0.6):
    'maxTokensInPagedKvCache must be large enough to process at least 1 sequence to completion (i.e. must be larger
    than beam_width * tokensPerBlock * maxBlocksPerSeq)', no counts (TensorRT-LLM#494, Triton, 2023-11)."""
    name = "trtllm-triton-2023-llama2-max-tokens-paged-kv-cache-no-count-failed-to-load-ensemble-depends-issue494"
    category, summary = _crash("trtllm", name, "allocating_kv_cache")
    assert category == "oom"
    assert "maxTokensInPagedKvCache must be large enough to process at least 1 sequence" in summary


def test_world_size_check_under_triton_is_a_launch_setting_before_any_load() -> None:
    """cpp/tensorrt_llm/runtime/worldConfig.cpp WorldConfig::mpi: TLLM_CHECK(mpiSize == tp * pp), the runtime's
    first step, before any engine is deserialized. Triton's model_lifecycle.cc quotes it in 'failed to load
    'tensorrt_llm' version 1: ...', whose own state is loading_weights: the check's own step (starting) wins."""
    name = "trtllm-triton-backend-2023-baichuan2-tp2-mpisize-equals-tp-times-pp-assertion-failed-to-load-tensorrtllmbackend129"
    category, summary = _crash("trtllm", name, "starting")
    assert category == "config"
    assert "Assertion failed: mpiSize == tp * pp" in summary


def test_tensorrt_out_of_memory_on_engine_load_is_the_cause_of_the_failed_deserialization() -> None:
    """TensorRT's error recorder: '[deserialize.cpp::load::572] Error Code 2: OutOfMemory (Requested size was N
    bytes.)' when an engine is deserialized into too little GPU memory; TensorRT-LLM's tllmRuntime.cpp then checks
    TLLM_CHECK_WITH_INFO(mEngine != nullptr, "Failed to deserialize cuda engine"), a consequence. The assertion was
    chosen (model_load); TensorRT's line says what failed (llgtrt#7, TensorRT-LLM 0.14)."""
    name = "trtllm-0.14-llgtrt-engine-deserialize-out-of-memory-tlc-init-assertion-llgtrt7"
    category, summary = _crash("trtllm", name, "loading_weights")
    assert category == "oom"
    assert "[deserialize.cpp::load::572] Error Code 2: OutOfMemory" in summary


def test_tgi_0x_waiting_for_shard_with_its_rank_in_the_message_is_loading_weights() -> None:
    """TGI 0.2-0.9.0's launcher (launcher/src/main.rs at those tags): tracing::info!("Starting shard {rank}"), then
    every 10 s tracing::info!("Waiting for shard {rank} to be ready...") until the shard's socket exists; later
    releases dropped the rank into the span ('Waiting for shard to be ready... rank=0'), the only form the profile
    read (TGI#81, flan-t5-xxl, 2023: an endless stream of them stayed at starting)."""
    out = _verdict("tgi", "tgi-0.x-2023-flan-t5-xxl-waiting-for-shard-0-endless-old-format-issue81")
    assert (out["state"], out["phase"]) == ("loading_weights", "loading_weights")
    assert out["error"] is None
