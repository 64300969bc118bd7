"""Rules read from the sources for what the eleventh crop of public 2025-2026 logs showed (issue 30, fourteenth
round), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_ollama_goroutine_dump_alone_is_a_go_program_dying() -> None:
    """Go's runtime (runtime/traceback.go goroutineheader) prints ' gp=0x.. m=..' after 'goroutine N' only when
    it is throwing or the traceback level is 2+, i.e. in the dump of a program that dies (runtime.Stack and
    debug.Stack print level 1, no gp=). A journald crop of an Ollama runner's dump that holds only GC workers'
    goroutines is a death whose cause the crop does not show."""
    out = _verdict("ollama", "ollama-2025-journal-dotted-date-go-goroutine-dump-gc-workers-only-issue10977")
    assert out["engine"] == "ollama"
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = _error(out)
    assert found["category"] == "killed"
    assert "goroutine 35 gp=0xc0005041c0 m=nil" in str(found["summary"])


def test_localai_backend_log_copy_glues_time_and_stream_to_the_line() -> None:
    """LocalAI's backend-log page (core/http/react-ui/src/pages/BackendLogs.jsx, 2026) shows each line as three
    spans with nothing between them: the time (toLocaleTimeString() + '.' + milliseconds), the stream's badge
    ('stdout'/'stderr') and the text. A copy of it reads '10:22:48.969stderrprint_info: ...': peeled, llama.cpp's
    print_info block is the model's load under way."""
    out = _verdict(
        "llamacpp", "llamacpp-2026-localai-stderr-glued-prefix-print-info-qwen36-mtp-cut-localai9893"
    )
    assert out["engine"] == "llamacpp"
    assert (out["state"], out["phase"]) == ("loading_weights", "loading_weights")
    assert out["error"] is None


def test_llama_swap_request_answered_200_is_an_upstream_serving() -> None:
    """llama-swap logs every request it answers ('[INFO] Request %s "%s %s %s" %d %d "%s" %v' since April 2025,
    '[llama-swap] %s [%s] "%s %s %s" ...' before); every POST outside its own /api/ and all of /upstream/ are
    proxied to the model's process, so one answered 200 was served by a loaded upstream. The upstream's death
    after that ('cmd.Wait() returned error: signal: aborted (core dumped)') is a crash after ready."""
    out = _verdict(
        "llamacpp", "llamacpp-2025-llama-swap-served-200s-then-502-cmd-wait-signal-aborted-llamaswap155"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "killed"
    assert "signal: aborted (core dumped)" in str(found["summary"])


def test_llama_server_slot_lines_of_one_request_name_llama_cpp() -> None:
    """tools/server's SLT_*/SRV_* macros print 'slot %12.*s: id %2d | task %d | ' and 'srv  %12.*s: ' with the
    function's name cut at 12 characters: 'slot launch_slot_:', 'slot get_availabl:', 'srv  params_from_:'. A crop of
    one request's first lines is llama.cpp's server serving."""
    out = _verdict(
        "llamacpp", "llamacpp-2026-hip-slot-launch-processing-task-qwen3-coder-chat-format-issue19775"
    )
    assert out["engine"] == "llamacpp"
    assert (out["state"], out["phase"]) == ("ready", "ready")


def test_llama_server_debug_lines_of_an_answer_are_serving() -> None:
    """At -v, llama-server logs each streamed chunk it writes (the HTTP handler's SRV_DBG 'http: streamed chunk: %s')
    and each result sent for a request's task (server_response::send, 'sending result for task id = %d'); tasks
    exist only for requests. llamafile 0.10's chat mode with --verbose, its answer's prose between them, serves."""
    out = _verdict(
        "llamacpp",
        "llamacpp-2026-llamafile-0.10.4-chat-verbose-streamed-chunk-answer-text-ctrl-c-llamafile1008",
    )
    assert out["engine"] == "llamacpp"
    assert (out["state"], out["phase"]) == ("ready", "ready")
    assert out["error"] is None


def test_ollama_runner_ggml_cuda_error_after_ready_is_certain_at_its_current_device_line() -> None:
    """ggml-cuda's ggml_cuda_error is [[noreturn]]: 'CUDA error: <message>', '  current device: N, in function F at
    FILE:LINE', the failed call, then GGML_ABORT. In an Ollama runner that had started ('llama runner started in
    43.46 seconds'), the second line is the runner's death even with the abort cut from the log: the crash is
    certain there (a live follower need not wait for the end), and its cause is the 'CUDA error' line."""
    out = _verdict(
        "ollama", "ollama-0.11-windows-runner-started-then-no-kernel-image-scale-failed-issue12316"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    crashed = [t for t in out["timeline"] if t["state"] == "crashed"]  # type: ignore[union-attr]
    assert crashed[0]["line"] == 4
    found = _error(out)
    assert found["category"] == "cuda"
    assert "CUDA error: no kernel image is available for execution on the device" in str(found["summary"])
