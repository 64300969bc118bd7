"""Rules read from the sources of CPython, SGLang, vLLM-Omni, torch_npu, SkyPilot and the Intel Gaudi PyTorch bridge
for what the nineteenth round's public logs of SGLang, TGI and vLLM's platforms showed (issue 30, helper
i30-cases19a), each pinned on the real log that showed it (tests/fixtures/corpus/sglang, tgi, vllm)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.replay import replay_path


def _crash(engine: str, name: str, category: str, says: str, phase: str | None = None) -> dict[str, object]:
    """A corpus case's replayed verdict, checked: crashed (in `phase`, when given), its error of `category` with
    `says` in its summary."""
    out = _verdict(engine, name)
    assert out["state"] == "crashed"
    assert phase is None or out["phase"] == phase
    found = _error(out)
    assert found["category"] == category
    assert says in str(found["summary"])
    return out


_DUMP_CASE = (
    "sglang-2025-dsv32-dp8-gpqa-eval-c10-frames-fatal-python-error-aborted-faulthandler-threads-issue11942"
)


def test_faulthandler_thread_dump_is_no_exception_the_fatal_python_error_is_the_death() -> None:
    """CPython's faulthandler (Python/traceback.c) writes 'Fatal Python error: Aborted', then per thread 'Thread
    0x... (most recent call first):' and frames worded '  File "f", line N in fn' (no comma before 'in'). The
    frames opened a traceback fragment whose next header was read as its exception line ('Thread 0x00007f76...
    (most recent call first)', category other). A dump is no traceback: the interpreter's dying words are the crash
    (killed), as they were at the crash's own line (SGLang, DeepSeek-V3.2 while serving, sglang#11942)."""
    _crash(
        "sglang",
        _DUMP_CASE,
        "killed",
        "Fatal Python error: Aborted",
    )


def test_sglang_watchdog_and_running_sigquit_lines_name_the_engine() -> None:
    """SGLang's scheduler watchdog ('Watchdog timeout (self.watchdog_timeout=300)', scheduler.py watchdog_thread)
    and its running server's SIGQUIT handler ('SIGQUIT received. signum=None, frame=None. It usually means one
    child failed.', tokenizer_manager.py running_phase_sigquit_handler) are SGLang's own words; a crop of a hang's
    end that holds only them (and a py-spy dump) was read by the generic profile, which knows neither: a cut
    traceback after them became the crash (other). Read as SGLang's, the watchdog's timeout is (gpustack#3139)."""
    out = _crash(
        "sglang",
        "sglang-2025-gpustack-cann-npu-warmup-request-hang-watchdog-timeout-v1-models-200-sigquit-gpustack3139",
        "timeout",
        "Watchdog timeout (self.watchdog_timeout=300)",
    )
    assert out["engine"] == "sglang"


def test_vllm_omni_stage_process_death_in_handshake_is_killed() -> None:
    """vllm_omni/diffusion/stage_diffusion_proc.py _perform_diffusion_handshake (and its VAE, sub-module and aux
    siblings): raise RuntimeError(f'StageDiffusionProc died during handshake (exit code {proc.exitcode})') when the
    stage's process exits before READY. A death told by its exit status, its own error not in the crop: killed,
    not other (vllm-omni#2662, 2026-04)."""
    _crash(
        "vllm",
        "vllm-omni-2026-bagel-stage-diffusion-proc-died-during-handshake-exit-1-cause-not-in-crop-issue2662",
        "killed",
        "StageDiffusionProc died during handshake (exit code 1)",
        "starting",
    )


def test_hccl_watchdog_with_nothing_on_its_line_is_the_collective_library() -> None:
    """torch_npu's ProcessGroupHCCL.cpp workCleanupLoop logs '[Rank N] HCCL watchdog thread terminated with
    exception: ' + e.what() and rethrows (the process terminates); with torch_npu's own DIST error the message is on
    the next line ('ERR02005 DIST internal error'), the watchdog's line says nothing more: Ascend's collective
    library failed, nccl, not other (vLLM-Ascend, vllm-ascend#14469, 2026-08)."""
    _crash(
        "vllm",
        "vllm-ascend-2026-dsv4-flash-pd-prefill-hccl-watchdog-terminate-recursively-health-200-after-issue14469",
        "nccl",
        "HCCL watchdog thread terminated with exception",
    )


def test_skypilot_task_prefix_is_peeled_so_the_router_batch_span_says_serving() -> None:
    """SkyPilot prefixes a task's output '(task, pid=N) ' (sky/skylet/log_lib.py callers; '(node, rank=R, pid=N[,
    ip=...]) ' on several nodes). Left on the line, it hid TGI's timestamp and level, so the router's
    'batch{batch_size=1}:decode' span (its batching of queued requests: serving) was not read and the shard's death
    was placed at starting; peeled as Ray's '(name pid=N)' is, it is a crash after ready (TGI#1207)."""
    _crash(
        "tgi",
        "tgi-1.1-2023-mistral-skypilot-task-prefix-decode-transport-error-connection-refused-issue1207",
        "killed",
        "Server error: transport error",
        "ready",
    )


def test_gaudi_bridge_fatal_error_logged_before_a_cut_traceback_is_the_cause() -> None:
    """The Intel Gaudi PyTorch bridge's fatal errors read '[Rank:N] FATAL ERROR :: MODULE:<module> <message>' (raised
    as RuntimeError); HabanaAI's vllm-fork V0 logs it as run_mp_engine's logger.exception(e) message before the
    traceback. With the traceback cut before its exception, 'a traceback cut before its exception' was the crash
    (other); the bridge's line names what failed, the HPU runtime: cuda (vllm-fork#776, Gaudi 1, 2025-02)."""
    _crash(
        "vllm",
        "vllm-gaudi-fork-2025-gaudi1-pt-lazy-fatal-error-after-weights-mq-engine-traceback-cut-vllmfork776",
        "cuda",
        "FATAL ERROR :: MODULE:PT_LAZY Error, ValidateSyncInputTensors tensor_data is empty.",
        "allocating_kv_cache",
    )


def test_any_fatal_python_error_is_the_interpreters_death(tmp_path: Path) -> None:
    """CPython's fatal_error (Python/pylifecycle.c) prints 'Fatal Python error: <func>: <message>' for any
    Py_FatalError, not only faulthandler's signal names, and then aborts (fatal_error_exit(-1): abort()). Its
    thread dump made the crash before a dump was read as one; now the line itself is the death (killed). The lines
    are CPython 3.12's own wording of the daemon-thread shutdown error."""
    log = tmp_path / "launch.log"
    log.write_text(
        "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='m')\n"
        "[2025-01-01 00:00:05 TP0] Load weight begin. avail mem=70.00 GB\n"
        "Fatal Python error: _enter_buffered_busy: could not acquire lock for <_io.BufferedWriter name='<stderr>'> "
        "at interpreter shutdown, possibly due to daemon threads\n"
        "Python runtime state: finalizing (tstate=0x00007f0000000000)\n"
        "\n"
        "Thread 0x00007f00000001 (most recent call first):\n"
        '  File "/usr/lib/python3.10/threading.py", line 320 in wait\n'
    )
    out = replay_path(log)[1].to_json()
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "killed"
    assert str(found["summary"]).startswith("Fatal Python error: _enter_buffered_busy")


def test_a_crop_of_a_faulthandler_dump_alone_is_a_death_while_starting(tmp_path: Path) -> None:
    """faulthandler's thread dump is printed as a fatal signal kills the interpreter (SGLang's scheduler and DP
    controller call faulthandler.enable()): a crop cut after 'Fatal Python error: ...' keeps only the dump. Once the
    dump was no traceback, such a crop said nothing; its headers are the interpreter's dying words (a [[dying]]
    rule): while starting, a death the log does not explain. The crop is the real dump of sglang#11942."""
    lines = (CORPUS / "sglang" / f"{_DUMP_CASE}.log").read_text().splitlines()
    log = tmp_path / "launch.log"
    log.write_text("\n".join(lines[lines.index("Fatal Python error: Aborted") + 2 :]) + "\n")
    out = replay_path(log)[1].to_json()
    assert out["state"] == "crashed"
    assert _error(out)["category"] == "killed"
