"""Rules read from vLLM's log format and SGLang's source for what the twenty-first round's public logs of SGLang and
vLLM's platforms showed (issue 30, helper i30-cases21a), each pinned on the real log that showed it
(tests/fixtures/corpus/sglang, vllm)."""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.core.envelope import parse
from watchdog.follow.replay import replay_path


def _replayed(tmp_path: Path, text: str) -> dict[str, object]:
    """The JSON verdict of `replay` on a log holding `text`."""
    log = tmp_path / "case.log"
    log.write_text(text, encoding="utf-8")
    return replay_path(log)[1].to_json()


def test_vllm_location_as_a_path_under_its_package_is_peeled() -> None:
    """vLLM's logger of 2025-2026 names a line's file by its path under its package, a plugin's middle directories
    shortened to '...' ('ERROR 02-07 18:18:59 [v1/executor/multiproc_executor.py:824] ', '[vllm_ascend/.../
    platform.py:12] '): the whole prefix is peeled, so a worker's traceback lines are frames. vLLM-Ascend 0.13's
    TP0 worker dying in model_runner_v1.py _allocate_kv_cache_tensors (torch_npu's 'NPU out of memory') was a
    death at starting with the prefix in its summary; it is allocating_kv_cache (vllm-ascend#6611, 2026-02)."""
    line = parse(
        '(Worker_TP0 pid=9) ERROR 02-07 18:18:59 [v1/executor/multiproc_executor.py:824]   File "/x.py"'
    )
    assert line.content == '  File "/x.py"'
    assert line.level == "ERROR"
    assert (
        parse("(EngineCore_DP0 pid=9) ERROR 02-07 18:18:59 [vllm_ascend/.../platform.py:12] boom").content
        == "boom"
    )
    assert parse("[v1/executor/multiproc_executor.py:492] ValueError: y").content == "ValueError: y"
    out = _verdict(
        "vllm",
        "vllm-ascend-2026-0.13.0-qwen3-next-80b-allocate-kv-cache-tensors-npu-oom-worker-tp0-issue6611",
    )
    assert out["state"] == "crashed"
    assert out["phase"] == "allocating_kv_cache"
    found = _error(out)
    assert found["category"] == "oom"
    assert str(found["summary"]).startswith("RuntimeError: NPU out of memory. Tried to allocate 2.57 GiB")


def test_sglang_model_runner_load_model_call_is_loading(tmp_path: Path) -> None:
    """SGLang's ModelRunner.initialize calls its steps one by one (srt/model_executor/model_runner.py:
    self.load_model(), self.init_memory_pool(...)); the 2026 Scheduler builds the pools itself (scheduler.py
    init_model_worker: self.init_memory_pools()). A traceback cut after such a call, the callee's frames gone, was
    a death at starting; the call names the step (KTransformers 0.6.1's SGLang, ktransformers#1969, 2026-05)."""
    out = _verdict(
        "sglang",
        "sglang-ktransformers-2026-v0.6.1-deepseek-v3.2-sigquit-tp2-model-runner-load-model-traceback-cut-issue1969",
    )
    assert out["state"] == "crashed"
    assert out["phase"] == "loading_weights"
    verdict = _replayed(
        tmp_path,
        "[2026-06-17 16:25:18] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/a/sglang/srt/managers/scheduler.py", line 4113, in run_scheduler_process\n'
        "    scheduler = Scheduler(\n"
        '  File "/a/sglang/srt/managers/scheduler.py", line 859, in init_model_worker\n'
        "    self.init_memory_pools()\n",
    )
    assert verdict["engine"] == "sglang"
    assert verdict["state"] == "crashed"
    assert verdict["phase"] == "allocating_kv_cache"


def test_sglang_test_launcher_exit_code_is_a_wrapper_of_the_servers_lines(tmp_path: Path) -> None:
    """sglang/test/test_utils.py popen_launch_server raises Exception(f'Server process exited with code {code}.
    Check server logs for errors.') when the server it started dies: the launcher's view, its -9 the server's own
    kill_process_tree after a child's SIGQUIT. The server's line is the cause, category killed (sglang#12421,
    bench_speculative.py on 0.5.3.post3, 2025-10); alone, the launcher's line is a crash whose cause is elsewhere."""
    out = _verdict(
        "sglang",
        "sglang-2025-bench-speculative-received-sigquit-then-popen-launch-server-exited-code-9-issue12421",
    )
    assert out["state"] == "crashed"
    found = _error(out)
    assert found["category"] == "killed"
    assert "Received sigquit from a child process" in str(found["summary"])
    verdict = _replayed(
        tmp_path,
        "Traceback (most recent call last):\n"
        '  File "/x/sglang/test/test_utils.py", line 625, in popen_launch_server\n'
        "    raise Exception(\n"
        "Exception: Server process exited with code 1. Check server logs for errors.\n",
    )
    assert verdict["state"] == "crashed"
    assert "Server process exited with code 1" in str(_error(verdict)["summary"])
