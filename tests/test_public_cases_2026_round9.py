"""Rules read from the engines' and libraries' sources for what the ninth crop of public 2025-2026 logs showed
(issue 30, twelfth round), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.replay import replay_path


def test_libstdcxx_assertion_is_the_cause_of_the_abort() -> None:
    """libstdc++'s std::__glibcxx_assert_fail (src/c++11/assert_fail.cc, debug.cc) prints '%s:%d: %s: Assertion
    '%s' failed.' with straight quotes, then abort()s. llama-server's sampler tripping std::discrete_distribution's
    precondition while it serves a request: the assertion is the cause, not the shell's 'Aborted (core dumped)'."""
    out = _verdict(
        "llamacpp",
        "llamacpp-2025-vulkan-glm4-server-prompt-done-libstdcxx-discrete-distribution-assertion-issue12946",
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    err = _error(out)
    assert err["category"] == "assertion"
    assert "Assertion '__sum > 0' failed." in str(err["summary"])


def test_ollama_runner_panic_is_categorized_by_its_message() -> None:
    """A Go panic's message is the runner's error: the new engine's model.New returns 'unsupported model
    architecture %q' (model/model.go) for an architecture it does not implement, and runner/ollamarunner panics
    with it. Its words say unsupported; `other` is only for a panic whose words say nothing known."""
    out = _verdict(
        "ollama",
        "ollama-2025-arch-ollamarunner-panic-unsupported-model-architecture-qwen2-llamacpp-issue12176",
    )
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    err = _error(out)
    assert err["category"] == "unsupported"
    assert str(err["summary"]).startswith('panic: unsupported model architecture "qwen2"')


def test_ollama_scheduler_fit_line_starts_the_model_load() -> None:
    """server/sched.go pickBestFitGPUs logs 'new model will fit in available VRAM in single GPU, loading' and the
    scheduler calls its load next (llm.NewLlamaServer: 'system memory', the offload plan, 'starting llama
    server'): a log cut after it is loading the model."""
    out = _verdict("ollama", "ollama-0.11-metal-gpt-oss-new-model-will-fit-flash-attention-cut-issue11686")
    assert out["engine"] == "ollama"
    assert (out["state"], out["phase"]) == ("loading_weights", "loading_weights")
    assert out["error"] is None


def test_triton_model_that_failed_to_load_was_loading() -> None:
    """Triton's model_lifecycle.cc 'failed to load '<model>' version <n>: <status>' ends a model's load: the
    TensorRT-LLM backend failed while it created the model instance (a lookahead decoding layer's assertion), so
    the launch died loading the model; the assertion the status quotes is the cause."""
    out = _verdict(
        "trtllm", "trtllm-triton-25.01-model-lifecycle-lookahead-decoding-layer-assertion-issue710"
    )
    assert out["engine"] == "trtllm"
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    err = _error(out)
    assert err["category"] == "assertion"
    assert "Assertion failed: 16 != 40" in str(err["summary"])


def test_a_frame_wrapped_inside_its_path_is_one_frame_whatever_its_transport(tmp_path: Path) -> None:
    """vLLM 0.7's serving_chat logs a request's preprocessing error with its traceback (logger.exception, then an
    error response: the server serves on), and the post wrapped each long frame inside its path ('File
    ".../vllm/entry' / 'points/openai/serving_chat.py", line 165, in create_chat_completion'). The rest of a
    frame's path completes that frame, also when a transport stamps every line with a time (Docker's -t): the
    stamp is no new record, and the request's error still names its frame."""
    name = "vllm-0.7-serving-chat-preprocess-error-wrapped-paths-agent-s-issue57"
    original = CORPUS / "vllm" / f"{name}.log"
    stamped = tmp_path / f"{name}.log"
    stamped.write_bytes(
        b"".join(
            b"2026-12-02T10:00:%02d.%09dZ " % (i % 60, i) + line
            for i, line in enumerate(original.read_bytes().splitlines(keepends=True))
        )
    )
    for path in (original, stamped):
        out = replay_path(path)[1].to_json()
        assert (out["state"], out["phase"]) == ("ready", "ready")
        assert out["error"] is None
        facts = out["facts"]
        assert isinstance(facts, dict)
        assert "(entrypoints/chat_utils.py:961)" in str(facts["last_request_error"])
