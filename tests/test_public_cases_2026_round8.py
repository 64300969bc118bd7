"""Rules read from the engines' sources for what the eighth crop of public 2025-2026 logs showed (issue 30, eleventh
round), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_llamacpp_health_answered_503_is_not_ready() -> None:
    """llama-server listens before its model loads and answers every request 503 'Loading model' until it has
    (tools/server/README.md, /health); its access log logs that answer too. Lemonade's '[stdout] ' copy of a load
    with 'srv  log_server_r: request: GET /health 127.0.0.1 503' among print_info's lines is still loading."""
    out = _verdict("llamacpp", "llamacpp-2025-lemonade-stdout-prefix-print-info-health-503-cut-issue515")
    assert out["engine"] == "llamacpp"
    assert (out["state"], out["phase"]) == ("loading_weights", "loading_weights")
    assert out["error"] is None


def test_vllm_platform_and_engine_core_lines_name_vllm() -> None:
    """'Automatically detected platform cuda.' (vllm/platforms/__init__.py:244 in 0.9.2) and the engine core's
    'Waiting for init message from front-end.' (v1/engine/core.py), two lines with no process prefix: vLLM."""
    out = _verdict("vllm", "vllm-0.9.2-v1-engine-core-waiting-for-init-message-two-lines-cut-kvcached29")
    assert out["engine"] == "vllm"
    assert (out["state"], out["phase"]) == ("starting", "starting")


def test_dynamo_tracing_frames_are_the_compile_phase() -> None:
    """vLLM 0.8's engine core traceback ('ERROR ... [core.py:340]', no prefix) cut in torch/_dynamo's
    convert_frame.py and symbolic_convert.py: Dynamo converts and traces a frame only to compile it, so the
    engine core died in torch.compile (capturing_graphs); its file names vLLM."""
    out = _verdict("vllm", "vllm-0.8-v1-engine-core-dynamo-symbolic-convert-traceback-cut-issue15329")
    assert out["engine"] == "vllm"
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")


def test_a_frames_source_line_is_not_the_error_it_raises() -> None:
    """vLLM 0.9's wait_for_engine_startup frame quotes its source, 'raise RuntimeError("Engine core initialization
    failed. "', above the exception line that says it: code, not a message, so the exception line is the crash's
    line."""
    out = _verdict("vllm", "vllm-0.9-v1-api-server-engine-core-initialization-failed-tail-issue19415")
    assert out["state"] == "crashed"
    summary = str(_error(out)["summary"])
    assert summary.startswith("RuntimeError: Engine core initialization failed. See root cause above.")
