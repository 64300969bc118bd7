"""Phases read from the lines each engine release prints as it opens a step, and the decisive line of a fatal header
over the traceback it logs (issue 30, helper i30-phase): each rule from the engine's source, pinned on the real log
that shows it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS
from publiccases import error as _error
from publiccases import replay_text as _replay_text
from publiccases import verdict as _verdict

from watchdog.core.rootcause import Candidate, rank
from watchdog.profiles.loader import load_profile
from watchdog.vocabulary import Category

# vLLM 0.32.0 on CPU, a worker SIGKILLed while the server serves (benchmarks/real_engines, a real capture): the engine
# core logs 'EngineCore encountered a fatal error.' over its traceback (RuntimeError: Executor failed.), then the API
# server's output handler logs 'AsyncLLM output_handler failed.' over its own (EngineDeadError)
_WORKER_KILLED = CORPUS / "vllm" / "captured-vllm-worker-killed-cpu.log"


def _lines(path: Path, first: str, last: str | None = None) -> str:
    """The lines of `path` from the first one holding `first` through the first one after it holding `last` (to the
    end without `last`): an excerpt of a real log as a thread quotes it."""
    lines = path.read_bytes().decode().split("\n")
    start = next(i for i, line in enumerate(lines) if first in line)
    end = len(lines) if last is None else next(i for i in range(start, len(lines)) if last in lines[i]) + 1
    return "\n".join(lines[start:end]) + "\n"


def _crash_line(out: dict[str, object]) -> object:
    """The line the crash verdict came at (its timeline's `crashed` entry)."""
    timeline = out["timeline"]
    assert isinstance(timeline, list)
    return next(t["line"] for t in timeline if t["state"] == "crashed")


# -- the decisive line of a fatal header over the traceback it logs -----------------------------------------------


def test_vllm_output_handler_header_is_the_fatal_line_and_the_engine_dead_error_it_logs_the_decisive_one() -> (
    None
):
    """vLLM's AsyncLLM._run_output_handler (v1/engine/async_llm.py, 0.8-0.34.0: 'except Exception as e:
    logger.exception("AsyncLLM output_handler failed.")') prints the header, then the traceback of what it caught. The
    header is fatal since i30-live (the output task ends for good): the verdict comes at it, live as in replay. But it
    says nothing of what failed: the exception line of the traceback it logs is the decisive line, even the
    EngineDeadError ('See stack trace (above)') that only points further up. vllm-ascend#7384 (two API servers, the
    second one's traceback lost), gpustack#2738, and the real capture's excerpt from the header on."""
    for name, header in (
        ("vllm-ascend-multi-apiserver-enginedead-after-serving-7384", 1),
        ("vllm-0.10-ray-cross-worker-executor-shutdown-enginedead-request-failed-gpustack2738", 2),
    ):
        out = _verdict("vllm", name)
        assert (out["state"], out["phase"]) == ("crashed", "ready"), name
        found = _error(out)
        assert str(found["summary"]).startswith("vllm.v1.engine.exceptions.EngineDeadError"), name
        assert found["line"] != header, name
        assert _crash_line(out) == header, name
        assert "not in this log" in str(found["hint"]), name


def test_vllm_output_handler_header_alone_or_over_a_cut_traceback_is_still_the_decisive_line(
    tmp_path: Path,
) -> None:
    """Where the log has the header but not the exception of the traceback it logs (the crop ends inside it, or
    before it), the header is all that says what happened: it stays the decisive line."""
    header = _lines(_WORKER_KILLED, "AsyncLLM output_handler failed.", "AsyncLLM output_handler failed.")
    cut = _lines(_WORKER_KILLED, "AsyncLLM output_handler failed.", "in get_output_async")
    for text in (header, cut):
        out = _replay_text(tmp_path, text)
        assert (out["state"], out["phase"]) == ("crashed", "ready")
        assert str(_error(out)["summary"]) == "AsyncLLM output_handler failed."


def test_vllm_engine_core_fatal_error_header_gives_the_decisive_line_to_its_traceback(tmp_path: Path) -> None:
    """vLLM's run_engine_core (v1/engine/core.py, 0.8.5-0.34.0: 'logger.exception("EngineCore encountered a fatal
    error.")', then _send_engine_dead() and raise) logs its header over the busy loop's traceback. In the real capture
    (vLLM 0.32.0) that traceback ends in 'RuntimeError: Executor failed.' (core.py _handle_client_request, raised
    once the executor's worker monitor saw a worker die): the exception says what happened, the header only that
    something did. An excerpt from the header on is timed by the header and decided by the exception."""
    out = _replay_text(tmp_path, _lines(_WORKER_KILLED, "EngineCore encountered a fatal error."))
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert str(found["summary"]) == "RuntimeError: Executor failed."
    assert _crash_line(out) == 1


_SGLANG_GLOO_PEER_CLOSED = """\
[2025-02-18 23:20:01 TP4] Decode batch. #running-req: 3, #token: 4211, token usage: 0.01, gen throughput (token/s): 41.20, #queue-req: 0
[2025-02-18 23:24:14 TP4] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 1825, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "/usr/local/lib/python3.11/site-packages/torch/utils/_contextlib.py", line 116, in decorate_context
    return func(*args, **kwargs)
  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 493, in event_loop_overlap
    recv_reqs = self.recv_requests()
  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 641, in recv_requests
    recv_reqs = broadcast_pyobj(recv_reqs, self.tp_rank, self.tp_cpu_group)
  File "/usr/local/lib/python3.11/site-packages/sglang/srt/utils.py", line 693, in broadcast_pyobj
    dist.broadcast(tensor_size, src=src, group=dist_group)
  File "/usr/local/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2425, in broadcast
    work.wait()
RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:11145

"""


def test_sglang_scheduler_exception_header_gives_the_decisive_line_to_its_traceback(tmp_path: Path) -> None:
    """SGLang's run_scheduler_process (managers/scheduler.py, 0.4.0-0.5.23: 'logger.error(f"Scheduler hit an
    exception: {traceback}")', get_exception_traceback() on the same line) writes the header and the traceback it
    logs as one record. A TP rank of a multi-node server whose peer went away (the shape of sglang#3685, 2025-02:
    broadcast_pyobj of the requests over gloo, 'Connection closed by peer') logs the news of that death: the decisive
    line is still that exception, not the header (which stays the fatal line: the scheduler then SIGQUITs the
    launcher)."""
    out = _replay_text(tmp_path, _SGLANG_GLOO_PEER_CLOSED)
    assert out["state"] == "crashed"
    assert _crash_line(out) == 2
    assert "Connection closed by peer" in str(_error(out)["summary"])


def test_a_header_over_its_traceback_ranks_behind_every_other_error_but_noise() -> None:
    """The ranking feature alone: a header whose traceback is in the log is behind even the news of a death (a
    consequence), and ahead only of noise."""
    profile = load_profile("vllm")
    header = Candidate("EngineCore encountered a fatal error.", 1, kind="rule", role="wrapper", fatal=True)
    news = Candidate("RuntimeError: cancelled", 9, exception="RuntimeError")
    assert rank(header, Category.OTHER, 0, profile, reporter=True) > rank(news, Category.OTHER, 1, profile)
    assert rank(header, Category.OTHER, 0, profile) < rank(news, Category.OTHER, 1, profile)
    noise = Candidate("TypeError: x", 10, noise=True)
    assert rank(header, Category.OTHER, 0, profile, reporter=True) < rank(noise, Category.OTHER, 1, profile)


# -- phases: the line or frame that says which step a launch was in ------------------------------------------------


def test_an_excerpt_of_a_client_api_request_answered_is_a_serving_server(tmp_path: Path) -> None:
    """An excerpt of Uvicorn's access lines only: a client's POST on an OpenAI-compatible route answered below 500
    (401 for a wrong key, 400 for a bad body) comes only from a server that serves: vLLM starts Uvicorn after its
    engine (entrypoints/openai/api_server.py), SGLang's warm-up is its own POST /generate after GET /get_model_info
    (srt/entrypoints/http_server.py _wait_and_warmup), never a /v1 route. sglang#25127 (0.5.11, /v1/responses 401
    and 400) and production-stack#43 (vLLM, a chat completion 400, then /health and /metrics 200) are ready."""
    for engine, name in (
        ("sglang", "sglang-2026-0.5.11-responses-endpoint-401-400-access-lines-serving-issue25127"),
        ("vllm", "vllm-2025-production-stack-chat-400-then-health-metrics-200-prodstack43"),
    ):
        out = _verdict(engine, name)
        assert (out["state"], out["phase"]) == ("ready", "ready"), name


def test_probes_and_sglang_warm_up_requests_answered_say_nothing_of_serving(tmp_path: Path) -> None:
    """What SGLang's app answers before 'The server is fired up' (its probes, its model list, its own warm-up
    request), a 5xx (a dead engine's HTTP server answers so too), and a model list are no proof that it serves."""
    for line in (
        'INFO:     127.0.0.1:40000 - "GET /get_model_info HTTP/1.1" 200 OK',
        'INFO:     127.0.0.1:40002 - "POST /generate HTTP/1.1" 200 OK',
        'INFO:     10.0.0.9:40004 - "GET /health HTTP/1.1" 200 OK',
        'INFO:     10.0.0.9:40006 - "GET /v1/models HTTP/1.1" 200 OK',
        'INFO:     10.0.0.9:40008 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
    ):
        out = _replay_text(tmp_path, f"[2026-05-13 11:24:14] {line}\n")
        assert out["state"] != "ready", line


def test_a_traceback_cut_at_a_call_is_in_the_frame_that_call_opens() -> None:
    """A traceback the log cuts after a frame's statement: the call it makes is the next frame, which the log lost.
    The Ascend SGLang fork's scheduler (2026-03, GLM5 under a stress test): an AscendC kernel's [ASSERT], then
    'Scheduler hit an exception' from run_scheduler_process, cut at 'scheduler.run_event_loop()' (scheduler.py
    run_scheduler_process of 0.5.x: the event loop is entered only once the scheduler is built and the server
    serves): a crash after ready, the kernel's assert its cause."""
    out = _verdict(
        "sglang",
        "sglang-ascend-2026-glm5-stress-ascendc-gather-v3-assert-out-of-range-scheduler-event-loop-ascendsglang74",
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "assertion"
    assert str(found["summary"]).startswith("[ASSERT]")


def test_a_cut_traceback_whose_last_statement_calls_no_known_step_keeps_its_phase(tmp_path: Path) -> None:
    """The call read from a cut statement is a frame like any other: a call no [[frame]] knows moves nothing."""
    text = (
        "[2026-03-07 03:03:55 TP9] Load weight begin. avail mem=60.12 GB\n"
        "[2026-03-07 03:03:56 TP9] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 3253, in '
        "run_scheduler_process\n"
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
    )
    out = _replay_text(tmp_path, text)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")


def test_sglang_piecewise_graph_failure_logged_from_the_event_loop_is_a_crash_while_serving() -> None:
    """SGLang's 'Piecewise CUDA Graph failed with error: ...' (piecewise_context_manager.py, 0.5.5-2026) is logged
    around the piecewise graph's capture and around its replay, then re-raised: the scheduler's own traceback of it
    that follows says which. sglang PR 23351 (2026-05, NSA attention in CI): that traceback runs through
    run_event_loop -> dispatch_event_loop -> event_loop_overlap, a batch replayed while serving: ready, not the
    capture the line's rule names by default."""
    out = _verdict(
        "sglang", "sglang-2026-nsa-piecewise-cuda-graph-tensor-match-failed-scheduler-event-loop-pr23351"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    assert str(_error(out)["summary"]).startswith(
        "Piecewise CUDA Graph failed with error: Tensor match failed"
    )


def test_llamacpp_cuda_error_zeroing_a_quantized_tensors_padding_is_in_the_weights_load() -> None:
    """ggml-cuda's ggml_backend_cuda_buffer_init_tensor (ggml-cuda.cu, :768 in 2026 builds) cudaMemsets the padding
    of each quantized tensor allocated in a buffer that is not a compute buffer: the weights' buffers as load_tensors
    allocates them. Its CUDA_CHECK failing names it on ggml_cuda_error's second line. llama.cpp#27430 (build 10525,
    two GPUs with --tensor-split, 2026's '[pid] m.ss.mmm.uuu E' lines): the illegal memory access there is a crash
    loading the weights."""
    out = _verdict(
        "llamacpp",
        "llamacpp-2026-build10525-pid-timestamp-format-cuda-illegal-memory-access-init-tensor-issue27430",
    )
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "cuda"
    assert "an illegal memory access was encountered" in str(found["summary"])


def test_vllm_v0_capture_advice_last_words_alone_open_the_capture(tmp_path: Path) -> None:
    """vLLM V0's capture_model (worker/model_runner.py, 0.4-0.10) ends its advice with 'You can also reduce the
    `max_num_seqs` as needed to decrease memory usage.' as the capture begins. NVIDIA Dynamo's worker relays vLLM's
    output a chunk a line (dynamo#787, 2025-04): the excerpt opens on those last words, then every TP worker's custom
    all-reduce CUDACHECK 'Failed: .../custom_all_reduce.cuh:368 'invalid argument'' around the capture bar's end: a
    crash while capturing the graphs. The words alone say it, and so does 0.4-0.5's own line of the advice."""
    out = _verdict(
        "vllm",
        "vllm-2025-dynamo-worker-prefix-custom-allreduce-invalid-argument-after-capture-100pct-dynamo787",
    )
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    assert "custom_all_reduce.cuh:368 'invalid argument'" in str(_error(out)["summary"])
    v04 = (
        "INFO 05-01 05:25:41 model_runner.py:876] CUDA graphs can take additional 1~3 GiB memory per GPU. If you are "
        "running out of memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode. You can also "
        "reduce the `max_num_seqs` as needed to decrease memory usage.\n"
    )
    assert _replay_text(tmp_path, v04)["phase"] == "capturing_graphs"


_SGLANG_WARM_UP = (
    CORPUS / "sglang" / "sglang-2025-cpu-compile-deep-gemm-warmup-request-scheduler-exception-cut-7547.log"
)


def test_sglang_warm_up_request_failing_in_the_event_loop_is_a_crash_of_the_warm_up(tmp_path: Path) -> None:
    """SGLang's HTTP app is up before its warm-up ends (profile `early_health`): the lifespan's warm-ups and
    _wait_and_warmup's POST /generate (srt/entrypoints/http_server.py) are served by the scheduler's event loop like
    any request. sglang#7547 (June 2025, on CPU): the KV cache and memory pool done, Uvicorn waiting for its startup,
    'Running warmup compile-deep-gemm', the warm-up request's 'Prefill batch', then the scheduler's traceback. With
    the event loop's and the batch's frames shown whole, the crash is still the warm-up's (capturing_graphs), not
    one after ready; the same frames in an excerpt that shows no startup step say a serving server (ready)."""
    head = _lines(_SGLANG_WARM_UP, "Load weight end.", "scheduler.event_loop_overlap()")
    frames = (
        '  File "/home/m/sglang/python/sglang/srt/managers/scheduler.py", line 774, in event_loop_overlap\n'
        "    result = self.run_batch(batch)\n"
        '  File "/home/m/sglang/python/sglang/srt/managers/scheduler.py", line 1672, in run_batch\n'
        "    ) = self.tp_worker.forward_batch_generation(model_worker_batch)\n"
        "RuntimeError: deep_gemm is not supported on this device\n"
    )
    out = _replay_text(tmp_path, head + frames)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    excerpt = head[head.index("[2025-06-27 19:02:10] Scheduler hit an exception") :] + frames
    out = _replay_text(tmp_path, excerpt)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
