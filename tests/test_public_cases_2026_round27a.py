"""What the twenty-seventh round's public logs of SGLang and vLLM (and their wrappers: Dynamo, vLLM-Omni) showed
(issue 30, helper i30-cases27a), read from the engines' and libraries' own words and pinned on the real log that
showed it (tests/fixtures/corpus/sglang and vllm)."""

from __future__ import annotations

from publiccases import error
from publiccases import verdict as _verdict

# vllm-omni#2157 (2026-03): the API server's 'Chat completion failed: {... 'error': 'EngineCore encountered an
# issue. See stack trace (above) for the root cause.'}' and the request handler's traceback
_OMNI_DEAD = "vllm-omni-2026-npu-chat-completion-failed-enginecore-issue-request-traceback-vllmomni2157"
# ai-dynamo/dynamo#349 (2025-03): 'dynamo run out=vllm' panicking in its Rust worker over a failed Python import
_DYNAMO_PANIC = "vllm-2025-dynamo-run-rust-panic-failed-to-import-vllm-ctypes-type-attribute-dynamo349"
# sglang#24589 (2026-06): a log viewer's timestamps, then the Frozen-KV MTP draft model's CUDA graph capture
_FROZEN_KV = "sglang-2026-docker-timestamp-gemma4-mtp-draft-cuda-graph-capture-cut-issue24589"
# ai-dynamo/dynamo#4934 (2025-12): kubectl's leader log, a pydantic ValidationError whose first frame line lost a space
_ONE_SPACE = (
    "vllm-2025-dynamo-k8s-leader-pydantic-parallelconfig-tp-larger-than-gpus-stream-closed-dynamo4934"
)


def test_a_request_error_carrying_enginedeaderror_message_is_the_engine_dying() -> None:
    """'EngineCore encountered an issue. See stack trace (above) for the root cause.' is the one message vLLM's
    EngineDeadError carries (v1/engine/exceptions.py ENGINE_DEAD_MESSAGE): quoted in a request's failure (vLLM-Omni's
    'Chat completion failed: {...}', api_server.py:786) it says the engine core died while serving. vllm-omni#2157
    was read as a request error on a ready server."""
    out = _verdict("vllm", _OMNI_DEAD)
    assert (out["state"], out["phase"]) == ("crashed", "ready")


def test_dynamo_rust_panic_over_a_failed_python_import_is_import() -> None:
    """Dynamo's Rust launcher panics with "Failed to import python 'vllm' module. Are we running in the correct
    venv? {err}" (lib/llm/src/engines/vllm/worker.rs python_imports) whatever the import raised: an
    AttributeError from ctypes inside it (dynamo#349) is still the engine's package failing to import, not other."""
    found = error(_verdict("vllm", _DYNAMO_PANIC))
    assert found["category"] == "import"
    assert "AttributeError: class must define a '_type_' attribute" in str(found["summary"])


def test_a_hyphenated_draft_graph_capture_is_capturing_graphs() -> None:
    """SGLang's Frozen-KV MTP worker announces 'Capture Frozen-KV MTP draft cuda graph begin.'
    (srt/speculative/frozen_kv_mtp_worker.py init_cuda_graphs): its name's hyphen kept the capture rule from
    reading it, and sglang#24589, cut inside the capture, stayed at the memory pool (allocating_kv_cache)."""
    out = _verdict("sglang", _FROZEN_KV)
    assert (out["state"], out["phase"]) == ("capturing_graphs", "capturing_graphs")


def test_a_cut_traceback_whose_first_frame_lost_a_space_still_reads_pydantic_detail() -> None:
    """A frame line that opens a cut traceback with one leading space (' File "...pydantic/_internal/
    _dataclasses.py", ...', a paste that lost one of Python's two) is still a frame: the ValidationError that
    follows is read as a traceback's exception, whose header ('1 validation error for ParallelConfig') takes its
    detail from the next line. dynamo#4934's summary lacked the validator's message."""
    found = error(_verdict("vllm", _ONE_SPACE))
    assert "Tensor parallel size (2) cannot be larger than the number of available GPUs (1)" in str(
        found["summary"]
    )
    assert found["category"] == "config"
