"""Rules read from the engines' sources for what the seventeenth crop of public 2025-2026 logs showed (issue 30),
each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.replay import replay_path

_SAMPLE_PANIC = "ollama-0.12.10-rocm-gpt-oss-panic-failed-to-sample-token-post-predict-eof-issue13060"


def test_ggml_metal_library_that_will_not_build_is_the_cause_under_the_runners_panic() -> None:
    """ggml-metal-context.m ggml_metal_init logs 'error: failed to initialize the Metal library' when no
    precompiled library fits the device and compiling the embedded source fails (Apple M5, macOS 26: 'Input
    types must match cooperative tensor types'); llama.cpp's llama_init_from_model then fails the context
    ('failed to initialize the context: failed to initialize Metal backend', after the weights) and Ollama's
    llamarunner panics 'unable to create llama context' (llama/llama.go NewContextWithModel). The GPU code that
    cannot run on this GPU is cuda, as 'no kernel image is available' is; the panic is its wrapper."""
    for name in (
        "ollama-0.21-apple-m5-metal-library-static-assert-go-panic-issue15835",
        "ollama-0.21.2-apple-m5-metal-library-init-error-debug-logs-issue15849",
    ):
        out = _verdict("ollama", name)
        assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache"), name
        found = _error(out)
        assert found["category"] == "cuda", name
        assert "ggml_metal_init: error: failed to initialize the Metal library" in str(found["summary"]), name
        assert "GGML_METAL_TENSOR_DISABLE" in str(found["hint"]), name


def test_ollama_schedulers_loading_first_model_starts_the_load() -> None:
    """server/sched.go processPending logs 'loading first model' (DEBUG) and calls s.loadFn: the model load has
    begun, so the ollama server's own SIGBUS in a cgo call right after it (0.11.8 on an M4) died loading."""
    out = _verdict("ollama", "ollama-0.11.8-macos-sigbus-in-cgo-loading-first-model-issue12296")
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    assert _error(out)["category"] == "killed"


def test_ollama_engine_load_lines_are_loading_not_serving() -> None:
    """Ollama 0.12+'s llm/server.go Load logs 'loading model' "model layers"=N before its fit/alloc/commit
    requests; the ollama engine's ggml.go says 'offloaded N/M layers to GPU' and ml/device.go the layout ('model
    weights', 'kv cache', ...). The runner's 'starting ollama engine' and 'Server listening on ...' open only its
    endpoint for those requests: a log that ends there is loading, not ready."""
    for name in (
        "ollama-0.12-new-engine-gfx1103-offloaded-0-layers-memory-layout-cut-issue12303",
        "ollama-2025-11-rocm-journal-ollama-engine-runner-server-listening-not-ready-issue15930",
    ):
        out = _verdict("ollama", name)
        assert (out["state"], out["phase"]) == ("loading_weights", "loading_weights"), name
        assert out.get("error") is None, name


def test_gdb_attaching_after_llama_server_runner_served_is_a_crash_while_serving() -> None:
    """Ollama 0.30+ relays its llama-server runner's lines: 'slot      release: ... stop processing' and 'srv
    update_slots: ...' are its main loop serving requests. ggml_abort's ggml_print_backtrace then forks gdb on the
    dying process (ggml.c: 'set style enabled on', 'attach PID'), whose '[New LWP N]' per thread are its last
    words even where the excerpt lost the abort's message: a crash after ready, killed."""
    out = _verdict(
        "ollama", "ollama-2026-llama-server-runner-journal-serving-then-gdb-attach-lwp-cut-issue17568"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    assert _error(out)["category"] == "killed"


def test_ollama_engine_runner_sampling_panic_is_a_crash_while_serving(tmp_path: Path) -> None:
    """runner/ollamarunner/runner.go computeBatch panics 'failed to sample token' (0.6-0.12 with ': <err>') or
    'failed to decode token' only while it evaluates a request's sequence: an excerpt that starts at the panic (the
    first two lines of the journal of ollama#13060) is a crash after ready."""
    lines = (CORPUS / "ollama" / f"{_SAMPLE_PANIC}.log").read_text(encoding="utf-8").splitlines(keepends=True)
    crop = tmp_path / "panic-only.log"
    crop.write_text("".join(lines[:2]), encoding="utf-8")
    out = replay_path(crop)[1].to_json()
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    assert _error(out)["summary"] == "panic: failed to sample token"
