"""Rules read from the engines' sources for what the twentieth crop of public 2025-2026 vLLM, Ollama and llama.cpp
logs showed (issue 30, part B), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.replay import replay_path

_WINDOWS_NTSTATUS = "ollama-0.30.4-windows-load-failed-exit-0xc0000094-integer-division-by-zero-issue16485"


def test_flash_attention_dispatch_abort_at_first_request_is_unsupported() -> None:
    """ggml-cuda's fattn.cu aborts with GGML_ABORT("fatal error") only where its dispatch has no kernel
    (ggml_cuda_flash_attn_ext's BEST_FATTN_KERNEL_NONE, the mma kernel's head-size switch, the vec cases' fall
    through): the line is the cause, not a wrapper of a message printed before it. llama.cpp#19169 (2026,
    GLM-4.7-Flash, Windows CUDA build): the first request's slot lines, then 'fattn.cu:469: fatal error'."""
    out = _verdict(
        "llamacpp", "llamacpp-2026-glm47-flash-fattn-cu-469-fatal-error-first-request-windows-issue19169"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "unsupported"
    assert str(found["summary"]).endswith("ggml-cuda\\fattn.cu:469: fatal error")


def test_flash_attention_abort_glued_to_a_spinner_is_the_cause_not_the_backtrace() -> None:
    """ggml_abort writes straight to stderr, after llama-cli's unfinished 'Loading model... |' spinner frame
    (llama.cpp#24400, 2026, Gemma 4 E4B on a Tesla T4): the fattn.cu abort is found inside that line and wins over
    the ggml_abort frame of the backtrace ggml_print_backtrace prints after it (a wrapper: 'killed' alone); the
    llama_decode frame places it in the warm-up run."""
    out = _verdict(
        "llamacpp",
        "llamacpp-2026-llama-cli-gemma4-e4b-fattn-cu-fatal-error-warmup-turing-backtrace-issue24400",
    )
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    found = _error(out)
    assert found["category"] == "unsupported"
    assert found["summary"] == (
        "Loading model... |/kaggle/working/llama.cpp/ggml/src/ggml-cuda/fattn.cu:110: fatal error"
    )


def test_windows_exit_status_with_its_ntstatus_text_is_a_death_by_a_fault() -> None:
    """Ollama 2026 (llm/exit_status_windows.go formatExitStatus) writes 'exit status 0x%08x: ' and
    windows.NTStatus(raw).Error() for a Windows exception, ntdll's text ('{EXCEPTION}\\r\\nInteger division by
    zero.', slog quoting its CR LF): the backend's death by a fault with no message of its own, killed as the bare
    'exit status 0xc0000409' and Linux's 'signal: floating point exception' are (ollama#16485, 0.30.4-rc1)."""
    out = _verdict("ollama", _WINDOWS_NTSTATUS)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "killed"
    assert "exit status 0xc0000094: {EXCEPTION}\\r\\nInteger division by zero." in str(found["summary"])


def test_windows_illegal_instruction_status_is_unsupported_as_sigill_is(tmp_path: Path) -> None:
    """STATUS_ILLEGAL_INSTRUCTION (0xc000001d) is Windows' SIGILL: the runner executed an instruction this CPU
    lacks, with or without the NTSTATUS text after it; the same load as ollama#16485's, its status swapped."""
    lines = (CORPUS / "ollama" / f"{_WINDOWS_NTSTATUS}.log").read_text(encoding="utf-8")
    text = "{EXCEPTION}\\r\\nIllegal Instruction\\r\\nAn attempt was made to execute an illegal instruction."
    for name, status in (("with-text", f"0xc000001d: {text}"), ("bare", "0xc000001d")):
        log = tmp_path / f"{name}.log"
        log.write_text(
            lines.replace("0xc0000094: {EXCEPTION}\\r\\nInteger division by zero.", status), encoding="utf-8"
        )
        found = _error(replay_path(log)[1].to_json())
        assert found["category"] == "unsupported", name
        assert f"exit status {status}" in str(found["summary"]), name


def test_runner_terminated_with_the_go_runtimes_fault_as_status_writer_keeps_it(tmp_path: Path) -> None:
    """Ollama's llm/status.go StatusWriter keeps the runner's last stderr line holding 'error:' as 'error:' plus the
    rest trimmed, so the Go runtime's 'fatal error: fault' reaches the client as 'llama runner process has
    terminated: error:fault' (ollama#11598, 0.9.6 on Windows): a death by a native fault, killed as the runtime's own
    line is; its other fault throw, 'unexpected signal during runtime execution', reads the same."""
    found = _error(
        _verdict("ollama", "ollama-0.9.6-windows-cli-runner-terminated-error-fault-gemma3-issue11598")
    )
    assert found["category"] == "killed"
    assert found["summary"] == "llama runner process has terminated: error:fault"
    log = tmp_path / "unexpected-signal.log"
    log.write_text(
        "Error: llama runner process has terminated: error:unexpected signal during runtime execution\n",
        encoding="utf-8",
    )
    assert _error(replay_path(log)[1].to_json())["category"] == "killed"
