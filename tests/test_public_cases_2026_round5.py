"""Rules read from the engines' sources for classes the fifth crop of public 2025-2026 logs showed (issue 30,
eighth round), each pinned on the real log of that class (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import CORPUS
from publiccases import verdict as _verdict

from watchdog.core.analyzer import Analyzer
from watchdog.core.lifecycle import State
from watchdog.profiles.loader import load_engine


def test_tgi_json_record_inside_the_routers_batch_span_is_a_serving_server() -> None:
    """TGI with --json-output writes a record's span chain as '"spans":[{"batch_size":1,"name":"batch"},
    {"name":"prefill"},...]', the JSON form of the plain 'batch{batch_size=1}:prefill' spans of the router's
    batching task: a request's failure there (the shard's socket gone) is a death after ready, not at the start."""
    out = _verdict("tgi", "tgi-3.x-hf-endpoint-json-request-failed-socket-gone-exit-code-1-issue3317")
    assert (out["state"], out["phase"]) == ("crashed", "ready")


def test_tgi_json_warmup_span_is_not_serving() -> None:
    """The router's warm-up runs in its own 'warmup' span: a JSON record there is no sign of serving."""
    a = Analyzer(load_engine("tgi"), crash_grace=5.0)
    line = (
        '{"timestamp":"2025-08-29T14:40:17.288163Z","level":"INFO","message":"Warming up model",'
        '"target":"text_generation_router_v3","span":{"name":"warmup"},"spans":[{"name":"warmup"}]}\n'
    )
    a.feed(line.encode(), now=0.0)
    a.finish(now=1.0)
    assert a.state != State.READY


def test_trtllm_cli_entry_points_name_the_engine() -> None:
    """TensorRT-LLM's console scripts (setup.py entry_points: trtllm-bench, trtllm-build, trtllm-eval, besides
    trtllm-serve; and its trtllm-llmapi-launch script) on the command line of a crop name the engine, before any
    [TRT-LLM] line is printed."""
    out = _verdict(
        "trtllm", "trtllm-bench-1.1.0-2026-int4-engine-lora-command-then-pynvml-warning-cut-issue11077"
    )
    assert out["engine"] == "trtllm"
    assert out["state"] == "starting"


def test_a_cut_traceback_re_reported_while_the_crash_report_goes_out_stays_cut() -> None:
    """A log that ends inside a traceback (Dynamo's TensorRT-LLM worker main, cut before its exception line) is
    reported cut when the follower catches up; the crash report going out re-reads the open traceback as far as
    it goes: it did not go on, so it is the same cut report again, not an empty fragment in its place (the live
    follower said '' where replay names the innermost frame)."""
    log = CORPUS / "trtllm" / "trtllm-dynamo-0.5.1-k8s-disagg-worker-main-traceback-cut-issue4299.log"
    a = Analyzer(load_engine(None), crash_grace=5.0)
    a.feed(log.read_bytes(), now=0.0)
    a.caught_up(0.0)
    a.report_open_tracebacks(1.0)
    a.tick(7.0)
    assert a.state == State.CRASHED
    summaries = [c.summary for c in a.lifecycle.current.candidates]
    assert summaries == [
        "a traceback cut before its exception, in wrapper (runtime/__init__.py:43): "
        "await func(runtime, *args, **kwargs)"
    ]
