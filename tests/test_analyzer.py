"""The analyzer's own behaviour: the template prefilter, rule switching once settled, activity and stalls."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pickle
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchdog.core import rootcause, scanner
from watchdog.core.analyzer import Analyzer, _newlines
from watchdog.core.lifecycle import State
from watchdog.core.prefilter import Prefilter
from watchdog.core.verdict import verdict_of
from watchdog.profiles.loader import load_engine
from watchdog.profiles.model import LazyPattern, Profile

READY = b"[2025-01-23 19:35:33] The server is fired up and ready to roll!\n"
DECODE = b"[2025-01-23 19:36:%02d TP0] Decode batch. #running-req: %d, #token: %d, token usage: 0.01\n"


def _to_json(inc: Any, **kwargs: Any) -> dict[str, Any]:
    return verdict_of(inc, **kwargs).to_json()


def test_lines_differing_only_in_digits_share_a_decision() -> None:
    """A phase marker is found whatever its numbers, after a line of the same shape was classified."""
    a = Analyzer(load_engine("sglang"))
    a.feed(b"[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n", 0.0)
    a.feed(b"Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:02,  1.08it/s]\n", 0.0)
    a.feed(b"Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.75it/s]\n", 0.0)
    assert a.lifecycle.current.progress["weights"] == (2, 4)


def test_errors_are_still_found_after_ready() -> None:
    """Once ready, serving lines are skipped, but a traceback after them is still read and is a crash."""
    a = Analyzer(load_engine("sglang"))
    a.feed(READY, 0.0)
    a.feed(b"".join(DECODE % (i % 60, i, i * 10) for i in range(5000)), 1.0)
    a.feed(
        b"[2025-01-23 19:37:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        b'  File "/sgl/scheduler.py", line 1, in event_loop_overlap\n'
        b"    self.run_batch()\n"
        b"ValueError: Failed to allocate token prealloc indices\n\n",
        2.0,
    )
    a.finish(3.0)
    v = a.lifecycle.current
    assert (v.state, v.crash_phase) == (State.CRASHED, State.READY)
    assert v.error is not None
    assert v.error.summary == "ValueError: Failed to allocate token prealloc indices"
    assert a.lines_read == 5006


def test_log_activity_holds_off_a_stall_but_idle_chatter_does_not() -> None:
    """Non-benign lines count as activity against a stall; vLLM's shm-broadcast warnings do not."""
    for line, stalled in (
        (b"INFO 08-19 07:51:03 worker.py:1] still busy with something\n", False),
        (
            b"INFO 08-19 07:51:03 shm_broadcast.py:1] No available shared memory broadcast block found in 60 second.\n",
            True,
        ),
    ):
        a = Analyzer(load_engine("vllm"), stall_after=60.0)
        a.feed(b"INFO 08-19 07:50:00 model_runner.py:1] Starting to load model x...\n", 0.0)
        a.feed(line, 59.0)
        a.tick(100.0)
        assert (a.state == State.STALLED) is stalled


CUT_TRACEBACK = (
    Path(__file__).parent
    / "fixtures/corpus/trtllm/trtllm-cuda-graph-warmup-traceback-cut-before-exception-exaone-issue8802.log"
)


@pytest.mark.parametrize("whole", [True, False], ids=["read-whole", "line-by-line"])
def test_a_log_quiet_inside_a_traceback_is_a_crash_not_a_stall(whole: bool) -> None:
    """A log that goes quiet inside a traceback (the writer died printing it: TRT-LLM#8802 as published) is the
    crash that replay says, even with --stall-after shorter than the crash grace: no stall is said first."""
    data = CUT_TRACEBACK.read_bytes()
    a = Analyzer(load_engine("trtllm"), stall_after=1.0, crash_grace=5.0)
    if whole:
        a.feed(data, 0.0)
        a.caught_up(0.0)
    else:
        for line in data.splitlines(keepends=True):
            a.feed(line, 0.0)
    for now in (1.5, 3.0, 4.9):
        a.tick(now)
        assert a.state != State.STALLED, now
    for now in (5.0, 10.0, 10.1):  # line by line: the cut is reported at 5 s, its grace ends at 10 s
        a.tick(now)
    assert a.state == State.CRASHED
    got = _to_json(a.lifecycle.current, engine=a.engine, lines_read=a.lines_read, bytes_read=a.bytes_read)
    assert got["phase"] == "capturing_graphs"


REQUEST_ERROR = (
    b"ERROR 07-22 08:51:06 [serving_completion.py:131] Error in preprocessing prompt inputs\n"
    b"ERROR 07-22 08:51:06 [serving_completion.py:131] Traceback (most recent call last):\n"
    b'ERROR 07-22 08:51:06 [serving_completion.py:131]   File "/usr/local/lib/python3.12/dist-packages/vllm/'
    b'entrypoints/openai/serving_completion.py", line 123, in create_completion\n'
    b"ERROR 07-22 08:51:06 [serving_completion.py:131]     request_prompts, engine_prompts = await self._preprocess()\n"
    b"ERROR 07-22 08:51:06 [serving_completion.py:131] ValueError: This model's maximum context length is 4096 tokens.\n"
)
# an engine's traceback outside a request's handler, with no fatal line: 'AsyncLLM output_handler failed.' before it
# would be one (the output task ends for good, tests/test_corpus_live_exit_lines.py), so the excerpt starts below it
ENGINE_ERROR = (
    b"ERROR 07-22 08:51:06 [async_llm.py:420] Traceback (most recent call last):\n"
    b'ERROR 07-22 08:51:06 [async_llm.py:420]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/'
    b'output_processor.py", line 380, in process_outputs\n'
    b"ERROR 07-22 08:51:06 [async_llm.py:420]     req_state = self.request_states.get(req_id)\n"
    b"ERROR 07-22 08:51:06 [async_llm.py:420] ValueError: unexpected output for request cmpl-1\n"
)
METRICS = (
    b"INFO 07-22 08:51:%02d [loggers.py:118] Engine 000: Avg prompt throughput: 12.0 tokens/s, "
    b"Avg generation throughput: %d.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%%\n"
)


def test_post_ready_request_error_survived_by_a_serving_server() -> None:
    """vLLM logs a failed request with its traceback and goes on serving: 50+ healthy lines keep it ready."""
    a = Analyzer(load_engine("vllm"))
    a.feed(b"INFO 07-22 08:50:00 [launcher.py:1] Available routes are:\n", 0.0)
    a.feed(REQUEST_ERROR + b"".join(METRICS % (i % 60, i) for i in range(60)), 1.0)
    a.finish(2.0)
    assert a.state == State.READY


def test_post_ready_error_at_the_end_of_the_log_is_a_crash() -> None:
    """An error after ready raised outside a request's handler (the output processor), with nothing served after
    it (a request answered 500), at the end of the log, is a crash after ready."""
    a = Analyzer(load_engine("vllm"))
    a.feed(b"INFO 07-22 08:50:00 [launcher.py:1] Available routes are:\n", 0.0)
    a.feed(
        ENGINE_ERROR
        + b'INFO:     127.0.0.1:40776 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error\n',
        1.0,
    )
    a.tick(100.0)
    assert a.state == State.READY  # the clock alone does not confirm an error after ready
    a.finish(101.0)
    v = a.lifecycle.current
    assert (v.state, v.crash_phase) == (State.CRASHED, State.READY)


def test_the_output_handler_failing_after_ready_is_a_crash_at_once() -> None:
    """AsyncLLM's output task logs 'AsyncLLM output_handler failed.' and ends, never started again (every request
    then fails with EngineDeadError): the same traceback under that line is a crash after ready at once, with no
    wait for the log's end, where without it (above) the clock alone confirms nothing."""
    a = Analyzer(load_engine("vllm"))
    a.feed(b"INFO 07-22 08:50:00 [launcher.py:1] Available routes are:\n", 0.0)
    a.feed(b"ERROR 07-22 08:51:06 [async_llm.py:420] AsyncLLM output_handler failed.\n" + ENGINE_ERROR, 1.0)
    a.tick(1.5)
    v = a.lifecycle.current
    assert (v.state, v.crash_phase) == (State.CRASHED, State.READY)


def test_post_ready_error_in_a_request_handler_at_the_end_of_the_log_is_a_request_error() -> None:
    """The request's own error (raised in vLLM's create_completion, a [[request]] handler) answered 500, with
    nothing after it: the handler answered it, no word says the engine died: a request error, not a crash."""
    a = Analyzer(load_engine("vllm"))
    a.feed(b"INFO 07-22 08:50:00 [launcher.py:1] Available routes are:\n", 0.0)
    a.feed(
        REQUEST_ERROR
        + b'INFO:     127.0.0.1:40776 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error\n',
        1.0,
    )
    a.finish(101.0)
    v = a.lifecycle.current
    assert v.state == State.READY
    assert v.facts["request_errors"] == 1


def test_post_ready_error_served_on_is_a_request_error() -> None:
    """The same error followed by a few stats lines of tokens generated is one request's: the engine serves on;
    it is counted among the facts, never a crash, even at the end of the log."""
    a = Analyzer(load_engine("vllm"))
    a.feed(b"INFO 07-22 08:50:00 [launcher.py:1] Available routes are:\n", 0.0)
    a.feed(REQUEST_ERROR + b"".join(METRICS % (i, i + 1) for i in range(5)), 1.0)
    a.finish(2.0)
    v = a.lifecycle.current
    assert v.state == State.READY
    assert v.facts["request_errors"] == 1
    assert "maximum context length" in str(v.facts["last_request_error"])


CORPUS = Path(__file__).parent / "fixtures" / "corpus"
SAMPLE = [
    "sglang/ready-llama31-8b-single-gpu-docs-v041.log",
    "sglang/multirank-same-traceback-other-rank-failed-loading-ktransformers1666.log",
    "vllm/vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log",
    "vllm/vllm-v1-ready-ansi-caret-prefix-pr33756.log",
    "tgi/tgi-ready-v3-router-python-tokenizer-error-noise-zephyr-delavande.log",
    "trtllm/trtllm-serve-ready-1.1.0rc3-pytorch-gptoss120b-dgx-spark-jeansblog.log",
    "ollama/ollama-runner-cudamalloc-oom-panic-journald-issue8597.log",
]


def _verdict(chunks: list[bytes]) -> dict[str, object]:
    a = Analyzer(load_engine(None))
    for chunk in chunks:
        a.feed(chunk, 0.0)
    a.finish(0.0)
    return _to_json(a.lifecycle.current, engine=a.engine, lines_read=a.lines_read, bytes_read=a.bytes_read)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(SAMPLE), cuts=st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=12))
def test_any_chunking_gives_the_same_verdict(name: str, cuts: list[int]) -> None:
    """A log fed in any pieces (the way SSH delivers it) gives the verdict of the whole file at once."""
    data = (CORPUS / name).read_bytes()
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert _verdict(chunks) == _verdict([data])


# A head whose first line names vLLM and whose later lines name SGLang twice: read live in pieces, the engine is
# first vLLM (provisional), then SGLang; a marker missed because a piece cut it would leave a tie, which vLLM
# (first seen) wins. Line separators other than "\n" (a CR, U+2028, U+0085) and multi-byte characters that a
# piece may cut in two are in it too.
_FLIP_HEAD = (
    "INFO 08-19 07:51:03 api_server.py:1] vLLM API server version 0.6.3\n"
    "caf\u00e9 \u2028 r\u00e9sum\u00e9\r progress \u0085 done\n"
    "server_args=ServerArgs(model_path='x', tp_size=1)\n"
    "[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n"
    "[2025-01-23 19:35:16 TP0] na\u00efve line \u2028 with no marker\n"
).encode()


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(_FLIP_HEAD)), max_size=12))
def test_a_head_read_live_in_pieces_ends_on_the_engine_of_the_whole_head(cuts: list[int]) -> None:
    """A log's head read in any pieces, each followed by catching up (as a live follower reads it), ends with
    the engine and verdict of the whole file read at once."""
    data = _FLIP_HEAD
    points = sorted(set(cuts))
    live = Analyzer(load_engine(None))
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        live.feed(data[a:b], 0.0)
        live.caught_up(0.0)
    live.finish(0.0)
    whole = _verdict([data])
    assert live.engine == whole["engine"] == "sglang"
    lc = live.lifecycle.current
    got = _to_json(lc, engine=live.engine, lines_read=live.lines_read, bytes_read=live.bytes_read)
    # this head mixes a yearless time with a dated one: the log's times cannot tell how long its start took, a
    # live follower's clock can (`durations.duration`), replay's cannot
    for a, b in zip(got["timeline"], whole["timeline"], strict=True):
        if "duration_seconds" not in b:
            a.pop("duration_seconds", None)
    assert got == whole


def test_next_due_is_the_crash_grace_after_a_log_goes_quiet_inside_a_traceback() -> None:
    """A log that stops inside a traceback is due a tick `crash_grace` after its last bytes, and not before:
    then the traceback is reported as cut."""
    a = Analyzer(load_engine("sglang"), crash_grace=5.0)
    a.feed(b"[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n", 1.0)
    assert a.next_due() is None  # no stall_after, nothing pending: only new bytes can change anything
    a.feed(b"Traceback (most recent call last):\n", 2.0)
    a.feed(b'  File "/sgl/srt/managers/scheduler.py", line 1, in run\n', 3.0)
    assert a.next_due() == 8.0
    assert a.tick(7.9) == []
    a.tick(8.0)
    assert a.next_due() is not None  # the cut traceback is now a pending error, judged by the clock
    assert a.next_due() == 13.0
    assert [t.state for t in a.tick(13.0)] == [State.CRASHED]
    assert a.next_due() is None


_STARTUP = (CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes()
_CRASH = b"".join(
    (CORPUS / "sglang" / "postready-scheduler-valueerror-lmcache-tp2-pr869.log")
    .read_bytes()
    .splitlines(True)[1:]
)


def test_a_crash_loop_reads_every_incarnation_with_the_rules_of_its_state() -> None:
    """A server that starts, becomes ready and crashes again and again has each start's phases and each
    post-ready crash found: the rules (and the line classifications kept for each set) switch back and forth."""
    a = Analyzer(load_engine(None))
    for i in range(4):
        a.feed(_STARTUP, float(i))
        a.feed(DECODE % (i, 1, 2), float(i))
        a.feed(_CRASH, float(i))
    a.finish(5.0)
    incarnations = [*a.lifecycle.history, a.lifecycle.current]
    assert len(incarnations) == 4
    for inc in incarnations:
        states = [t.state for t, _ in inc.timeline]
        assert State.LOADING_WEIGHTS in states
        assert states[-2:] == [State.READY, State.CRASHED]


def test_a_traceback_read_a_line_at_a_time_is_read_whole_without_the_prefilter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a traceback is open each line is read whole: a live log's lines of it, one a read, are not looked for
    by the prefilter (its answer would not be used), and they are read as the block of them is."""
    lines = _CRASH.splitlines(keepends=True)
    lines = lines[: next(i for i, line in enumerate(lines) if line.startswith(b"ValueError")) + 1]
    whole, live = Analyzer(load_engine("sglang")), Analyzer(load_engine("sglang"))
    said = whole.feed(_STARTUP + b"".join(lines), 0.0)
    heard = live.feed(_STARTUP, 0.0)
    looked: list[bytes] = []
    lines_of, found_in = Prefilter.lines, Prefilter.found_in_line
    monkeypatch.setattr(
        Prefilter, "lines", lambda self, *args: looked.append(args[0]) or lines_of(self, *args)
    )

    def named(self: Prefilter, line: bytes) -> list[int] | None:
        # with Hyperscan, what the line holds is named in the pass that finds it (`lines` is then not asked)
        found = found_in(self, line)
        if found is not None:
            looked.append(line)
        return found

    monkeypatch.setattr(Prefilter, "found_in_line", named)
    for line in lines:
        heard += live.feed(line, 0.0)
    assert looked == lines[:1]  # the line that opens it
    assert [(t.state, t.line) for t in heard] == [(t.state, t.line) for t in said]
    assert heard[-1].state == State.CRASHED


def test_an_analyzer_pickled_mid_log_reads_on_as_the_original() -> None:
    """An analyzer pickled (as a checkpoint keeps it) and loaded again reads the rest of the log to the same
    verdict as the one that was never stopped."""
    first, rest = _STARTUP + _CRASH + _STARTUP, _CRASH + _STARTUP
    a = Analyzer(load_engine(None))
    a.feed(first, 0.0)
    b = pickle.loads(pickle.dumps(a))
    for x in (a, b):
        x.feed(rest, 1.0)
        x.finish(2.0)
    assert _to_json(
        a.lifecycle.current, engine=a.engine, lines_read=a.lines_read, bytes_read=a.bytes_read
    ) == (_to_json(b.lifecycle.current, engine=b.engine, lines_read=b.lines_read, bytes_read=b.bytes_read))
    assert len(b.lifecycle.history) == len(a.lifecycle.history) == 2


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("error: invalid argument: --no-mmap", id="llamacpp"),
        pytest.param("error: unexpected argument '--foo' found", id="clap-tgi"),
        pytest.param(
            "error: invalid value 'x' for '--port <PORT>': invalid digit found in string", id="clap-value"
        ),
        pytest.param("Error: No such option: --foo", id="click-trtllm"),
        pytest.param("Error: unknown flag: --bar", id="cobra-ollama"),
        pytest.param("vllm serve: error: argument --dtype: invalid choice: 'x'", id="argparse"),
    ],
)
def test_a_refused_command_line_is_a_config_crash_at_once(line: str) -> None:
    """A command line refused by the engine's argument parser (one line, then the process exits) is a config
    crash the moment the line is read, with no grace to wait."""
    analyzer = Analyzer(load_engine(None))
    out = analyzer.feed(line.encode() + b"\n", now=0.0)
    out += analyzer.caught_up(now=0.0)
    assert [t.state for t in out][-1] == State.CRASHED
    error = analyzer.lifecycle.current.error
    assert error is not None
    assert (error.category, error.summary) == ("config", line)


def _replay(text: str, engine: str | None = None) -> Analyzer:
    analyzer = Analyzer(load_engine(engine))
    analyzer.feed(text.encode(), now=0.0)
    analyzer.finish(now=0.0)
    return analyzer


def test_a_crash_is_in_the_phase_of_the_startup_step_it_was_raised_out_of() -> None:
    """vLLM's CPU backend warms up (a capture-phase marker) before it sizes the KV cache: a KV-cache error
    after the warm-up crashed in allocating_kv_cache, as its traceback's startup step says."""
    a = _replay(
        "(Worker pid=4) INFO 12-02 01:26:45 [cpu_model_runner.py:87] Warming up model for the compilation...\n"
        "(Worker pid=4) INFO 12-02 01:27:11 [cpu_model_runner.py:91] Warming up done.\n"
        "(EngineCore pid=3) ERROR 12-02 01:27:11 [core.py:1510] Traceback (most recent call last):\n"
        '(EngineCore pid=3) ERROR 12-02 01:27:11 [core.py:1510]   File "/v/core.py", line 1, in run_engine_core\n'
        "(EngineCore pid=3) ERROR 12-02 01:27:11 [core.py:1510]     engine_core = EngineCoreProc()\n"
        '(EngineCore pid=3) ERROR 12-02 01:27:11 [core.py:1510]   File "/v/kv.py", line 2, in get_kv_cache_configs\n'
        "(EngineCore pid=3) ERROR 12-02 01:27:11 [core.py:1510]     raise ValueError(\n"
        "(EngineCore pid=3) ERROR 12-02 01:27:11 [core.py:1510] ValueError: No available memory for the cache blocks.\n",
        "vllm",
    )
    v = _to_json(a.lifecycle.current, engine=a.engine, lines_read=a.lines_read, bytes_read=a.bytes_read)
    assert (v["state"], v["phase"], v["error"]["category"]) == ("crashed", "allocating_kv_cache", "oom")


def test_wrappers_and_consequences_alone_are_a_silent_death() -> None:
    """When the only errors are wrappers pointing elsewhere and the news that a part went away (a broken
    pipe), the process they point at died without a word: killed, with a hint that says so."""
    a = _replay(
        "Traceback (most recent call last):\n"
        '  File "/usr/local/bin/vllm", line 8, in <module>\n'
        "    sys.exit(main())\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
        "(Worker pid=9) ERROR 12-02 01:29:57 [multiproc_executor.py:953] WorkerProc failed to start.\n"
        "(Worker pid=9) ERROR 12-02 01:29:57 [multiproc_executor.py:953] Traceback (most recent call last):\n"
        '(Worker pid=9) ERROR 12-02 01:29:57 [multiproc_executor.py:953]   File "/v/m.py", line 9, in send\n'
        "(Worker pid=9) ERROR 12-02 01:29:57 [multiproc_executor.py:953] BrokenPipeError: [Errno 32] Broken pipe\n",
        "vllm",
    )
    error = a.lifecycle.current.error
    assert error is not None
    assert error.category == "killed"
    assert error.summary.startswith("RuntimeError: Engine core initialization failed")
    assert error.hint.startswith("a process of the engine died without a word of its own")


def test_wrappers_alone_point_back_at_the_cause_printed_before() -> None:
    """A cause the launch seemed to survive (a failed download, then loading goes on) is the root cause when
    what ends the launch is only wrappers ("exiting due to model loading error")."""
    a = _replay(
        "0.00.010.297 I srv  llama_server: initializing ...\n"
        "0.00.048.914 E get_repo_commit: error: HTTPLIB failed: Could not establish connection\n"
        "0.00.051.626 I srv    load_model: loading model 'ggml-org/models-tiny-test-GGUF'\n"
        "0.00.051.814 E srv    load_model: failed to load model, ''\n"
        "0.00.052.365 E srv  llama_server: exiting due to model loading error\n",
        "llamacpp",
    )
    error = a.lifecycle.current.error
    assert error is not None
    assert (error.category, error.summary) == (
        "model_load",
        "get_repo_commit: error: HTTPLIB failed: Could not establish connection",
    )


def test_the_resource_trackers_leak_warning_is_no_error() -> None:
    """Python's resource tracker warns of leaked semaphores at any exit, a clean stop too: it is no error."""
    a = _replay(
        "INFO:     Application startup complete.\n"
        "/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There "
        "appear to be 1 leaked semaphore objects to clean up at shutdown\n",
        "vllm",
    )
    assert a.state == State.READY
    assert a.lifecycle.current.candidates == []


@pytest.mark.parametrize(
    ("log", "category"),
    [
        pytest.param(
            b"main: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080\n",
            "port_in_use",
            id="llamacpp-bind",
        ),
        pytest.param(
            b"0.00.029.500 E srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 80\n",
            "config",
            id="llamacpp-bind-privileged-port",
        ),
        pytest.param(
            b"0.00.020.641 I srv    load_model: loading model '/models/m.gguf'\n"
            b"/src/llama.cpp/src/llama-hparams.cpp:265: is_recr: il (7) out of bounds (n_layer_all: 4)\n",
            "assertion",
            id="llamacpp-ggml-abort-message",
        ),
        pytest.param(
            b'time=2025-01-01T00:00:00.000Z level=INFO source=routes.go:1 msg="server config"\n'
            b"Error: listen tcp 127.0.0.1:11434: bind: address already in use\n",
            "port_in_use",
            id="ollama-cli-last-words",
        ),
        pytest.param(
            b"(EngineCore pid=3) ERROR 12-02 01:34:51 [multiproc_executor.py:315] Worker proc VllmWorker-0 died "
            b"unexpectedly (exit code: -9), shutting down executor.\n",
            "killed",
            id="vllm-worker-died",
        ),
        pytest.param(
            b"ERROR 04-27 16:28:02 [engine.py:448] CUDA out of memory. Tried to allocate 800.00 MiB. GPU 0 has a "
            b"total capacity of 15.56 GiB of which 442.62 MiB is free.\n",
            "oom",
            id="memory-while-starting",
        ),
    ],
)
def test_a_launch_that_cannot_go_on_is_a_crash_at_once(log: bytes, category: str) -> None:
    """A port the server cannot bind, memory it cannot get while starting, Ollama's CLI's last words, a vLLM
    worker's death and ggml's abort ('file.cpp:N: message', then a backtrace and abort()) end the launch the
    moment they are read, with no crash grace to wait."""
    a = Analyzer(load_engine(None))
    out = a.feed(log, now=0.0) + a.caught_up(now=0.0)
    assert State.CRASHED in [t.state for t in out]
    error = a.lifecycle.current.error
    assert error is not None
    assert error.category == category


def test_a_refused_configuration_raised_while_starting_is_certain_but_a_logged_line_is_not() -> None:
    """An exception saying the configuration, model or hardware is refused ends a starting launch at once; the
    same words on an error-level line alone (an engine's own fallback may print one) wait the crash grace."""
    raised = Analyzer(load_engine(None))
    out = raised.feed(
        b"ValueError: Model architectures ['Glm4ForCausalLM'] are not supported for now.\n", now=0.0
    ) + raised.caught_up(now=0.0)
    assert State.CRASHED in [t.state for t in out]
    logged = Analyzer(load_engine(None))
    out = logged.feed(
        b"ERROR 04-27 16:28:02 [loader.py:1] Model architectures ['X'] are not supported for now\n", now=0.0
    ) + logged.caught_up(now=0.0)
    assert State.CRASHED not in [t.state for t in out]
    assert [t.state for t in logged.tick(6.0)] == [State.CRASHED]


@pytest.mark.parametrize(
    ("log", "category", "summary"),
    [
        pytest.param(
            b"Invalid value for --port: abc\n", "config", "Invalid value for --port: abc", id="usage"
        ),
        pytest.param(b"unknown option --bogus\n", "other", "unknown option --bogus", id="unknown-option"),
        pytest.param(
            b"[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n",
            "killed",
            "process exited: no such process",
            id="silent",
        ),
    ],
)
def test_process_gone_after_its_last_words(log: bytes, category: str, summary: str) -> None:
    """A process gone right after a line that says why (no rule knows it) crashed with that line; one gone
    after an ordinary line is `killed` (the log does not explain it)."""
    from watchdog.core.findings import ProcessExited  # noqa: PLC0415

    a = Analyzer(load_engine(None))
    a.feed(log, 0.0)
    a.caught_up(0.1)
    a.probe(ProcessExited("no such process"), 1.0)
    err = a.lifecycle.current.error
    assert a.state == State.CRASHED
    assert err is not None
    assert (err.category, err.summary) == (category, summary)
    assert ("OOM" in err.hint) == (category == "killed")


def _lines_of_zeros(b: bytes) -> bytes:
    return b.replace(b"\x00", b"\n") * 400


def _a_line(t: str) -> bytes:
    return t.encode() + b"\n"


# named functions, not lambdas: Hypothesis names a strategy by its function's source, and finding a lambda's in
# a decorator's text is slow in the floors' Hypothesis (a CI timeout inside hypothesis.internal.reflection)
@settings(max_examples=200, deadline=None)
@given(
    st.binary(min_size=0, max_size=300).map(_lines_of_zeros),
    st.integers(min_value=0, max_value=130_000),
    st.integers(min_value=0, max_value=130_000),
)
def test_newlines_of_a_range_are_counted_exactly_whichever_way(data: bytes, lo: int, hi: int) -> None:
    # the lines read count a block's newlines by `bytes.count` or, over most of a big block, by what a
    # `bytes.replace` leaves: the same number for every range (a block's line numbers and `lines_read`)
    lo, hi = sorted((min(lo, len(data)), min(hi, len(data))))
    assert _newlines(data, lo, hi) == data.count(b"\n", lo, hi)


@pytest.mark.parametrize(
    "name", [*SAMPLE[:6], "sglang/ready-qwen25-vl-multimodal-then-traffic-notebook-docs.log"], ids=str
)
def test_a_log_read_a_line_at_a_time_reads_as_the_whole_file(name: str) -> None:
    """Fed one line a read (a live log's usual read: `Analyzer` takes it without the framer's block), a log gives
    the transitions, the verdict and the tail of the whole file read at once."""
    data = (CORPUS / name).read_bytes()
    whole, live = Analyzer(load_engine(None)), Analyzer(load_engine(None))
    said = whole.feed(data, 0.0) + whole.finish(0.0)
    heard = [t for line in data.splitlines(keepends=True) for t in live.feed(line, 0.0)] + live.finish(0.0)
    assert [(t.state, t.line, t.incarnation) for t in heard] == [
        (t.state, t.line, t.incarnation) for t in said
    ]
    assert _to_json(
        live.lifecycle.current, engine=live.engine, lines_read=live.lines_read, bytes_read=live.bytes_read
    ) == _to_json(
        whole.lifecycle.current, engine=whole.engine, lines_read=whole.lines_read, bytes_read=whole.bytes_read
    )
    assert live.tail() == whole.tail()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="ab \u00e9", max_size=3000).map(_a_line), max_size=40))
def test_the_tail_is_the_last_bytes_read_however_they_came(lines: list[bytes]) -> None:
    # the tail is kept in the pieces read and joined when asked: the last 8 KB read, whatever the reads were
    lines = [b"[2025-01-23 19:35:14 TP0] Init torch distributed begin.\n", *lines]
    whole, live = Analyzer(load_engine("sglang")), Analyzer(load_engine("sglang"))
    data = b"".join(lines)
    whole.feed(data, 0.0)
    for n, line in enumerate(lines, 1):
        live.feed(line, 0.0)
        if n % 3 == 0:
            assert live._tail == b"".join(lines[:n])[-8192:]
    assert live._tail == whole._tail == data[-8192:]
    assert live.tail() == whole.tail()


@pytest.mark.parametrize("per_read", [1, 5])
@pytest.mark.parametrize("breaks", [b"", b"\t", b"\r", b"\x0c", b"\x1e", "\u2028".encode()])
def test_a_provisional_head_read_live_counts_its_lines_as_splitlines(breaks: bytes, per_read: int) -> None:
    """While the engine is provisional, a head read a line a read, or a few lines a read (a burst, a traceback in
    one write), is detected from the lines `str.splitlines` makes of it, as a whole head is: a line holding another
    line break is more than one line of it. Where its lines are ASCII broken at their newlines alone, the markers
    they hold are looked up by their templates (those of a crash loop's lines repeat)."""
    from watchdog.core.detection import EngineDetector, _any_marker  # noqa: PLC0415
    from watchdog.core.templates import ZEROED  # noqa: PLC0415
    from watchdog.profiles.loader import catalogue  # noqa: PLC0415

    data = (CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes()
    lines = data.splitlines(keepends=True)
    lines[3] = lines[3][:-1] + breaks + b"INFO 08-19 07:51:03 [api_server.py:1] vLLM API server version 0.9\n"
    index = _any_marker(catalogue().markers)[1]
    assert index is not None  # Hyperscan
    index[2].seen.clear()
    analyzer = Analyzer(catalogue())
    analyzer.feed(b"".join(lines[:2]), 0.0)
    analyzer.caught_up(0.0)  # detected from two lines: provisional from here on
    assert analyzer._provisional
    for at in range(2, len(lines), per_read):
        analyzer.feed(b"".join(lines[at : at + per_read]), 0.0)
    head = b"".join(lines).decode("utf-8", "replace").splitlines()
    reference = EngineDetector(catalogue().markers)
    reference.feed_lines(head)
    detector = analyzer._detector
    assert detector is not None
    assert (detector.count, detector.score, detector.engine()) == (
        reference.count,
        reference.score,
        reference.engine(),
    )
    assert lines[-1].translate(ZEROED) in index[2].seen


def test_a_line_a_rule_reads_counts_as_the_same_line_read_as_a_block() -> None:
    """A live log's line that the prefilter finds, read whole on the one-line path, counts its activity (an error
    line: none, and no healthy line after it; a benign line: none) as the block path does, and gives the same
    transitions: the reference is the same lines fed to an analyzer that reads every block whole."""
    from watchdog.core.findings import LinesRead  # noqa: PLC0415

    data = (CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes()
    lines = (
        data.splitlines(keepends=True)
        + [
            b"[2025-01-23 19:35:40] ERROR:    Exception in ASGI application while handling a request\n",
            b"[2025-01-23 19:35:41 TP0] Decode batch. #running-req: 1, #token: 340, token usage: 0.02, "
            b"gen throughput (token/s): 4.67, #queue-req: 0\n",
            b"[2025-01-23 19:35:41] Child process unexpectedly failed with an exit code 0\n",
            b'[2025-01-23 19:35:42] INFO:     127.0.0.1:47228 - "POST /generate HTTP/1.1" 200 OK\n',
            b"[2025-01-23 19:35:43 TP0] Load weight begin. avail mem=78.81 GB\n",
        ]
        * 3
    )
    heard: dict[bool, list[object]] = {}
    said: dict[bool, list[tuple[object, ...]]] = {}
    for prefilter in (True, False):
        analyzer = Analyzer(load_engine("sglang"), prefilter=prefilter)
        events: list[object] = []
        feed = analyzer.lifecycle.feed

        def spy(event: object, now: float, feed: Any = feed, events: list[object] = events) -> Any:
            if isinstance(event, LinesRead):
                events.append(event)
            return feed(event, now)

        analyzer.lifecycle.feed = spy  # type: ignore[method-assign]
        out = [t for n, line in enumerate(lines) for t in analyzer.feed(line, float(n))]
        heard[prefilter], said[prefilter] = events, [(t.state, t.line, t.incarnation) for t in out]
        inc = analyzer.lifecycle.current
        said[prefilter].append((inc.lines, inc.healthy_after_error, inc.last_progress, analyzer.lines_read))
    assert heard[True] == heard[False]
    assert said[True] == said[False]
    assert {e.active for e in heard[True]} == {0, 1}  # type: ignore[attr-defined]


_LOADING = b"[2025-07-02 07:31:02 TP0] Load weight begin. avail mem=139.28 GB\n"
_OOM_CRASH = (
    b"[2025-07-02 07:34:18 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
    b'  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2712,'
    b" in run_scheduler_process\n"
    b"    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
    b"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
)


def test_prepare_makes_what_the_first_error_would_and_changes_no_verdict() -> None:
    """`prepare` compiles each category rule of the analyzer's profile (a step for each piece it makes; none left
    for a second launch of the engine), and a crash fed after is judged as by an analyzer that made nothing."""
    base = load_engine("sglang")
    assert isinstance(base, Profile)
    # the same rules, never compiled (the bundled ones may have been, by other tests)
    fresh = dataclasses.replace(
        base,
        categories=tuple(dataclasses.replace(r) for r in base.categories),
        mains=tuple(LazyPattern(p.pattern) if isinstance(p, LazyPattern) else p for p in base.mains),
        frames=tuple(
            (s, LazyPattern(p.pattern) if isinstance(p, LazyPattern) else p) for s, p in base.frames
        ),
    )
    assert all(r._compiled is None for r in fresh.categories)
    prepared, plain = Analyzer(fresh), Analyzer(load_engine("sglang"))
    for a in (prepared, plain):
        a.feed(_LOADING, 0.0)
    lazy = list(fresh.lazy_patterns())
    assert lazy  # the bundled profile's traceback tables, compiled when first searched
    steps = sum(1 for _ in prepared.prepare())
    assert all(r._compiled is not None for r in fresh.categories)
    # nor are they left for the first crash (a burst of compiles in the daemon's event loop)
    assert all(p._compiled is not None for p in lazy)
    assert steps >= len(fresh.categories)
    assert list(Analyzer(fresh).prepare()) == []  # another launch of the engine: nothing left to make
    got, want = prepared.feed(_OOM_CRASH, 1.0), plain.feed(_OOM_CRASH, 1.0)
    assert got == want
    assert prepared.lifecycle.current.state is State.CRASHED
    assert prepared.lifecycle.current == plain.lifecycle.current  # its error, category, phase and times


def _ranks_crash(ranks: int) -> bytes:
    # a post-ready crash of `ranks` ranks, each its "Scheduler hit an exception" wrapper line and its traceback
    return b"".join(
        b"[2025-06-26 02:16:20 TP%d] Scheduler hit an exception: Traceback (most recent call last):\n"
        b'  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2620, in '
        b"run_scheduler_process\n"
        b"    scheduler.event_loop_overlap()\n"
        b"ValueError: Failed to allocate token prealloc indices on rank %d\n" % (rank, rank)
        for rank in range(ranks)
    )


def test_a_crash_after_ready_read_in_one_block_has_its_root_cause_chosen_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A crash after ready that one read brings whole (each rank's wrapper line and traceback) has its root cause
    chosen once, from all of its errors, not again at each of them; its verdict is that of the same lines read a
    line a read, where each error chooses it again."""
    from watchdog.core import lifecycle  # noqa: PLC0415

    chosen = []
    root_cause = lifecycle.root_cause

    def counted(*args: Any, **kwargs: Any) -> Any:
        chosen.append(args[0])
        return root_cause(*args, **kwargs)

    monkeypatch.setattr(lifecycle, "root_cause", counted)
    startup = (CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes()
    crash = _ranks_crash(4)
    verdicts = []
    for whole in (True, False):
        analyzer = Analyzer(load_engine("sglang"))
        analyzer.feed(startup, 0.0)
        analyzer.caught_up(0.0)
        assert analyzer.state is State.READY
        del chosen[:]
        for line in [crash] if whole else crash.splitlines(keepends=True):
            analyzer.feed(line, 1.0)
        analyzer.finish(2.0)
        inc = analyzer.lifecycle.current
        assert inc.state is State.CRASHED
        assert inc.error is not None
        verdicts.append(
            (inc.error, inc.crash_phase, _to_json(inc, engine="sglang", lines_read=0, bytes_read=0))
        )
        if whole:
            # chosen once, from the four wrappers and the four tracebacks
            assert [len(c) for c in chosen] == [8]
        else:
            assert len(chosen) == 8
    assert verdicts[0] == verdicts[1]
    assert verdicts[0][0].ranks == ("TP0", "TP1", "TP2", "TP3")


def test_a_choice_put_off_to_the_end_of_a_block_is_the_one_made_at_once() -> None:
    """The events of a crash loop (a crash after ready in one block, the facts and errors after it, the next start
    and its crash), fed to a lifecycle that puts its root-cause choices off and settles them only at the end, leave
    every incarnation as a lifecycle that chooses at once does."""
    from watchdog.core.lifecycle import Lifecycle  # noqa: PLC0415

    startup = (CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes()
    log = (
        startup
        + _ranks_crash(2)
        + b"[2025-06-26 02:16:21 TP0] avail mem=3.2 GB\n"
        + startup
        + _ranks_crash(3)
    )
    events: list[tuple[Any, float]] = []
    analyzer = Analyzer(load_engine("sglang"))
    feed = analyzer.lifecycle.feed

    def spy(event: Any, now: float) -> Any:
        events.append((event, now))
        return feed(event, now)

    analyzer.lifecycle.feed = spy  # type: ignore[method-assign]
    analyzer.feed(log, 1.0)
    analyzer.finish(2.0)
    lifecycles = []
    for defer in (False, True):
        lc = Lifecycle("sglang")
        lc.profile = analyzer.lifecycle.profile
        lc.defer_choice = defer
        said = [t for event, now in events for t in lc.feed(event, now)]
        lc.settle()
        lifecycles.append((said, lc.history, lc.current))
    assert lifecycles[0] == lifecycles[1]
    assert [i.state for i in lifecycles[0][1]] == [State.CRASHED]
    assert lifecycles[0][2].error is not None
    assert lifecycles[0][2].error.ranks == ("TP0", "TP1", "TP2")


@pytest.mark.parametrize(("after", "reads"), [(b"", 1), (b"while allocating for request 7\n", 2)])
def test_a_traceback_closed_unchanged_is_not_read_again(
    monkeypatch: pytest.MonkeyPatch, after: bytes, reads: int
) -> None:
    """A traceback is reported at its exception line and again, whole, when the next line closes it: when nothing
    of it came between, the second report is the candidate made for the first (read once); when a line of its
    message came (it grew), it is read again."""
    from watchdog.core import scanner  # noqa: PLC0415
    from watchdog.core.findings import ErrorSeen  # noqa: PLC0415

    made = []
    from_traceback = scanner.from_traceback

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(from_traceback(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(scanner, "from_traceback", counted)
    analyzer = Analyzer(load_engine("sglang"))
    reported = []
    feed = analyzer.lifecycle.feed

    def spy(event: Any, now: float) -> Any:
        if isinstance(event, ErrorSeen) and event.candidate.kind == "traceback":
            reported.append(event.candidate)
        return feed(event, now)

    analyzer.lifecycle.feed = spy  # type: ignore[method-assign]
    analyzer.feed(READY, 0.0)
    for line in (_ranks_crash(1) + after + READY).splitlines(keepends=True):
        analyzer.feed(line, 1.0)
    assert len(made) == reads
    assert len(reported) == 2
    assert (reported[0] is reported[1]) == (reads == 1)
    assert reported[1].traceback[-1] == (after.decode().strip() or reported[1].summary)


def _tb_fields(function: Any) -> set[str]:
    # the attributes of `tb` a function's own code reads (`tb.x`, `tb.x()`)
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "tb"
    }


def test_a_tracebacks_reuse_key_holds_everything_its_candidate_is_read_from() -> None:
    """The scanner reuses the candidate of a traceback read again unchanged (`Scanner._traceback`'s key): the key
    must hold every field of the traceback that `from_traceback` reads, or a traceback that differs only there would
    get the other's candidate (`ignored`, CPython's unraisable header, was added to both)."""
    read = _tb_fields(rootcause.from_traceback) - {"exception", "last_statement"}  # derived from `lines`
    keyed = _tb_fields(scanner.Scanner._traceback) - {"reported_cut"}  # read after the candidate, not by it
    assert read <= keyed, read - keyed
