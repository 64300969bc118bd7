"""Rules read from the sources of llama.cpp's CLI, ggml-vulkan, KoboldCpp and Ollama (server and desktop app) for what
the twenty-third crop of public 2025-2026 llama.cpp-family and Ollama logs showed (issue 30, part B), each pinned on
the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS, replay_text
from publiccases import error as _error
from publiccases import verdict as _verdict

_CLI = "llamacpp-2026-llama-cli-second-prompt-mul-mat-illegal-memory-access-gdb-issue24489"
_KOBOLD = "llamacpp-2026-koboldcpp-rocm-warmup-fattn-max-blocks-per-sm-assert-gdb-koboldcpp2089"
_VULKAN = "llamacpp-2026-vulkan-strix-halo-device-lost-during-prompt-after-ready-backtrace-strixhalo16"
_APP = "ollama-2025-0.5.13-windows-app-server-crash-respawning-after-chat-issue9496"
_NIL = "ollama-2026-continue-client-runner-terminated-go-nil-verb-continue11953"
_WINDOWS = "ollama-2025-0.6.1-windows-served-chats-then-cudamalloc-oom-exception-c0000005-issue9674"


def _text(engine: str, name: str) -> str:
    return (CORPUS / engine / f"{name}.log").read_text(encoding="utf-8")


def test_llama_clis_turn_timings_say_a_turn_was_answered(tmp_path: Path) -> None:
    """llama-cli (2026, tools/cli/cli.cpp) prints '[ Prompt: N t/s | Generation: M t/s ]' after each answered turn:
    the model serves. llama.cpp#24489 dies on the second turn ('Whats up!') with an illegal memory access: a crash
    after ready. Without the timings line the same CUDA error is the warm-up's."""
    out = _verdict("llamacpp", _CLI)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "cuda"
    assert found["summary"] == "CUDA error: an illegal memory access was encountered"
    text = _text("llamacpp", _CLI)
    timings = "[ Prompt: 81.3 t/s | Generation: 27.3 t/s ]\n"
    assert timings in text
    assert replay_text(tmp_path, text.replace(timings, ""))["phase"] == "capturing_graphs"


def test_koboldcpps_warm_up_line_places_a_crash_in_the_warm_up(tmp_path: Path) -> None:
    """KoboldCpp's 'Starting model warm up, please wait a moment...' ends its load (after the context's buffers and
    its threadpool): koboldcpp#2089's ROCm launch_fattn assert right after it is a warm-up crash, not one of the KV
    cache's allocation that the compute-buffer lines before it would say."""
    out = _verdict("llamacpp", _KOBOLD)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    assert _error(out)["category"] == "assertion"
    text = _text("llamacpp", _KOBOLD)
    warm = "Starting model warm up, please wait a moment...\n"
    assert warm in text
    assert replay_text(tmp_path, text.replace(warm, ""))["phase"] == "allocating_kv_cache"


def test_ggml_vulkans_device_lost_line_is_the_cause_and_not_fatal_alone(tmp_path: Path) -> None:
    """ggml-vulkan's 'device lost on Vulkan0' is the backend's own word; llama-server's 'decode() failed:
    vk::Queue::submit: ErrorDeviceLost' for the request and the abort's backtrace follow from it
    (strix-halo-llamacpp#16): the root cause is the backend's line. Alone it ends nothing: a server whose slots go on
    processing after it is serving."""
    out = _verdict("llamacpp", _VULKAN)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "cuda"
    assert found["summary"] == "ggml_vulkan: device lost on Vulkan0"
    first = "".join(_text("llamacpp", _VULKAN).splitlines(keepends=True)[:3])
    assert first.endswith("4.45.745.058 E ggml_vulkan: device lost on Vulkan0\n")
    timing = (
        "4.50.{0:03d}.000 I slot print_timing: id  0 | task {0} | prompt processing, n_tokens =  1000, "
        "progress = 0.50, t = 1.00 s / 1000.00 tokens per second\n"
    )
    # ggml's line alone (Mesa RADV's 'context is lost' line before it is fatal of its own: round 25B)
    alone = "".join(line for line in first.splitlines(keepends=True) if "radv/amdgpu" not in line)
    served = alone + "".join(timing.format(i) for i in range(1, 30))
    assert replay_text(tmp_path, served)["state"] == "ready"
    assert (
        replay_text(tmp_path, first + "".join(timing.format(i) for i in range(1, 30)))["state"] == "crashed"
    )


def test_the_ollama_apps_respawn_starts_a_new_server(tmp_path: Path) -> None:
    """The desktop app logs 'starting server...' before each start of 'ollama serve' (app/lifecycle/server.go
    SpawnServer), the first and each respawn after 'server crash N - exit code X - respawning': ollama#9496's merge of
    app.log and server.log shows crash 3, a new server that listens and takes a chat request, then crash 4. The
    verdict is the new server's: a crash after ready; without the start line, crash 3 would be all it says."""
    out = _verdict("ollama", _APP)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "killed"
    assert "server crash 4 - exit code 3221225477" in str(found["summary"])
    start = 'time=2025-03-05T08:00:53.659+10:00 level=INFO source=server.go:141 msg="starting server..."\n'
    text = _text("ollama", _APP)
    assert start in text
    assert replay_text(tmp_path, text.replace(start, ""))["phase"] == "starting"


def test_a_nil_error_formatted_by_go_is_a_death_without_cause(tmp_path: Path) -> None:
    """Ollama's WaitUntilRunning wraps the runner's cmd.Wait() error with %w; a runner that exited with status 0
    while loading leaves it nil, which Go's fmt writes '%!w(<nil>)' (continue#11953): killed, as a bare exit status
    is, not `other`."""
    out = _verdict("ollama", _NIL)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    assert _error(out)["category"] == "killed"
    status = replay_text(tmp_path, _text("ollama", _NIL).replace("%!w(<nil>)", "exit status 2"))
    assert _error(status)["category"] == "killed"


def test_gos_windows_exception_header_is_the_runners_death(tmp_path: Path) -> None:
    """On Windows the Go runtime's last-chance handler (runtime/signal_windows.go) prints 'Exception <code> <info0>
    <info1> <pc>', 'PC=...' and its dump, then exits: ollama#9674's runner, served six requests, dies so. Its header
    after the served requests is a death after ready (killed: main read the crop as ready); a native error printed
    before it stays the cause (the OOM, once the reporter's markdown '**' is out of ggml-cuda's line: the case's
    known gap)."""
    lines = _text("ollama", _WINDOWS).splitlines(keepends=True)
    header = "Exception 0xc0000005 0x0 0x58 0x7ff789a4ebd4\n"
    assert lines[-1] == header
    out = replay_text(tmp_path, "".join(lines[:7]) + header)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "killed"
    assert found["summary"] == header.strip()
    clean = replay_text(tmp_path, "".join(lines).replace("**", ""))
    assert (clean["state"], clean["phase"]) == ("crashed", "ready")
    found = _error(clean)
    assert found["category"] == "oom"
    assert "cudaMalloc failed: out of memory" in str(found["summary"])
