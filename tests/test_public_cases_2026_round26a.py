"""What the twenty-sixth round's public logs of SGLang and vLLM showed (issue 30, helper i30-cases26a), read from
the engines' and Python's own words and pinned on the real log that showed it (tests/fixtures/corpus/sglang and
vllm)."""

from __future__ import annotations

from publiccases import verdict as _verdict

# sglang PR 4618 (2025-03): a DP scheduler's traceback as the PR quotes it, cut after torch's decorator frame
_DP_SCHEDULER = "sglang-2025-dp-attention-scheduler-exception-event-loop-overlap-cut-pr4618"
# vllm#16818 (2025-04): a V1 worker's torch.compile traceback, its frame lines wrapped after their paths
_WRAPPED_DYNAMO = "vllm-0.8.4-glm4-32b-worker-dynamo-compile-frames-soft-wrapped-cut-issue16818"
# vllm PR 12600 (2025-01): Uvicorn's lines, then a chat request in vLLM's bracketless header format
_CHAT_TEMPLATE = "vllm-v1-2025-01-uvicorn-up-models-200-chat-template-received-request-pr12600"


def test_cut_traceback_through_a_decorator_frame_is_where_the_outer_statement_calls() -> None:
    """A frame's statement is the call into the frame that follows: SGLang's run_scheduler_process calling
    'scheduler.event_loop_overlap()' entered the serving loop, though the next frame shown is torch's
    decorate_context (the loop's `@torch.no_grad()` wrapper, managers/scheduler.py) and the log cuts there. sglang
    PR 4618's crop was read as a crash while starting."""
    out = _verdict("sglang", _DP_SCHEDULER)
    assert (out["state"], out["phase"]) == ("crashed", "ready")


def test_dynamo_frame_wrapped_after_its_path_still_says_torch_compile() -> None:
    """Dynamo's convert_frame.py frames run only while torch.compile compiles: a frame line wrapped after its path
    ('.../torch/_dynamo/convert_frame.py", li' then 'ne 715, in compile_inner', vllm#16818 as published) still
    names the file with the quote that closes it; it was read as a crash while starting."""
    out = _verdict("vllm", _WRAPPED_DYNAMO)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")


def test_chat_template_content_format_line_names_vllm() -> None:
    """'You can set `--chat-template-content-format` to override this.' is vLLM's (entrypoints/chat_utils.py
    _log_chat_template_content_format, renderers/hf.py in 2026 releases): vllm PR 12600's serving excerpt, with
    Uvicorn's lines and the old bracketless header ('chat_utils.py:330]'), was read as an unknown Python server."""
    out = _verdict("vllm", _CHAT_TEMPLATE)
    assert (out["engine"], out["state"], out["phase"]) == ("vllm", "ready", "ready")
