"""vLLM and SGLang launches of shapes the corpus had not seen (issue 30, second round), read line by line."""

from __future__ import annotations

from watchdog.core.analyzer import Analyzer
from watchdog.core.lifecycle import State
from watchdog.profiles.loader import catalogue, load_engine


def _read(engine: str, text: str) -> Analyzer:
    a = Analyzer(load_engine(engine))
    a.feed(text.encode(), now=0.0)
    a.finish(now=0.0)
    return a


# sgl-router's startup panic as published in sgl-project/sglang#7619 (Rust >= 1.73: the message follows the location)
_ROUTER_PANIC = """\
2025-06-25 15:01:45  INFO sglang_router_rs::server: src/server.rs:334: 🚧 Service discovery disabled

thread '<unnamed>' panicked at /home/router/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tokio-1.45.1/src/runtime/blocking/shutdown.rs:51:21:
Cannot drop a runtime in a context where blocking is not allowed. This happens when a runtime is dropped from within an asynchronous context.
"""


def test_a_rust_panics_message_on_the_line_after_its_location_is_the_error() -> None:
    """A Rust panic prints its location, then its message on the next line: that message is the crash's decisive
    line (the router has no traceback), and with nothing known of it the category is other."""
    a = _read("sglang", _ROUTER_PANIC)
    assert a.state == State.CRASHED
    error = a.lifecycle.current.error
    assert error is not None
    assert error.summary.startswith("Cannot drop a runtime in a context where blocking is not allowed.")
    assert error.category == "other"


# sgl-project/sglang#21352 as published: every frame's 'File "/path/' cut by the reporter
_CUT_FRAMES = """\
sglang/multimodal_gen/runtime/server_args.py", line 1084, in prepare_server_args
   raw_args = parser.parse_args(argv)
sglang/multimodal_gen/utils.py", line 169, in parse_args
   args = self._pull_args_from_from_config(args)
sglang/multimodal_gen/utils.py", line 298, in _pull_args_from_config
   command =  args_before_config[0]
IndexError: list index out of range
"""


def test_frames_whose_head_was_cut_are_frames_and_a_config_file_error_is_config() -> None:
    """Frames pasted without their 'File "/path/' head still make a traceback, and an IndexError raised where the
    argument parser reads a --config file (_pull_args_from_config) is the launch's configuration."""
    a = _read("sglang", _CUT_FRAMES)
    assert a.state == State.CRASHED
    error = a.lifecycle.current.error
    assert error is not None
    assert error.summary == "IndexError: list index out of range"
    assert error.category == "config"
    assert any("_pull_args_from_config" in line for line in error.traceback)


def test_a_max_context_length_error_on_one_line_is_a_requests_error() -> None:
    """vLLM's one-line 'This model's maximum context length is N tokens. However, you requested M tokens' (a
    request longer than --max-model-len, answered 400) is a request's error, not a crash: the server serves."""
    a = _read(
        "vllm",
        "ERROR 05-08 21:27:27 [serving_chat.py:198] ValueError: This model's maximum context length is 8192 tokens."
        " However, you requested 8203 tokens (7691 in the messages, 512 in the completion). Please reduce the "
        "length of the messages or completion.\n",
    )
    assert a.state == State.READY
    assert a.lifecycle.current.facts.get("request_errors") == 1


def test_sglang_health_answered_200_is_ready() -> None:
    """SGLang answers /health 503 while starting and 200 once its warm-up is done: Uvicorn's access line of a 200
    is ready, and a request's KV-transfer failure before it (PD disaggregation) is no crash."""
    a = _read(
        "sglang",
        "[2025-09-17 16:23:13 TP1] Decode transfer failed for request rank=1 decode_req.req.rid='3ce8' with "
        "exception KVTransferError(bootstrap_room=1655955501905217457): Failed due to an unknown reason from another "
        "rank\n"
        '[2025-09-17 16:23:16] INFO:     10.10.11.1:41712 - "GET /health HTTP/1.1" 200 OK\n',
    )
    assert a.state == State.READY


def test_a_kv_cache_line_after_the_profile_runs_compile_is_the_kv_cache_step() -> None:
    """vLLM V1 compiles inside the profiling run that sizes the KV cache: after torch.compile's lines (the phase
    reached: capturing_graphs), a KV-cache line (arcb70 issue 4, an XPU launch with kv_cache_memory_bytes) says the
    step under way is the KV cache's, so the crash that follows is in allocating_kv_cache; once graphs are being
    captured, a crash is in capturing_graphs whatever KV-cache line came."""
    compile_lines = (
        "(EngineCore pid=316) INFO 08-21 18:37:40 [monitor.py:53] torch.compile took 0.06 s in total\n"
        "(EngineCore pid=316) INFO 08-21 18:37:40 [monitor.py:81] Initial profiling/warmup run took 0.00 s\n"
    )
    kv_line = (
        "(EngineCore pid=316) INFO 08-21 18:37:44 [gpu_worker.py:492] Initial free memory 31.16 GiB, reserved 4.25 "
        "GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling.\n"
    )
    failed = b"(EngineCore pid=316) ERROR 08-21 18:37:44 [core.py:1344] EngineCore failed to start.\n"
    a = Analyzer(load_engine("vllm"))
    a.feed(compile_lines.encode(), now=0.0)
    a.feed(kv_line.encode(), now=1.0)
    assert a.state == State.CAPTURING_GRAPHS  # the phase reached: the timeline does not go back
    a.feed(failed, now=2.0)
    a.finish(now=2.0)
    assert a.lifecycle.current.crash_phase == State.ALLOCATING_KV_CACHE

    b = Analyzer(load_engine("vllm"))
    b.feed(compile_lines.encode(), now=0.0)
    b.feed(
        b"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  10%|#         | 7/67 [00:01<00:09]\n",
        now=1,
    )
    b.feed(kv_line.encode(), now=2.0)
    b.feed(failed, now=3.0)
    b.finish(now=3.0)
    assert b.lifecycle.current.crash_phase == State.CAPTURING_GRAPHS


def test_a_scheduler_death_with_an_exit_status_other_than_minus_9_is_no_sigkill() -> None:
    """SGLang's 'Rank 0 scheduler died during initialization (exit code: 255)' goes on with a hint about -9 and
    the OOM killer: a death told by its exit status alone is `killed` (its cause is not in the log, issue 30),
    but the words SIGKILL and OOM in that conditional do not give it the SIGKILL hint (sglang#23602)."""
    a = _read(
        "sglang",
        "RuntimeError: Rank 0 scheduler died during initialization (exit code: 255). If exit code is -9 (SIGKILL), "
        "a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.\n",
    )
    assert a.state == State.CRASHED
    error = a.lifecycle.current.error
    assert error is not None
    assert error.category == "killed"
    assert "SIGKILL" not in error.hint
    assert "no error of its own" in error.hint


def test_sglang_routers_lines_name_the_engine_and_inductor_autotune_is_capture() -> None:
    """A log of sglang_router.launch_server's Rust router polling workers that are in torch.compile's Inductor
    autotuning (sglang#4208) is SGLang's, in capturing_graphs; pending health checks are no failure."""
    a = Analyzer(catalogue())
    a.feed(
        b"SingleProcess AUTOTUNE benchmarking takes 1.3427 seconds and 8.8429 seconds precompiling\n"
        b"[Router (Rust)] 2025-03-08 02:33:09 - INFO - Worker http://0.0.0.0:31000 health check is pending with "
        b"error: error sending request for url (http://0.0.0.0:31000/health)\n",
        now=0.0,
    )
    a.finish(now=0.0)
    assert a.lifecycle.engine == "sglang"
    assert a.state == State.CAPTURING_GRAPHS


def test_requests_answered_after_a_stop_show_the_server_had_been_ready() -> None:
    """An excerpt that begins at Uvicorn's 'Shutting down' and goes on with requests answered 200 while the server
    drains (production-stack's router, vllm-project/production-stack#448) was a ready server stopped cleanly."""
    a = _read(
        "vllm",
        "INFO:     Shutting down\n"
        'INFO:     127.0.0.1:42496 - "POST /v1/chat/completions HTTP/1.0" 200 OK\n'
        "INFO:     Waiting for connections to close. (CTRL+C to force quit)\n"
        'INFO:     127.0.0.1:42526 - "POST /v1/chat/completions HTTP/1.0" 200 OK\n'
        "INFO:     Waiting for application shutdown.\n",
    )
    assert a.state == State.STOPPED
    assert a.lifecycle.current.phase == State.READY


def test_a_requests_traceback_cut_by_the_end_of_the_log_is_no_cause_of_the_engines_death() -> None:
    """After vLLM's EngineDeadError, a request handler's traceback that the log cuts short (vllm#27194) is that
    request failing because the engine died: the summary stays the engine's death, as it was said live."""
    a = _read(
        "vllm",
        "(APIServer pid=1) ERROR 10-20 03:20:50 [async_llm.py:485] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
        "(APIServer pid=1) ERROR 10-20 03:20:50 [serving_chat.py:1136] Error in chat completion stream generator.\n"
        "(APIServer pid=1) ERROR 10-20 03:20:50 [serving_chat.py:1136] Traceback (most recent call last):\n"
        '(APIServer pid=1) ERROR 10-20 03:20:50 [serving_chat.py:1136]   File "/v/vllm/entrypoints/openai/'
        'serving_chat.py", line 562, in chat_completion_stream_generator\n',
    )
    assert a.state == State.CRASHED
    error = a.lifecycle.current.error
    assert error is not None
    assert error.summary.startswith(
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
    )


def test_vllms_cuda_graph_memory_estimate_is_kv_cache_sizing_not_capture() -> None:
    """vLLM 0.21+ measures the CUDA graphs' memory to size the KV cache ('Profiling CUDA graph memory', 'Estimated
    CUDA graph memory', 'CUDA graph memory profiling is disabled'): a launch that stops there is in
    allocating_kv_cache, not capturing_graphs (wtdcode/vllm-backport#34, vllm#53013, 2026)."""
    a = Analyzer(catalogue())
    a.feed(
        b"(Worker_PP1_TP0 pid=4362) INFO 08-31 15:25:47 [gpu_model_runner.py:6790] Profiling CUDA graph memory: "
        b"PIECEWISE=2 (largest=8), FULL=2 (largest=8)\n"
        b"(Worker_PP1_TP0 pid=4362) INFO 08-31 15:25:48 [gpu_model_runner.py:6798] Estimated CUDA graph memory: "
        b"0.58 GiB total\n",
        now=0.0,
    )
    a.finish(now=1.0)
    assert (a.state, a.lifecycle.current.phase) == (State.ALLOCATING_KV_CACHE, State.ALLOCATING_KV_CACHE)
