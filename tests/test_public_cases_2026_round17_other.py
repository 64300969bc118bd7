"""The crashes called `other` read again by what failed (issue 30): a rule where the failing call says it, and no
`killed` where the log's own words point at a cause printed elsewhere; each pinned on the real log that shows it
(tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_vllm_engine_dead_error_in_an_excerpt_points_at_a_cause_above_it_not_a_silent_death() -> None:
    """vLLM's EngineDeadError says 'EngineCore encountered an issue. See stack trace (above) for the root cause.'
    (v1/engine/exceptions.py): the engine client raises it after the engine core sent its death notice, which it
    does after logging its own fatal traceback (v1/engine/core.py run_engine_core: 'EngineCore encountered a fatal
    error.'), or after its monitor logged 'Engine core proc ... died unexpectedly'. An excerpt that holds only the
    API server's EngineDeadError (and a request's traceback cut after it) has its cause above the crop: the crash is
    after ready and what failed is not shown (`other`, the hint saying the error is not in this log), not a death
    without a word (`killed`, whose hint sends the operator to the OOM killer)."""
    for name in (
        "vllm-metal-enginedead-first-chat-112",
        "vllm-ascend-multi-apiserver-enginedead-after-serving-7384",
        "vllm-2026-spark-gptoss-engine-dead-then-chat-stream-generator-error-cut-issue31",
    ):
        out = _verdict("vllm", name)
        assert (out["state"], out["phase"]) == ("crashed", "ready"), name
        found = _error(out)
        assert found["category"] == "other", name
        # the EngineDeadError, also where (vllm-ascend#7384) the output handler's 'AsyncLLM output_handler failed.'
        # that logs it is a fatal line of its own (tests/test_phases_2026_round23.py: a header's traceback decides)
        assert str(found["summary"]).startswith("vllm.v1.engine.exceptions.EngineDeadError"), name
        assert "not in this log" in str(found["hint"]), name


def test_vllm_traceback_cut_at_its_kv_cache_admission_check_is_oom() -> None:
    """vLLM's check_enough_kv_cache_memory (v1/core/kv_cache_utils.py, 0.8.5-0.33) raises only 'No available memory
    for the cache blocks' or 'To serve at least one request ... KV cache is needed, which is larger than the
    available KV cache memory' (its docstring: 'Raises: ValueError: If there is not enough memory available for the
    KV cache.'). A traceback the log cuts at its call (vllm#20726, in Docker Desktop's stamped view) has lost that
    line, but only that error can follow: oom, in the KV-cache sizing."""
    out = _verdict(
        "vllm",
        "vllm-0.9-docker-desktop-timestamps-v1-initialize-kv-caches-check-enough-memory-traceback-cut-issue20726",
    )
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")
    found = _error(out)
    assert found["category"] == "oom"
    assert str(found["summary"]).startswith("a traceback cut before its exception, in get_kv_cache_config")
