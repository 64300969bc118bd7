"""Rules read from the engines' and their libraries' sources for what the eighteenth crop of public 2025-2026 vLLM
and Ollama logs showed (issue 30, part B), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.replay import replay_path


def test_ascend_stream_synchronize_failure_is_the_accelerators_error() -> None:
    """torch_npu's CopyKernel.cpp (copy_between_host_and_device) raises 'ACL stream synchronize failed, error
    code:N' when aclrtSynchronizeStreamWithTimeout returns the device's fault (CANN 5070xx: an AI core, AI CPU or
    vector core exception) before a device-to-host copy: vLLM-Ascend's model runner meets it at .tolist() while
    serving (vllm-ascend 0.9.2rc1, #2349, the API server's EngineDeadError after it) and at indexing in profile_run
    while starting (#2105). The NPU runtime's error is cuda, as CUDA's illegal memory access is; the EngineCore's
    wrappers are not the cause."""
    for name, phase, code in (
        (
            "vllm-ascend-0.9.2rc1-acl-stream-synchronize-507035-while-serving-enginedead-issue2349",
            "ready",
            "507035",
        ),
        (
            "vllm-ascend-0.9.2rc1-acl-stream-synchronize-507018-profile-run-ep-w8a8-issue2105",
            "allocating_kv_cache",
            "507018",
        ),
    ):
        out = _verdict("vllm", name)
        assert (out["state"], out["phase"]) == ("crashed", phase), name
        found = _error(out)
        assert found["category"] == "cuda", name
        assert found["summary"] == f"RuntimeError: ACL stream synchronize failed, error code:{code}", name


def test_ray_executors_own_shutdown_line_is_no_operators_stop() -> None:
    """vLLM 0.10's executor/ray_distributed_executor.py shutdown() logs 'Shutting down Ray distributed executor. If
    you see error log from logging.cc regarding SIGTERM received, please ignore ...' whenever the EngineCore shuts
    its executor down, after a fatal error as on a stop; only the whole line 'Shutting down' (Uvicorn) or 'Shutting
    down.' (cli/serve.py) is the stop. Here the EngineDeadError and the request 'failed (engine dead)' that follow
    it are a crash while serving (GPUStack, two Ray workers), not a clean stop before ready."""
    out = _verdict(
        "vllm", "vllm-0.10-ray-cross-worker-executor-shutdown-enginedead-request-failed-gpustack2738"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    assert _error(out)["category"] == "other"


_HAMI = "vllm-2026-05-hami-2.8.2-tp2-illegal-device-id-both-ranks-tvm-ffi-segfault-banner-hami1853"


def test_hami_core_illegal_device_id_is_the_cause_of_the_segfault_after_it() -> None:
    """HAMi-core (src/multiprocess/multiprocess_memory_limit.c) logs '[HAMI-core ERROR (pid:N thread=N
    multiprocess_memory_limit.c:N)]: Illegal device id: N' for a device index it cannot map and then indexes its
    shared region with it, so the process segfaults (HAMi 2.8.2 under vLLM's TP workers while NCCL initialises,
    HAMi#1853): the interposer's error on a device call is the crash's cause (cuda), not the backtrace that
    follows the segfault banner. The excerpt is vLLM's by its worker's prefix before the parallel groups exist
    ('(Worker pid=N)', multiproc_executor.py setup_proc_title_and_log_prefix) and pynccl's 'vLLM is using nccl=='."""
    out = _verdict("vllm", _HAMI)
    assert out["engine"] == "vllm"
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = _error(out)
    assert found["category"] == "cuda"
    assert str(found["summary"]).endswith("]: Illegal device id: 31069")


def test_tvm_ffi_segfault_banner_is_a_death(tmp_path: Path) -> None:
    """tvm-ffi's TVMFFISegFaultHandler (src/ffi/backtrace.cc), loaded into the engines by FlashInfer and TileLang,
    writes '!!!!!!! Segfault encountered !!!!!!!' and the native backtrace as 'File ..., line N, in fn' lines, then
    re-raises SIGSEGV: the banner is the process's dying words (killed), not a Python traceback cut before its
    exception. An excerpt that starts at the banner (the last two lines of HAMi#1853's paste) is a death."""
    lines = (CORPUS / "vllm" / f"{_HAMI}.log").read_text(encoding="utf-8").splitlines(keepends=True)
    crop = tmp_path / "banner-only.log"
    crop.write_text("".join(lines[-2:]), encoding="utf-8")
    out = replay_path(crop)[1].to_json()
    assert out["state"] == "crashed"
    found = _error(out)
    assert (found["category"], found["summary"]) == ("killed", "!!!!!!! Segfault encountered !!!!!!!")


def test_anthropic_messages_handlers_traceback_is_a_requests_error() -> None:
    """vLLM's Anthropic Messages route (entrypoints/anthropic/api_router.py create_messages, then serving.py
    AnthropicServingMessages.create_messages) logs a request's failure with logger.exception and answers it with an
    error status: a traceback under create_messages is that request's error while the server serves on
    (club-3090#45, 2026-05: a grammar the backend cannot compile, answered 500), not a crash while starting."""
    out = _verdict(
        "vllm", "vllm-2026-05-anthropic-messages-request-traceback-during-handling-cut-club3090-45"
    )
    assert (out["state"], out["phase"]) == ("ready", "ready")
    assert out.get("error") is None
