"""What the twenty-fourth round's public logs of engines on Ray, multi-node and container platforms showed (issue 30,
helper i30-cases24c), read from the libraries' source and pinned on the real log that showed it
(tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import replay_text as _replay_text
from publiccases import verdict as _verdict


def test_ray_check_failure_is_a_fatal_assertion_even_after_ready(tmp_path: Path) -> None:
    """Ray's RAY_CHECK (src/ray/util/logging.h RAY_CHECK_WITH_DISPLAY) logs at FATAL '... An unexpected system state
    has occurred ... Check failed: <condition>', and RayLog::~RayLog (logging.cc) prints the StackTrace Information
    and aborts the process: no Python traceback follows. ray#62328 (2026-04, vLLM on Ray across two DGX Sparks):
    ready, then the compiled graph's channel check fails in the engine core at the first request - read as a
    launch that stayed ready before."""
    out = _verdict("vllm", "vllm-2026-ray-dgx-spark-ready-then-cgraph-ray-check-failed-0-vs-0-ray62328")
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "assertion"
    assert str(found["summary"]).startswith("Check failed: RAY_PREDICT_TRUE(_left_ != _right_)")
    # the raylet's own check, under the EngineCore's and Ray's prefixes, while starting
    raylet = (
        "(EngineCore_DP0 pid=7) (raylet) [2025-11-24 16:14:48,882 C 37444 37444] (raylet) "
        "experimental_mutable_object_provider.cc:154:  An unexpected system state has occurred. You have likely "
        "discovered a bug in Ray. Please report this issue at https://github.com/ray-project/ray/issues and we'll "
        "work with you to fix it. Check failed: object_manager_->WriteAcquire(info.local_object_id) Status not OK: "
        "ChannelError: Channel closed. \n(EngineCore_DP0 pid=7) (raylet) *** StackTrace Information ***\n"
    )
    again = _replay_text(tmp_path, raylet)
    assert (again["state"], _error(again)["category"]) == ("crashed", "assertion")


def test_gloo_monitored_barrier_failure_is_the_ranks_decisive_line() -> None:
    """torch's ProcessGroupGloo::monitoredBarrier (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp), on a non-zero
    rank whose send/recv with rank 0 failed: logAndThrow logs 'Rank <r> successfully reached monitoredBarrier, but
    received errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.' and raises
    it. sglang#5602 (SGLang 0.4.5 multi-node): that line, then 'Scheduler hit an exception' with a traceback cut
    before its exception - read as the scheduler's wrapper, category other, before."""
    out = _verdict(
        "sglang",
        "sglang-0.4.5-multinode-gloo-monitored-barrier-rank0-faulty-scheduler-exception-cut-issue5602",
    )
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = _error(out)
    assert found["category"] == "nccl"
    assert "Rank 6 successfully reached monitoredBarrier, but received errors" in str(found["summary"])


def test_ray_executor_future_result_frame_is_serving() -> None:
    """vLLM's Ray executor returns a FutureWrapper from execute_model (vllm/v1/executor/ray_utils.py, 0.8's
    ray_distributed_executor.py): 'The top level (core busy loop) expects .result() api to block', so only
    step_with_batch_queue resolves it; startup's steps use collective_rpc. vllm-gaudi#728 (2025-12, pipeline parallel
    over Ray): the EngineCore's traceback through future.result() -> ray_utils.py result -> ray.get, cut before
    its exception - placed at starting before."""
    out = _verdict("vllm", "vllm-gaudi-2025-ray-pp-enginecore-busy-loop-ray-get-traceback-cut-gaudi728")
    assert (out["state"], out["phase"]) == ("crashed", "ready")
