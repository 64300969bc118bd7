"""Rules read from llama.cpp's and ggml's sources for what the twenty-second crop of public 2025-2026 llama.cpp-family
and Ollama logs showed (issue 30, part B), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS, replay_text
from publiccases import error as _error
from publiccases import verdict as _verdict

_LMSTUDIO_TYPE_41 = (
    "llamacpp-2026-lmstudio-gguf-init-from-file-ptr-invalid-ggml-type-41-two-lines-lmstudio1729"
)
_CLI_TYPE_39 = "llamacpp-2025-llama-cli-hf-cached-gpt-oss-invalid-ggml-type-39-metal-issue15099"
_OLLAMA_TYPE_4 = "ollama-2025-0.11-journal-gpt-oss-type-4-deprecated-block-size-zero-cpu-issue11718"
_VULKAN_LIMIT = "llamacpp-2025-vulkan-compute-pp-buffer-exceeds-device-limit-segfault-issue18160"
_ROCM_STATE_SEQ = (
    "llamacpp-2026-lemonade-rocm-b1326-unspecified-launch-failure-state-seq-backtrace-llamacpprocm122"
)
_PROMPT = "llamacpp-2026-prism-b10709-windows-silent-exit-bare-timestamp-shell-prompt-issue29119"


def _text(engine: str, name: str) -> str:
    return (CORPUS / engine / f"{name}.log").read_text(encoding="utf-8")


def test_a_ggml_type_the_build_does_not_have_is_unsupported() -> None:
    """gguf.cpp's tensor-info check 'info.t.type < 0 || info.t.type >= GGML_TYPE_COUNT' says 'has invalid ggml type
    %d (%s)' (2024-2025) or 'has invalid ggml type %d. should be in [0, %d)' (2026, from gguf_init_from_file_ptr):
    a quantization newer than the build. llama-cli 6090 meeting MXFP4 (llama.cpp#15099) and LM Studio's runtime
    meeting Q1_0 (lmstudio-bug-tracker#1729) cannot load the file: unsupported, that line the cause."""
    for name, words in (
        (_CLI_TYPE_39, "tensor 'blk.0.ffn_down_exps.weight' has invalid ggml type 39 (NONE)"),
        (_LMSTUDIO_TYPE_41, "tensor 'output.weight' has invalid ggml type 41. should be in [0, 41)"),
    ):
        out = _verdict("llamacpp", name)
        assert (out["state"], out["phase"]) == ("crashed", "loading_weights"), name
        found = _error(out)
        assert found["category"] == "unsupported", name
        assert words in str(found["summary"]), name


def test_a_removed_type_of_block_size_zero_is_unsupported_a_real_block_size_a_damaged_file(
    tmp_path: Path,
) -> None:
    """The next check, 'blck_size == 0 || ne[0] % blck_size != 0', words a type the build has removed as block size
    (0): Ollama 0.11's llama.cpp runner meeting gpt-oss's tensors as type 4 (DEPRECATED), ollama#11718. With a real
    block size the row does not fit a type the build has: a malformed file (model_load)."""
    out = _verdict("ollama", _OLLAMA_TYPE_4)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    assert _error(out)["category"] == "unsupported"
    damaged = _text("ollama", _OLLAMA_TYPE_4).replace(
        "of type 4 (DEPRECATED) has 2880 elements per row, not a multiple of block size (0)",
        "of type 2 (q4_0) has 2880 elements per row, not a multiple of block size (64)",
    )
    out = replay_text(tmp_path, damaged)
    assert out["state"] == "crashed"
    found = _error(out)
    assert found["category"] == "model_load"
    assert "not a multiple of block size (64)" in str(found["summary"])


def test_ggml_vulkans_own_out_of_device_memory_throw_is_the_cause() -> None:
    """ggml_vk_create_buffer throws vk::OutOfDeviceMemoryError("Requested buffer size exceeds device buffer size
    limit") for a buffer larger than the device's maxBufferSize, and the catch prints its what() (the message, ': ',
    the vk::Result) as it does for allocateMemory's: llama.cpp#18160's 8.7 GB compute buffer. The allocator's and
    the context's failures and the segfault after it are consequences."""
    out = _verdict("llamacpp", _VULKAN_LIMIT)
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")
    found = _error(out)
    assert found["category"] == "oom"
    assert found["summary"] == (
        "ggml_vulkan: Requested buffer size exceeds device buffer size limit: ErrorOutOfDeviceMemory"
    )


def test_a_sequence_state_frame_places_the_abort_in_a_served_request(tmp_path: Path) -> None:
    """llama_state_seq_get_data_ext / set_data_ext copy a slot's state for the server's prompt cache (server_slot::
    prompt_save / prompt_load) and its speculative checkpoints: only a serving loop calls them. lemonade's
    llamacpp-rocm b1326 (#122, 2026) aborts on a ROCm launch failure under one: a crash after ready, in glibc's
    frame form and in gdb's; without the frame the same abort is the warm-up's."""
    out = _verdict("llamacpp", _ROCM_STATE_SEQ)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "cuda"
    assert found["summary"] == "ROCm error: unspecified launch failure"
    text = _text("llamacpp", _ROCM_STATE_SEQ)
    frame = "/opt/llama.cpp/versions-rocm/llama-b1326/libllama.so.0(llama_state_seq_get_data_ext+0x1b) [0x70b17d969e9b]\n"
    assert frame in text
    gdb = "#7  0x000070b17d969e9b in llama_state_seq_set_data_ext () from /opt/llama.cpp/libllama.so.0\n"
    assert replay_text(tmp_path, text.replace(frame, gdb))["phase"] == "ready"
    without = replay_text(tmp_path, text.replace(frame, ""))
    assert (without["state"], without["phase"]) == ("crashed", "capturing_graphs")


def test_a_windows_console_prompt_after_the_log_is_the_process_gone(tmp_path: Path) -> None:
    """PowerShell prompts again ('PS C:\\AI>') only once llama-server has exited: llama.cpp#29119 (PrismML's b10709,
    2026) ends on a bare log time and the prompt, a death with no word before the load. cmd.exe's 'C:\\AI>' alike;
    a prompt followed by a command is the launch itself, no end."""
    out = _verdict("llamacpp", _PROMPT)
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    assert _error(out)["category"] == "killed"
    text = _text("llamacpp", _PROMPT)
    assert text.endswith("PS C:\\AI>\n")
    cmd = replay_text(tmp_path, text.replace("PS C:\\AI>\n", "C:\\AI>\n"))
    assert (cmd["state"], cmd["phase"]) == ("crashed", "starting")
    relaunch = replay_text(tmp_path, text.replace("PS C:\\AI>\n", "C:\\AI>llama-server.exe -m model.gguf\n"))
    assert relaunch["state"] != "crashed"
