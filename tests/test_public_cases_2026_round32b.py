"""What the thirty-second round's public logs of the llama.cpp family, TensorRT-LLM, TGI and Ollama showed (issue 30,
helper i30-cases32b), read from the engines' own source and pinned on the real log that showed it
(tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict

# huggingface/text-generation-inference#3140 (2025-03, tgi-gaudi 2.0.6, 4 shards): the router's prefill error
_CANCELLED = "tgi-gaudi-2.0.6-2025-sharded-router-prefill-server-error-cancelled-issue3140"
# NVIDIA/TensorRT-LLM#8550 (2025-10, 1.2.0rc0 in Compose): one KV cache manager warning
_STORE_CONTEXT = "trtllm-2025-compose-worker-store-context-blocks-warning-serving-issue8550"
# containers/ramalama#2007 (2025, llama-server in RamaLama's container): the load elided, the chat template's example
_EXAMPLE_FORMAT = "llamacpp-2025-ramalama-serve-two-3090-listening-load-elided-chat-template-cut-ramalama2007"
# lmstudio-ai/lmstudio-bug-tracker#417 (2025-02, LM Studio 0.3.9): the load channel's rejection on the child's exit
_CHILD_EXIT = "llamacpp-2025-lmstudio-0.3.9-load-error-on-child-exit-channel-handler-lmstudio417"


def test_a_tgi_routers_error_in_a_prefill_batch_is_its_requests_not_a_crash() -> None:
    """TGI's router fails a batch whose prefill or decode call errs (send_errors, clear_cache) and its batching task
    goes on: 'Server error: CANCELLED' in a batch span is a request error counted in the facts, the server ready.
    tgi#3140 was a crash after ready."""
    out = _verdict("tgi", _CANCELLED)
    assert (out["state"], out["phase"]) == ("ready", "ready")
    facts = out["facts"]
    assert isinstance(facts, dict)
    assert facts["request_errors"] == 1
    assert "Server error: CANCELLED" in str(facts["last_request_error"])


def test_tensorrt_llms_store_context_blocks_warning_says_the_kv_cache_exists_but_not_ready() -> None:
    """KVCacheManager::storeContextBlocks warns for a context request's missing sequence, the KV-cache estimation
    run's dummy requests included: the KV cache manager exists (allocating_kv_cache at least), nothing says the
    server serves. TensorRT-LLM#8550 was at starting."""
    out = _verdict("trtllm", _STORE_CONTEXT)
    assert (out["state"], out["phase"]) == ("allocating_kv_cache", "allocating_kv_cache")


def test_llama_servers_chat_template_example_is_after_the_load() -> None:
    """llama-server prints the chat template's example_format only once the model, its context and the warm-up
    run are done (main() after 'model loaded' in 2025, load_model after the slots in 2026): a crop ending in it
    is past the load. ramalama#2007 was at loading_weights."""
    out = _verdict("llamacpp", _EXAMPLE_FORMAT)
    assert (out["state"], out["phase"]) == ("capturing_graphs", "capturing_graphs")


def test_lm_studios_load_rejected_on_the_engines_exit_is_a_crash_while_loading() -> None:
    """LM Studio's loadModel channel rejecting with 'Error loading model.' from its child-exit handler: the engine's
    process died during the model load, so the crash is in loading_weights (model_load). lmstudio#417 was at
    starting."""
    out = _verdict("llamacpp", _CHILD_EXIT)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert "Error in channel handler: Error: Error loading model." in str(found["summary"])
    assert found["category"] == "model_load"
